"""Blender's own Cloth modifier on the thesis scene, driven through the bpy module in the same units.

See ../shared/BENCHMARKS.md: gravity is scaled by 0.001 internally and a frame advances
time_scale internal units, so time_scale = h·√1000 gives h seconds per frame; its spring
constant is tension / average edge length with a factor 1000 to N/m.
"""

import time


def triangulated_grid(n_side, name="Grid"):
    """An n_side×n_side grid of 1 m, triangulated, with its two +Y corners in a vertex group 'pin'."""
    import bmesh
    import bpy  # first: it sets up bmesh and mathutils

    bpy.ops.mesh.primitive_grid_add(x_subdivisions=n_side - 1, y_subdivisions=n_side - 1, size=1.0)
    obj = bpy.context.active_object
    obj.name = name
    bm = bmesh.new()
    bm.from_mesh(obj.data)
    bmesh.ops.triangulate(bm, faces=bm.faces[:])
    bm.to_mesh(obj.data)
    bm.free()
    verts = obj.data.vertices
    top = max(v.co.y for v in verts)
    xs = [v.co.x for v in verts if abs(v.co.y - top) < 1e-6]
    pins = [v.index for v in verts if abs(v.co.y - top) < 1e-6 and v.co.x in (min(xs), max(xs))]
    obj.vertex_groups.new(name="pin").add(pins, 1.0, "REPLACE")
    return obj


def world_positions(obj):
    """obj's evaluated vertices at the current frame, in world space (n,3)."""
    import bpy
    import numpy as np

    ev = obj.evaluated_get(bpy.context.evaluated_depsgraph_get())
    mesh = ev.to_mesh()
    co = np.empty(len(mesh.vertices) * 3)
    mesh.vertices.foreach_get("co", co)
    mw = np.array(ev.matrix_world)
    ev.to_mesh_clear()
    return co.reshape(-1, 3) @ mw[:3, :3].T + mw[:3, 3]


def add_cloth_modifier(obj, frames, dt, k_tension, k_bending, mass, quality=5):
    """Blender's Cloth on obj in DiffCloth's units (k_bending: a bending spring's N/m)."""
    import math

    verts, edges = obj.data.vertices, obj.data.edges
    avg_edge = sum((verts[e.vertices[0]].co - verts[e.vertices[1]].co).length for e in edges) / len(edges)
    mod = obj.modifiers.new("Cloth", "CLOTH")
    settings = mod.settings
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
    mod.point_cache.frame_start, mod.point_cache.frame_end = 1, frames + 1
    return mod


def step_seconds(obj, frames):
    """Wall seconds to step Blender's cloth on obj through frames 2..frames+1, checked: it fell
    and its pins held."""
    import bpy
    from mathutils import Vector

    scene = bpy.context.scene
    pins = [v.index for v in obj.data.vertices if v.groups]
    start_pins = [Vector(obj.data.vertices[i].co) for i in pins]
    scene.frame_set(1)
    t0 = time.perf_counter()
    for f in range(2, frames + 2):
        scene.frame_set(f)
    seconds = time.perf_counter() - t0
    ev = obj.evaluated_get(bpy.context.evaluated_depsgraph_get())
    mesh = ev.to_mesh()
    lowest = min(v.co.z for v in mesh.vertices)
    moved_pins = max((mesh.vertices[i].co - p).length for i, p in zip(pins, start_pins))
    ev.to_mesh_clear()
    if lowest > -0.1:
        raise RuntimeError(f"Blender's cloth did not fall (lowest z {lowest:.3f})")
    if moved_pins > 1e-4:
        raise RuntimeError(f"Blender's pinned vertices moved by {moved_pins:.4f} m")
    return seconds


def blender_cloth_seconds(n_side, frames=100, dt=0.1, k_tension=20.0, k_bending=0.1, mass=0.5, sphere=False, quality=5):
    """Wall seconds Blender takes to step `frames` frames of an n_side×n_side cloth."""
    import bpy

    bpy.ops.wm.read_factory_settings(use_empty=True)
    bpy.context.scene.frame_start, bpy.context.scene.frame_end = 1, frames + 1
    cloth = triangulated_grid(n_side)
    add_cloth_modifier(cloth, frames, dt, k_tension, k_bending, mass, quality)
    if sphere:
        bpy.ops.mesh.primitive_uv_sphere_add(radius=0.25, location=(0.0, 0.1, -0.45))
        bpy.context.active_object.modifiers.new("Collision", "COLLISION")
    return step_seconds(cloth, frames)
