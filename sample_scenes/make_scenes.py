"""Regenerate the sample scenes deterministically, with the oldest supported Blender (4.2 LTS) so
that every supported version opens them:

    .envs/py311-bpy4.2/bin/python sample_scenes/make_scenes.py [output folder [scene names…]]   (default: sample_scenes/, all)

Each scene's targets come from simulating known "true" settings with DiffCloth itself, after
which the cloth is reset to a wrong start, so optimizing recovers a reachable answer:
  hanging_cloth.blend       the thesis's hanging cloth; optimize tension stiffness
  throw_onto_sphere.blend   a cloth thrown onto a sphere, keyed mid-flight and landed; optimize
                            its initial velocity
  artist_keyframes.blend    a pinned cloth swinging down onto a sphere, then swayed by a gust; two
                            keyed poses; optimize control forces
  pinned_to_animated.blend  a cloth pinned to an animated object; optimize tension and bending
  tablecloth.blend          a cotton tablecloth falling onto a table (Collision physics, friction),
                            blown aside by a breeze on its way; optimize the breeze (wind)
  cape.blend                a cotton cape pinned at the shoulders of a swaying body (Collision
                            physics, shape keys); optimize its stretch stiffness
  windy_cape.blend          the cape in a gusting Wind field, softly pinned, its hem stiffer
                            (Property Weights), subdivided, keyed as a stronger gust would
                            pose it; optimize control forces
  character.blend           a rigged body walking and turning, wearing a cape over a skirt
                            (pinned through Armature modifiers, subdivided, run together) in a
                            gusting Wind field; the cape keyed as a stronger gust would pose it;
                            optimize the wind's strength
"""

import math
import os
import pathlib
import sys

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "scripts"))
import bpy  # noqa: E402
from dev_extension import load_extension  # noqa: E402

SCENES = {}


def scene(fn):
    SCENES[fn.__name__] = fn
    return fn


def reset(frames, fps=10):
    bpy.ops.wm.read_factory_settings(use_empty=True)
    sc = bpy.context.scene
    sc.render.fps, sc.render.fps_base = fps, 1.0
    sc.frame_start, sc.frame_end = 1, frames + 1
    sc.frame_set(1)
    return sc


def cloth_grid(n, size, location=(0.0, 0.0, 0.0), pin_corners=True, name="Cloth"):
    bpy.ops.mesh.primitive_grid_add(x_subdivisions=n - 1, y_subdivisions=n - 1, size=size, location=location)
    obj = bpy.context.active_object
    obj.name = obj.data.name = name
    obj.diffcloth.role = "CLOTH"
    # the thesis's setting: springs (total mass, a stiffness per spring), converged steps, and the
    # bending and damping these scenes were made with
    s = obj.diffcloth
    s.model, s.solver, s.bending, s.damping = "SPRINGS", "NEWTON", 1e-4, 0.0
    if pin_corners:
        co = np.array([v.co for v in obj.data.vertices])
        top = co[:, 1].max()
        corners = np.flatnonzero((np.abs(co[:, 1] - top) < 1e-6) & (np.abs(np.abs(co[:, 0]) - size / 2) < 1e-6))
        obj.vertex_groups.new(name="Pins").add([int(i) for i in corners], 1.0, "REPLACE")
        obj.diffcloth.pin_group = "Pins"
    return obj


def sphere(location, radius, name="Sphere"):
    bpy.ops.mesh.primitive_uv_sphere_add(radius=radius, location=location, segments=32, ring_count=16)
    obj = bpy.context.active_object
    obj.name = name
    obj.diffcloth.role, obj.diffcloth.friction = "SPHERE", 0.0  # frictionless, as the thesis's
    return obj


def targets_from_truth(cloth, frames, forces=None):
    """Simulate the current ('true') settings and key a Target copy at each of `frames`."""
    if forces is not None:
        cloth["diffcloth_result"] = {"forces": forces.ravel().tolist()}
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    for f in frames:
        bpy.context.scene.frame_set(f)
        assert bpy.ops.diffcloth.new_target() == {"FINISHED"}
    bpy.ops.diffcloth.clear_bake()
    if "diffcloth_result" in cloth.keys():
        del cloth["diffcloth_result"]
    bpy.context.scene.frame_set(1)


