"""Real fabric, defaults against defaults: DiffCloth's fabric presets against Blender's Cloth with its
same-named preset, interleaved in one process.

The artist scene: a 1 m cloth of side×side vertices (triangulated grid), its two +Y corners pinned,
24 fps, 48 frames; alone, and with a sphere (r 0.25 at (0, 0.1, −0.45)) and a floor (z = −0.8).
DiffCloth: the add-on's defaults with the preset applied (Fabric Preset), read by the add-on,
simulated with its default Solver (linearized steps). Blender: its Cloth modifier with its own
preset (Blender's scripts/presets/cloth/<Preset>.py: its quality, mass, stiffness and damping),
Collision modifiers on the colliders, speed set so a frame is 1/24 s (time_scale = √1000/24).
Per case, medians of --repeats: times and their ratio, Newton iterations and factorizations per
step, 95th-percentile and largest edge strain and the lowest point at the last frame for both;
for Cotton, value_and_grad's time over the forward's (a key 5 cm above the last frame).
--garments: a dress (~5.5k vertices, hanging from its shoulders) and a skirt (~1.4k, from its
waist), irregular triangles, every preset, DiffCloth against Blender at its defaults (Cotton).
--heap: a 48×48 cloth (0.8 m) standing 1 cm above a floor, let go, every preset.
--convergence: Cotton's lowest point at 32², 64² and 128². --converged: Cotton with the converged
solver (what Optimize uses) too, one run. --proxies N …: Cotton with the converged solver through
an automatic proxy of about N vertices (Proxy Vertices) too, one run each; strain and lowest point
of the cloth it carries. --steps: how the motion converges as the step shrinks,
the Cotton artist scene alone at 32² over its first half second (before the folds begin):
each solver at 1, 2, 4 and 8 substeps a frame against 16 converged substeps (with --proxies, the
64×64 scene converged through each proxy too).

    .envs/py313-bpy5.2/bin/python benchmarks/fabric.py [--sizes 64 128] [--presets cotton silk]
        [--repeats 3] [--garments] [--heap] [--convergence] [--steps] [--converged] [--proxies 500 1000]
"""

import argparse
import json
import math
import os
import pathlib
import statistics
import sys
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "scripts"))
sys.path.insert(0, str(HERE))
import bpy  # noqa: E402
from blender_cloth import triangulated_grid, world_positions  # noqa: E402
from dev_extension import load_extension  # noqa: E402

ext = load_extension()
import diffcloth.core as dc  # noqa: E402
from diffcloth.diffcloth_addon import convert  # noqa: E402
from diffcloth.diffcloth_addon.results import render_positions  # noqa: E402

FPS, FRAMES = 24, 48
PRESETS = pathlib.Path(bpy.utils.resource_path("LOCAL")) / "scripts" / "presets" / "cloth"


def strain_figures(x, rest, edges):
    """95th-percentile and largest edge strain (%), lowest point (m)."""
    length0 = np.linalg.norm(rest[edges[:, 0]] - rest[edges[:, 1]], axis=1)
    strain = np.linalg.norm(x[edges[:, 0]] - x[edges[:, 1]], axis=1) / length0 - 1
    return float(np.percentile(strain, 95)) * 100, float(strain.max()) * 100, float(x[:, 2].min())


def reset():
    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    scene.render.fps, scene.render.fps_base = FPS, 1.0
    scene.frame_start, scene.frame_end = 1, FRAMES + 1


def add_colliders():
    bpy.ops.mesh.primitive_uv_sphere_add(radius=0.25, location=(0.0, 0.1, -0.45))
    bpy.context.active_object.diffcloth.role = "SPHERE"
    bpy.ops.mesh.primitive_plane_add(size=4.0, location=(0.0, 0.0, -0.8))
    bpy.context.active_object.diffcloth.role = "PLANE"


def diffcloth_cloth(obj, preset):
    """obj as the add-on's default cloth with the preset applied."""
    obj.diffcloth.role, obj.diffcloth.pin_group = "CLOTH", "pin"
    bpy.context.view_layer.objects.active = obj
    assert bpy.ops.diffcloth.fabric_preset(cloth=obj.name, preset=preset) == {"FINISHED"}


