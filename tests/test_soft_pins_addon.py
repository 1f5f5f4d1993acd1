"""Soft pins through the add-on, as Blender's Cloth reads a pin group: weight 1 pins outright, a
partial weight w pulls with w⁴ × Pin Stiffness toward where the group holds the vertex, following
the cloth object; files from before keep their pins outright above 0.5."""

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")

from test_addon import draw_all, evaluated, grid_cloth  # noqa: E402


def convert():
    from diffcloth.diffcloth_addon import convert as c

    return c


def top_row(cloth, corner=1.0, inner=0.9):
    """The pin group over the cloth's top row: its corners at `corner`, the rest at `inner`."""
    co = np.array([v.co for v in cloth.data.vertices])
    top = np.flatnonzero(np.isclose(co[:, 1], co[:, 1].max()))
    corners = top[np.isin(co[top, 0], [co[:, 0].min(), co[:, 0].max()])]
    group = cloth.vertex_groups["pin"]
    group.add([int(i) for i in top], inner, "REPLACE")
    group.add([int(i) for i in corners], corner, "REPLACE")
    return top, corners


def test_partial_weights_pull_softly_and_weight_one_pins(blank):
    cloth = grid_cloth(n=7, fabric=True)
    top, corners = top_row(cloth)
    s = cloth.diffcloth
    sc = convert().gather(blank, need_targets=False).scene
    inner = np.setdiff1d(top, corners)
    assert sorted(sc.cloth.pinned) == sorted(corners)
    assert sorted(sc.goals.vertices) == sorted(inner)
    assert np.allclose(sc.goals.stiffness, 0.9**4 * s.pin_stiffness * sc.cloth.masses[sc.goals.vertices])
    assert "pin_stiffness" in draw_all(blank)
    rest = evaluated(cloth)
    heights = {}
    for stiffness in (30.0, 3e4):
        s.pin_stiffness = stiffness
        assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
        blank.scene.frame_set(blank.scene.frame_end)
        heights[stiffness] = evaluated(cloth)[inner, 2].mean() - rest[inner, 2].mean()
        blank.scene.frame_set(blank.scene.frame_start)
    s.pin_group = ""  # only the corners, as pins outright: the row sags freely
    cloth.vertex_groups.new(name="corners").add([int(i) for i in corners], 1.0, "REPLACE")
    s.pin_group = "corners"
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    blank.scene.frame_set(blank.scene.frame_end)
    free = evaluated(cloth)[inner, 2].mean() - rest[inner, 2].mean()
    assert free < heights[30.0] < heights[3e4] < 0 and heights[3e4] > -0.005, (free, heights)


def test_soft_pins_follow_the_cloth_object(blank):
    scene = blank.scene
    scene.frame_start, scene.frame_end = 1, 11
    cloth = grid_cloth(n=7, fabric=True)
    top, corners = top_row(cloth, corner=0.95)  # every pin soft
    cloth.diffcloth.pin_stiffness = 1e4
    cloth.location = (0, 0, 0)
    cloth.keyframe_insert("location", frame=1)
    cloth.location = (0.2, 0, 0)
    cloth.keyframe_insert("location", frame=11)
    sc = convert().gather(blank, need_targets=False).scene
    assert len(sc.cloth.pinned) == 0 and sc.goals.path.shape == (11, len(top), 3)
    assert np.allclose(sc.goals.path[-1] - sc.goals.path[0], [0.2, 0, 0])
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    scene.frame_set(11)
    moved = evaluated(cloth)[top, 0].mean() - np.array([v.co for v in cloth.data.vertices])[top, 0].mean()
    assert moved == pytest.approx(0.2, abs=0.02)


def test_files_from_before_soft_pins_keep_their_pins_above_half(blank):
    from diffcloth.diffcloth_addon import properties

    cloth = grid_cloth(n=7, fabric=True)
    top, corners = top_row(cloth, inner=0.6)
    cloth.diffcloth.settings_version = 3
    properties.upgrade([cloth])
    assert cloth.diffcloth.legacy_pins and cloth.diffcloth.settings_version == properties.SETTINGS_VERSION
    sc = convert().gather(blank, need_targets=False).scene
    assert sorted(sc.cloth.pinned) == sorted(top) and sc.goals is None


def test_a_proxy_takes_the_soft_pins_of_the_cloth_vertices_nearest_it(blank):
    cloth = grid_cloth(n=13, fabric=True)
    top, corners = top_row(cloth)
    cloth.diffcloth.proxy_vertices = 60
    sc = convert().gather(blank, need_targets=False).scene
    high = sc.cloth.rest[:, 1] > sc.cloth.rest[:, 1].max() - 1e-6
    assert len(sc.goals.vertices) and high[sc.goals.vertices].all()
    assert not np.isin(sc.goals.vertices, sc.cloth.pinned).any()
