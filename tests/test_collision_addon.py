"""Blender's Collision physics as DiffCloth colliders, through the add-on in the real Blender."""

import math

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")

from test_addon import draw_all, evaluated, grid_cloth, target_from_simulation  # noqa: E402
from test_careless_input import refused  # noqa: E402


def convert():
    from diffcloth.diffcloth_addon import convert as c

    return c


def table(size=0.3, height=-0.2, friction=50.0, single_sided=True, thickness=0.005, depth=0.02):
    """A box (a table top, or a whole block of table with depth) with Collision physics."""
    bpy.ops.mesh.primitive_cube_add(size=1.0, location=(0.0, 0.0, height - depth / 2))
    top = bpy.context.active_object
    top.name = "Table"
    top.scale = (size, size, depth)
    top.modifiers.new("Collision", "COLLISION")
    top.collision.cloth_friction, top.collision.use_culling = friction, single_sided
    top.collision.thickness_outer = thickness
    return top


def test_collision_physics_makes_a_mesh_collider_with_blenders_settings(blank):
    from diffcloth import core

    grid_cloth(fabric=True, pins=False)
    top = table(friction=30.0, single_sided=False, thickness=0.01)
    sc = convert().gather(blank, need_targets=False).scene
    [mesh] = sc.colliders
    assert isinstance(mesh, core.MeshCollider) and len(mesh.tris) == 12
    assert mesh.friction == pytest.approx(0.3) and mesh.thickness == pytest.approx(0.01) and not mesh.one_sided
    corners = np.array([top.matrix_world @ v.co for v in top.data.vertices])
    assert np.allclose(mesh.vertices, corners, atol=1e-6)
    top.diffcloth.role = "SPHERE"  # a role wins: one collider, the analytic one
    top.location.z -= 1.0
    sc = convert().gather(blank, need_targets=False).scene
    assert len(sc.colliders) == 1 and isinstance(sc.colliders[0], core.Sphere)


def test_a_cloth_falls_onto_a_table_and_hangs_over_its_edges(blank):
    scene = blank.scene
    scene.frame_start, scene.frame_end = 1, 16
    cloth = grid_cloth(fabric=True, pins=False, n=10, size=0.5)
    table(size=0.3, depth=0.4)
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    scene.frame_set(16)
    x = evaluated(cloth)
    on_top = (np.abs(x[:, 0]) < 0.14) & (np.abs(x[:, 1]) < 0.14)
    assert on_top.any() and (x[on_top, 2] > -0.2).all()  # held by the top, nothing inside the table
    assert x[~on_top, 2].min() < -0.25  # the rest hangs over the edges


def test_a_cloth_falls_onto_another_cloths_bake(blank):
    """A cape baked after a skirt: with Collision physics on the skirt, the cape collides with the
    skirt as baked (one way, as Blender's cloth objects collide); without, it falls through.
    Cloths Together off: each runs alone."""
    scene = blank.scene
    scene.diffcloth.together = False
    scene.frame_start, scene.frame_end, scene.render.fps = 1, 13, 24  # an artist's frame rate
    skirt = grid_cloth("Skirt", n=9, size=0.5, fabric=True, pins=False)  # held at its four corners
    skirt.vertex_groups.new(name="corners").add([0, 8, 72, 80], 1.0, "REPLACE")
    skirt.diffcloth.pin_group = "corners"
    blank.view_layer.objects.active = skirt
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    skirt.modifiers.new("Collision", "COLLISION")
    skirt.collision.thickness_outer = 0.005
    cape = grid_cloth("Cape", n=5, size=0.2, fabric=True, pins=False, location=(0.0, 0.0, 0.03))
    blank.view_layer.objects.active = cape
    setup = convert().gather(blank, need_targets=False)
    assert setup.collider_names == ["Skirt"]

    def gap():  # the cape's height above the skirt's vertex nearest in plan, at its worst frame
        assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
        worst = np.inf
        for f in range(1, 14):
            scene.frame_set(f)
            low, up = evaluated(skirt), evaluated(cape)
            below = np.argmin(np.linalg.norm(up[:, None, :2] - low[None, :, :2], axis=2), axis=1)
            worst = min(worst, (up[:, 2] - low[below, 2]).min())
        scene.frame_set(1)
        return worst

    assert gap() > -0.01  # on the skirt (its nearest vertex, not its surface: within a centimetre)
    skirt.modifiers.remove(skirt.modifiers["Collision"])
    assert gap() < -0.05  # through it


def test_an_animated_collider_is_read_at_every_frame(blank):
    scene = blank.scene
    scene.frame_start, scene.frame_end = 1, 5
    grid_cloth(fabric=True, pins=False)
    top = table()
    top.keyframe_insert("location", frame=1)
    top.location.x += 0.4
    top.keyframe_insert("location", frame=5)
    mesh = convert().gather(blank, need_targets=False).scene.colliders[0]
    assert mesh.vertices.shape == (5, 8, 3)
    assert np.allclose(mesh.vertices[-1] - mesh.vertices[0], [0.4, 0.0, 0.0], atol=1e-6)