@scene
def hanging_cloth():
    reset(frames=40)
    cloth = cloth_grid(12, 1.0)
    cloth.diffcloth.tension, cloth.diffcloth.bending = 20.0, 1e-4
    targets_from_truth(cloth, [41])
    cloth.diffcloth.tension = 8.0
    s = bpy.context.scene.diffcloth
    s.opt_tension, s.max_iterations = True, 20
    return "optimize tension (start 8, true 20)", 1e4


@scene
def throw_onto_sphere():
    reset(frames=9)
    sphere((0.0, 0.0, -0.45), 0.25)
    cloth = cloth_grid(10, 0.8, location=(-0.3, 0.0, 0.0), pin_corners=False)
    cloth.diffcloth.substeps = 4
    cloth["diffcloth_result"] = {"v0": np.tile([0.6, 0.0, 2.05], 100).tolist()}
    # keyed in mid-flight and on landing: the landing pose alone has other, local optima
    # (a lower, shorter throw draping the sphere too) that L-BFGS from rest settles in
    targets_from_truth(cloth, [5, 10])
    s = bpy.context.scene.diffcloth
    s.opt_tension, s.opt_velocity, s.max_iterations = False, True, 20
    return "optimize initial velocity (start 0, true (0.6, 0, 2.05) m/s)", 1e5


@scene
def artist_keyframes():
    reset(frames=30)
    sphere((0.0, -0.35, -0.55), 0.25)
    cloth = cloth_grid(12, 1.0)
    cloth.diffcloth.damping = 0.5
    # the poses come from a gust that no stiffness can imitate: control forces must find it
    t = np.arange(30) * 0.1
    gust = np.zeros((30, 144, 3))
    gust[:, :, 0] = (3.0 * np.sin(2 * np.pi * t / 3.0))[:, None]
    targets_from_truth(cloth, [16, 31], forces=gust * (0.5 / 144))  # ≈ 0.5 kg spread over 144 vertices
    s = bpy.context.scene.diffcloth
    s.opt_tension, s.opt_forces, s.max_iterations = False, True, 30
    return "optimize control forces to pass through the poses at frames 16 and 31", 100.0


@scene
def pinned_to_animated():
    reset(frames=30)
    rig = bpy.data.objects.new("Rig", None)
    bpy.context.collection.objects.link(rig)
    rig.empty_display_type = "ARROWS"
    for frame, x in ((1, 0.0), (16, 0.6), (31, 0.0)):
        rig.location = (x, 0.0, 0.0)
        rig.keyframe_insert("location", frame=frame)
    cloth = cloth_grid(10, 0.8)
    cloth.parent = rig
    cloth.diffcloth.tension, cloth.diffcloth.bending, cloth.diffcloth.damping = 30.0, 5e-4, 0.2
    targets_from_truth(cloth, [31])
    cloth.diffcloth.tension, cloth.diffcloth.bending = 12.0, 1e-4
    s = bpy.context.scene.diffcloth
    s.opt_tension, s.opt_bending, s.max_iterations = True, True, 20
    return "optimize tension and bending (start 12 N/m / 1e-4 N·m, true 30 / 5e-4) with pins following the rig", 1e3


def fabric_grid(n, size, location=(0.0, 0.0, 0.0), name="Cloth"):
    """A grid marked as cloth with the add-on's defaults (Cotton; the converged solver, which
    Optimize uses, so the targets made from its simulation are exactly reachable)."""
    bpy.ops.mesh.primitive_grid_add(x_subdivisions=n - 1, y_subdivisions=n - 1, size=size, location=location)
    obj = bpy.context.active_object
    obj.name = obj.data.name = name
    obj.diffcloth.role, obj.diffcloth.solver = "CLOTH", "NEWTON"
    return obj


def collision(obj, friction, thickness, single_sided=True):
    """Blender's Collision physics on obj, as an artist sets it (Single Sided: Blender's default)."""
    obj.modifiers.new("Collision", "COLLISION")
    obj.collision.cloth_friction, obj.collision.thickness_outer = friction, thickness
    obj.collision.use_culling = single_sided
    return obj


