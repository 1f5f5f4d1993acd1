"""Simulating through a proxy (Proxy Vertices): is the artist's round trip on a fine cloth fast
enough, and how far is the carried cloth from Blender's own Cloth?

The artist scene of artist_match.py at side×side vertices (default 128: a 1 m cloth, the add-on's
default fabric, Cotton, its two +Y corners pinned, 24 fps, 48 frames, over a sphere (r 0.25 at
(0, −0.35, −0.55), Role Sphere) and a floor (z = −1, Role Plane); artist_match.addon_scene), its
cloth simulated through an automatic proxy of about --proxies vertices (Blender's Decimate of the
cloth; the cloth follows it through core.design.embedding).

- Optimize (per proxy size, artist_match.addon_case): through the add-on's operators, Simulate &
  Bake with the proxy set, New Target from Cloth at frames 25 and 49, the targets edited as
  artist_match's "whole" poses (frame 25 turned 25° about the vertical through its centroid,
  frame 49 shifted 15 cm in x), Control Forces (the add-on's defaults, Move Pins on; no
  stiffness), Stop Within 10 mm, Optimize (Max Iterations --max-iter). Per row: the proxy's actual
  vertex count, Simulate & Bake's seconds, Optimize's wall seconds (criterion ≤ 2 min), its
  iterations and why it stopped, per key the mean and largest distance (mm) of the cloth (the
  render mesh) from its target, whether every key's mean came within 10 mm, and the largest
  control acceleration (g). --refine N adds a row with the proxy nearest 1000 and N Refine
  iterations on the full cloth after the proxy's run (stopping at Stop Within too).
- Simulate & Bake through the proxy of --bake-proxy vertices (default: of --proxies the one
  nearest 1000, the add-on's default budget) against Blender's Cloth with its Cotton preset as it
  is (fabric.blender_run: Collision modifiers on the sphere and the floor, a frame is 1/24 s; its
  mass is per vertex and its stiffness per spring, so it behaves differently at another
  resolution), once on the full side×side cloth (triangulated) and once on the same proxy (the
  add-on's decimated mesh as an object, the proxy vertex nearest each pinned corner pinned)
  carrying the full cloth with a Surface Deform modifier bound at frame 1. Medians of --repeats
  of the three times, and the mean and largest distance (mm) between each two of the three cloths
  (evaluated meshes, world space) at frames 25 and 49.

JSON lines per case (also appended to --out), then a markdown table.

    .envs/py313-bpy5.2/bin/python benchmarks/proxy.py [--side 128] [--proxies 500 1000 2000] [--repeats 1]
        [--bake-proxy 1000] [--max-iter 100] [--refine 0] [--skip-blender] [--skip-optimize] [--out proxy.jsonl]
"""

import argparse
import json
import pathlib
import statistics
import sys
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "scripts"))
sys.path.insert(0, str(HERE))
import bpy  # noqa: E402
from artist_match import addon_case, addon_scene, default_settings  # noqa: E402
from blender_cloth import triangulated_grid  # noqa: E402
from dev_extension import load_extension  # noqa: E402
from fabric import blender_run, world_positions  # noqa: E402

ext = load_extension()
from diffcloth.diffcloth_addon import proxy  # noqa: E402

WITHIN_MM = 10.0  # Stop Within, and the criterion on every key's mean distance
LIMIT_S = 120.0  # Optimize's wall time (criterion for the default proxy)
KEYS = (25, 49)  # Blender frames of the two keys (core frames 24 and 48)


def optimize_case(side, budget, max_iter, move_pins, refine=0):
    """The artist's round trip through a proxy of about `budget` vertices, then `refine` Refine
    iterations on the cloth itself (artist_match.addon_case; Stop Within is a length property,
    in metres)."""
    out = dict(
        proxy=budget,
        **addon_case(side, max_iter, "whole", move_pins, WITHIN_MM * 1e-3, proxy=budget, refine=refine),
    )
    out["meets"]["in_time"] = out["wall_s"] <= LIMIT_S
    return out


