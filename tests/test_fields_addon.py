"""Blender's Force, Vortex and Drag fields, and Wind with falloff, through the add-on: read at
every frame (place, axis, animated strength), with the cloth's Field Weights (All × the type) and
Effector Collection, simulated by the operators (the evaluated mesh moves)."""

import math

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")

from test_addon import draw_all, evaluated, grid_cloth  # noqa: E402


def gather(context):
    from diffcloth.diffcloth_addon import convert

    return convert.gather(context, need_targets=False)


def field(kind, location=(0.0, 0.0, 0.0), strength=1.0):
    bpy.ops.object.effector_add(type=kind, location=location)
    obj = bpy.context.active_object
    obj.field.strength = strength
    return obj


def bake_at(context, cloth, frame):
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    context.scene.frame_set(frame)
    out = evaluated(cloth)
    bpy.ops.diffcloth.clear_bake()
    context.scene.frame_set(context.scene.frame_start)
    return out


def test_a_force_field_read_at_every_frame_pushes_the_cloth(blank):
    scene = blank.scene
    scene.frame_start, scene.frame_end = 1, 9
    cloth = grid_cloth(n=7, fabric=True, pins=False)
    still = bake_at(blank, cloth, 9)
    force = field("FORCE", location=(0.0, 0.0, -0.3), strength=2.0)
    force.keyframe_insert("location", frame=1)
    force.keyframe_insert("field.strength", frame=1)
    force.location.x, force.field.strength = 0.1, 6.0
    force.keyframe_insert("location", frame=9)
    force.keyframe_insert("field.strength", frame=9)
    force.field.falloff_power, force.field.use_max_distance, force.field.distance_max = 1.0, True, 3.0
    setup = gather(blank)
    assert setup.warnings == [] and setup.scene.wind is None
    (eff,) = setup.scene.effectors
    assert eff.kind == "FORCE" and eff.falloff.power == 1.0 and eff.falloff.far == pytest.approx(3.0)
    assert eff.strength[0] == pytest.approx(2.0) and eff.strength[-1] == pytest.approx(6.0)
    assert np.allclose(eff.origin[[0, -1]], [[0.0, 0, -0.3], [0.1, 0, -0.3]], atol=1e-6)
    assert eff.fps == scene.render.fps
    pushed = bake_at(blank, cloth, 9)
    assert (pushed - still)[:, 2].mean() > 0.005  # away from the field below
    cloth.diffcloth.all_weight, cloth.diffcloth.force_weight = 0.5, 0.4
    assert gather(blank).scene.effectors[0].weight == pytest.approx(0.2)  # All × Force
    cloth.diffcloth.force_weight = 0.0
    assert gather(blank).scene.effectors == []


def mean_x(context, obj, frames):
    """obj's evaluated mean x at each of frames."""
    out = []
    for f in frames:
        context.scene.frame_set(f)
        out.append(float(evaluated(obj)[:, 0].mean()))
    return np.array(out)


def test_a_field_acts_from_the_frame_its_strength_is_keyed_on_as_in_blender(blank):
    """Blender evaluates a cloth's force fields at the frame it steps to: a Force field off to the
    side whose strength rises from 0 at frame 4 to 5 at frame 5 first moves a falling sheet
    sideways at frame 5, in Blender's Cloth and in DiffCloth's bake alike (the sheet's mean x
    moves by nothing else)."""
    scene = blank.scene
    scene.frame_start, scene.frame_end = 1, 6
    cloth = grid_cloth(n=7, fabric=True, pins=False)
    force = field("FORCE", location=(-1.0, 0.0, 0.0), strength=0.0)
    force.keyframe_insert("field.strength", frame=4)
    force.field.strength = 5.0
    force.keyframe_insert("field.strength", frame=5)
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    ours = mean_x(blank, cloth, (1, 4, 5, 6)) - mean_x(blank, cloth, (1,))
    bpy.ops.diffcloth.clear_bake()
    cloth.diffcloth.role = "NONE"
    cloth.modifiers.new("Cloth", "CLOTH")
    scene.frame_set(1)
    blenders = mean_x(blank, cloth, (1, 4, 5, 6)) - mean_x(blank, cloth, (1,))
    for motion in (blenders, ours):
        assert abs(motion[1]) < 1e-7 and motion[2] > 1e-5 and motion[3] > motion[2]