def tube(name, rings, segments):
    """A mesh object `name`: `rings` of (radius, height) around the z axis, `segments` quads between
    neighbouring rings, their normals outward."""
    verts = [
        (r * math.cos(2 * math.pi * j / segments), r * math.sin(2 * math.pi * j / segments), z)
        for r, z in rings
        for j in range(segments)
    ]
    faces = [
        (
            i * segments + j,
            i * segments + (j + 1) % segments,
            (i + 1) * segments + (j + 1) % segments,
            (i + 1) * segments + j,
        )
        for i in range(len(rings) - 1)
        for j in range(segments)
    ]
    mesh = bpy.data.meshes.new(name)
    mesh.from_pydata(verts, [], faces)
    obj = bpy.data.objects.new(name, mesh)
    bpy.context.collection.objects.link(obj)
    return obj


def swaying_body(rings, segments, lean, keys):
    """The object 'Body' at z = −1 (a tube), and a shape key 'Sway' moving each vertex lean(its z)
    along y, keyed 0 → 1 → 0 at the three frames `keys`."""
    body = tube("Body", rings, segments)
    body.location = (0.0, 0.0, -1.0)
    body.shape_key_add(name="Basis")
    sway = body.shape_key_add(name="Sway")
    for p in sway.data:
        p.co.y += lean(p.co.z)
    for frame, value in zip(keys, (0.0, 1.0, 0.0)):
        sway.value = value
        sway.keyframe_insert("value", frame=frame)
    return body


@scene
def tablecloth():
    reset(frames=24, fps=24)
    bpy.ops.mesh.primitive_cube_add(size=1.0, location=(0.0, 0.0, -0.4))
    table = bpy.context.active_object
    table.name = "Table"
    table.scale = (0.7, 0.7, 0.8)
    collision(table, friction=30.0, thickness=0.005)
    fabric_grid(14, 1.0, location=(0.0, 0.0, 0.25), name="Tablecloth")
    s = bpy.context.scene.diffcloth
    s.opt_tension, s.opt_wind, s.max_iterations = False, True, 15
    # the gust that made the key: 2 m/s² along x for the first quarter second, while the cloth falls,
    # then calm (a breeze on the cloth once it rests on the table, whose friction holds it from its
    # first touch, Gauss–Newton could not find: it stalled at 0.19 of the start's loss)
    breeze = np.zeros((24, 196, 3))
    breeze[:6, :, 0] = 2.0 * (0.15 / 196)
    targets_from_truth(bpy.data.objects["Tablecloth"], [25], forces=breeze)
    return "optimize a breeze (wind) that lands the tablecloth where the key has it", 30.0


def cape_on_body(n):
    """A 0.5 m Cotton cape of n×n vertices hanging at the back of a body whose shoulders lean back
    8 cm and return (frames 1, 13, 25; Collision physics), and its vertices in the world."""
    rings, radius, height = 30, 0.15, 0.9
    body = swaying_body(
        [(radius, height * i / rings) for i in range(rings + 1)], 32, lambda z: -0.08 * z / height, (1, 13, 25)
    )
    collision(body, friction=20.0, thickness=0.01)
    cloth = fabric_grid(n, 0.5, location=(0.0, -0.17, -0.35), name="Cape")
    cloth.rotation_euler = (math.pi / 2, 0.0, 0.0)
    bpy.context.view_layer.update()
    return cloth, np.array([cloth.matrix_world @ v.co for v in cloth.data.vertices])


@scene
def cape():
    reset(frames=24, fps=24)
    cloth, co = cape_on_body(12)
    cloth.vertex_groups.new(name="Shoulders").add(
        [int(i) for i in np.flatnonzero(co[:, 2] > co[:, 2].max() - 1e-6)], 1.0, "REPLACE"
    )
    cloth.diffcloth.pin_group = "Shoulders"
    cloth.diffcloth.stretch = 90.0
    targets_from_truth(cloth, [25])
    cloth.diffcloth.stretch = 150.0
    s = bpy.context.scene.diffcloth
    s.opt_tension, s.max_iterations = True, 15
    return "optimize the cape's stretch stiffness (start 150 N/m, true 90) as it swings against the body", 1e3


