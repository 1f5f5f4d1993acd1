"""Modelled shape kept: a collar (a strip curled over 3/4 of a turn, held along its straight first
edge) for two seconds, DiffCloth bending about the mesh's own rest angles (Rest Angles on) and
about flat (the quadratic model's own, the default), against Blender's Cloth with the same preset (its Angular
bending keeps rest angles), without gravity (what the rest shape alone does) and with it. Per
preset: the mean and largest distance (mm) of the last frame from the shape as modelled, and the
seconds each took.

    .envs/py313-bpy5.2/bin/python benchmarks/rest_shape.py [--presets cotton denim leather]
"""

import argparse
import json
import math
import pathlib
import sys
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import fabric  # noqa: E402  (bpy, the extension and Blender's presets, loaded as fabric.py loads them)
from fabric import FPS, blender_run, bpy, convert, dc, diffcloth_cloth, ext, reset  # noqa: E402


def collar(name, around=25, rows=6, radius=0.06, width=0.2, turn=1.5 * math.pi):
    """A strip rolled about the x axis over `turn` (a curled collar or cuff), held along its
    straight first edge (the vertex group 'pin'): open, so it could unroll."""
    angles = np.linspace(0.0, turn, around)
    verts = [
        (width * (j / (rows - 1) - 0.5), radius * math.sin(a), radius * math.cos(a))
        for a in angles
        for j in range(rows)
    ]
    faces = [
        (i * rows + j, i * rows + j + 1, (i + 1) * rows + j + 1, (i + 1) * rows + j)
        for i in range(around - 1)
        for j in range(rows - 1)
    ]
    mesh = bpy.data.meshes.new(name)
    mesh.from_pydata(verts, [], faces)
    obj = bpy.data.objects.new(name, mesh)
    bpy.context.scene.collection.objects.link(obj)
    obj.vertex_groups.new(name="pin").add(list(range(rows)), 1.0, "REPLACE")
    return obj, np.array(verts)


def off(x, modelled):
    d = np.linalg.norm(x - modelled, axis=1) * 1e3
    return round(float(d.mean()), 1), round(float(d.max()), 1)


def case(preset, gravity):
    reset()
    bpy.context.scene.use_gravity = gravity
    obj, modelled = collar("Collar")
    seconds, x, _ = blender_run(obj, preset)
    row = {"case": f"collar, {preset}, gravity {'on' if gravity else 'off'}"}
    row.update(blender_mm=off(x, modelled), blender_s=round(seconds, 2))
    reset()
    bpy.context.scene.use_gravity = gravity
    obj, _ = collar("Collar")
    diffcloth_cloth(obj, preset)
    obj.diffcloth.use_rest_angles = True
    scene = convert.gather(bpy.context, "Collar", need_targets=False).scene
    for name, sc in (
        ("rest_angles", scene),
        ("flat_rest", scene.replace(cloth=scene.cloth.replace(rest_angles=False))),
    ):
        t0 = time.perf_counter()
        x = dc.simulate(sc, keep_factors=False).x[-1]
        row[f"{name}_mm"], row[f"{name}_s"] = off(x, modelled), round(time.perf_counter() - t0, 2)
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--presets", nargs="+", default=["cotton", "denim", "leather"])
    args = ap.parse_args()
    ext.register()
    try:
        for preset in args.presets:
            for gravity in (False, True):
                print(json.dumps(dict(case(preset, gravity), fps=FPS, frames=fabric.FRAMES)), flush=True)
    finally:
        ext.unregister()


if __name__ == "__main__":
    main()
