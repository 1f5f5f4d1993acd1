"""The cloth's Self Collisions (Blender's terms: on/off, Distance, Friction) through the add-on in the real Blender."""

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")

from test_addon import draw_all, evaluated, grid_cloth  # noqa: E402
from test_careless_input import refused  # noqa: E402


def convert():
    from diffcloth.diffcloth_addon import convert as c

    return c


def curtain(context, n=12, size=0.3):
    """A Cotton cloth standing on its edge 1 cm above a floor plane (a millimetre of noise out of
    its plane), let go: it collapses into a heap."""
    scene = context.scene
    scene.render.fps, scene.frame_start, scene.frame_end = 24, 1, 37
    cloth = grid_cloth(fabric=True, pins=False, n=n, size=size)
    co = np.array([v.co for v in cloth.data.vertices])
    noise = 1e-3 * np.random.default_rng(0).normal(size=len(co))
    cloth.data.vertices.foreach_set("co", np.stack([co[:, 0], noise, co[:, 1] + size / 2 + 0.01], axis=1).ravel())
    cloth.data.update()
    bpy.ops.mesh.primitive_plane_add(size=2.0)
    bpy.context.active_object.diffcloth.role = "PLANE"
    return cloth


def crossings(context, cloth):
    """The most triangle pairs of the baked cloth that pass through each other at any frame."""
    from diffcloth import core

    tris = np.array([p.vertices[:] for p in cloth.data.polygons])
    tris = np.concatenate([tris[:, [0, 1, 2]], tris[:, [0, 2, 3]]])
    most = 0
    for f in range(context.scene.frame_start, context.scene.frame_end + 1):
        context.scene.frame_set(f)
        most = max(most, len(core.crossing_pairs(evaluated(cloth), tris)))
    return most


def test_self_collisions_are_read_in_blenders_terms(blank):
    cloth = curtain(blank)
    off = convert().gather(blank, need_targets=False).scene
    assert (off.self_distance, off.self_friction) == (0.0, 0.0)  # off by default
    cloth.diffcloth.use_self_collision, cloth.diffcloth.self_distance = True, 0.01
    on = convert().gather(blank, need_targets=False).scene
    assert on.self_distance == pytest.approx(0.01)
    assert on.self_friction == pytest.approx(0.05)  # Blender's default Friction 5: μ = 0.05
    cloth.diffcloth.self_friction = 30.0
    assert convert().gather(blank, need_targets=False).scene.self_friction == pytest.approx(0.3)
    blank.view_layer.objects.active = cloth
    labels = []
    assert {"self_distance", "self_friction"} <= set(draw_all(blank, labels))
    assert any("Self Collisions: 10 mm, friction 30" in label for label in labels)


def test_a_collapsing_cloth_crosses_itself_far_less_with_self_collisions(blank):
    cloth = curtain(blank)
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    without = crossings(blank, cloth)
    cloth.diffcloth.use_self_collision, cloth.diffcloth.self_distance = True, 0.01
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    assert "Self Collisions " in blank.window_manager.diffcloth.status  # what they cost, in the sidebar
    with_self = crossings(blank, cloth)
    assert without > 100 and with_self <= without / 10, (without, with_self)
    blank.scene.frame_set(37)
    assert evaluated(cloth)[:, 2].max() < 0.15  # it did collapse


def test_bad_self_collision_settings_are_named(blank):
    cloth = curtain(blank)
    cloth.diffcloth.use_self_collision, cloth.diffcloth.self_distance = True, 0.08
    refused(blank, bpy.ops.diffcloth.simulate, "Self Collisions Distance 80 mm is more than its simulated mesh allows")
    # the right half folded over the left one, above it where y > 0 and below it where y < 0:
    # between, its triangles pass through the left half's
    twisted = grid_cloth("Twisted", fabric=True, pins=False, n=12, size=0.3, location=(0, 0, 0.5))
    co = np.array([v.co for v in twisted.data.vertices])
    right = co[:, 0] > 1e-6
    co[right, 2] = 0.005 * np.sign(co[right, 1] + 1e-9)
    co[right, 0] *= -1
    twisted.data.vertices.foreach_set("co", co.ravel())
    twisted.data.update()
    twisted.diffcloth.use_self_collision, twisted.diffcloth.self_distance = True, 0.01
    blank.view_layer.objects.active = twisted
    cloth.diffcloth.role = "NONE"
    refused(blank, bpy.ops.diffcloth.simulate, "cloth 'Twisted' passes through itself at frame 1 (")
