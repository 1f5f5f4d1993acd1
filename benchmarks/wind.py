"""A hanging cloth in a Wind field, DiffCloth against Blender's Cloth in the same units and the same
field: how far the wind pushes it (mean displacement along the wind, against the same cloth
without wind), and the time each takes.

    .envs/py311-bpy4.2/bin/python benchmarks/wind.py [--strengths 1 3] [--sides 20]

The cloth: 1 m, two corners pinned, falling from horizontal and hanging, 24 fps, 48 frames; springs
of tension 20 N/m and bending springs 0.1 N/m, 0.5 kg, no damping (blender_cloth.py drives
Blender's in these units: time_scale = √1000/fps). The Wind field blows along +Y from its object's
Z axis at strength S; DiffCloth takes it as S·√1000/fps m/s (diffcloth_addon/fields.py).
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

load_extension()
from blender_cloth import add_cloth_modifier, step_seconds, triangulated_grid  # noqa: E402

import diffcloth.core as dc  # noqa: E402

FPS, FRAMES = 24, 48
K_TENSION, K_BENDING, MASS = 20.0, 0.1, 0.5


def blender(side, strength):
    """Blender's cloth at the last frame (world vertices) and its wall seconds."""
    import bpy

    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    scene.render.fps, scene.render.fps_base = FPS, 1.0
    scene.frame_start, scene.frame_end = 1, FRAMES + 1
    cloth = triangulated_grid(side)
    mod = add_cloth_modifier(cloth, FRAMES, 1 / FPS, K_TENSION, K_BENDING, MASS)
    mod.settings.bending_damping = 0.0
    if strength:
        bpy.ops.object.effector_add(type="WIND", rotation=(-math.pi / 2, 0.0, 0.0))  # Z along +Y
        bpy.context.active_object.field.strength = strength
    seconds = step_seconds(cloth, FRAMES)
    ev = cloth.evaluated_get(bpy.context.evaluated_depsgraph_get())
    mesh = ev.to_mesh()
    x = np.array([ev.matrix_world @ v.co for v in mesh.vertices])
    ev.to_mesh_clear()
    return x, seconds


def diffcloth(side, strength, solver):
    verts, tris = dc.grid(side, side, size=1.0)
    top = np.flatnonzero(np.isclose(verts[:, 1], 0.5))
    cloth = dc.Cloth(
        verts, tris, mass=MASS, k_tension=K_TENSION, k_bending=K_BENDING, bending="springs", pinned=[top[0], top[-1]]
    )
    wind = np.array([0.0, strength * math.sqrt(1000.0) / FPS, 0.0]) if strength else None
    scene = dc.Scene(cloth, steps=FRAMES, dt=1 / FPS, solver=solver, wind=wind)
    t0 = time.perf_counter()
    x = dc.simulate(scene).x[-1]
    return x, time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--strengths", type=float, nargs="+", default=[1.0, 3.0])
    ap.add_argument("--sides", type=int, nargs="+", default=[20])
    args = ap.parse_args()
    for side in args.sides:
        calm = {"blender": blender(side, 0.0)[0]}
        for solver in ("linearized", "newton"):
            calm[solver] = diffcloth(side, 0.0, solver)[0]
        for strength in args.strengths:
            row = {"side": side, "strength": strength, "fps": FPS, "frames": FRAMES}
            x, row["blender_s"] = blender(side, strength)
            pushed = {"blender": float((x - calm["blender"])[:, 1].mean())}
            for solver in ("linearized", "newton"):
                x, row[f"{solver}_s"] = diffcloth(side, strength, solver)
                pushed[solver] = float((x - calm[solver])[:, 1].mean())
            row.update({f"{k}_push_mm": round(v * 1e3, 1) for k, v in pushed.items()})
            row.update({f"{k}_vs_blender": round(pushed[k] / pushed["blender"], 2) for k in ("linearized", "newton")})
            print(json.dumps({k: round(v, 2) if isinstance(v, float) else v for k, v in row.items()}), flush=True)


if __name__ == "__main__":
    main()
