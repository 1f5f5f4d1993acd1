"""A cloth simulated through a proxy in the real Blender: picked (Simulation Mesh) or made from the
cloth (Proxy Vertices); the bake is the embedded proxy motion; targets and loss stay on the cloth."""

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")

from test_addon import evaluated, grid_cloth  # noqa: E402
from test_careless_input import refused  # noqa: E402


def convert():
    from diffcloth.diffcloth_addon import convert as c

    return c


def render_cloth(n=16, size=0.4):
    """A fine Cotton cloth pinned at its +Y corners (converged steps: Optimize's)."""
    cloth = grid_cloth(n=n, size=size, fabric=True)
    cloth.diffcloth.solver = "NEWTON"
    return cloth


def coarse(name="Proxy", n=6, size=0.42):
    bpy.ops.mesh.primitive_grid_add(x_subdivisions=n - 1, y_subdivisions=n - 1, size=size)
    obj = bpy.context.active_object
    obj.name = name
    return obj


def posed_on_a_proxy(blank, edit, solver="NEWTON"):
    """A fine cloth simulated through a picked proxy over frames 1–8, a New Target at frame 8 posed
    by edit (its vertices ↦ the posed ones), back at frame 1 with the cloth active: the cloth."""
    scene = blank.scene
    scene.frame_start, scene.frame_end = 1, 8
    cloth = render_cloth()
    cloth.diffcloth.solver = solver
    cloth.diffcloth.sim_mesh = coarse()
    bpy.context.view_layer.objects.active = cloth
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    scene.frame_set(8)
    assert bpy.ops.diffcloth.new_target() == {"FINISHED"}
    target = bpy.data.objects["Cloth_target_f0008"]
    co = np.array([v.co for v in target.data.vertices])
    target.data.vertices.foreach_set("co", edit(co).ravel())
    target.data.update()
    scene.frame_set(1)
    bpy.context.view_layer.objects.active = cloth
    return cloth


@pytest.mark.parametrize("how", ["picked", "automatic"])
def test_the_bake_is_the_embedded_proxy_motion(blank, how):
    scene = blank.scene
    scene.frame_start, scene.frame_end = 1, 8
    cloth = render_cloth()
    if how == "picked":
        cloth.diffcloth.sim_mesh = coarse()
    else:
        cloth.diffcloth.proxy_vertices = 60
    bpy.context.view_layer.objects.active = cloth
    setup = convert().gather(blank, need_targets=False)
    assert setup.embedding is not None and setup.scene.cloth.n < len(cloth.data.vertices)
    assert len(setup.scene.cloth.pinned) >= 2  # the pins carried over to the proxy
    from diffcloth import core

    expected = setup.embedding.apply(core.simulate(setup.scene).x)
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    for f in (1, 4, 8):
        scene.frame_set(f)
        assert np.abs(evaluated(cloth) - expected[f - 1]).max() <= 1e-6
    assert expected[-1][:, 2].min() < -0.05  # it hangs
    assert len(bpy.data.objects) == (2 if how == "picked" else 1)  # no helper object left behind


def test_optimizing_through_a_proxy_reaches_keys_posed_on_the_cloth(blank):
    scene = blank.scene
    scene.frame_start, scene.frame_end = 1, 8
    cloth = render_cloth()
    cloth.diffcloth.sim_mesh = coarse()
    cloth.diffcloth.stretch = 30.0
    bpy.context.view_layer.objects.active = cloth
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    scene.frame_set(8)
    assert bpy.ops.diffcloth.new_target() == {"FINISHED"}  # a copy of the cloth, not of its proxy
    bpy.ops.diffcloth.clear_bake()
    scene.frame_set(1)
    cloth.diffcloth.stretch = 12.0
    scene.diffcloth.max_iterations = 20
    bpy.context.view_layer.objects.active = cloth
    assert bpy.ops.diffcloth.optimize() == {"FINISHED"}
    mean_before, _, mean_after, _ = cloth["diffcloth_result"]["keyframes"]["8"]
    assert mean_before > 1e-3 and mean_after < 0.02 * mean_before
    assert bpy.ops.diffcloth.apply_result() == {"FINISHED"}
    assert cloth.diffcloth.stretch == pytest.approx(30.0, rel=1e-2)


