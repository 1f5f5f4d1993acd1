"""The add-on's fabric material: presets, defaults, files of older versions, Apply Optimized Stiffness."""

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")

from test_addon import draw_all, evaluated, grid_cloth, results, target_from_simulation  # noqa: E402


def convert():
    from diffcloth.diffcloth_addon import convert as c

    return c


def test_a_new_cloth_is_cotton_simulated_with_linearized_steps(blank):
    cloth = grid_cloth(fabric=True)
    s = cloth.diffcloth
    assert (s.model, s.solver) == ("FABRIC", "LINEARIZED")
    setup = convert().gather(blank, need_targets=False)
    sc = setup.scene
    assert sc.solver == "linearized"
    assert sc.cloth.mass == pytest.approx(0.15 * 0.4 * 0.4)  # Cotton: 150 g/m²
    assert sc.cloth.damping == pytest.approx(1.0) and np.allclose(sc.cloth.k_bending, 5e-6)
    assert sc.cloth.k_tension.max() == pytest.approx(90.0)  # interior edges along the rows carry the stretch stiffness
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    blank.scene.frame_set(blank.scene.frame_end)
    assert evaluated(cloth)[:, 2].min() < -0.05  # it hangs


def test_new_target_poses_the_motion_optimize_simulates(blank):
    """A quick (linearized) preview differs from Optimize's converged motion where stiff cloth
    buckles, so New Target first bakes the cloth again with converged steps and copies that; a
    second target copies the bake as it is; a cloth without a bake is baked first too."""
    scene = blank.scene
    scene.frame_start, scene.frame_end = 1, 12
    bpy.ops.mesh.primitive_uv_sphere_add(radius=0.1, location=(0, -0.05, -0.2))
    bpy.context.active_object.diffcloth.role = "SPHERE"
    cloth = grid_cloth(n=10, fabric=True)
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    assert results().baked_solver(cloth) == "linearized"
    scene.frame_set(12)
    preview = evaluated(cloth)
    assert bpy.ops.diffcloth.new_target() == {"FINISHED"}
    assert results().baked_solver(cloth) == "newton"
    target = bpy.data.objects["Cloth_target_f0012"]
    copied = np.array([target.matrix_world @ v.co for v in target.data.vertices])
    assert np.allclose(copied, evaluated(cloth), atol=1e-6)  # the converged bake, as now shown
    assert np.abs(copied - preview).max() > 1e-3  # which is not the preview
    scene.frame_set(6)
    from diffcloth.diffcloth_addon.bake import baked_positions

    motion = baked_positions(cloth, 1, 12)
    assert bpy.ops.diffcloth.new_target() == {"FINISHED"}
    assert np.array_equal(baked_positions(cloth, 1, 12), motion)  # baked once
    bpy.ops.diffcloth.clear_bake()
    assert results().baked_solver(cloth) is None and results().MOTION_SOLVER_KEY not in cloth
    # no bake at all: the motion is baked first, not the cloth as modelled copied
    assert bpy.ops.diffcloth.new_target() == {"FINISHED"}
    assert results().baked_solver(cloth) == "newton"
    copied = bpy.data.objects["Cloth_target_f0006.001"]
    copied = np.array([copied.matrix_world @ v.co for v in copied.data.vertices])
    assert np.allclose(copied, evaluated(cloth), atol=1e-6)  # the new bake at frame 6
    assert np.abs(copied - motion[5]).max() < 0.01 and np.abs(copied - motion[0]).max() > 0.05


@pytest.mark.parametrize("preset", ["Denim", "Silk", "Leather", "Rubber", "Cotton"])
def test_a_preset_sets_the_fabric_and_the_panel_names_it(blank, preset):
    from diffcloth import core

    cloth = grid_cloth()  # springs: a preset makes it fabric
    assert bpy.ops.diffcloth.fabric_preset(preset=preset) == {"FINISHED"}
    fabric, s = core.FABRICS[preset.lower()], cloth.diffcloth
    assert s.model == "FABRIC"
    assert (s.density, s.stretch, s.bending, s.damping) == pytest.approx(
        (fabric.density, fabric.stretch, fabric.bending, fabric.damping), rel=1e-6
    )
    labels = []
    draw_all(blank, labels)
    assert preset in labels
    s.stretch *= 2
    labels = []
    draw_all(blank, labels)
    assert "Custom" in labels and preset not in labels


def test_an_unknown_preset_is_named(blank):
    grid_cloth()
    with pytest.raises(RuntimeError, match="no fabric preset 'Tweed'"):
        bpy.ops.diffcloth.fabric_preset(preset="Tweed")


def older_file(path, tension):
    """A file as an older DiffCloth saved it: springs, and no record of the settings' layout."""
    cloth = grid_cloth()
    cloth.diffcloth.tension = tension
    s = cloth.diffcloth
    for key in ("model", "solver", "settings_version", "bending", "damping"):
        s.property_unset(key)
    stamps = [h for h in bpy.app.handlers.save_pre if h.__name__ == "_stamp"]  # an older version had none
    for h in stamps:
        bpy.app.handlers.save_pre.remove(h)
    try:
        bpy.ops.wm.save_as_mainfile(filepath=path)
    finally:
        bpy.app.handlers.save_pre.extend(stamps)


