"""Colliders artists use, against Blender's own Cloth on the same collider objects, in one process.

Every scene is built in Blender and read by the add-on as an artist's would be (its defaults:
Cotton, linearized steps; colliders through Blender's Collision physics), and Blender's Cloth runs
on a copy of the cloth with its own defaults (Cotton, quality 5) and the same Collision objects.

- mesh sphere vs analytic sphere: the 64×64 artist scene (1 m cloth, two corners pinned, 24 fps,
  48 frames) over a UV sphere mesh (32×16, Collision physics) and over DiffCloth's analytic sphere of
  the same radius: the largest and 95th-percentile distance between the two results (criterion:
  the mesh's facet depth + 1 mm), how deep each goes into the true sphere, and the time with the
  mesh over the time with the analytic sphere (≤ 1.5×).
- character: a cape pinned at the shoulders of a swaying body (a capsule of ≥ 5k triangles
  animated by shape keys), 48 frames: the deepest cloth vertex inside the body beyond its
  thickness (criterion ≤ 1 mm) at any frame, DiffCloth's time against Blender's (≤ 2×).
- slope: a 10 cm patch on a 30° Collision plane with Friction 70 and 30: drift over 2 s and the
  acceleration against Coulomb's g(sin 30° − μ cos 30°), DiffCloth and Blender.
- tunnelling: cloth dropped from 40 cm at 24 fps onto a zero-thickness quad, a 1 cm board and a
  closed sphere mesh: the worst position relative to the surface at any frame (wrong side < 0).

    .envs/py313-bpy5.2/bin/python benchmarks/colliders.py [--repeats 3] [--cases sphere character slope tunnel]
"""

import argparse
import json
import math
import pathlib
import statistics
import sys
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "scripts"))
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "sample_scenes"))
import bpy
from blender_cloth import triangulated_grid, world_positions
from dev_extension import load_extension
from make_scenes import collision, swaying_body

ext = load_extension()
import diffcloth.core as dc  # noqa: E402
from diffcloth.diffcloth_addon import convert  # noqa: E402

FPS, FRAMES = 24, 48


def reset(frames=FRAMES):
    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    scene.render.fps, scene.render.fps_base = FPS, 1.0
    scene.frame_start, scene.frame_end = 1, frames + 1


def cloth_object(obj):
    obj.diffcloth.role = "CLOTH"
    if obj.vertex_groups:
        obj.diffcloth.pin_group = obj.vertex_groups[0].name
    return obj


def ours(repeats=1):
    """DiffCloth on the scene as gathered: median seconds and the motion (frames+1, n, 3)."""
    setup = convert.gather(bpy.context, "DiffCloth", need_targets=False)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        traj = dc.simulate(setup.scene, keep_factors=False)  # as Simulate & Bake
        times.append(time.perf_counter() - t0)
    return statistics.median(times), traj.x, setup.scene


def blenders(obj, frames=FRAMES, repeats=1):
    """Blender's Cloth (its defaults) on obj: median seconds and the motion in world space."""
    scene = bpy.context.scene
    times = []
    for _ in range(repeats):
        mod = obj.modifiers.get("Cloth") or obj.modifiers.new("Cloth", "CLOTH")
        mod.settings.time_scale = math.sqrt(1000.0) / FPS
        if obj.vertex_groups:
            mod.settings.vertex_group_mass = obj.vertex_groups[0].name
        mod.point_cache.frame_start, mod.point_cache.frame_end = 1, frames + 1
        mod.point_cache.frame_end = frames + 1  # a fresh cache each repeat
        scene.frame_set(1)
        t0 = time.perf_counter()
        motion = [world_positions(obj)]
        for f in range(2, frames + 2):
            scene.frame_set(f)
            motion.append(world_positions(obj))
        times.append(time.perf_counter() - t0)
        obj.modifiers.remove(mod)
    return statistics.median(times), np.array(motion)


NUDGE = 1e-4  # m: how far the "nudged" analytic sphere is moved along x


