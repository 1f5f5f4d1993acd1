"""DiffCloth's place in the modifier stack: before every modifier, as its bake (shape keys) is.
The cloth is read as modelled, whatever modifiers it has; Subdivision, Solidify, an animated
Displace apply to the simulated cloth; New Target copies the cloth's own vertices."""

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")

from test_addon import evaluated, grid_cloth  # noqa: E402


def shown(context, cloth, frame):
    context.scene.frame_set(frame)
    return evaluated(cloth)


def test_modifiers_apply_to_the_simulated_cloth(blank):
    scene = blank.scene
    scene.frame_start, scene.frame_end = 1, 8
    cloth = grid_cloth(n=6, fabric=True)
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    plain = [shown(blank, cloth, f) for f in (1, 8)]
    bpy.ops.diffcloth.clear_bake()
    subsurf = cloth.modifiers.new("Subdivision", "SUBSURF")
    subsurf.levels = 1
    cloth.modifiers.new("Solidify", "SOLIDIFY").thickness = 0.005
    displace = cloth.modifiers.new("Displace", "DISPLACE")
    for frame, strength in ((1, 0.0), (5, 0.05)):  # animated: it moves the result, not the input
        displace.strength = strength
        displace.keyframe_insert("strength", frame=frame)
    scene.frame_set(1)
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    assert all(m.show_viewport for m in cloth.modifiers)  # left as they were
    assert len(shown(blank, cloth, 8)) > 2 * len(cloth.data.vertices)  # subdivided and solidified
    # the simulated cloth is the same as without the modifiers: their input is the bake
    for m in cloth.modifiers:
        m.show_viewport = False
    for frame, before in zip((1, 8), plain):
        assert np.abs(shown(blank, cloth, frame) - before).max() < 1e-6
    for m in cloth.modifiers:
        m.show_viewport = True
    scene.frame_set(8)
    assert bpy.ops.diffcloth.new_target() == {"FINISHED"}
    target = next(o for o in scene.objects if o.diffcloth.role == "TARGET")
    assert len(target.data.vertices) == len(cloth.data.vertices)  # the cloth's own vertices, as baked
    for m in cloth.modifiers:
        m.show_viewport = False
    assert np.abs(evaluated(target) - shown(blank, cloth, 8)).max() < 1e-6