def test_a_file_of_an_older_version_keeps_its_springs(blank, tmp_path):
    path = str(tmp_path / "old.blend")
    older_file(path, 7.0)
    bpy.ops.wm.read_factory_settings(use_empty=True)
    bpy.ops.wm.open_mainfile(filepath=path)
    s = bpy.data.objects["Cloth"].diffcloth
    assert (s.model, s.solver, s.tension, s.damping) == ("SPRINGS", "NEWTON", 7.0, 0.0)
    assert s.bending == pytest.approx(1e-4)
    assert s.self_friction == 0.0  # its Self Collisions, if turned on, had no friction
    # and once saved by this version it is not converted again
    s.model, s.solver = "FABRIC", "LINEARIZED"
    bpy.ops.wm.save_mainfile()
    bpy.ops.wm.open_mainfile(filepath=path)
    s = bpy.data.objects["Cloth"].diffcloth
    assert (s.model, s.solver) == ("FABRIC", "LINEARIZED")


def test_optimized_stretch_is_applied_to_the_fabric(blank):
    """Optimize scales the fabric's springs together; Apply Optimized Stiffness makes that its
    Stretch Stiffness."""
    scene = blank.scene
    scene.frame_start, scene.frame_end = 1, 8
    cloth = grid_cloth(fabric=True)
    cloth.diffcloth.solver = "NEWTON"  # the target exactly reachable by Optimize's converged steps
    cloth.diffcloth.stretch = 30.0
    target_from_simulation(blank, 8)
    cloth.diffcloth.stretch = 12.0
    scene.diffcloth.max_iterations = 20
    assert bpy.ops.diffcloth.optimize() == {"FINISHED"}
    assert cloth.diffcloth.stretch == 12.0  # kept apart until applied
    assert cloth["diffcloth_result"]["solver"] == "newton"
    assert bpy.ops.diffcloth.apply_result() == {"FINISHED"}
    assert cloth.diffcloth.stretch == pytest.approx(30.0, rel=1e-3)


def test_compression_and_shear_are_the_stretch_stiffness_until_ticked(blank):
    """As in Blender's presets (and files from before these settings), Compression and Shear are the
    Stretch Stiffness unless ticked; the panel shows them in Blender's order."""
    cloth = grid_cloth(fabric=True)
    s = cloth.diffcloth
    assert not s.use_compression and not s.use_shear
    shown = draw_all(blank)
    order = [p for p in shown if p in ("stretch", "compression", "shear", "bending")]
    assert order == ["stretch", "compression", "shear", "bending"]
    s.stretch, s.compression = 120.0, 30.0  # unticked: not used
    sc = convert().gather(blank, need_targets=False).scene
    assert sc.cloth.own_compression is None  # one stiffness both ways
    assert sc.cloth.n_shear == 25  # a diagonal per quad of the 6×6 grid
    s.use_compression, s.use_shear, s.shear = True, True, 60.0
    cloth2 = convert().gather(blank, need_targets=False).scene.cloth
    assert np.allclose(cloth2.own_compression / cloth2.k_tension, 30.0 / 120.0)
    assert np.allclose(cloth2.k_shear / sc.cloth.k_shear, 60.0 / 120.0)
    labels = []
    draw_all(blank, labels)
    assert "Custom" in labels
    assert bpy.ops.diffcloth.fabric_preset(preset="Denim") == {"FINISHED"}
    assert not s.use_compression and not s.use_shear and s.compression == pytest.approx(220.0)
    labels = []
    draw_all(blank, labels)
    assert "Denim" in labels


def test_soft_compression_and_shear_change_what_blender_shows(blank):
    """A cloth hanging from two corners: a soft Shear lets its quads skew into a deeper sag, a soft
    Compression lets the slack edges shorten in plane; both bakes differ from the preset's."""
    scene = blank.scene
    scene.frame_start, scene.frame_end = 1, 12
    cloth = grid_cloth(n=8, fabric=True)
    cloth.diffcloth.solver = "NEWTON"  # the physics itself (docs/solver.md: linearized steps of 0.1 s)
    cloth.diffcloth.compression = cloth.diffcloth.shear = 2.0
    shapes = []
    for use_compression, use_shear in ((False, False), (False, True), (True, False)):
        cloth.diffcloth.use_compression, cloth.diffcloth.use_shear = use_compression, use_shear
        assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
        scene.frame_set(12)
        shapes.append(evaluated(cloth))
        scene.frame_set(1)
    preset, soft_shear, soft_compression = shapes
    assert soft_shear[:, 2].min() < preset[:, 2].min() - 0.01
    assert np.abs(soft_compression - preset).max() > 1e-3


def test_optimized_stretch_scales_compression_and_shear_of_their_own(blank):
    scene = blank.scene
    scene.frame_start, scene.frame_end = 1, 8
    cloth = grid_cloth(fabric=True)
    s = cloth.diffcloth
    s.solver = "NEWTON"
    s.use_compression = s.use_shear = True
    s.stretch, s.compression, s.shear = 30.0, 15.0, 45.0
    target_from_simulation(blank, 8)
    s.stretch, s.compression, s.shear = 12.0, 6.0, 18.0
    scene.diffcloth.max_iterations = 20
    assert bpy.ops.diffcloth.optimize() == {"FINISHED"}
    stored = cloth["diffcloth_result"]
    assert "k_compression" in stored and "k_shear" in stored
    assert bpy.ops.diffcloth.apply_result() == {"FINISHED"}
    assert (s.stretch, s.compression, s.shear) == pytest.approx((30.0, 15.0, 45.0), rel=2e-3)