def sphere_case(repeats):
    """The artist scene over a UV sphere mesh and over the analytic sphere of the same radius, and
    over that sphere nudged by 0.1 mm: how far two runs over the same surface drift apart where the
    cloth folds (the floor under any collider's difference)."""
    out = {}
    for kind in ("analytic", "mesh", "nudged"):
        reset()
        cloth_object(triangulated_grid(64, "DiffCloth"))
        at = (NUDGE if kind == "nudged" else 0.0, 0.1, -0.45)
        bpy.ops.mesh.primitive_uv_sphere_add(radius=0.25, location=at, segments=32, ring_count=16)
        ball = bpy.context.active_object
        if kind in ("analytic", "nudged"):
            ball.diffcloth.role, ball.diffcloth.friction = "SPHERE", 5.0
        else:
            collision(ball, friction=5.0, thickness=0.0)
        out[kind] = ours(repeats)
    facet = 0.25 * (1 - math.cos(math.pi / 16))  # the deepest a facet lies under the sphere
    apart = np.linalg.norm(out["mesh"][1] - out["analytic"][1], axis=2)
    gap = float(apart.max())
    nudged = np.linalg.norm(out["nudged"][1] - out["analytic"][1], axis=2)
    # the frames before the same surface's two runs part by a millimetre: there the results say how
    # near the mesh's surface is to the sphere, not which way a fold went
    horizon = int(np.argmax(np.r_[nudged.max(axis=1), np.inf] > 1e-3))
    # how deep each result goes into the true sphere: the contact itself, apart from where folds went
    deepest = {
        k: 0.25 - float(np.linalg.norm(out[k][1] - (0.0, 0.1, -0.45), axis=2).min()) for k in ("analytic", "mesh")
    }
    return dict(
        case="mesh sphere vs analytic sphere, 64x64, 48 frames",
        analytic_s=round(out["analytic"][0], 2),
        mesh_s=round(out["mesh"][0], 2),
        time_ratio=round(out["mesh"][0] / out["analytic"][0], 2),
        largest_difference_mm=round(gap * 1e3, 1),
        p95_difference_mm=round(float(np.percentile(apart, 95)) * 1e3, 1),
        # the analytic sphere against itself moved 0.1 mm: largest and 95th percentile
        nudged_difference_mm=[round(float(nudged.max()) * 1e3, 1), round(float(np.percentile(nudged, 95)) * 1e3, 1)],
        # up to that frame: how many frames, and the largest mesh-vs-analytic difference over them
        predictable_frames=horizon,
        largest_difference_until_then_mm=round(float(apart[:horizon].max(initial=0.0)) * 1e3, 1),
        deepest_into_sphere_mm={k: round(v * 1e3, 1) for k, v in deepest.items()},
        facet_depth_mm=round(facet * 1e3, 1),
        meets=dict(difference=gap <= facet + 1e-3, time=out["mesh"][0] <= 1.5 * out["analytic"][0]),
    )


def capsule(radius=0.15, height=0.9, rings=44):
    """The (radius, height) rings of a closed capsule (a body), z from 0 up."""
    out = []
    for i in range(rings + 1):
        t = i / rings  # 0 bottom pole … 1 top pole
        if t < 0.2:
            a = math.pi / 2 * (1 - t / 0.2)
            out.append((radius * math.cos(a), radius - radius * math.sin(a)))
        elif t > 0.8:
            a = math.pi / 2 * (t - 0.8) / 0.2
            out.append((radius * math.cos(a), height - radius + radius * math.sin(a)))
        else:
            out.append((radius, radius + (height - 2 * radius) * (t - 0.2) / 0.6))
    return out


def character_case(repeats):
    reset()
    # about 64·44·2 triangles; the upper body leans forward 10 cm at the shoulders
    body = swaying_body(capsule(), 64, lambda z: 0.1 * max(z - 0.3, 0.0) / 0.6, (1, 25, 49))
    collision(body, friction=5.0, thickness=0.005)
    triangles = sum(len(p.vertices) - 2 for p in body.data.polygons)
    # a 0.6 × 0.8 m cape behind the body, its top edge pinned at shoulder height
    bpy.ops.mesh.primitive_grid_add(x_subdivisions=29, y_subdivisions=39, size=1.0)
    cape = bpy.context.active_object
    cape.name = "DiffCloth"
    cape.scale = (0.6, 0.8, 1.0)
    cape.rotation_euler = (math.pi / 2, 0.0, 0.0)
    cape.location = (0.0, -0.17, -0.5)
    bpy.ops.object.transform_apply(location=True, rotation=True, scale=True)
    co = np.array([v.co for v in cape.data.vertices])
    cape.vertex_groups.new(name="pin").add(
        [int(i) for i in np.flatnonzero(co[:, 2] > co[:, 2].max() - 1e-6)], 1.0, "REPLACE"
    )
    cloth_object(cape)
    t_ours, motion, scene = ours(repeats)
    collider = scene.colliders[0]
    deepest = 0.0
    for f, x in enumerate(motion):  # signed distance to the body at each frame, beyond its thickness
        deepest = max(deepest, -float(collider.signed(x, f).min()) + 0.005)
    t_blender, theirs = blenders(cape, repeats=repeats)
    deepest_blender = max(-float(collider.signed(x, f).min()) + 0.005 for f, x in enumerate(theirs))
    return dict(
        case=f"cape on a swaying body ({triangles} triangles, shape keys), 30x40 cape, 48 frames",
        diffcloth_s=round(t_ours, 2),
        blender_s=round(t_blender, 2),
        ratio=round(t_ours / t_blender, 2),
        deepest_beyond_thickness_mm=round(deepest * 1e3, 2),
        blender_deepest_beyond_thickness_mm=round(deepest_blender * 1e3, 2),
        meets=dict(depth=deepest <= 1e-3, time=t_ours <= 2 * t_blender),
    )


