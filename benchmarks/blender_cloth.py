"""Blender's own Cloth modifier on the thesis scene, driven through the bpy module in the same units.

See ../shared/BENCHMARKS.md: gravity is scaled by 0.001 internally and a frame advances
time_scale internal units, so time_scale = h·√1000 gives h seconds per frame; its spring
constant is tension / average edge length with a factor 1000 to N/m.
"""

import math
import time


def blender_cloth_seconds(n_side, frames=100, dt=0.1, k_tension=20.0, k_bending=0.1, mass=0.5, sphere=False,
                          quality=5):
    """Wall seconds Blender takes to step `frames` frames of an n_side×n_side cloth."""
    import bpy  # first: it sets up bmesh and mathutils
    import bmesh
    from mathutils import Vector

    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, frames + 1
    bpy.ops.mesh.primitive_grid_add(x_subdivisions=n_side - 1, y_subdivisions=n_side - 1, size=1.0)
    cloth = bpy.context.active_object
    bm = bmesh.new()
    bm.from_mesh(cloth.data)
    bmesh.ops.triangulate(bm, faces=bm.faces[:])
    bm.to_mesh(cloth.data)
    bm.free()
    verts = cloth.data.vertices
    top = max(v.co.y for v in verts)
    xs = [v.co.x for v in verts if abs(v.co.y - top) < 1e-6]
    pins = [v.index for v in verts if abs(v.co.y - top) < 1e-6 and v.co.x in (min(xs), max(xs))]
    group = cloth.vertex_groups.new(name="pin")
    group.add(pins, 1.0, "REPLACE")
    edges = cloth.data.edges
    avg_edge = sum((verts[e.vertices[0]].co - verts[e.vertices[1]].co).length for e in edges) / len(edges)

    settings = cloth.modifiers.new("Cloth", "CLOTH").settings
    settings.quality = quality
    settings.time_scale = dt * math.sqrt(1000.0)
    settings.mass = mass / len(verts)
    settings.tension_stiffness = settings.compression_stiffness = k_tension / 1000.0 * avg_edge
    settings.bending_model = "LINEAR"
    settings.bending_stiffness = k_bending / 1000.0 * 20.0 * avg_edge
    settings.tension_damping = settings.compression_damping = settings.bending_damping = 0.0
    settings.air_damping = 0.0
    settings.vertex_group_mass = "pin"
    settings.effector_weights.gravity = 1.0
    cloth.modifiers["Cloth"].point_cache.frame_end = frames + 1

    if sphere:
        bpy.ops.mesh.primitive_uv_sphere_add(radius=0.25, location=(0.0, 0.1, -0.45))
        bpy.context.active_object.modifiers.new("Collision", "COLLISION")

    start_pins = [tuple(verts[i].co) for i in pins]
    scene.frame_set(1)
    t0 = time.perf_counter()
    for f in range(2, frames + 2):
        scene.frame_set(f)
    seconds = time.perf_counter() - t0

    mesh = cloth.evaluated_get(bpy.context.evaluated_depsgraph_get()).to_mesh()
    lowest = min(v.co.z for v in mesh.vertices)
    moved_pins = max((mesh.vertices[i].co - Vector(p)).length for i, p in zip(pins, start_pins))
    cloth.evaluated_get(bpy.context.evaluated_depsgraph_get()).to_mesh_clear()
    if lowest > -0.1:
        raise RuntimeError(f"Blender's cloth did not fall (lowest z {lowest:.3f})")
    if moved_pins > 1e-4:
        raise RuntimeError(f"Blender's pinned vertices moved by {moved_pins:.4f} m")
    return seconds