def test_vortex_drag_and_a_wind_with_falloff_are_effectors(blank):
    scene = blank.scene
    scene.frame_start, scene.frame_end = 1, 7
    cloth = grid_cloth(n=6, fabric=True)
    vortex = field("VORTEX", strength=2.0)
    drag = field("DRAG", strength=0.5)
    drag.field.quadratic_drag = 0.3
    wind = field("WIND", strength=3.0)
    wind.rotation_euler = (-math.pi / 2, 0.0, 0.0)
    wind.field.use_max_distance, wind.field.distance_max = True, 2.0
    setup = gather(blank)
    assert setup.scene.wind is None  # the wind has falloff: an effector, not the uniform wind
    kinds = {e.kind: e for e in setup.scene.effectors}
    assert set(kinds) == {"VORTEX", "DRAG", "WIND"}
    assert kinds["DRAG"].damping == pytest.approx(0.3) and kinds["WIND"].wind_factor == 1.0
    assert np.allclose(kinds["WIND"].axis[0], [0.0, 1.0, 0.0], atol=1e-6)
    still = bake_at(blank, cloth, 7)
    for o in (vortex, drag):
        o.hide_viewport = True
    drag.field.apply_to_location = False  # Blender's Affect Location off: the field moves nothing
    assert {e.kind for e in gather(blank).scene.effectors} == {"WIND"}
    assert np.abs(bake_at(blank, cloth, 7) - still).max() > 1e-3


def test_a_turbulence_flutters_the_cloth_and_says_its_pattern_is_not_blenders(blank):
    scene = blank.scene
    scene.frame_start, scene.frame_end = 1, 9
    cloth = grid_cloth(n=7, fabric=True)
    still = bake_at(blank, cloth, 9)
    turbulence = field("TURBULENCE", strength=8.0)
    turbulence.field.size = 0.2
    setup = gather(blank)
    (eff,) = setup.scene.effectors
    assert eff.kind == "TURBULENCE" and eff.size == pytest.approx(0.2)
    assert setup.warnings == [
        f"Turbulence field '{turbulence.name}': its noise pattern (DiffCloth's turbulence has the same size and "
        "strength, not Blender's pattern) not followed"
    ]
    moved = np.linalg.norm(bake_at(blank, cloth, 9) - still, axis=1)
    assert moved.mean() > 1e-3 and moved.std() > 1e-4  # pushed unevenly
    cloth.diffcloth.turbulence_weight = 0.0
    assert gather(blank).scene.effectors == []


def test_the_effector_collection_chooses_the_fields(blank):
    grid_cloth(n=5, fabric=True)
    field("FORCE", location=(0, 0, -1))
    chosen = field("VORTEX")
    collection = bpy.data.collections.new("Fields")
    blank.scene.collection.children.link(collection)
    collection.objects.link(chosen)
    cloth = bpy.data.objects["Cloth"]
    assert {e.kind for e in gather(blank).scene.effectors} == {"FORCE", "VORTEX"}
    cloth.diffcloth.effector_collection = collection
    assert [e.kind for e in gather(blank).scene.effectors] == ["VORTEX"]
    # as Blender reads a collection: its objects whatever their own flags, not a disabled child's
    chosen.hide_viewport = True
    assert [e.kind for e in gather(blank).scene.effectors] == ["VORTEX"]
    inner = bpy.data.collections.new("Inner")
    collection.children.link(inner)
    drag = field("DRAG")
    inner.objects.link(drag)
    blank.scene.collection.objects.unlink(drag)
    assert sorted(e.kind for e in gather(blank).scene.effectors) == ["DRAG", "VORTEX"]
    inner.hide_viewport = True
    assert [e.kind for e in gather(blank).scene.effectors] == ["VORTEX"]
    cloth.diffcloth.effector_collection = None  # the view layer's: a field disabled there is out,
    child = bpy.data.objects.new("Child", None)  # also where Blender evaluates it for a child of it
    blank.collection.objects.link(child)
    child.parent = chosen
    assert [e.kind for e in gather(blank).scene.effectors] == ["FORCE"]
    cloth.diffcloth.effector_collection = collection
    blank.view_layer.objects.active = cloth
    drawn = draw_all(blank)  # the Field Weights panel, in Blender's order
    assert all(k in drawn for k in ("effector_collection", "all_weight", "turbulence_weight", "drag_weight"))


