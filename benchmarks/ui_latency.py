"""How late Blender's main thread gets to run while an optimization is going: the add-on's worker
process against core in a thread of Blender's own interpreter (what Optimize used to do).

    .envs/py313-bpy5.2/bin/python benchmarks/ui_latency.py [--side 64] [--seconds 20]

The main thread stands in for Blender's event loop: it asks to wake every 20 ms (as a modal
timer or a panel redraw would) and runs a little Python each time; the figure is how much later
than asked it woke (median, 99th percentile and worst). The job is the artist scene at 24 fps: a
1 m cloth of side×side vertices, two corners pinned, 48 frames, a keyframe 5 cm below the
simulated last frame, tension optimized.
"""

import argparse
import pathlib
import sys
import threading
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "scripts"))
from dev_extension import load_extension  # noqa: E402

ext = load_extension()
import diffcloth.core as dc  # noqa: E402
from diffcloth.diffcloth_addon import runner, worker  # noqa: E402

TICK = 0.02


def job(side):
    verts, tris = dc.grid(side, side, size=1.0)
    top = np.flatnonzero(np.isclose(verts[:, 1], verts[:, 1].max()))
    cloth = dc.Cloth(verts, tris, mass=0.5, k_tension=20.0, pinned=[top[0], top[-1]])
    scene = dc.Scene(cloth, steps=48, dt=1 / 24)
    target = verts + [0.0, 0.0, -0.3]
    return {
        "kind": "optimize",
        "scene": scene,
        "loss": dc.KeyframeLoss({48: target}),
        "params": ["k_tension"],
        "max_iter": 1000,
        "within": None,
        "render_tris": tris,
    }


def main_loop(seconds, busy):
    """Wake every TICK for `seconds` while busy() holds; lateness of each wake-up (s)."""
    late = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end and busy():
        asked = time.perf_counter() + TICK
        time.sleep(TICK)
        late.append(time.perf_counter() - asked)
        sum(i * i for i in range(2000))  # a panel's worth of Python
    return np.array(late)


def in_thread(side, seconds):
    stop = threading.Event()
    t = threading.Thread(target=lambda: worker.run(dc, job(side), lambda info: None, stop.is_set), daemon=True)
    t.start()
    time.sleep(1.0)  # past the set-up
    late = main_loop(seconds, t.is_alive)
    stop.set()
    return late


def in_process(side, seconds):
    run = runner.Process(job(side)).start()
    time.sleep(1.0)
    late = main_loop(seconds, lambda: run.proc.poll() is None)
    run.kill()
    return late


def figures(late):
    ms = 1e3 * late
    return (
        f"median {np.median(ms):6.2f} ms   p99 {np.percentile(ms, 99):7.2f} ms   worst {ms.max():7.2f} ms"
        f"   ({len(ms)} wake-ups)"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--side", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    print(f"main-thread lateness during a {args.side}×{args.side} optimization, {args.seconds:g} s each")
    print(f"  idle            {figures(main_loop(min(args.seconds, 5.0), lambda: True))}")
    print(f"  worker process  {figures(in_process(args.side, args.seconds))}")  # killed at once
    print(f"  core in thread  {figures(in_thread(args.side, args.seconds))}")  # runs on to its iteration's end


if __name__ == "__main__":
    main()
