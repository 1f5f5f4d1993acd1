"""A hanging cloth in Blender's force fields, DiffCloth against Blender's Cloth in the same units
and the same field: how far each field pushes it (the mean displacement at the last frame against
the same cloth without the field, along Blender's mean displacement; and the root mean square of
each vertex's displacement, which compares a Turbulence, whose noise pattern is not Blender's),
and the time each takes.

    .envs/py311-bpy4.2/bin/python benchmarks/fields.py [--cases wind force ...] [--sides 20] [--falling]

The cloth: 1 m, two corners pinned, falling from horizontal and hanging, 24 fps, 48 frames; springs
of tension 20 N/m and bending springs 0.1 N/m, 0.5 kg, no damping (blender_cloth.py drives
Blender's in these units: time_scale = √1000/fps); --falling: no pins, a flat sheet falling
through the field (what velocity-driven fields, Drag and Flow, do is then plain). Each field is made once in Blender; DiffCloth
reads it as the add-on does (diffcloth_addon/fields.py: a Wind field blowing alike everywhere is
the uniform wind S·√1000/fps m/s, every other field a core.Effector).
"""

import argparse
import json
import math
import pathlib
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from dev_extension import load_extension  # noqa: E402

EXT = load_extension()
from blender_cloth import add_cloth_modifier, step_seconds, triangulated_grid  # noqa: E402

import diffcloth.core as dc  # noqa: E402

FPS, FRAMES = 24, 48
K_TENSION, K_BENDING, MASS = 20.0, 0.1, 0.5
# field type, place, rotation, strength, other settings: each pushes the hanging cloth visibly
CASES = {
    "wind": ("WIND", (0.0, -1.0, 0.0), (-math.pi / 2, 0, 0), 3.0, {}),
    "wind_falloff": ("WIND", (0.0, -1.0, 0.0), (-math.pi / 2, 0, 0), 6.0, {"falloff_power": 2.0}),
    "force": ("FORCE", (0.0, -1.0, -0.5), (0, 0, 0), 3.0, {}),
    "force_plane": ("FORCE", (0.0, -1.0, 0.0), (-math.pi / 2, 0, 0), 3.0, {"shape": "PLANE", "falloff_power": 1.0}),
    "vortex": ("VORTEX", (0.0, 0.0, 0.0), (0, 0, 0), 1.0, {}),
    "drag": ("DRAG", (0.0, 0.0, 0.0), (0, 0, 0), 1.0, {"quadratic_drag": 1.0}),
    "drag_linear": ("DRAG", (0.0, 0.0, 0.0), (0, 0, 0), 0.0, {"quadratic_drag": 1.0}),
    "wind_flow": ("WIND", (0.0, 0.0, 0.0), (0, 0, 0), 1e-6, {}),  # Flow 1 alone: drag along the normals
    # the same at the cloth's Field Weights › Wind 0.5 (Blender halves the drag too)
    "wind_flow_weight": ("WIND", (0.0, 0.0, 0.0), (0, 0, 0), 1e-6, {"wind_weight": 0.5}),
    "turbulence": ("TURBULENCE", (0.0, 0.0, 0.0), (0, 0, 0), 10.0, {"size": 0.3}),
}


def build(side, case, falling=False):
    """Blender's scene: the cloth with its Cloth modifier, and the case's field (None: no field)."""
    import bpy

    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    scene.render.fps, scene.render.fps_base = FPS, 1.0
    scene.frame_start, scene.frame_end = 1, FRAMES + 1
    cloth = triangulated_grid(side)
    mod = add_cloth_modifier(cloth, FRAMES, 1 / FPS, K_TENSION, K_BENDING, MASS)
    mod.settings.bending_damping = 0.0
    if falling:
        mod.settings.vertex_group_mass = ""
    if case is not None:
        kind, location, rotation, strength, extra = CASES[case]
        extra = dict(extra)
        if "wind_weight" in extra:  # the cloth's Field Weights › Wind, Blender's and DiffCloth's
            mod.settings.effector_weights.wind = cloth.diffcloth.wind_weight = extra.pop("wind_weight")
        bpy.ops.object.effector_add(type=kind, location=location, rotation=rotation)
        field = bpy.context.active_object.field
        field.strength = strength
        for key, value in extra.items():
            setattr(field, key, value)
    return scene, cloth