def colliders_only(side):
    """artist_match's scene without its cloth: the sphere and the floor (Roles set, so that
    fabric.blender_run gives them Collision modifiers), 24 fps, frames 1 to 49."""
    cloth, _ = addon_scene(side)
    bpy.data.objects.remove(cloth)


def at_keys(obj):
    """obj's evaluated world positions at the key frames (Blender's Cloth: from its cache)."""
    out = {}
    for f in KEYS:
        bpy.context.scene.frame_set(f)
        out[f] = world_positions(obj)
    return out


def diffcloth_bake(side, budget):
    """Simulate & Bake through the proxy: seconds, the baked cloth at the keys, and the proxy the
    run simulated (local vertices and faces: the add-on's own decimation, made before the run)."""
    cloth, _ = addon_scene(side)
    cloth.diffcloth.proxy_vertices = budget
    local, faces = proxy.decimated_at_start(bpy.context, cloth, budget)
    t0 = time.perf_counter()
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    seconds = time.perf_counter() - t0
    return seconds, at_keys(cloth), (local, faces)


def blender_full(side):
    """Blender's Cloth (Cotton) on the full cloth: seconds, the cloth at the keys, its quality."""
    colliders_only(side)
    cloth = triangulated_grid(side, "Blender")
    seconds, _, quality = blender_run(cloth, "cotton")
    return seconds, at_keys(cloth), quality


def blender_proxy(side, local, faces):
    """Blender's Cloth (Cotton) on the proxy (the proxy vertex nearest each pinned corner in the
    group 'pin'), the full cloth carried by Surface Deform bound at frame 1: seconds (the carried
    cloth evaluated every frame) and the carried cloth at the keys."""
    colliders_only(side)
    render = triangulated_grid(side, "Render")
    corners = np.array([v.co[:] for v in render.data.vertices if v.groups])
    mesh = bpy.data.meshes.new("Blender proxy")
    mesh.from_pydata(local.tolist(), [], faces)
    mesh.update()
    sim = bpy.data.objects.new(mesh.name, mesh)  # the cloth's own space: the grid's is the world's
    bpy.context.scene.collection.objects.link(sim)
    nearest = [int(np.argmin(np.linalg.norm(local - c, axis=1))) for c in corners]
    sim.vertex_groups.new(name="pin").add(nearest, 1.0, "REPLACE")
    bpy.context.scene.frame_set(1)
    mod = render.modifiers.new("SurfaceDeform", "SURFACE_DEFORM")
    mod.target = sim
    bpy.context.view_layer.update()
    with bpy.context.temp_override(object=render, active_object=render):
        assert bpy.ops.object.surfacedeform_bind(modifier=mod.name) == {"FINISHED"}
    bpy.context.view_layer.update()
    assert mod.is_bound, "Surface Deform did not bind the cloth to the proxy"
    seconds, _, _ = blender_run(sim, "cotton")
    return seconds, at_keys(render)


def distances_mm(a, b):
    d = np.linalg.norm(a - b, axis=1) * 1e3
    return [round(float(d.mean()), 1), round(float(d.max()), 1)]


def bake_case(side, budget, repeats):
    """The add-on's Simulate & Bake through the proxy against Blender's Cloth at full resolution
    and on the same proxy; medians of `repeats`, distances of the last repeat's cloths."""
    times = {"diffcloth_proxy": [], "blender_full": [], "blender_proxy": []}
    ext.register()
    try:
        for _ in range(repeats):
            seconds, ours, (local, faces) = diffcloth_bake(side, budget)
            times["diffcloth_proxy"].append(seconds)
            seconds, full, quality = blender_full(side)
            times["blender_full"].append(seconds)
            seconds, carried = blender_proxy(side, local, faces)
            times["blender_proxy"].append(seconds)
    finally:
        ext.unregister()
    cloths = {"diffcloth_proxy": ours, "blender_full": full, "blender_proxy": carried}
    pairs = [
        ("diffcloth_proxy", "blender_full"),
        ("diffcloth_proxy", "blender_proxy"),
        ("blender_proxy", "blender_full"),
    ]
    return dict(
        case=f"{side}x{side} Simulate & Bake, proxy {budget}",
        proxy_vertices=len(local),
        repeats=repeats,
        blender_quality=quality,
        **{f"{k}_s": round(statistics.median(v), 2) for k, v in times.items()},
        # per pair and key frame: [mean, largest] distance in mm
        distances_mm={f"{a} vs {b}": {f: distances_mm(cloths[a][f], cloths[b][f]) for f in KEYS} for a, b in pairs},
    )


