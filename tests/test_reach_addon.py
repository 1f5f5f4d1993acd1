"""Keys out of the cloth's reach, through the operators: the sidebar, the status and the stored
result say which key and how far, the target's colours show where (red: stretch; blue: inside a
collider; orange: resting where friction cannot hold it); a key within reach clears them."""

import math

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")

from test_addon import draw_all, grid_cloth, target_from_simulation  # noqa: E402

ATTRIBUTE = "DiffCloth Reach"


def set_co(obj, co):
    obj.data.vertices.foreach_set("co", np.asarray(co).ravel())
    obj.data.update()


def keyed(blank, end, n, iterations):
    """A Cotton grid of n×n simulated over frames 1..end, a target copied at the end, the bake
    cleared: the cloth, its target and the target's vertices."""
    scene = blank.scene
    scene.frame_start, scene.frame_end = 1, end
    cloth = grid_cloth(n=n, size=0.4, fabric=True)
    scene.diffcloth.max_iterations = iterations
    target = target_from_simulation(blank, end)
    return cloth, target, np.array([v.co for v in target.data.vertices])


def test_a_lifted_key_is_told_and_shown_on_its_target(blank):
    cloth, target, posed = keyed(blank, 11, 9, 2)
    state = blank.window_manager.diffcloth
    centre = int(np.argmin(np.linalg.norm(posed - posed.mean(axis=0), axis=1)))
    near = np.linalg.norm(posed - posed[centre], axis=1)
    lift = np.exp(-(near**2) / (2 * 0.05**2))  # proportional editing's bump, 10 cm high
    set_co(target, posed + lift[:, None] * [0.0, 0.0, 0.1])

    assert bpy.ops.diffcloth.optimize() == {"FINISHED"}
    assert "frame 11 out of the cloth's reach" in state.status
    demand, p95, fabric, mean, largest, inside, _, slid, _ = cloth["diffcloth_result"]["unreachable"]["11"]
    assert demand > fabric > 0 and p95 < demand and 0 < mean < largest and inside == 0 and slid == 0
    labels = []
    draw_all(blank, labels)
    assert f"    asks {demand * 100:.0f}% stretch, the fabric shows {fabric * 100:.1f}%" in labels, labels
    colours = target.data.color_attributes[ATTRIBUTE]
    assert target.data.color_attributes.active_color.name == ATTRIBUTE
    rgba = np.array([c.color for c in colours.data])
    # red (green and blue below 1) on the bump's slopes, white far from it
    assert rgba[near < 0.1, 1].min() < 0.5 and rgba[near > 0.25, 1].min() > 0.7

    set_co(target, posed)  # the pose as simulated: within reach, and the colours go
    assert bpy.ops.diffcloth.optimize() == {"FINISHED"}
    assert "reach" not in state.status
    assert len(cloth["diffcloth_result"]["unreachable"]) == 0
    assert target.data.color_attributes.get(ATTRIBUTE) is None


def test_a_key_inside_a_collider_is_told_by_name(blank):
    bpy.ops.mesh.primitive_plane_add(size=2.0, location=(0, 0, -0.3))
    floor = bpy.context.active_object
    floor.name = "Floor"
    floor.diffcloth.role = "PLANE"
    cloth, target, posed = keyed(blank, 8, 7, 1)
    world_z = np.array([(target.matrix_world @ v.co).z for v in target.data.vertices])
    drop = world_z.min() + 0.3 + 0.05  # moved down as a whole, its lowest point 5 cm through the floor
    set_co(target, posed - [0.0, 0.0, drop])
    low = world_z - drop < -0.3 - 0.005
    assert bpy.ops.diffcloth.optimize() == {"FINISHED"}
    demand, _, fabric, _, largest, inside, deepest, _, _ = cloth["diffcloth_result"]["unreachable"]["8"]
    assert inside == int(low.sum()) > 0 and 0.045 < deepest < 0.051 and largest == 0.0
    rgba = np.array([c.color for c in target.data.color_attributes[ATTRIBUTE].data])
    assert np.allclose(rgba[low, 2], 1.0) and rgba[low, 0].max() < 0.01  # blue where it went in
    assert "out of the cloth's reach" in blank.window_manager.diffcloth.status


def test_a_key_resting_where_friction_cannot_hold_it_is_told(blank):
    """A key laid on a 30° slope (a mesh with Collision physics) whose Friction 10 (μ 0.1) cannot
    hold the cloth, far from where the cloth falls: the warning names the slope, the stored result
    and the sidebar count the vertices that slide, which are orange on the target; at Friction 80
    (μ 0.8) the same key is out of reach for no reason, and told nothing."""
    scene = blank.scene
    scene.frame_start, scene.frame_end = 1, 7
    bpy.ops.mesh.primitive_plane_add(size=2.0, rotation=(math.radians(30.0), 0.0, 0.0))
    slope = bpy.context.active_object
    slope.name = "Slope"
    slope.modifiers.new("Collision", "COLLISION")
    slope.collision.cloth_friction = 10.0
    cloth = grid_cloth(n=6, size=0.4, pins=False, location=(0.0, 0.0, 1.5), fabric=True)
    scene.diffcloth.max_iterations = 1
    scene.frame_set(7)
    assert bpy.ops.diffcloth.new_target() == {"FINISHED"}
    target = next(o for o in scene.objects if o.diffcloth.role == "TARGET")
    flat = np.array([v.co for v in cloth.data.vertices])
    a = math.radians(30.0)
    normal = np.array([0.0, -math.sin(a), math.cos(a)])
    rot = np.array([[1, 0, 0], [0, math.cos(a), -math.sin(a)], [0, math.sin(a), math.cos(a)]])
    on_slope = flat @ rot.T + (slope.collision.thickness_outer + 0.001) * normal
    set_co(target, on_slope - np.array(target.location))
    scene.frame_set(1)
    state = blank.window_manager.diffcloth

    assert bpy.ops.diffcloth.optimize() == {"FINISHED"}
    assert "frame 7 out of the cloth's reach" in state.status
    *_, inside, _, slid, farthest = cloth["diffcloth_result"]["unreachable"]["7"]
    # 6 frames at the tests' 10 fps: g·(sin 30° − μ·cos 30°)·t²/2 = 0.73 m along the slope
    assert inside == 0 and slid == len(flat) and 0.5 < farthest < 0.8
    labels = []
    draw_all(blank, labels)
    assert f"    {slid} vertices slide off at rest, up to {farthest * 1e3:.0f} mm" in labels, labels
    rgba = np.array([c.color for c in target.data.color_attributes[ATTRIBUTE].data])
    assert np.allclose(rgba[:, 0], 1.0) and np.allclose(rgba[:, 1], 0.5) and np.allclose(rgba[:, 2], 0.0)

    slope.collision.cloth_friction = 80.0
    assert bpy.ops.diffcloth.optimize() == {"FINISHED"}
    assert "reach" not in state.status and len(cloth["diffcloth_result"]["unreachable"]) == 0