def slope_case(friction):
    reset(frames=60)
    bpy.ops.mesh.primitive_plane_add(size=40.0, rotation=(math.radians(30), 0, 0))
    slope = collision(bpy.context.active_object, friction=friction, thickness=0.005)
    patch = triangulated_grid(6, "DiffCloth")
    patch.vertex_groups.clear()
    patch.scale = (0.1, 0.1, 1.0)
    patch.rotation_euler = (math.radians(30), 0, 0)
    patch.location = np.array(slope.matrix_world.to_3x3().col[2]) * 0.0055
    cloth_object(patch).diffcloth.damping = 0.0
    _, motion, _ = ours()
    downhill = np.array([0, -math.cos(math.radians(30)), -math.sin(math.radians(30))])
    t = np.arange(61) / FPS

    def figures(x):
        centre = x.mean(axis=1) @ downhill
        accel = np.polyfit(t[12:], np.gradient(centre, t)[12:], 1)[0]
        return float(centre[-1] - centre[12]), float(accel)

    drift, accel = figures(motion)
    _, theirs = blenders(patch, frames=60)
    b_drift, b_accel = figures(theirs)
    mu = friction / 100
    coulomb = 9.81 * (math.sin(math.radians(30)) - mu * math.cos(math.radians(30)))
    out = dict(
        case=f"slope 30 deg, Friction {friction:g} (mu {mu:g})",
        drift_over_2s_mm=round(drift * 1e3, 1),
        acceleration=round(accel, 3),
        coulomb=round(max(coulomb, 0.0), 3),
        blender_drift_over_2s_mm=round(b_drift * 1e3, 1),
        blender_acceleration=round(b_accel, 3),
    )
    out["meets"] = abs(drift) <= 0.01 if coulomb <= 0 else abs(accel - coulomb) <= 0.05 * coulomb
    return out


def tunnel_case(target):
    reset(frames=24)
    if target == "quad":
        bpy.ops.mesh.primitive_plane_add(size=0.6)
        obstacle = collision(bpy.context.active_object, friction=5.0, thickness=0.0, single_sided=False)
    elif target == "board":
        bpy.ops.mesh.primitive_cube_add(size=1.0, location=(0.0, 0.0, -0.005))
        obstacle = collision(bpy.context.active_object, friction=5.0, thickness=0.0)
        obstacle.scale = (0.6, 0.6, 0.01)
    else:
        bpy.ops.mesh.primitive_uv_sphere_add(radius=0.2, location=(0.0, 0.0, -0.2), segments=32, ring_count=16)
        obstacle = collision(bpy.context.active_object, friction=5.0, thickness=0.0)
    cloth = triangulated_grid(12, "DiffCloth")
    cloth.vertex_groups.clear()
    cloth.scale = (0.4, 0.4, 1.0)
    cloth.location = (0.05, 0.0, 0.4)
    cloth_object(cloth)
    _, motion, scene = ours()
    mesh = scene.colliders[0]
    if target == "closed":
        worst = min(float(mesh.signed(x, 0.0).min()) for x in motion)
    else:
        over = (np.abs(motion[:, :, 0]) < 0.3) & (np.abs(motion[:, :, 1]) < 0.3)
        worst = float(motion[:, :, 2][over].min())
    return dict(
        case=f"drop onto a {dict(quad='zero-thickness quad', board='1 cm board', closed='closed sphere mesh')[target]}",
        closest_to_the_surface_mm=round(worst * 1e3, 2),
        meets=worst > (0.0 if target == "quad" else -0.003),
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cases", nargs="+", default=["sphere", "character", "slope", "tunnel"])
    args = ap.parse_args()
    ext.register()
    try:
        if "sphere" in args.cases:
            print(json.dumps(sphere_case(args.repeats)), flush=True)
        if "character" in args.cases:
            print(json.dumps(character_case(args.repeats)), flush=True)
        if "slope" in args.cases:
            for friction in (70.0, 30.0):
                print(json.dumps(slope_case(friction)), flush=True)
        if "tunnel" in args.cases:
            for target in ("quad", "board", "closed"):
                print(json.dumps(tunnel_case(target)), flush=True)
    finally:
        ext.unregister()


if __name__ == "__main__":
    main()
