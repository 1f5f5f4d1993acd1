"""Self-collision: how often cloth passes through itself, DiffCloth against Blender's Cloth with its
Self Collisions on and off, in one process.

Two 64×64 Cotton cloths, 24 fps, 48 frames (Blender: its Cotton preset, quality 5, Collision
physics on the colliders, a frame lasting 1/24 s; Self Collisions at its defaults, Distance 15 mm
and Friction 5): *fold*, a 1 m cloth dropped flat from 10 cm over a sphere (r 0.25) that stands on
a floor, its sides folding down onto the floor; *heap*, a 0.8 m cloth standing 1 cm above a floor
(a millimetre of out-of-plane noise) and let go. DiffCloth: the add-on's defaults (Cotton,
linearized steps), colliders Role Sphere and Plane, read by the add-on. Per scene and run: seconds,
Newton iterations a step, and the number of triangle pairs that pass through each other
(core.model.mesh.crossing_pairs) at every frame — its largest, its last, and in how many frames it is
above zero — with Self Collisions off and on (DiffCloth: the cloth's Self Collisions at Blender's
defaults, Distance 15 mm and Friction 5). Targets: no crossing with self-collision, its time at most 2× the run without
and at most Blender's own ratio of time with and without Self Collisions.

Every run is repeated (--repeat, 3) and its median time reported (the crossings are the same
each time).

    .envs/py313-bpy5.2/bin/python benchmarks/self_collision.py [--side 64] [--scenes fold heap] [--repeat 3]
"""

import argparse
import json
import pathlib
import sys
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "scripts"))
sys.path.insert(0, str(HERE))
import bpy  # noqa: E402
from blender_cloth import triangulated_grid  # noqa: E402
from fabric import FRAMES, blender_run, convert, dc, diffcloth_cloth, ext, reset, world_positions  # noqa: E402

crossing_pairs = sys.modules[dc.__name__ + ".model.mesh"].crossing_pairs

# Blender's Self Collisions defaults: Distance 0.015 m, Friction 5
BLENDER_SELF = (0.015, 5.0)


def build(scene, side, name):
    """The scene's colliders (Roles Sphere and Plane) and its cloth as object `name`, in a reset
    file; returns the cloth."""
    reset()
    if scene == "fold":
        bpy.ops.mesh.primitive_uv_sphere_add(radius=0.25, location=(0.0, 0.0, 0.0), segments=64, ring_count=32)
        bpy.context.active_object.diffcloth.role = "SPHERE"
        floor = -0.25
    else:
        floor = 0.0
    bpy.ops.mesh.primitive_plane_add(size=4.0, location=(0.0, 0.0, floor))
    bpy.context.active_object.diffcloth.role = "PLANE"
    cloth = triangulated_grid(side, name)
    cloth.vertex_groups.remove(cloth.vertex_groups["pin"])  # nothing holds it
    co = np.array([v.co[:] for v in cloth.data.vertices])
    if scene == "fold":
        co[:, 2] = 0.35
    else:
        noise = 1e-3 * np.random.default_rng(0).normal(size=len(co))
        co = np.stack([0.8 * co[:, 0], noise, 0.8 * co[:, 1] + 0.41], axis=1)
    cloth.data.vertices.foreach_set("co", co.ravel())
    cloth.data.update()
    cloth.vertex_groups.new(name="pin")  # empty: fabric's helpers name the group
    return cloth


def crossings(frames, tris):
    counts = np.array([len(crossing_pairs(x, tris)) for x in frames])
    return dict(largest=int(counts.max()), last=int(counts[-1]), frames_with_any=int((counts > 0).sum()))


def diffcloth_case(scene, side, self_collision):
    cloth = build(scene, side, "DiffCloth")
    diffcloth_cloth(cloth, "cotton")
    cloth.diffcloth.pin_group = ""
    if self_collision:
        cloth.diffcloth.use_self_collision = True
        cloth.diffcloth.self_distance, cloth.diffcloth.self_friction = self_collision
    setup = convert.gather(bpy.context, "DiffCloth", need_targets=False)
    t0 = time.perf_counter()
    traj = dc.simulate(setup.scene, keep_factors=False)  # as Simulate & Bake
    seconds = time.perf_counter() - t0
    out = dict(seconds=round(seconds, 2), newton_per_step=round(float(traj.stats.iterations.mean()), 2))
    return out, crossings(traj.x, setup.scene.cloth.tris), setup.scene.cloth.tris


def blender_case(scene, side, tris, self_collision):
    cloth = build(scene, side, "Blender")
    seconds, _, quality = blender_run(cloth, "cotton", self_collision)
    frames = []
    for f in range(1, FRAMES + 2):  # from its cache
        bpy.context.scene.frame_set(f)
        frames.append(world_positions(cloth))
    return dict(seconds=round(seconds, 2), quality=quality), crossings(frames, tris)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--side", type=int, default=64)
    ap.add_argument("--scenes", nargs="+", default=["fold", "heap"], choices=("fold", "heap"))
    ap.add_argument("--repeat", type=int, default=3, help="runs of each case; the median time is reported")
    args = ap.parse_args()

    def median(case, *case_args):
        """The case's first run, its seconds the median over args.repeat runs."""
        runs = [case(*case_args) for _ in range(args.repeat)]
        first = runs[0]
        first[0]["seconds"] = round(float(np.median([r[0]["seconds"] for r in runs])), 2)
        return first

    ext.register()
    try:
        for scene in args.scenes:
            ours, ours_crossing, tris = median(diffcloth_case, scene, args.side, None)
            ours_on, ours_on_crossing, _ = median(diffcloth_case, scene, args.side, BLENDER_SELF)
            off, off_crossing = median(blender_case, scene, args.side, tris, None)
            on, on_crossing = median(blender_case, scene, args.side, tris, BLENDER_SELF)
            row = dict(
                scene=f"{scene}, {args.side}x{args.side}, {FRAMES} frames, median of {args.repeat}",
                diffcloth_self_off=dict(**ours, crossing_pairs=ours_crossing),
                diffcloth_self_on=dict(**ours_on, crossing_pairs=ours_on_crossing),
                diffcloth_self_collision_cost=round(ours_on["seconds"] / ours["seconds"], 2),
                blender_self_off=dict(**off, crossing_pairs=off_crossing),
                blender_self_on=dict(**on, crossing_pairs=on_crossing),
                blender_self_collision_cost=round(on["seconds"] / off["seconds"], 2),
            )
            print(json.dumps(row), flush=True)
    finally:
        ext.unregister()


if __name__ == "__main__":
    main()
