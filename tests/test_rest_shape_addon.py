"""The cloth's rest shape through the add-on: with Rest Angles a mesh modelled round keeps its shape
(hinges bend about their rest angles, as Blender's Angular bending), and a Rest Shape Key (Shape)
is the rest the cloth is drawn to, as Blender's; bad keys are named and change nothing."""

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")

from test_addon import draw_all, evaluated, grid_cloth, ops_report  # noqa: E402


def bake_last(context, cloth):
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    context.scene.frame_set(context.scene.frame_end)
    return evaluated(cloth)


def test_a_cloth_modelled_round_keeps_its_shape(blank):
    blank.scene.frame_start, blank.scene.frame_end = 1, 13
    blank.scene.use_gravity = False
    cloth = grid_cloth(n=8, fabric=True, pins=False)
    for v in cloth.data.vertices:  # rolled onto a cylinder of radius 0.2 about y
        angle = v.co.x / 0.2
        v.co.x, v.co.z = 0.2 * np.sin(angle), 0.2 * np.cos(angle)
    start = evaluated(cloth)
    cloth.diffcloth.use_rest_angles = True
    assert np.abs(bake_last(blank, cloth) - start).max() < 1e-5
    assert bpy.ops.diffcloth.clear_bake() == {"FINISHED"}
    cloth.diffcloth.use_rest_angles = False  # about flat: it unrolls
    assert np.abs(bake_last(blank, cloth) - start).max() > 1e-3


def test_a_rest_shape_key_is_the_rest_the_cloth_is_drawn_to(blank):
    blank.scene.frame_start, blank.scene.frame_end = 1, 25
    blank.scene.use_gravity = False
    cloth = grid_cloth(n=7, fabric=True, pins=False)
    cloth.shape_key_add(name="Basis")
    small = cloth.shape_key_add(name="Small", from_mix=False)
    small.value = 0.0  # a shape to rest at, not one to show
    for k in small.data:
        k.co *= 0.8
    start = evaluated(cloth)  # the Basis
    cloth.diffcloth.rest_shape_key = "Small"
    end = bake_last(blank, cloth)
    assert np.ptp(end[:, 0]) < 0.9 * np.ptp(start[:, 0])  # it shrinks toward the key
    blank.view_layer.objects.active = cloth
    drawn = draw_all(blank)
    assert "rest_shape_key" in drawn and "use_rest_angles" in drawn


def test_bad_rest_shape_keys_are_named_and_change_nothing(blank):
    cloth = grid_cloth(n=5, fabric=True)
    cloth.diffcloth.rest_shape_key = "Collar"
    message = ops_report(bpy.ops.diffcloth.simulate)
    assert "cloth 'Cloth': its Rest Shape Key 'Collar' is not one of its shape keys" in message
    assert cloth.data.shape_keys is None  # nothing baked
    cloth.diffcloth.rest_shape_key = ""
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    cloth.diffcloth.rest_shape_key = cloth.data.shape_keys.key_blocks[-1].name  # a frame of the bake
    assert "is DiffCloth's bake: choose a key of yours" in ops_report(bpy.ops.diffcloth.simulate)