@pytest.mark.parametrize("proxy", [0, 60])
def test_a_converged_preview_is_the_motion_optimize_starts_from(blank, proxy):
    """Solver Converged (with or without Proxy Vertices): a key copied from the preview as it is
    lies on Optimize's first motion (0 mm before any iteration), and one moved 2 cm is 2 cm off it."""
    scene = blank.scene
    scene.frame_start, scene.frame_end = 1, 8
    cloth = render_cloth()
    cloth.diffcloth.proxy_vertices = proxy
    bpy.context.view_layer.objects.active = cloth
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    for frame, shift in ((5, 0.0), (8, 0.02)):
        scene.frame_set(frame)
        assert bpy.ops.diffcloth.new_target() == {"FINISHED"}
        target = bpy.data.objects[f"Cloth_target_f{frame:04d}"]
        co = np.array([v.co for v in target.data.vertices]) + [shift, 0.0, 0.0]
        target.data.vertices.foreach_set("co", co.ravel())
        target.data.update()
    scene.frame_set(1)
    scene.diffcloth.max_iterations = 1
    bpy.context.view_layer.objects.active = cloth
    assert bpy.ops.diffcloth.optimize() == {"FINISHED"}
    keys = cloth["diffcloth_result"]["keyframes"]
    assert keys["5"][0] < 1e-6 and keys["5"][1] < 1e-6
    assert keys["8"][0] == pytest.approx(0.02, rel=1e-3)


def test_bad_proxies_are_named(blank):
    cloth = render_cloth()
    small = coarse("Small", size=0.2)
    cloth.diffcloth.sim_mesh = small
    refused(blank, bpy.ops.diffcloth.simulate, "cloth 'Cloth': Simulation Mesh 'Small' does not cover it")
    cloth.diffcloth.sim_mesh = None
    cloth.diffcloth.proxy_vertices = 1000
    refused(blank, bpy.ops.diffcloth.simulate, "Proxy Vertices (1000) is not fewer than the cloth's own 256")
    cloth.diffcloth.proxy_vertices = 0
    far = coarse("Far", size=0.42)
    far.scale = (1.0, 0.5, 1.0)  # covers the middle only: the pinned corners lie off it
    far.location.y = -0.1
    cloth.diffcloth.sim_mesh = far
    refused(blank, bpy.ops.diffcloth.simulate, "does not cover it")


def test_a_target_with_the_proxys_topology_is_named(blank):
    scene = blank.scene
    scene.frame_start, scene.frame_end = 1, 6
    cloth = render_cloth()
    proxy = coarse()
    cloth.diffcloth.sim_mesh = proxy
    target = bpy.data.objects.new("Target", proxy.data.copy())
    blank.collection.objects.link(target)
    target.diffcloth.role = "TARGET"
    target.keyframe_insert("location", frame=6)
    bpy.context.view_layer.objects.active = cloth
    refused(
        blank,
        bpy.ops.diffcloth.optimize,
        "target 'Target' has 36 vertices, cloth 'Cloth' has 256 (its simulation "
        "mesh's count: pose a copy of the cloth itself)",
    )


def test_make_simulation_mesh_shows_the_automatic_proxy(blank):
    """The operator makes the automatic proxy an object (wireframe, not rendered, a child of the
    cloth) and picks it: the run simulates exactly what Proxy Vertices would have."""
    scene = blank.scene
    scene.frame_start, scene.frame_end = 1, 6
    cloth = render_cloth()
    cloth.location.z = 0.3
    cloth.diffcloth.proxy_vertices = 60
    bpy.context.view_layer.objects.active = cloth
    automatic = convert().gather(blank, need_targets=False)
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    scene.frame_set(5)  # made from the rest shape, whatever frame the artist is on
    assert bpy.ops.diffcloth.make_proxy() == {"FINISHED"}
    sim = cloth.diffcloth.sim_mesh
    assert sim is not None and sim.parent == cloth and sim.display_type == "WIRE" and sim.hide_render
    assert len(sim.data.vertices) == automatic.scene.cloth.n
    scene.frame_set(1)
    picked = convert().gather(blank, need_targets=False)
    assert np.abs(picked.scene.x0 - automatic.scene.x0).max() <= 1e-6
    cloth.diffcloth.proxy_vertices = 300
    refused(blank, bpy.ops.diffcloth.make_proxy, "cloth 'Cloth' has 256 vertices, not more than a 300-vertex proxy")