def blender_run(obj, preset, self_collision=None):
    """Blender's Cloth on obj with its own preset (None: its defaults), stepped through the frames:
    seconds and the last frame's world positions. self_collision: (distance m, friction) to turn
    its Self Collisions on with."""
    scene = bpy.context.scene
    for other in scene.objects:
        if other.diffcloth.role in ("SPHERE", "PLANE") and not other.modifiers:
            other.modifiers.new("Collision", "COLLISION")
    mod = obj.modifiers.new("Cloth", "CLOTH")
    if preset is not None:
        source = (PRESETS / f"{preset.title()}.py").read_text().replace("bpy.context.cloth", "cloth")
        exec(compile(source, preset, "exec"), {"bpy": bpy, "cloth": mod})
    mod.settings.time_scale = math.sqrt(1000.0) / FPS
    if self_collision is not None:
        cs = mod.collision_settings
        cs.use_self_collision, (cs.self_distance_min, cs.self_friction) = True, self_collision
    mod.settings.vertex_group_mass = "pin"
    mod.point_cache.frame_start, mod.point_cache.frame_end = 1, FRAMES + 1
    scene.frame_set(1)
    t0 = time.perf_counter()
    for f in range(2, FRAMES + 2):
        scene.frame_set(f)
    seconds = time.perf_counter() - t0
    return seconds, world_positions(obj), mod.settings.quality


def ours(setup, gradient=False):
    sc = setup.scene
    t0 = time.perf_counter()
    traj = dc.simulate(sc, keep_factors=False)  # as Simulate & Bake
    forward = time.perf_counter() - t0
    grad = None
    if gradient:
        loss = dc.KeyframeLoss({FRAMES: traj.x[FRAMES] + [0.0, 0.0, 0.05]})
        t0 = time.perf_counter()
        dc.value_and_grad(sc, loss)
        grad = time.perf_counter() - t0
    return forward, traj, grad


def artist_case(side, preset, contact, repeats, solver="LINEARIZED", proxy=0):
    """proxy: Proxy Vertices (simulated through an automatic proxy of about that many vertices;
    strain and lowest point measured on the cloth it carries)."""
    reset()
    if contact:
        add_colliders()
    cloth = triangulated_grid(side, "DiffCloth")
    diffcloth_cloth(cloth, preset)
    cloth.diffcloth.solver, cloth.diffcloth.proxy_vertices = solver, proxy
    setup = convert.gather(bpy.context, "DiffCloth", need_targets=False)
    # the cloth's own rest mesh and edges (its triangles' sides), with or without a proxy
    rest, edges = world_positions(cloth), np.array([e.vertices[:] for e in cloth.data.edges])
    t_ours, t_blender, t_grad = [], [], []
    # value_and_grad of Cotton: linearized steps with friction (the colliders' default) have none built
    gradient = preset == "cotton" and (solver == "NEWTON" or not contact) and not proxy
    for _ in range(repeats):
        forward, traj, grad = ours(setup, gradient=gradient)
        t_ours.append(forward)
        if grad is not None:
            t_grad.append(grad)
        copy = triangulated_grid(side, "Blender")
        seconds, x_blender, quality = blender_run(copy, preset)
        t_blender.append(seconds)
        bpy.data.objects.remove(copy)
    st = traj.stats
    last = render_positions(setup, traj.x[-1])
    mine, theirs = strain_figures(last, rest, edges), strain_figures(x_blender, rest, edges)
    f, b = statistics.median(t_ours), statistics.median(t_blender)
    out = dict(
        scene=f"{side}x{side}{' + sphere + floor' if contact else ''}",
        preset=preset,
        solver=solver.lower(),
        proxy_vertices=setup.scene.cloth.n if proxy else None,
        repeats=repeats,
        diffcloth_s=round(f, 2),
        blender_s=round(b, 2),
        ratio=round(f / b, 2),
        blender_quality=quality,
        newton_per_step=round(float(st.iterations.mean()), 2),
        factorizations_per_step=round(st.factorizations / setup.scene.n_steps, 2),
        p95_strain_pct=[round(mine[0], 2), round(theirs[0], 2)],
        max_strain_pct=[round(mine[1], 1), round(theirs[1], 1)],
        lowest_m=[round(mine[2], 3), round(theirs[2], 3)],
    )
    if t_grad:
        out["value_and_grad_over_forward"] = round(statistics.median(t_grad) / f, 2)
    return out


