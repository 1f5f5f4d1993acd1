"""The artist scene of issue 14, DiffCloth against Blender's own Cloth, interleaved in one process.

A 1 m cloth of side×side vertices (triangulated grid), 0.5 kg, its two +Y corners pinned, at
24 fps for 48 frames, one implicit Euler step per frame, with the add-on's default settings: the
scene is built in Blender and read by the add-on exactly as an artist's would be. Variants: alone,
with a sphere (r 0.25 at (0, 0.1, −0.45)), with the sphere and a floor at z = −0.8. Blender's Cloth
(quality 5) runs on a copy of the same mesh, same mass, tension and colliders (its linear bending
as earlier measurements set it: a 0.1 N/m bending spring scaled by (0.05 m / mean edge)², mapped
as in BENCHMARKS.md; DiffCloth uses the add-on's hinge bending rigidity). Per case: medians of the forward times and
their ratio, Newton iterations and factorizations per step, whether every step converged, and
value_and_grad's time over the forward's (a keyframe 5 cm above the last frame).

    .envs/py313-bpy5.2/bin/python benchmarks/artist_scene.py [--sizes 64 128] [--repeats 3]
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
from blender_cloth import add_cloth_modifier, step_seconds, triangulated_grid  # noqa: E402
from dev_extension import load_extension  # noqa: E402

ext = load_extension()
import diffcloth.core as dc  # noqa: E402
from diffcloth.diffcloth_addon import convert  # noqa: E402

FPS, FRAMES = 24, 48


def build(side, sphere, floor):
    """The Blender scene: the DiffCloth cloth and its colliders (with Collision modifiers for Blender)."""
    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    scene.render.fps, scene.render.fps_base = FPS, 1.0
    scene.frame_start, scene.frame_end = 1, FRAMES + 1
    cloth = triangulated_grid(side, "DiffCloth")
    cloth.diffcloth.role, cloth.diffcloth.pin_group = "CLOTH", "pin"
    if sphere:
        bpy.ops.mesh.primitive_uv_sphere_add(radius=0.25, location=(0.0, 0.1, -0.45))
        bpy.context.active_object.diffcloth.role = "SPHERE"
    if floor:
        bpy.ops.mesh.primitive_plane_add(size=4.0, location=(0.0, 0.0, -0.8))
        bpy.context.active_object.diffcloth.role = "PLANE"
    return cloth


def blender_seconds(side):
    """Blender's Cloth on a fresh copy of the mesh (a fresh cache) with the scene's colliders."""
    for obj in bpy.context.scene.objects:
        if obj.diffcloth.role in ("SPHERE", "PLANE") and not obj.modifiers:
            obj.modifiers.new("Collision", "COLLISION")
    copy = triangulated_grid(side, "Blender")
    s = bpy.data.objects["DiffCloth"].diffcloth
    edge = np.mean(
        [(copy.data.vertices[a].co - copy.data.vertices[b].co).length for a, b in (e.vertices for e in copy.data.edges)]
    )
    add_cloth_modifier(copy, FRAMES, 1.0 / FPS, s.tension, 0.1 * (0.05 / edge) ** 2, s.mass)
    seconds = step_seconds(copy, FRAMES)
    bpy.data.objects.remove(copy)
    return seconds


def case(side, sphere, floor, repeats):
    build(side, sphere, floor)
    setup = convert.gather(bpy.context, "DiffCloth", need_targets=False)
    sc = setup.scene
    ours, theirs, grads = [], [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        traj = dc.simulate(sc)
        ours.append(time.perf_counter() - t0)
        theirs.append(blender_seconds(side))
    loss = dc.KeyframeLoss({FRAMES: traj.x[FRAMES] + [0.0, 0.0, 0.05]})
    for _ in range(repeats):
        t0 = time.perf_counter()
        dc.value_and_grad(sc, loss)
        grads.append(time.perf_counter() - t0)
    st = traj.stats
    f, b = statistics.median(ours), statistics.median(theirs)
    return dict(
        mesh=f"{side}x{side}",
        sphere=sphere,
        floor=floor,
        frames=FRAMES,
        repeats=repeats,
        diffcloth_s=round(f, 2),
        blender_s=round(b, 2),
        ratio=round(f / b, 2),
        newton_per_step=round(float(st.iterations.mean()), 2),
        newton_max=int(st.iterations.max()),
        factorizations_per_step=round(st.factorizations / sc.n_steps, 2),
        all_converged=bool(st.converged.all()),
        value_and_grad_over_forward=round(statistics.median(grads) / f, 2),
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[64, 128])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    ext.register()
    try:
        for side in args.sizes:
            for sphere, floor in ((False, False), (True, False), (True, True)):
                print(json.dumps(case(side, sphere, floor, args.repeats)), flush=True)
    finally:
        ext.unregister()


if __name__ == "__main__":
    main()