def test_a_deforming_collider_is_read_with_its_shape_keys(blank):
    scene = blank.scene
    scene.frame_start, scene.frame_end = 1, 3
    grid_cloth(fabric=True, pins=False)
    top = table()
    top.shape_key_add(name="Basis")
    lift = top.shape_key_add(name="Lift")
    for p in lift.data:
        p.co.z += 1.0  # ×0.02 scale: 2 cm
    lift.value = 0.0
    lift.keyframe_insert("value", frame=1)
    lift.value = 1.0
    lift.keyframe_insert("value", frame=3)
    mesh = convert().gather(blank, need_targets=False).scene.colliders[0]
    assert mesh.vertices.shape == (3, 8, 3)
    assert np.allclose(mesh.vertices[2, :, 2] - mesh.vertices[0, :, 2], 0.02, atol=1e-6)


def test_bad_collision_objects_are_named(blank):
    scene = blank.scene
    scene.frame_start, scene.frame_end = 1, 4
    grid_cloth(fabric=True, pins=False)
    top = table()
    remesh = top.modifiers.new("Subdivide later", "SUBSURF")
    remesh.levels = 0
    remesh.keyframe_insert("levels", frame=1)
    remesh.levels = 1
    remesh.keyframe_insert("levels", frame=3)
    top.modifiers.move(1, 0)  # before the Collision modifier
    refused(blank, bpy.ops.diffcloth.simulate, "collider 'Table': its vertex count changes from 8 to")
    top.modifiers.remove(top.modifiers["Subdivide later"])
    bpy.ops.object.select_all(action="DESELECT")
    flat = bpy.data.meshes.new("Edges")
    flat.from_pydata([(0, 0, -1), (1, 0, -1)], [(0, 1)], [])
    wire = bpy.data.objects.new("Wire", flat)
    blank.collection.objects.link(wire)
    wire.modifiers.new("Collision", "COLLISION")
    refused(blank, bpy.ops.diffcloth.simulate, "collider 'Wire' has no faces")


def test_a_cloth_inside_a_single_sided_collider_is_named(blank):
    grid_cloth(fabric=True, pins=False)
    table(size=1.0, height=0.005)  # the cloth lies in the box's top
    refused(blank, bpy.ops.diffcloth.simulate, "cloth 'Cloth' starts inside collider 'Table'")


def collision_slope(scene, friction):
    """A large plane tilted 30° about x with Collision physics (Friction as given, Thickness Outer
    5 mm), in a scene of two seconds at 24 fps."""
    scene.render.fps = 24
    scene.frame_start, scene.frame_end = 1, 49
    bpy.ops.mesh.primitive_plane_add(size=40.0, rotation=(math.radians(30), 0, 0))
    slope = bpy.context.active_object
    slope.modifiers.new("Collision", "COLLISION")
    slope.collision.cloth_friction, slope.collision.thickness_outer = friction, 0.005
    return slope


@pytest.mark.parametrize("friction,slides", [(70.0, False), (30.0, True)])
def test_friction_on_a_slope_as_blenders_setting_reads(blank, friction, slides):
    """A patch on a 30° Collision-physics slope: Blender's Friction 70 (μ 0.7) holds it, 30 slides
    at g·(sin 30° − 0.3·cos 30°)."""
    scene = blank.scene
    slope = collision_slope(scene, friction)
    cloth = grid_cloth(fabric=True, pins=False, n=6, size=0.1)
    cloth.rotation_euler = (math.radians(30), 0, 0)
    cloth.location = np.array(slope.matrix_world.to_3x3().col[2]) * 0.0055
    cloth.diffcloth.damping = 0.0
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    downhill = np.array([0, -math.cos(math.radians(30)), -math.sin(math.radians(30))])
    centre = []
    for f in range(1, 50):
        scene.frame_set(f)
        centre.append(evaluated(cloth).mean(axis=0) @ downhill)
    t = np.arange(49) / 24
    if slides:
        acceleration = np.polyfit(t[12:], np.gradient(centre, t)[12:], 1)[0]
        assert acceleration == pytest.approx(9.81 * (0.5 - 0.3 * math.cos(math.radians(30))), rel=0.05)
    else:
        assert abs(centre[-1] - centre[12]) < 0.01


