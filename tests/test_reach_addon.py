"""Keys out of the cloth's reach, through the operators: the sidebar, the status and the stored
result say which key and how far, the target's colours show where (red: stretch; blue: inside a
collider); a key within reach clears them."""

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
    demand, p95, fabric, mean, largest, inside, _ = cloth["diffcloth_result"]["unreachable"]["11"]
    assert demand > fabric > 0 and p95 < demand and 0 < mean < largest and inside == 0
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
    demand, _, fabric, _, largest, inside, deepest = cloth["diffcloth_result"]["unreachable"]["8"]
    assert inside == int(low.sum()) > 0 and 0.045 < deepest < 0.051 and largest == 0.0
    rgba = np.array([c.color for c in target.data.color_attributes[ATTRIBUTE].data])
    assert np.allclose(rgba[low, 2], 1.0) and rgba[low, 0].max() < 0.01  # blue where it went in
    assert "out of the cloth's reach" in blank.window_manager.diffcloth.status
