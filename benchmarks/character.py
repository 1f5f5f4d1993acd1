"""The character sample scene (sample_scenes/character.blend: a walking, turning rig wearing a cape
over a skirt, both pinned through Armature modifiers and subdivided, in a gusting Wind field)
baked by DiffCloth and by Blender's Cloth on the same rig, in one process.

- time: Simulate & Bake of both cloths together (the operator: reading the scene, simulating,
  writing the bake), with the add-on's default linearized steps and with Optimize's converged ones,
  against stepping Blender's Cloth (its defaults, Cotton, quality 5, at DiffCloth's vertex mass:
  at_our_mass) on both cloths through the frames, each cloth with Collision physics so that they
  collide with one another, as far apart as DiffCloth keeps them, a run of each in turn (criterion:
  DiffCloth ≤ 1× Blender's time; the median of the rounds' own ratios beside it), and how far apart
  the two bakes end; and Blender at its defaults throughout
  (0.3 kg a vertex, its own collision distances), as the fabric benchmarks compare;
- pins: the largest distance of a pinned vertex from where the rig puts it at any frame (≤ 1 mm);
- body: the deepest cloth vertex inside the body beyond its Collision thickness (≤ 1 mm), and
  the cape's deepest into the skirt (its side of it at the start) for both;
- keys: the main job's optimization (the cape's two keys, the wind's strength): seconds and the
  distances reached (≤ 1 cm within 1 min).

    .envs/py313-bpy5.2/bin/python benchmarks/character.py [--repeats 3] [--dense]
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
REPO = HERE.parent
sys.path.insert(0, str(REPO / "scripts"))
sys.path.insert(0, str(HERE))
import bpy
from blender_cloth import world_positions
from dev_extension import load_extension

ext = load_extension()
from diffcloth.diffcloth_addon import convert, operators, runner  # noqa: E402
from diffcloth.diffcloth_addon.reading import CACHE_MODIFIER  # noqa: E402

SCENE = REPO / "sample_scenes" / "character.blend"
CLOTHS = ("Cape", "Skirt")


DENSE = False  # --dense: the cloths' Subdivision applied to their meshes (4× the vertices), no keys


def open_scene():
    bpy.ops.wm.open_mainfile(filepath=str(SCENE))
    scene = bpy.context.scene
    if DENSE:
        for t in [o for o in scene.objects if o.diffcloth.role == "TARGET"]:
            bpy.data.objects.remove(t)
        for name in CLOTHS:
            obj = scene.objects[name]
            with bpy.context.temp_override(object=obj, active_object=obj):
                bpy.ops.object.modifier_apply(modifier="Subdivision")
            obj.modifiers.new("Subdivision", "SUBSURF").levels = 1
            obj.diffcloth.self_distance = 0.01  # within twice the finer mesh's shortest edge
    return scene


def world(obj, drop=("Subdivision",)):
    """obj's evaluated vertices in the world with the modifiers named in drop off (the simulated
    mesh, not its subdivision)."""
    mods = [m for m in obj.modifiers if m.name in drop]
    for m in mods:
        m.show_viewport = False
    out = world_positions(obj)
    for m in mods:
        m.show_viewport = True
    return out


def motions(scene, drop):
    """Per cloth, its simulated vertices at every frame (frames, n, 3)."""
    out = {name: [] for name in CLOTHS}
    for f in range(scene.frame_start, scene.frame_end + 1):
        scene.frame_set(f)
        for name in CLOTHS:
            out[name].append(world(scene.objects[name], drop))
    scene.frame_set(scene.frame_start)
    return {name: np.array(x) for name, x in out.items()}


def rigged(scene, cloth_modifier):
    """Per cloth, where the rig alone puts its vertices at every frame (the cloth's modifiers off)."""
    return motions(scene, ("Subdivision", cloth_modifier))


def pins_off(scene, moved, held):
    """The largest distance of a pinned vertex (pinned outright) from where the rig holds it, over both cloths."""
    worst = 0.0
    for name in CLOTHS:
        obj = scene.objects[name]
        group = obj.vertex_groups["Pinned"].index
        pinned = [v.index for v in obj.data.vertices if any(g.group == group and g.weight >= 0.9999 for g in v.groups)]
        worst = max(worst, float(np.linalg.norm(moved[name][:, pinned] - held[name][:, pinned], axis=2).max()))
    return worst


def depths(setup, moved):
    """The deepest cloth vertex inside the body beyond its thickness (m), at any frame."""
    body = setup.scene.colliders[0]
    x = np.concatenate([moved[name] for name in CLOTHS], axis=1)
    return max(-float(body.signed(xf, f).min()) - body.thickness for f, xf in enumerate(x))


def diffcloth_bake(solver, repeats):
    """Simulate & Bake of both cloths with `solver` steps: the seconds of each run, their motion,
    the Setup and where the rig holds them."""
    times = []
    for _ in range(repeats):
        scene = open_scene()
        for name in CLOTHS:
            scene.objects[name].diffcloth.solver = solver
        t0 = time.perf_counter()
        assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
        times.append(time.perf_counter() - t0)
    setup = convert.gather(bpy.context, need_targets=False)
    return times, motions(scene, ("Subdivision",)), setup, rigged(scene, CACHE_MODIFIER)


def blender_bake(repeats, matched=True):
    """Blender's Cloth on both cloths after their Armature, colliding with the body and each other:
    the seconds of each run and their motion. matched: at DiffCloth's vertex mass (at_our_mass) and as far
    apart as DiffCloth keeps them; else Blender's defaults throughout (0.3 kg a vertex, its
    collision distances), as the fabric benchmarks compare them. The Subdivision after it is
    removed: toggling a modifier while stepping would reset Blender's cache, and its cost is not
    the simulation's."""
    times = []
    for _ in range(repeats):
        scene = open_scene()
        for name in CLOTHS:
            obj = scene.objects[name]
            for m in [m for m in obj.modifiers if m.type in ("MESH_CACHE", "SUBSURF")]:
                obj.modifiers.remove(m)
            mod = obj.modifiers.new("Cloth", "CLOTH")
            mod.settings.time_scale = math.sqrt(1000.0) / scene.render.fps  # a frame's time (../shared/BENCHMARKS.md)
            mod.settings.vertex_group_mass = "Pinned"
            mod.point_cache.frame_start, mod.point_cache.frame_end = scene.frame_start, scene.frame_end
            obj.modifiers.new("Collision", "COLLISION")  # the other cloth collides with it
            if matched:  # the distances DiffCloth keeps: Blender adds the cloth's own to a collider's thickness
                at_our_mass(mod.settings, obj)
                mod.collision_settings.distance_min = 0.001
                obj.collision.thickness_outer = obj.diffcloth.self_distance - 0.001
        scene.frame_set(scene.frame_start)
        motion = {name: [world(scene.objects[name], ())] for name in CLOTHS}
        t0 = time.perf_counter()
        for f in range(scene.frame_start + 1, scene.frame_end + 1):
            scene.frame_set(f)
            for name in CLOTHS:
                motion[name].append(world(scene.objects[name], ()))  # as an artist's viewport evaluates it
        times.append(time.perf_counter() - t0)
        assert "outdated" not in scene.objects["Cape"].modifiers["Cloth"].point_cache.info
    return times, {name: np.array(x) for name, x in motion.items()}


# Blender's settings that act per unit of its vertex mass: scaled with it, its cloth moves alike
SCALED = (
    "tension_stiffness",
    "compression_stiffness",
    "shear_stiffness",
    "bending_stiffness",
    "tension_damping",
    "compression_damping",
    "shear_damping",
    "bending_damping",
    "air_damping",
)


def at_our_mass(settings, obj):
    """Blender's defaults (Cotton: 0.3 kg a vertex, whatever the mesh) at DiffCloth's vertex mass,
    every stiffness and damping scaled with it: under gravity alone it moves as its defaults do, and
    a field pushes the fabric's real weight (its defaults make this cape 60 kg, which no wind moves)."""
    area = sum(p.area for p in obj.data.polygons)
    mass = obj.diffcloth.density * area / len(obj.data.vertices)
    ratio = mass / settings.mass
    settings.mass = mass
    for key in SCALED:
        setattr(settings, key, getattr(settings, key) * ratio)


def keys(repeats):
    """The main job's optimization in this process: median seconds and the keys' distances (mm)."""
    times, result = [], None
    for _ in range(repeats):
        open_scene()
        t0 = time.perf_counter()
        setup, job = operators.prepare(bpy.context, "optimize", use_active=False)
        run = runner.Inline(job).start()
        run.wait()
        result = operators.finish(bpy.context, setup, run)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), {f: round(d[2] * 1e3, 2) for f, d in result.keyframes.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--dense", action="store_true", help="the cloths subdivided once more (4x the vertices), no keys")
    args = ap.parse_args()
    global DENSE
    DENSE = args.dense
    ext.register()
    try:
        out = {}
        ours = {}
        # DiffCloth's default bake and Blender's matched one in turn, a run of each a round: a
        # machine whose speed drifts (30-50% within an hour, seen here) moves both alike
        linearized, blender = [], []
        for _ in range(args.repeats):
            linearized.append(diffcloth_bake("LINEARIZED", 1))
            blender.append(blender_bake(1))
        rounds = {
            "LINEARIZED": ([t for times, *_ in linearized for t in times], *linearized[-1][1:]),
            "NEWTON": diffcloth_bake("NEWTON", args.repeats),
        }
        for solver, (times, moved, setup, held) in rounds.items():
            ours[solver] = moved
            out[f"diffcloth_{solver.lower()}"] = dict(
                seconds=round(statistics.median(times), 3),
                pins_off_mm=round(pins_off(bpy.context.scene, moved, held) * 1e3, 3),
                inside_body_mm=round(max(depths(setup, moved), 0.0) * 1e3, 2),
            )
        t_defaults = statistics.median(blender_bake(args.repeats, matched=False)[0])
        times, moved = [t for ts, _ in blender for t in ts], blender[-1][1]
        out["blender"] = dict(
            seconds=round(statistics.median(times), 3),
            pins_off_mm=round(pins_off(bpy.context.scene, moved, held) * 1e3, 3),
            inside_body_mm=round(max(depths(setup, moved), 0.0) * 1e3, 2),
            # how far the cape's hem hangs from DiffCloth's (linearized) at the last frame: the same shot?
            hem_from_diffcloth_mm={
                name: round(
                    float(np.linalg.norm(moved[name][-1] - ours["LINEARIZED"][name][-1], axis=1).mean()) * 1e3, 1
                )
                for name in CLOTHS
            },
        )
        # the ratio within each round, its median: what the drift leaves of the comparison
        out["diffcloth_linearized"]["ratio_by_round"] = round(
            statistics.median(d[0][0] / b[0][0] for d, b in zip(linearized, blender)), 2
        )
        out["vertices"] = len(setup.scene.x0)
        t, reached = keys(args.repeats) if not DENSE else (0.0, {})
        out["keys"] = dict(seconds=round(t, 2), reached_mm=reached)
        out["blender_defaults"] = dict(seconds=round(t_defaults, 3))
        for key in ("diffcloth_linearized", "diffcloth_newton"):
            out[key]["ratio_to_blender"] = round(out[key]["seconds"] / out["blender"]["seconds"], 2)
            out[key]["ratio_to_blender_defaults"] = round(out[key]["seconds"] / t_defaults, 2)
        lin = out["diffcloth_linearized"]
        out["meets"] = dict(
            time=lin["ratio_to_blender"] <= 1.0,
            pins=lin["pins_off_mm"] <= 1.0,
            body=lin["inside_body_mm"] <= 1.0,
            keys=out["keys"]["seconds"] <= 60 and max(reached.values(), default=0.0) <= 10.0,
        )
        print(json.dumps(out, indent=1))
    finally:
        ext.unregister()


if __name__ == "__main__":
    main()