def test_fields_blender_leaves_out_are_left_out_and_the_others_named(blank):
    """As Blender's Cloth: the cloth's own field does not push it, a negative Field Weight is no
    field (Blender applies a field only where its falloff is positive), a Wind weakened off its axis
    (Tube falloff with a radial power) is simulated as it is, not as the uniform wind; a particle
    system's field, not simulated, is named."""
    scene = blank.scene
    scene.frame_start, scene.frame_end = 1, 5
    cloth = grid_cloth(n=5, fabric=True)
    blank.view_layer.objects.active = cloth
    bpy.ops.object.forcefield_toggle()  # a Force field on the cloth itself
    cloth.field.type, cloth.field.strength = "FORCE", 5.0
    setup = gather(blank)
    assert setup.scene.effectors == [] and setup.warnings == []
    wind = field("WIND", strength=4.0)
    assert gather(blank).scene.wind is not None
    cloth.diffcloth.wind_weight = -1.0
    setup = gather(blank)
    assert setup.scene.wind is None and setup.scene.effectors == []
    cloth.diffcloth.wind_weight = 1.0
    wind.field.falloff_type, wind.field.radial_falloff = "TUBE", 3.0
    setup = gather(blank)
    assert setup.scene.wind is None and [(e.kind, e.falloff.radial[0]) for e in setup.scene.effectors] == [
        ("WIND", 3.0)
    ]
    bpy.ops.mesh.primitive_plane_add(size=0.01, location=(0.0, 0.0, 0.3))
    emitter = bpy.context.active_object
    emitter.modifiers.new("Particles", "PARTICLE_SYSTEM")
    emitter.particle_systems[0].settings.force_field_1.type = "FORCE"
    system = emitter.particle_systems[0].name
    assert gather(blank).warnings == [
        f"force field of particle system '{system}' on '{emitter.name}' (Force) is ignored: DiffCloth simulates "
        "the fields of objects, not of particles"
    ]


def test_a_field_scaled_to_zero_acts_as_in_blender(blank):
    """An object scaled to zero has no Z axis: Blender's Cloth then feels a Point-shaped Force
    field as ever and a Plane-shaped one not at all, and so does DiffCloth's bake (they were
    refused). The fields, off to the side and turned, push the falling sheet along x alone."""
    scene = blank.scene
    scene.frame_start, scene.frame_end = 1, 5
    cloth = grid_cloth(n=7, fabric=True, pins=False)
    force = field("FORCE", location=(-1.0, 0.0, 0.0), strength=5.0)
    force.rotation_euler = (0.0, 1.2, 0.0)
    frames = (1, 2, 3, 4, 5)
    moved = {}
    for shape in ("POINT", "PLANE"):
        force.field.shape = shape
        for scale in (1.0, 0.0):
            force.scale = (scale, scale, scale)
            assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
            ours = mean_x(blank, cloth, frames)
            bpy.ops.diffcloth.clear_bake()
            cloth.diffcloth.role = "NONE"
            modifier = cloth.modifiers.new("Cloth", "CLOTH")
            scene.frame_set(1)
            moved[shape, scale] = ours - ours[0], (blenders := mean_x(blank, cloth, frames)) - blenders[0]
            cloth.modifiers.remove(modifier)
            cloth.diffcloth.role = "CLOTH"
    for ours, blenders in moved.values():  # the same way, as far within a factor of 2 where they move
        assert np.all(np.sign(np.round(ours, 7)) == np.sign(np.round(blenders, 7)))
    point, plane = moved["POINT", 0.0], moved["PLANE", 0.0]
    assert np.array_equal(point[0], moved["POINT", 1.0][0]) and point[1][-1] > 1e-4 and point[0][-1] > 1e-4
    assert np.abs(plane[0]).max() < 1e-9 and np.abs(plane[1]).max() < 1e-7 < moved["PLANE", 1.0][0][-1]


def test_a_field_setting_animated_beside_its_strength_is_named(blank):
    """Only a field's place, axis and Strength follow their animation; another animated setting
    is read at the start, and a warning names it."""
    grid_cloth(n=5, fabric=True)
    force = field("FORCE", location=(0.0, 0.0, -0.5), strength=2.0)
    force.field.use_max_distance = True
    for frame, far in ((1, 0.1), (5, 5.0)):
        force.field.distance_max, force.field.strength = far, 2.0 * frame
        force.keyframe_insert("field.distance_max", frame=frame)
        force.keyframe_insert("field.strength", frame=frame)
    name = force.field.bl_rna.properties["distance_max"].name
    assert gather(blank).warnings == [f"Force field '{force.name}': its animated {name} not followed"]
