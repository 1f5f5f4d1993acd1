"""How much a step amplifies a change of its start: the largest gain ‖δ(x, h·v) at the end‖ /
‖δ(x, h·v) at the start‖ over `frames` frames from a frame of the artist scene, for each solver.

The 32×32 Cotton artist scene (benchmarks/artist_match.py's `scene`: two corners pinned, sphere and
floor, 24 fps) is simulated once; from its state at each start frame a window of 1, 3, 6 and 12
frames is simulated again, and the largest singular value of the window's Jacobian (end state by
start state, velocities scaled by the frame's length so both are metres) found by power iteration
on JᵀJ: a tangent pass (core.gradients.tangent) and an adjoint pass (core.gradients.adjoint.backward)
a round. What the optimizer sees where it moves a design: a gain far above 1 in one frame is a map
no window of frames makes smooth (multiple shooting needs a gain of a few per window), where
implicit Euler's converged step stays near 1. Also printed: where the most amplified change lives
(its largest vertex's clearance from the nearest collider and distance from the nearest pin), to
tell contact from the cloth's own response.

    .envs/py313-bpy5.2/bin/python benchmarks/sensitivity.py [--side 32] [--starts 0 12 24 36] [--frames 1 3 6 12]
        [--solvers linearized newton] [--rounds 12]
"""

import argparse
import json
import pathlib
import sys

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from artist_match import dc, scene  # noqa: E402

adjoint = sys.modules[dc.__name__ + ".gradients.adjoint"]
tangent = sys.modules[dc.__name__ + ".gradients.tangent"].tangent


def gain(sc, full, start, frames, rounds, seed=0):
    """The largest gain over `frames` frames from frame `start` of the trajectory full, and the
    most amplified start change (δx, h·δv) (n,3 each)."""
    n, h, pinned = sc.cloth.n, sc.dt, sc.cloth.pinned
    v0 = full.v[start].copy()
    v0[pinned] = 0.0
    window = sc.replace(steps=frames, x0=full.x[start].copy(), v0=v0)
    guess = full.step_x[start * sc.substeps : (start + frames) * sc.substeps + 1] if sc.solver == "newton" else None
    traj = dc.simulate(window, guess=guess)
    lin = adjoint.Linearization(window, traj)
    rng = np.random.default_rng(seed)
    dx, dv = rng.normal(size=(n, 3)), rng.normal(size=(n, 3))
    value = 0.0
    for _ in range(rounds):
        dx[pinned], dv[pinned] = 0.0, 0.0
        norm = np.sqrt((dx * dx).sum() + (dv * dv).sum())
        dx, dv = dx / norm, dv / norm
        out = tangent(window, traj, {"x0": dx, "v0": dv / h}, lin)
        ex, ev = out.x[-1], out.v[-1] * h
        value = float(np.sqrt((ex * ex).sum() + (ev * ev).sum()))
        gx, gv = np.zeros((frames + 1, n, 3)), np.zeros((frames + 1, n, 3))
        gx[-1], gv[-1] = ex, ev * h
        back = adjoint.backward(window, traj, gx, gv, lin=lin)
        dx, dv = back.x0.copy(), back.v0 * h
    dx[pinned], dv[pinned] = 0.0, 0.0  # the pins' rows hold their own gradient, not a change of the start
    return value, dx, dv


def where(sc, frame, x, dx, dv):
    """The most amplified change's largest vertex (x: the positions at `frame`): its clearance from
    the nearest collider there and distance from the nearest pin (m)."""
    v = int(np.argmax((dx * dx).sum(axis=1) + (dv * dv).sum(axis=1)))
    clearance = min(float(col.signed(x[v : v + 1], frame)[0]) for col in sc.colliders) if sc.colliders else np.inf
    pin = float(np.linalg.norm(x[sc.cloth.pinned] - x[v], axis=1).min()) if len(sc.cloth.pinned) else np.inf
    return v, clearance, pin


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--side", type=int, default=32)
    ap.add_argument("--starts", type=int, nargs="+", default=[0, 12, 24, 36])
    ap.add_argument("--frames", type=int, nargs="+", default=[1, 3, 6, 12])
    ap.add_argument("--solvers", nargs="+", default=["linearized", "newton"])
    ap.add_argument("--rounds", type=int, default=12, help="power iterations")
    args = ap.parse_args()
    base = scene(args.side)
    for solver in args.solvers:
        sc = base.replace(solver=solver)
        full = dc.simulate(sc, keep_factors=False)
        for start in args.starts:
            for frames in args.frames:
                if start + frames > sc.steps:
                    continue
                value, dx, dv = gain(sc, full, start, frames, args.rounds)
                vertex, clearance, pin = where(sc, start, full.x[start], dx, dv)
                row = dict(side=args.side, solver=solver, start=start, frames=frames, gain=round(value, 2))
                row.update(vertex=vertex, clearance_mm=round(clearance * 1e3), from_pin_mm=round(pin * 1e3))
                print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