@scene
def windy_cape():
    reset(frames=24, fps=24)
    cloth, co = cape_on_body(14)
    top = np.flatnonzero(co[:, 2] > co[:, 2].max() - 1e-6)
    held = top[np.argsort(co[top, 0])][[0, len(top) // 2, -1]]
    shoulders = cloth.vertex_groups.new(name="Shoulders")
    shoulders.add([int(i) for i in top], 0.9, "REPLACE")  # held softly (Pin Stiffness) ...
    shoulders.add([int(i) for i in held], 1.0, "REPLACE")  # ... but at the ends and the neck
    hem = cloth.vertex_groups.new(name="Hem")
    hem.add([int(i) for i in np.flatnonzero(co[:, 2] < co[:, 2].min() + 0.05)], 1.0, "REPLACE")
    s = cloth.diffcloth
    s.pin_group, s.pin_stiffness = "Shoulders", 3000.0
    s.structural_group, s.stretch, s.tension_max = "Hem", 90.0, 360.0  # a hem four times as stiff
    cloth.modifiers.new("Subdivision", "SUBSURF").levels = 1  # on the simulated cape
    # a gust from the front lifts the cape off the body's back: the key is posed from a stronger one
    bpy.ops.object.effector_add(type="WIND", location=(0.0, 0.6, -0.5), rotation=(math.pi / 2, 0.0, 0.0))
    wind = bpy.context.active_object
    wind.name = "Wind"

    gust(wind, (1.0, 3.0, 1.0))
    targets_from_truth(cloth, [25])
    gust(wind, (1.0, 1.5, 1.0))
    settings = bpy.context.scene.diffcloth
    settings.opt_tension, settings.opt_forces, settings.max_iterations = False, True, 15
    return (
        "optimize control forces that pose the cape as a stronger gust would (a Wind field lifts it off the "
        "swaying body; soft pins at the shoulders, a stiffer hem, Subdivision)",
        1e3,
    )


def walking_rig(end):
    """The armature 'Rig': 'Root' lying on the floor (z = −1) along +y, 'Hips' (z −1 → −0.55) on it
    and 'Chest' above; the root walks 0.4 m forward (+y) turning 30° left by frame `end`, the chest
    leaning forward and back on the way (bones carry the meshes an Armature modifier deforms, the
    armature object does not)."""
    rig = bpy.data.objects.new("Rig", bpy.data.armatures.new("Rig"))
    bpy.context.collection.objects.link(rig)
    bpy.context.view_layer.objects.active = rig
    bpy.ops.object.mode_set(mode="EDIT")
    bones = rig.data.edit_bones
    root = bones.new("Root")
    root.head, root.tail = (0.0, 0.0, -1.0), (0.0, 0.3, -1.0)
    hips = bones.new("Hips")
    hips.head, hips.tail, hips.parent = (0.0, 0.0, -1.0), (0.0, 0.0, -0.55), root
    chest = bones.new("Chest")
    chest.head, chest.tail, chest.parent, chest.use_connect = (0.0, 0.0, -0.55), (0.0, 0.0, -0.1), hips, True
    bpy.ops.object.mode_set(mode="OBJECT")
    walk = rig.pose.bones["Root"]  # its local y is the world's +y, its z the world's +z
    walk.rotation_mode = "XYZ"
    for frame, y, turn in ((1, 0.0, 0.0), (end, 0.4, math.radians(30.0))):
        walk.location, walk.rotation_euler = (0.0, y, 0.0), (0.0, 0.0, turn)
        walk.keyframe_insert("location", frame=frame)
        walk.keyframe_insert("rotation_euler", frame=frame)
    lean = rig.pose.bones["Chest"]
    lean.rotation_mode = "XYZ"
    for frame, angle in ((1, 0.0), ((1 + end) // 2, 0.12), (end, 0.0)):
        lean.rotation_euler = (angle, 0.0, 0.0)
        lean.keyframe_insert("rotation_euler", frame=frame)
    return rig


def skinned(obj, rig, weights):
    """obj deformed by rig (an Armature modifier first in its stack): weights {bone: per vertex}."""
    for bone, w in weights.items():
        group = obj.vertex_groups.new(name=bone)
        for i in np.flatnonzero(w > 0):
            group.add([int(i)], float(w[i]), "REPLACE")
    obj.modifiers.new("Armature", "ARMATURE").object = rig
    return obj


def garment(obj, pinned):
    """obj as a cloth of the add-on's defaults on converged steps (the targets made from its motion
    are then exactly reachable), keeping its modelled shape, pinned at `pinned`, subdivided."""
    obj.diffcloth.role, obj.diffcloth.solver, obj.diffcloth.use_rest_angles = "CLOTH", "NEWTON", True
    obj.vertex_groups.new(name="Pinned").add([int(i) for i in pinned], 1.0, "REPLACE")
    obj.diffcloth.pin_group = "Pinned"
    obj.modifiers.new("Subdivision", "SUBSURF").levels = 1  # after DiffCloth's place: on the simulated cloth
    return obj


@scene
def character():
    frames = 24
    reset(frames=frames, fps=24)
    rig = walking_rig(frames + 1)
    body = tube("Body", [(0.15, -1.0 + 0.9 * i / 18) for i in range(19)], 24)
    z = np.array([v.co.z for v in body.data.vertices])
    chest = np.clip((z + 0.55) / 0.1, 0.0, 1.0)
    collision(skinned(body, rig, {"Chest": chest, "Hips": 1.0 - chest}), friction=20.0, thickness=0.01)
    skirt = tube("Skirt", [(0.17 + 0.1 * i / 8, -0.5 - 0.4 * i / 8) for i in range(9)], 24)
    garment(skinned(skirt, rig, {"Hips": np.ones(len(skirt.data.vertices))}), range(24))
    # the cape: 0.44 m wide, 0.62 m from the shoulders down over the skirt, leaning back clear of it
    bpy.ops.mesh.primitive_grid_add(x_subdivisions=11, y_subdivisions=15, size=0.44)
    cape = bpy.context.active_object
    cape.name = cape.data.name = "Cape"
    grid = np.array([v.co for v in cape.data.vertices])
    down = (0.22 - grid[:, 1]) / 0.44
    co = np.column_stack([grid[:, 0], -0.21 - 0.07 * down, -0.13 - 0.62 * down])
    cape.data.vertices.foreach_set("co", co.ravel())
    skinned(cape, rig, {"Chest": np.ones(len(co))})
    garment(cape, np.flatnonzero(co[:, 2] > co[:, 2].max() - 1e-6))
    # a gust from the front lifts the cape off the body's back; the keys are posed where the cloths
    # feel it in full, the scene leaves them 0.6 of it (Field Weights › Wind)
    bpy.ops.object.effector_add(type="WIND", location=(0.0, 0.8, -0.5), rotation=(math.pi / 2, 0.0, 0.0))
    wind = bpy.context.active_object
    wind.name = "Wind"

    gust(wind, (0.3, 1.0, 0.3))
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}  # the cape and the skirt together
    for f in (13, 25):
        bpy.context.scene.frame_set(f)
        assert bpy.ops.diffcloth.new_target(cloth="Cape") == {"FINISHED"}
    for obj in (cape, skirt):
        bpy.ops.diffcloth.clear_bake(cloth=obj.name)
    bpy.context.scene.frame_set(1)
    for obj in (cape, skirt):  # Blender's weight scales the wind's push and its drag alike
        obj.diffcloth.wind_weight = 0.6
    settings = bpy.context.scene.diffcloth
    settings.opt_tension, settings.opt_wind_fields, settings.max_iterations = False, True, 10
    return (
        "optimize how hard the wind blows on the cloths to pose the cape as the full gust would (a walking, turning rig; "
        "a cape over a skirt pinned through Armature modifiers, run together, subdivided)",
        1e3,
    )


def gust(wind, strengths):
    """Key the Wind field's strength at frames 1, 13 and 25."""
    for frame, strength in zip((1, 13, 25), strengths):
        wind.field.strength = strength
        wind.field.keyframe_insert("strength", frame=frame)


def make(name, folder):
    what, reduction = SCENES[name]()
    iterations = bpy.context.scene.diffcloth.max_iterations
    note = f"{what}: loss down at least {reduction:g}x in {iterations} iterations"
    bpy.context.scene["diffcloth_sample"] = note
    bpy.context.scene["diffcloth_sample_reduction"] = reduction  # what tests/test_sample_scenes.py holds it to
    path = os.path.join(folder, f"{name}.blend")
    bpy.ops.wm.save_as_mainfile(filepath=path, compress=True)
    return path, note


def main(folder, names=None):
    ext = load_extension()
    ext.register()
    try:
        os.makedirs(folder, exist_ok=True)
        for name in names or SCENES:
            path, note = make(name, folder)
            print(f"{path}: {note}")
    finally:
        ext.unregister()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else str(HERE), sys.argv[2:])