def table(rows):
    """The rows as markdown: the optimizations, then the bake comparison."""
    out = []
    optimized = [r for r in rows if "iterations" in r]
    if optimized:
        out += [
            "| proxy | vertices | Simulate & Bake s | Optimize s | iterations | stopped | "
            + " | ".join(f"frame {f} mean / largest mm" for f in KEYS)
            + f" | ≤ {WITHIN_MM:g} mm | ≤ {LIMIT_S:g} s | control g |",
            "|---:|---:|---:|---:|---:|---|" + "---:|" * len(KEYS) + "---|---|---:|",
        ]
        for r in optimized:
            keys = " | ".join(f"{r['mean_mm'][str(f)]} / {r['largest_mm'][str(f)]}" for f in KEYS)
            refine = f" + Refine {r['refine']}" if r.get("refine") else ""
            out.append(
                f"| {r['proxy']}{refine} | {r['proxy_vertices']} | "
                f"{r['simulate_s']} | "
                f"{r['wall_s']} | {r['iterations']} | {r['reason'].split(':')[0]} | {keys} | "
                f"{'yes' if r['meets']['within_1cm'] else 'no'} | {'yes' if r['meets']['in_time'] else 'no'} | "
                f"{r['max_control_g']} |"
            )
        out.append("")
    for r in (r for r in rows if "distances_mm" in r):
        out += [
            f"{r['case']} ({r['proxy_vertices']} vertices), median of {r['repeats']}: DiffCloth through the "
            f"proxy {r['diffcloth_proxy_s']} s, Blender's Cloth (Cotton, quality {r['blender_quality']}) on the "
            f"full cloth {r['blender_full_s']} s, on the proxy with Surface Deform {r['blender_proxy_s']} s.",
            "",
            "| cloths | " + " | ".join(f"frame {f} mean / largest mm" for f in KEYS) + " |",
            "|---|" + "---:|" * len(KEYS),
        ]
        for pair, by_frame in r["distances_mm"].items():
            out.append(f"| {pair} | " + " | ".join(f"{d[0]} / {d[1]}" for d in by_frame.values()) + " |")
        out.append("")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--side", type=int, default=128)
    ap.add_argument("--proxies", type=int, nargs="+", default=[500, 1000, 2000], help="Proxy Vertices to optimize with")
    ap.add_argument(
        "--bake-proxy", type=int, help="Proxy Vertices of the bake comparison (default: of --proxies, nearest 1000)"
    )
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--max-iter", type=int, default=100)
    ap.add_argument(
        "--refine", type=int, default=0, help="also optimize with this many Refine iterations (proxy nearest 1000)"
    )
    ap.add_argument("--skip-blender", action="store_true", help="no Simulate & Bake comparison")
    ap.add_argument("--skip-optimize", action="store_true", help="no optimizations")
    ap.add_argument("--out", type=pathlib.Path, help="append the JSON lines to this file too")
    args = ap.parse_args()
    rows = []
    default_budget = min(args.proxies, key=lambda p: abs(p - proxy.DEFAULT_BUDGET))  # of --proxies, nearest 1000

    def emit(row):
        line = json.dumps(row)
        rows.append(json.loads(line))  # the table reads what was printed (frames as strings)
        print(line, flush=True)
        if args.out:
            with args.out.open("a") as f:
                f.write(line + "\n")

    if not args.skip_optimize:
        move_pins = default_settings()["move_pins"]
        for budget in args.proxies:
            emit(optimize_case(args.side, budget, args.max_iter, move_pins))
        if args.refine:
            emit(optimize_case(args.side, default_budget, args.max_iter, move_pins, args.refine))
    if not args.skip_blender:
        emit(bake_case(args.side, args.bake_proxy or default_budget, args.repeats))
    print()
    print(table(rows))


if __name__ == "__main__":
    main()
