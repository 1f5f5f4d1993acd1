"""Forward and gradient speed on the thesis scene at several resolutions, one JSON line per case.

Forward: DiffCloth's simulate against Blender's own Cloth modifier on the same mesh and frames,
measured in this process through the bpy module, runs interleaved (A B A B …), medians.
Gradient: forward time, backward (adjoint) time and their ratio, and the speed-up over a
central finite-difference gradient of the same design dimension — measured on a few components
and extrapolated (stated in the output).

    python benchmarks/speed.py [--sizes 20 64 128] [--repeats 3] [--no-blender] [--no-gradient]
"""

import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "scripts"))
sys.path.insert(0, HERE)
from dev_extension import load_extension  # noqa: E402

load_extension()
import diffcloth.core as dc  # noqa: E402
from diffcloth.core.solver.integrator import StepModel  # noqa: E402


def scene(n, sphere):
    verts, tris = dc.grid(n, n, size=1.0)
    cloth = dc.Cloth(
        verts, tris, mass=0.5, k_tension=20.0, k_bending=0.1, pinned=[(n - 1) * n, n * n - 1], bending="springs"
    )  # the thesis's model
    colliders = [dc.Sphere((0.0, 0.1, -0.45), 0.25)] if sphere else []
    return dc.Scene(cloth, steps=100, dt=0.1, colliders=colliders, contact_stiffness=8e5)


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def forward(n, sphere, repeats, blender, substeps=1):
    sc = scene(n, sphere).replace(substeps=substeps)
    ours, theirs, traj = [], [], None
    for _ in range(repeats):
        t, traj = timed(lambda: dc.simulate(sc))
        ours.append(t)
        if blender is not None:
            theirs.append(blender(n, frames=sc.steps, dt=sc.dt, sphere=sphere))
    st = traj.stats
    out = dict(
        case="forward",
        vertices=f"{n}x{n}",
        sphere=sphere,
        frames=sc.steps,
        substeps=substeps,
        repeats=repeats,
        diffcloth_s=round(statistics.median(ours), 3),
        newton_iterations_per_step=round(float(st.iterations.mean()), 2),
        factorizations_per_step=round(st.factorizations / sc.n_steps, 2),
        all_steps_converged=bool(st.converged.all()),
        solver=StepModel(sc).system.backend,
    )
    if theirs:
        out.update(
            blender_s=round(statistics.median(theirs), 3),
            ratio=round(statistics.median(ours) / statistics.median(theirs), 2),
        )
    return out


def gradient(n, repeats):
    sc = scene(n, False)
    target = dc.simulate(sc.replace(cloth=sc.cloth.replace(k_tension=25.0)))
    loss = dc.KeyframeLoss({sc.steps: target.x[-1]})
    fwd, bwd = [], []
    for _ in range(repeats):
        t, traj = timed(lambda: dc.simulate(sc))
        fwd.append(t)
        t, _ = timed(lambda traj=traj: dc.value_and_grad(sc, loss, traj=traj))
        bwd.append(t)
    f, b = statistics.median(fwd), statistics.median(bwd)
    # design dimension: per-spring stiffness, x0, v0 and per-frame forces
    dim = sc.cloth.n_tension + sc.cloth.n_bending + 2 * 3 * sc.cloth.n + sc.steps * 3 * sc.cloth.n
    # one central-difference component = two simulations (measured on the global stiffness)
    per_component, _ = timed(
        lambda: [
            dc.simulate(sc.replace(cloth=sc.cloth.replace(k_tension=sc.cloth.k_tension * (1 + sign * 1e-6))))
            for sign in (1, -1)
        ]
    )
    return dict(
        case="gradient",
        vertices=f"{n}x{n}",
        frames=sc.steps,
        repeats=repeats,
        forward_s=round(f, 3),
        backward_s=round(b, 3),
        backward_over_forward=round(b / f, 3),
        design_dimension=dim,
        fd_seconds_per_component=round(per_component, 3),
        fd_gradient_s_extrapolated=round(per_component * dim, 1),
        speedup_over_fd_extrapolated=round(per_component * dim / (f + b), 1),
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[20, 64, 128])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-blender", action="store_true")
    ap.add_argument("--no-gradient", action="store_true")
    args = ap.parse_args()
    blender = None
    if not args.no_blender:
        from blender_cloth import blender_cloth_seconds as blender
    cases = [
        (forward, (n, sphere, args.repeats if n < 128 else 1, blender), dict(case="forward", sphere=sphere))
        for n in args.sizes
        for sphere in (False, True)
    ]
    if not args.no_gradient:
        cases += [(gradient, (n, args.repeats), dict(case="gradient")) for n in args.sizes if n <= 64]
    for fn, fn_args, label in cases:
        for out in attempts(fn, fn_args, label):
            print(json.dumps(out), flush=True)


def attempts(fn, fn_args, label):
    """The case's figures. A figure we cannot measure is reported, not skipped; a failing forward
    case is retried as the error suggests, in two substeps per frame (Blender takes 5)."""
    for kw in ({}, dict(substeps=2)) if fn is forward else ({},):
        try:
            yield fn(*fn_args, **kw)
            return
        except dc.SimulationError as err:
            yield dict(label, vertices=f"{fn_args[0]}x{fn_args[0]}", failed=str(err), **kw)


if __name__ == "__main__":
    main()