def garment(kind, seed=1):
    """A dress (a tube narrowing to the waist and flaring below, ~5.5k vertices, pinned at two
    shoulder patches) or a skirt (a flared tube, ~1.4k vertices, pinned at the waist ring), as
    irregular triangles: vertices jittered in the surface, then Delaunay-triangulated per row
    pair, a seam where the tube closes."""
    rng = np.random.default_rng(seed)
    rows, cols, height = (74, 75, 1.1) if kind == "dress" else (36, 40, 0.55)
    t = np.linspace(0.0, 1.0, rows)
    if kind == "dress":
        radius = (
            0.16 + 0.04 * np.cos(np.pi * np.clip(t / 0.45, 0, 1)) ** 2 + 0.25 * np.clip((t - 0.45) / 0.55, 0, 1) ** 1.5
        )
    else:
        radius = 0.15 + 0.2 * t
    verts, index = [], {}
    for i in range(rows):
        for j in range(cols):
            jitter = 0.0 if i in (0, rows - 1) else rng.uniform(-0.3, 0.3)
            a = 2 * np.pi * (j + jitter) / cols
            z = -height * t[i] + (0.0 if i in (0, rows - 1) else rng.uniform(-0.25, 0.25) * height / (rows - 1))
            index[i, j] = len(verts)
            verts.append((radius[i] * np.cos(a), radius[i] * np.sin(a), z))
    faces = []
    for i in range(rows - 1):
        for j in range(cols):
            a, b = index[i, j], index[i, (j + 1) % cols]
            c, d = index[i + 1, j], index[i + 1, (j + 1) % cols]
            faces += [(a, b, d), (a, d, c)] if (i + j) % 2 else [(a, b, c), (b, d, c)]
    verts = np.array(verts) + [0.0, 0.0, 1.5]
    if kind == "dress":  # shoulder patches: the top ring's two arcs around ±x
        angle = np.arctan2(verts[:cols, 1], verts[:cols, 0])
        pins = [int(j) for j in np.flatnonzero(np.minimum(np.abs(angle), np.pi - np.abs(angle)) < 0.5)]
    else:
        pins = list(range(cols))
    return verts, faces, pins


def garment_object(name, verts, faces, pins):
    mesh = bpy.data.meshes.new(name)
    mesh.from_pydata(verts.tolist(), [], faces)
    obj = bpy.data.objects.new(name, mesh)
    bpy.context.collection.objects.link(obj)
    obj.vertex_groups.new(name="pin").add(pins, 1.0, "REPLACE")
    return obj


def garment_case(kind, presets):
    verts, faces, pins = garment(kind)
    rows = []
    reset()
    obj = garment_object("Blender", verts, faces, pins)
    seconds, x_blender, _ = blender_run(obj, None)  # Blender at its defaults (its Cotton)
    edges = np.array([e.vertices[:] for e in obj.data.edges])
    theirs = strain_figures(x_blender, verts, edges)
    for preset in presets:
        reset()
        cloth = garment_object("DiffCloth", verts, faces, pins)
        diffcloth_cloth(cloth, preset)
        try:
            setup = convert.gather(bpy.context, "DiffCloth", need_targets=False)
            forward, traj, _ = ours(setup)
            mine, finished = strain_figures(traj.x[-1], verts, edges), True
        except dc.SimulationError as err:
            forward, mine, finished = float("nan"), (float("nan"),) * 3, str(err)
        rows.append(
            dict(
                garment=kind,
                vertices=len(verts),
                preset=preset,
                finished=finished,
                diffcloth_s=round(forward, 2),
                blender_defaults_s=round(seconds, 2),
                p95_strain_pct=[round(mine[0], 2), round(theirs[0], 2)],
                max_strain_pct=[round(mine[1], 1), round(theirs[1], 1)],
                lowest_m=[round(mine[2], 3), round(theirs[2], 3)],
            )
        )
    return rows


def heap_case(preset):
    """A vertical 48×48 cloth (0.8 m) 1 cm above a floor, a millimetre of out-of-plane noise (a flat
    one is an equilibrium), let go: it must finish, in a heap."""
    verts, tris = dc.grid(48, 48, 0.8)
    noise = 1e-3 * np.random.default_rng(0).normal(size=len(verts))
    verts = np.stack([verts[:, 0], noise, verts[:, 1] + 0.41], axis=1)
    scene = dc.Scene(
        dc.FABRICS[preset].cloth(verts, tris),
        steps=FRAMES,
        dt=1 / FPS,
        solver="linearized",
        colliders=[dc.Plane((0, 0, 0), (0, 0, 1))],
    )
    t0 = time.perf_counter()
    traj = dc.simulate(scene, keep_factors=False)
    return dict(
        heap="48x48, 0.8 m, 1 cm above the floor",
        preset=preset,
        diffcloth_s=round(time.perf_counter() - t0, 2),
        newton_per_step=float(traj.stats.iterations.mean()),
        highest_m=round(float(traj.x[-1][:, 2].max()), 3),
        deepest_mm=round(float(-traj.x[-1][:, 2].min()) * 1e3, 1),
    )