def blender(side, case, falling):
    """Blender's cloth at the last frame (world vertices) and its wall seconds."""
    import bpy

    scene, cloth = build(side, case, falling)
    if falling:
        t0 = time.perf_counter()
        for f in range(1, FRAMES + 2):
            scene.frame_set(f)
        seconds = time.perf_counter() - t0
    else:
        seconds = step_seconds(cloth, FRAMES)
    ev = cloth.evaluated_get(bpy.context.evaluated_depsgraph_get())
    mesh = ev.to_mesh()
    x = np.array([ev.matrix_world @ v.co for v in mesh.vertices])
    ev.to_mesh_clear()
    return x, seconds


def read_fields(side, case):
    """The uniform wind, its drag and the core effectors the add-on reads from the case's Blender
    scene."""
    import bpy

    from diffcloth.diffcloth_addon.fields import FieldReader

    scene, cloth = build(side, case)  # the fields alone: the cloth's pins do not matter
    depsgraph = bpy.context.evaluated_depsgraph_get()
    reader = FieldReader(scene, cloth.diffcloth, depsgraph)
    for _ in range(FRAMES + 1):
        reader.read(depsgraph)
    return reader.wind(), reader.wind_drag(), reader.effectors()


def diffcloth(side, solver, falling, wind=None, wind_drag=1.0, effectors=()):
    verts, tris = dc.grid(side, side, size=1.0)
    top = np.flatnonzero(np.isclose(verts[:, 1], 0.5))
    pinned = [] if falling else [top[0], top[-1]]
    cloth = dc.Cloth(verts, tris, mass=MASS, k_tension=K_TENSION, k_bending=K_BENDING, bending="springs", pinned=pinned)
    scene = dc.Scene(
        cloth, steps=FRAMES, dt=1 / FPS, solver=solver, wind=wind, wind_drag=wind_drag, effectors=effectors
    )
    t0 = time.perf_counter()
    x = dc.simulate(scene).x[-1]
    return x, time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", nargs="+", choices=list(CASES), default=list(CASES))
    ap.add_argument("--sides", type=int, nargs="+", default=[20])
    ap.add_argument("--falling", action="store_true", help="no pins: a sheet falling through the field")
    args = ap.parse_args()
    falling = args.falling
    EXT.register()
    for side in args.sides:
        calm = {"blender": blender(side, None, falling)[0]}
        for solver in ("linearized", "newton"):
            calm[solver] = diffcloth(side, solver, falling)[0]
        for case in args.cases:
            row = {"side": side, "case": case, "falling": falling, "fps": FPS, "frames": FRAMES}
            x, row["blender_s"] = blender(side, case, falling)
            moved = x - calm["blender"]
            along = moved.mean(axis=0) / np.linalg.norm(moved.mean(axis=0))
            pushed = {"blender": float((moved @ along).mean())}
            rms = {"blender": float(np.sqrt((moved**2).sum(axis=1).mean()))}
            wind, wind_drag, effectors = read_fields(side, case)
            for solver in ("linearized", "newton"):
                x, row[f"{solver}_s"] = diffcloth(side, solver, falling, wind, wind_drag, effectors)
                pushed[solver] = float(((x - calm[solver]) @ along).mean())
                rms[solver] = float(np.sqrt(((x - calm[solver]) ** 2).sum(axis=1).mean()))
            row.update({f"{k}_push_mm": round(v * 1e3, 1) for k, v in pushed.items()})
            row.update({f"{k}_rms_mm": round(v * 1e3, 1) for k, v in rms.items()})
            row.update({f"{k}_vs_blender": round(pushed[k] / pushed["blender"], 2) for k in ("linearized", "newton")})
            print(json.dumps({k: round(v, 2) if isinstance(v, float) else v for k, v in row.items()}), flush=True)
    EXT.unregister()


if __name__ == "__main__":
    main()
