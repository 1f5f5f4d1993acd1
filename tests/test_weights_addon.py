"""Property Weights through the add-on: vertex groups raise the stiffness toward their Max, as
Blender's Cloth does; bad groups are named; proxies and Apply carry them."""

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")

from test_addon import draw_all, evaluated, grid_cloth, ops_report, target_from_simulation  # noqa: E402


def convert():
    from diffcloth.diffcloth_addon import convert as c

    return c


def hem_cloth(rows=2, n=9):
    """A Cotton grid pinned at its top corners, with a vertex group 'hem' of weight 1 on its
    lowest `rows` rows; the row of each vertex, counted from the bottom."""
    cloth = grid_cloth(n=n, fabric=True)
    co = np.array([v.co for v in cloth.data.vertices])
    row = np.round((co[:, 1] - co[:, 1].min()) / (np.ptp(co[:, 1]) / (n - 1))).astype(int)
    cloth.vertex_groups.new(name="hem").add([int(i) for i in np.flatnonzero(row < rows)], 1.0, "REPLACE")
    return cloth, row


def test_a_structural_group_raises_the_stretch_toward_max_tension(blank):
    cloth, row = hem_cloth()
    s = cloth.diffcloth
    plain = convert().gather(blank, need_targets=False).scene.cloth
    s.structural_group, s.tension_max = "hem", 10 * s.stretch
    s.bending_group, s.bending_max = "hem", 100 * s.bending
    setup = convert().gather(blank, need_targets=False)
    assert setup.warnings == []
    weighted = setup.scene.cloth
    hem = row < 2
    ends = hem[weighted.tension_edges].sum(axis=1)  # 0, 1 or 2 ends in the hem: ×1, ×5.5, ×10
    assert np.allclose(weighted.k_tension / plain.k_tension, np.choose(ends, [1.0, 5.5, 10.0]))
    assert np.allclose(
        weighted.k_shear / plain.k_shear, np.choose(hem[weighted.shear_edges].sum(axis=1), [1.0, 5.5, 10.0])
    )
    bend = hem[weighted.hinges[:, :2]].sum(axis=1)
    assert np.allclose(weighted.k_bending / plain.k_bending, np.choose(bend, [1.0, 50.5, 100.0]))
    # and Blender's bake shows it: the hem hangs stiffer, the rest as before
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    blank.scene.frame_set(blank.scene.frame_end)
    stiff = evaluated(cloth)
    s.structural_group = s.bending_group = ""
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    blank.scene.frame_set(blank.scene.frame_end)
    assert np.abs(evaluated(cloth) - stiff)[row < 2].max() > 1e-3
    s.structural_group = "hem"
    shown = draw_all(blank)
    assert {"structural_group", "tension_max", "shear_group", "bending_group", "bending_max"} <= set(shown)


def test_bad_property_weights_are_named_and_change_nothing(blank):
    cloth, _ = hem_cloth()
    s = cloth.diffcloth
    s.structural_group = "collar"
    assert bpy.ops.diffcloth.simulate.poll()
    message = ops_report(bpy.ops.diffcloth.simulate)
    assert "cloth 'Cloth': its Structural Group 'collar' is not one of its vertex groups" in message
    assert cloth.data.shape_keys is None  # nothing baked
    s.structural_group, s.tension_max = "hem", 0.5 * s.stretch  # a Max below the stiffness
    setup = convert().gather(blank, need_targets=False)
    assert setup.warnings == [
        "cloth 'Cloth': Max Tension 45 is below its Stretch Stiffness 90: Structural Group 'hem' changes nothing there"
    ]
    assert np.array_equal(
        setup.scene.cloth.k_tension, convert().gather(blank, need_targets=False).scene.cloth.k_tension
    )


def test_a_proxy_takes_the_weights_of_the_cloth_vertices_nearest_it(blank):
    cloth, row = hem_cloth(rows=3, n=13)
    s = cloth.diffcloth
    s.structural_group, s.tension_max = "hem", 10 * s.stretch
    s.proxy_vertices = 60
    sim = convert().gather(blank, need_targets=False).scene.cloth
    s.structural_group = ""
    plain = convert().gather(blank, need_targets=False).scene.cloth
    ratio = sim.k_tension / plain.k_tension
    low = sim.rest[:, 1] < sim.rest[:, 1].min() + 0.05  # proxy vertices near the hem
    high = sim.rest[:, 1] > sim.rest[:, 1].min() + 0.2
    assert np.allclose(ratio[low[sim.tension_edges].all(axis=1)], 10.0)
    assert np.allclose(ratio[high[sim.tension_edges].all(axis=1)], 1.0)


def test_apply_scales_the_max_values_with_the_optimized_stiffness(blank):
    """An optimization scales every spring together, weighted ones too: Apply moves each Max with
    its stiffness, so the cloth's own settings make the optimized springs."""
    scene = blank.scene
    scene.frame_start, scene.frame_end = 1, 8
    cloth, _ = hem_cloth()
    s = cloth.diffcloth
    s.structural_group, s.tension_max = "hem", 5 * s.stretch
    target_from_simulation(blank, 8)
    s.stretch, s.tension_max = 45.0, 225.0  # half of what the target was simulated with
    scene.diffcloth.max_iterations = 20
    assert bpy.ops.diffcloth.optimize() == {"FINISHED"}
    stored = np.array(cloth["diffcloth_result"]["k_tension"])
    assert bpy.ops.diffcloth.apply_result() == {"FINISHED"}
    assert s.stretch == pytest.approx(90.0, rel=2e-2) and s.tension_max / s.stretch == pytest.approx(
        5.0, rel=1e-6
    )  # float32 settings
    applied = convert().gather(blank, need_targets=False).scene.cloth  # the settings alone, now
    assert np.allclose(applied.k_tension, stored, rtol=1e-6)


def test_shrinking_shortens_the_springs_as_blenders_does(blank):
    """Shrinking Factor shrinks every spring; the Shrinking Group moves its vertices toward Max
    Shrinking: each spring's rest length × √(kᵢkⱼ), kᵢ = 1 − lerp(factor, max, wᵢ)."""
    cloth, row = hem_cloth()
    s = cloth.diffcloth
    plain = convert().gather(blank, need_targets=False).scene.cloth
    s.shrink_min = 0.1
    assert np.allclose(convert().gather(blank, need_targets=False).scene.cloth.rest_lengths, 0.9 * plain.rest_lengths)
    s.shrink_group, s.shrink_max = "hem", 0.3
    shrunk = convert().gather(blank, need_targets=False).scene.cloth
    k = np.where(row < 2, 0.7, 0.9)
    e = shrunk.edges
    assert np.allclose(shrunk.rest_lengths, plain.rest_lengths * np.sqrt(k[e[:, 0]] * k[e[:, 1]]))
    assert {"shrink_min", "shrink_group", "shrink_max"} <= set(draw_all(blank))