def convergence():
    lowest = {}
    for side in (32, 64, 128):
        reset()
        diffcloth_cloth(triangulated_grid(side, "DiffCloth"), "cotton")
        traj = ours(convert.gather(bpy.context, "DiffCloth", need_targets=False))[1]
        lowest[f"{side}x{side}"] = round(float(traj.x[-1][:, 2].min()), 4)
    values = list(lowest.values())
    return dict(
        convergence="Cotton artist scene, lowest point at the last frame (m)",
        **lowest,
        spread_pct=round(100 * (max(values) - min(values)) / abs(np.mean(values)), 2),
    )


def step_convergence(side=32, frames=12, proxy=0):
    """Mean distance (mm) over the cloth to the 16-substep converged motion, at the last frame and
    at the worst, per solver and substeps a frame; the run's seconds. proxy: the converged solver
    through an automatic proxy of about that many vertices, distances on the cloth it carries."""
    reset()
    bpy.context.scene.frame_end = 1 + frames
    cloth = triangulated_grid(side, "DiffCloth")
    diffcloth_cloth(cloth, "cotton")
    cloth.diffcloth.proxy_vertices = proxy
    setup = convert.gather(bpy.context, "DiffCloth", need_targets=False)
    scene = setup.scene

    def motion(solver, substeps):
        return render_positions(
            setup, dc.simulate(scene.replace(solver=solver, substeps=substeps), keep_factors=False).x
        )

    reference = motion("newton", 16)
    rows = []
    for solver in ("newton",) if proxy else ("linearized", "newton"):
        for substeps in (1, 2, 4, 8):
            t0 = time.perf_counter()
            x = motion(solver, substeps)
            seconds = time.perf_counter() - t0
            off = np.linalg.norm(x - reference, axis=2).mean(axis=1) * 1e3
            rows.append(
                dict(
                    steps=f"Cotton {side}x{side}{f', proxy of {scene.cloth.n}' if proxy else ''}, {frames} frames, "
                    "against 16 converged substeps",
                    solver=solver,
                    substeps=substeps,
                    last_mm=round(float(off[-1]), 2),
                    worst_mm=round(float(off.max()), 2),
                    seconds=round(seconds, 2),
                )
            )
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="*", default=[64, 128])
    ap.add_argument("--presets", nargs="+", default=list(dc.FABRICS))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--converged", action="store_true", help="Cotton with the converged solver too (Optimize's)")
    ap.add_argument(
        "--proxies",
        type=int,
        nargs="+",
        default=[],
        help="Cotton converged through an automatic proxy of each of these Proxy Vertices too",
    )
    ap.add_argument("--scenes", nargs="+", default=["alone", "contact"], choices=("alone", "contact"))
    ap.add_argument("--garments", action="store_true")
    ap.add_argument("--heap", action="store_true")
    ap.add_argument("--convergence", action="store_true")
    ap.add_argument("--steps", action="store_true", help="the motion's convergence as the step shrinks")
    args = ap.parse_args()
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    ext.register()
    try:
        for side in args.sizes:
            for contact in [c == "contact" for c in args.scenes]:
                for preset in args.presets:
                    print(json.dumps(artist_case(side, preset, contact, args.repeats)), flush=True)
                if args.converged:
                    print(json.dumps(artist_case(side, "cotton", contact, 1, "NEWTON")), flush=True)
                for proxy in args.proxies:
                    print(json.dumps(artist_case(side, "cotton", contact, 1, "NEWTON", proxy)), flush=True)
        if args.garments:
            for kind in ("dress", "skirt"):
                for row in garment_case(kind, args.presets):
                    print(json.dumps(row), flush=True)
        if args.heap:
            for preset in args.presets:
                print(json.dumps(heap_case(preset)), flush=True)
        if args.convergence:
            print(json.dumps(convergence()), flush=True)
        if args.steps:
            for row in step_convergence():
                print(json.dumps(row), flush=True)
            for proxy in args.proxies:
                for row in step_convergence(64, proxy=proxy):
                    print(json.dumps(row), flush=True)
    finally:
        ext.unregister()


if __name__ == "__main__":
    main()
