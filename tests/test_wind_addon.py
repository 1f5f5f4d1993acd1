"""Blender's Wind force fields through the add-on: read at every frame as the cloth feels them,
scaled by the cloth's Field Weights › Wind; other fields and settings not simulated are named."""

import math

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")

from test_addon import draw_all, evaluated, grid_cloth, target_from_simulation  # noqa: E402


def convert():
    from diffcloth.diffcloth_addon import convert as c

    return c


def wind_field(strength=2.0, rotation=(-math.pi / 2, 0.0, 0.0)):
    """A Wind field blowing along its Z axis, turned to blow along +y by default."""
    bpy.ops.object.effector_add(type="WIND", rotation=rotation)
    wind = bpy.context.active_object
    wind.field.strength = strength
    return wind


def test_a_wind_field_blows_the_cloth_along_its_axis(blank):
    scene = blank.scene
    scene.frame_start, scene.frame_end = 1, 11
    cloth = grid_cloth(n=7, fabric=True)
    still_setup = convert().gather(blank, need_targets=False)
    assert still_setup.scene.wind is None
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    scene.frame_set(11)
    still = evaluated(cloth)
    scene.frame_set(1)
    wind = wind_field()
    wind.keyframe_insert("field.strength", frame=1)
    wind.field.strength = 4.0
    wind.keyframe_insert("field.strength", frame=11)
    setup = convert().gather(blank, need_targets=False)
    assert setup.warnings == []
    expected = np.array([0.0, 1.0, 0.0]) * math.sqrt(1000) / scene.render.fps
    assert np.allclose(setup.scene.wind[0], 2.0 * expected, atol=1e-6)
    assert np.allclose(setup.scene.wind[-1], 4.0 * expected, atol=1e-6)  # its animated strength
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    scene.frame_set(11)
    blown = evaluated(cloth)
    assert (blown - still)[:, 1].mean() > 0.01
    cloth.diffcloth.wind_weight = 0.0  # Field Weights › Wind
    assert convert().gather(blank, need_targets=False).scene.wind is None  # left out, as Blender leaves it
    blank.view_layer.objects.active = cloth
    assert "wind_weight" in draw_all(blank)


def test_the_winds_drag_follows_the_field_weights_and_the_fields(blank):
    """Blender drags the cloth by each Wind field's Flow times its Field Weights (All × Wind): at
    Wind 0.5 the wind and its drag halve; a second field at that weight doubles both again."""
    cloth = grid_cloth(n=5, fabric=True)
    wind_field()
    full = convert().gather(blank, need_targets=False).scene
    assert full.wind_drag == 1.0
    cloth.diffcloth.wind_weight = 0.5
    half = convert().gather(blank, need_targets=False).scene
    assert half.wind_drag == pytest.approx(0.5) and np.allclose(half.wind, 0.5 * full.wind)
    wind_field()
    both = convert().gather(blank, need_targets=False).scene
    assert both.wind_drag == pytest.approx(1.0) and np.allclose(both.wind, full.wind)


def test_fields_and_settings_not_simulated_are_named(blank):
    grid_cloth(n=5, fabric=True)
    wind = wind_field()
    wind.field.noise, wind.field.flow = 0.5, 0.0
    bpy.ops.object.effector_add(type="HARMONIC")
    harmonic = bpy.context.active_object
    bpy.ops.mesh.primitive_plane_add(location=(0, 0, -2))
    surface = bpy.context.active_object
    bpy.ops.object.forcefield_toggle()  # a Force field on the mesh
    surface.field.shape = "SURFACE"
    bpy.ops.object.effector_add(type="LENNARDJ")  # named as Blender's panel names it
    lennard_jones = bpy.context.active_object
    warnings = convert().gather(blank, need_targets=False).warnings
    ignored = (
        "is ignored: DiffCloth simulates Wind, Force, Vortex, Drag and Turbulence fields of Point, Line or Plane shape"
    )
    assert sorted(warnings) == sorted(
        [
            f"Wind field '{wind.name}': its Noise not followed",
            f"force field '{harmonic.name}' (Harmonic) {ignored}",
            f"force field '{surface.name}' (Surface shape) {ignored}",
            f"force field '{lennard_jones.name}' (Lennard-Jones) {ignored}",
        ]
    )


def test_optimize_finds_how_hard_the_wind_blew(blank):
    """Wind Fields under What May Change: the target was posed in the field at full strength, the
    cloth's Field Weights › Wind halved; Optimize finds the factor 2, Apply makes it the weight."""
    scene = blank.scene
    scene.frame_start, scene.frame_end = 1, 11
    cloth = grid_cloth(n=7, fabric=True)
    cloth.diffcloth.solver = "NEWTON"  # the motion Optimize simulates
    wind_field(strength=3.0)
    blank.view_layer.objects.active = cloth
    target_from_simulation(blank, 11)
    cloth.diffcloth.wind_weight = 0.5
    settings = scene.diffcloth
    settings.opt_tension, settings.opt_wind_fields, settings.max_iterations = False, True, 20
    blank.view_layer.objects.active = cloth
    assert bpy.ops.diffcloth.optimize() == {"FINISHED"}
    assert cloth["diffcloth_result"]["wind_scale"] == pytest.approx(2.0, rel=1e-3)
    assert bpy.ops.diffcloth.apply_result() == {"FINISHED"}
    assert cloth.diffcloth.wind_weight == pytest.approx(1.0, rel=1e-3) and "wind_scale" not in cloth["diffcloth_result"]