def test_optimize_finds_how_much_friction_holds_the_cloth(blank):
    """Friction under What May Change: a patch keyed where it slid on a slope of Friction 40 starts
    on the slope at Friction 20; Optimize finds the factor 2, the sidebar shows it, Simulate &
    Bake reproduces it, and Apply makes it the slope's Friction."""
    scene = blank.scene
    slope = collision_slope(scene, 40.0)
    scene.frame_end = 13
    cloth = grid_cloth(fabric=True, pins=False, n=5, size=0.1)
    cloth.rotation_euler = (math.radians(30), 0, 0)
    cloth.location = np.array(slope.matrix_world.to_3x3().col[2]) * 0.0055
    blank.view_layer.objects.active = cloth
    target = target_from_simulation(blank, 13)
    slope.collision.cloth_friction = 20.0
    settings = scene.diffcloth
    settings.opt_tension, settings.opt_friction, settings.max_iterations = False, True, 20
    assert bpy.ops.diffcloth.optimize() == {"FINISHED"}
    stored = cloth["diffcloth_result"]
    assert stored["friction_scale"] == pytest.approx(2.0, rel=1e-3)
    assert stored["keyframes"]["13"][2] < 1e-4 < stored["keyframes"]["13"][0]
    labels = []
    draw_all(blank, labels)
    assert "Colliders' friction: 2×" in labels, labels
    scene.frame_set(13)
    optimized = evaluated(cloth)
    assert np.abs(optimized - evaluated(target)).max() < 1e-3
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    scene.frame_set(13)
    assert np.abs(evaluated(cloth) - optimized).max() < 1e-3
    assert slope.collision.cloth_friction == 20.0  # kept apart until applied
    assert bpy.ops.diffcloth.apply_result() == {"FINISHED"}
    assert slope.collision.cloth_friction == pytest.approx(40.0, rel=1e-3)
    assert "friction_scale" not in cloth["diffcloth_result"]


def test_friction_of_cloths_run_together_is_applied_once(blank):
    """Two patches on one slope run together, keyed at Friction 40 and started at 20: both store the
    factor 2, and Apply on either makes the slope's Friction 40 (not 80: the slope is shared)."""
    scene = blank.scene
    slope = collision_slope(scene, 40.0)
    scene.frame_end = 13
    normal = np.array(slope.matrix_world.to_3x3().col[2])
    patches = []
    for name, x in (("Left", -0.2), ("Right", 0.2)):
        patch = grid_cloth(name, fabric=True, pins=False, n=5, size=0.1, location=(x, 0.0, 0.0))
        patch.rotation_euler = (math.radians(30), 0, 0)
        patch.location = np.array([x, 0.0, 0.0]) + normal * 0.0055
        patches.append(patch)
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    scene.frame_set(13)
    assert bpy.ops.diffcloth.new_target(cloth="Left") == {"FINISHED"}
    assert bpy.ops.diffcloth.new_target(cloth="Right") == {"FINISHED"}
    scene.frame_set(1)
    slope.collision.cloth_friction = 20.0
    settings = scene.diffcloth
    settings.opt_tension, settings.opt_friction, settings.max_iterations = False, True, 20
    assert bpy.ops.diffcloth.optimize() == {"FINISHED"}
    for patch in patches:
        assert patch["diffcloth_result"]["friction_scale"] == pytest.approx(2.0, rel=1e-3)
    assert bpy.ops.diffcloth.apply_result(cloth="Right") == {"FINISHED"}
    assert slope.collision.cloth_friction == pytest.approx(40.0, rel=1e-3)
    assert all("friction_scale" not in patch["diffcloth_result"] for patch in patches)


def test_friction_with_no_collider_that_has_some_is_named(blank):
    """Friction ticked where no collider has friction: named, nothing run."""
    scene = blank.scene
    scene.frame_start, scene.frame_end = 1, 6
    collision_slope(scene, 0.0)
    grid_cloth(fabric=True, pins=False, n=4, size=0.1, location=(0.0, 0.0, 0.5))
    target_from_simulation(blank, 6)
    scene.diffcloth.opt_friction = True
    refused(blank, bpy.ops.diffcloth.optimize, "Friction: no collider has Friction above 0 to scale")


def test_a_friction_too_rough_for_gradients_is_found_by_a_scan(blank):
    """An 8×8 sheet hung 20 cm over a table's edge slides off it, keyed at Friction 20 and started
    at 13, where it slides faster: how far it has slid is a staircase in the friction (which
    vertices hold at the edge, and when), whose local slopes point either way, and Gauss–Newton
    stalls; the scan of the factor finds 20 / 13 (not a point of its grid)."""
    scene = blank.scene
    scene.render.fps, scene.frame_start, scene.frame_end = 24, 1, 25
    desk = table(size=1.0, height=-0.3, friction=20.0, thickness=0.01, depth=1.0)
    desk.location.y, desk.scale.x = -0.35, 1.2  # its +y edge at y = 0.15
    cloth = grid_cloth(fabric=True, pins=False, n=8, size=0.5, location=(0.0, 0.10, -0.288))
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    for frame in (13, 25):
        scene.frame_set(frame)
        assert bpy.ops.diffcloth.new_target() == {"FINISHED"}
    bpy.ops.diffcloth.clear_bake()
    scene.frame_set(1)
    desk.collision.cloth_friction = 13.0
    settings = scene.diffcloth
    settings.opt_tension, settings.opt_friction, settings.max_iterations = False, True, 20
    blank.view_layer.objects.active = cloth
    assert bpy.ops.diffcloth.optimize() == {"FINISHED"}
    stored = cloth["diffcloth_result"]
    assert stored["friction_scale"] == pytest.approx(20.0 / 13.0, rel=2e-2)
    assert stored["reason"].startswith("scanned")
    assert all(after < 1e-3 < before for before, _, after, _ in stored["keyframes"].values())