def test_move_pins_moves_the_proxys_pins_for_a_copy_moved_as_a_whole(blank):
    """A target moved as a whole, pinned corners included: Move Pins (the default) moves the
    proxy's pins that hold the cloth's pinned vertices, so the cloth reaches the pose; without
    Move Pins the warning names the pins, as without a proxy."""
    cloth = posed_on_a_proxy(blank, lambda co: co + [0.04, 0.0, 0.03])
    settings = blank.scene.diffcloth
    settings.opt_tension, settings.opt_forces, settings.max_iterations = False, True, 15
    assert settings.force_move_pins
    from diffcloth.diffcloth_addon import operators

    setup, _ = operators.prepare(blank, "optimize")
    assert setup.warnings == []
    assert len(setup.scene.cloth.pinned) == 2 and sorted(setup.posed_pins) == sorted(setup.scene.cloth.pinned)
    assert bpy.ops.diffcloth.optimize() == {"FINISHED"}
    stored = cloth["diffcloth_result"]
    mean_before, _, mean_after, _ = stored["keyframes"]["8"]
    assert mean_before > 0.045 and mean_after < 0.005, (mean_before, mean_after)
    assert len(stored["pin_offset"]) == 8 * 2 * 3
    settings.force_move_pins = False
    warnings = operators.prepare(blank, "optimize")[0].warnings
    # 4.6 cm, not the 5 cm move: the cloth's pinned corners lie 1 cm inside the proxy's, and sag with it
    assert len(warnings) == 1 and "at frame 8 moves pinned vertices of 'Cloth' by up to 4.6 cm" in warnings[0]


def test_refine_goes_on_from_the_proxys_design_on_the_cloth_itself(blank):
    """Refine: after the proxy run, iterations on the cloth itself from the design found there; the
    result is the cloth's own (Simulate & Bake reproduces it without the proxy) until Discard
    Result."""
    # the default Solver (Optimize and Refine simulate converged steps), the hem lifted
    cloth = posed_on_a_proxy(blank, lambda x: x + [0.0, 0.0, 0.03] * (x[:, 2:] < np.median(x[:, 2])), "LINEARIZED")
    scene = blank.scene
    settings = scene.diffcloth
    settings.opt_forces, settings.max_iterations = True, 2
    assert bpy.ops.diffcloth.optimize() == {"FINISHED"}
    proxy_only = cloth["diffcloth_result"]["keyframes"]["8"][2]
    assert not cloth["diffcloth_result"]["refined"]
    assert bpy.ops.diffcloth.discard_result() == {"FINISHED"}

    cloth.diffcloth.refine_iterations = 2
    assert bpy.ops.diffcloth.optimize() == {"FINISHED"}
    stored = cloth["diffcloth_result"]
    n = len(cloth.data.vertices)
    assert stored["refined"] and len(stored["v0"]) == 3 * n and len(stored["forces"]) == 7 * n * 3
    assert stored["iterations"] == 4
    assert stored["refine_start"]["8"][0] > 0.0  # the cloth itself with the proxy's design
    before, _, after, _ = stored["keyframes"]["8"]
    assert before > 0.01 and after < proxy_only  # measured on the cloth itself: 15.0 → 13.98 mm (proxy: 14.08)
    scene.frame_set(8)
    baked = evaluated(cloth)
    setup = convert().gather(blank, need_targets=False)
    assert setup.embedding is None and setup.scene.cloth.n == n
    assert any("refined on the cloth itself" in w for w in setup.warnings)
    assert bpy.ops.diffcloth.simulate(converged=True) == {"FINISHED"}
    scene.frame_set(8)
    assert np.abs(evaluated(cloth) - baked).max() <= 1e-6
    assert bpy.ops.diffcloth.discard_result() == {"FINISHED"}
    assert convert().gather(blank, need_targets=False).embedding is not None
