"""Careless input through the operators in the real Blender: settings at their bounds, broken meshes
and targets, colliders set up loosely, carried and oddly placed cloths, re-runs after every kind of
edit, runs cancelled, failing or outlived by their cloth. Every case ends as a named refusal with the
scene exactly as before (`refused`), or as a bake that matches core's simulation of the scene as
gathered (`matches_plain`)."""

import math
import os
import re
import signal
import sys
import time

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")

from test_addon import errors, evaluated, grid_cloth, ops_report, reading, results  # noqa: E402


def snapshot(context):
    """What a refusal must leave as it was: objects, vertices, shape keys with their animation, ID
    properties, DiffCloth settings, the current frame."""
    state = {"frame": context.scene.frame_current, "objects": sorted(o.name for o in bpy.data.objects)}
    for obj in bpy.data.objects:
        # the settings are read through RNA below (on bpy 4.2 reading a pointer setting adds it to the raw storage)
        entry = {
            "props": {k: _plain(obj[k]) for k in obj.keys() if k != "diffcloth"},
            "settings": {
                p: _plain(getattr(obj.diffcloth, p)) for p in obj.diffcloth.bl_rna.properties.keys() if p != "rna_type"
            },
            "matrix": np.array(obj.matrix_world).tobytes(),
        }
        if obj.type == "MESH":
            mesh = obj.data
            co = np.empty(len(mesh.vertices) * 3)
            mesh.vertices.foreach_get("co", co)
            entry["co"] = co.tobytes()
            keys = mesh.shape_keys
            if keys is not None:
                entry["keys"] = []
                for b in keys.key_blocks:
                    kco = np.empty(len(b.data) * 3)
                    b.data.foreach_get("co", kco)
                    entry["keys"].append((b.name, b.value, b.mute, kco.tobytes()))
                anim = keys.animation_data
                entry["key_anim"] = (
                    None
                    if anim is None or anim.action is None
                    else sorted((fc.data_path, tuple(tuple(k.co) for k in fc.keyframe_points)) for fc in _fcurves(anim))
                )
        state[obj.name] = entry
    return state


def _fcurves(anim):
    return reading().action_fcurves(anim)


def _plain(value):
    if hasattr(value, "to_dict"):
        return {k: _plain(v) for k, v in value.to_dict().items()}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if hasattr(value, "to_list"):
        return value.to_list()
    if isinstance(value, bpy.types.ID):
        return value.name
    if isinstance(value, (list, tuple)) or (hasattr(value, "__len__") and not isinstance(value, str)):
        return [_plain(v) for v in value]
    return value


def refused(context, op, message):
    """op is refused with message, and the scene is exactly as before."""
    context.view_layer.update()  # the matrices of objects just moved
    before = snapshot(context)
    out = ops_report(op)
    assert out != {"FINISHED"}, f"expected a refusal saying {message!r}"
    assert message in str(out), str(out)
    assert snapshot(context) == before
    assert not context.window_manager.diffcloth.running


def motion(context, cloth):
    """The motion the cloth's next run starts from (flattened): the stored one, or its bake."""
    setup = conv().gather(context, cloth.name, need_targets=False)
    return results().stored_motion(setup, results().apply_stored_result(setup)).ravel()


def baked(context, cloth, frames):
    out = []
    for f in frames:
        context.scene.frame_set(f)
        out.append(evaluated(cloth))
    return np.array(out)


def plain_simulation(context):
    """The cloth's motion simulated by core from the scene as gathered (world positions per frame)."""
    from diffcloth import core
    from diffcloth.diffcloth_addon import convert

    return core.simulate(convert.gather(context, need_targets=False).scene).x


def grid_mesh(n, size=0.4):
    bpy.ops.mesh.primitive_grid_add(x_subdivisions=n - 1, y_subdivisions=n - 1, size=size)
    tmp = bpy.context.active_object
    mesh = tmp.data
    bpy.data.objects.remove(tmp)
    return mesh


# (before, after) of a re-run: frames (end), substeps, vertices (grid side)
EDITS = {
    "more substeps": (dict(substeps=1), dict(substeps=2)),
    "fewer substeps": (dict(substeps=2), dict(substeps=1)),
    "more frames": (dict(end=6), dict(end=11)),
    "fewer frames": (dict(end=11), dict(end=6)),
    "more vertices": (dict(side=6), dict(side=8)),
    "fewer vertices": (dict(side=8), dict(side=5)),
}


def apply_edit(context, cloth, edit):
    if "substeps" in edit:
        cloth.diffcloth.substeps = edit["substeps"]
    if "end" in edit:
        context.scene.frame_end = edit["end"]
    if "side" in edit:
        old = cloth.data
        cloth.data = grid_mesh(edit["side"])
        if old.users == 0:
            bpy.data.meshes.remove(old)


@pytest.mark.parametrize("edit", list(EDITS))
def test_rerun_after_an_edit_stores_the_new_motion_whole(blank, edit):
    """Re-simulating after raising Substeps, extending the range or adding vertices crashed
    Blender (an ID-property array written in place over a shorter one); shrinking left a stale
    tail. The stored motion must be exactly the new run's, and the bake what was simulated."""
    first, second = EDITS[edit]
    scene = blank.scene
    scene.frame_start, scene.frame_end = 1, 6
    cloth = grid_cloth(pins=False)
    apply_edit(blank, cloth, first)
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    apply_edit(blank, cloth, second)
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    n, steps = len(cloth.data.vertices), scene.frame_end - scene.frame_start
    stored = motion(blank, cloth).reshape(-1, n, 3)
    assert len(stored) == steps * cloth.diffcloth.substeps + 1
    frames = range(scene.frame_start, scene.frame_end + 1)
    shown = baked(blank, cloth, frames)
    assert np.abs(stored[:: cloth.diffcloth.substeps] - shown).max() < 1e-5
    # and it is the simulation of the scene as it now is
    scene.frame_set(1)
    assert np.abs(plain_simulation(blank) - shown).max() < 1e-5


def test_reoptimize_after_extending_the_range_stores_the_new_design_whole(blank):
    """The optimized design (per-frame control forces) follows the new frame range."""
    scene = blank.scene
    scene.frame_start, scene.frame_end = 1, 6
    cloth = grid_cloth()
    target = bpy.data.objects.new("Target", cloth.data.copy())
    blank.collection.objects.link(target)
    target.diffcloth.role = "TARGET"
    target.location = (0.0, 0.0, -0.02)
    target.keyframe_insert("location", frame=6)
    settings = scene.diffcloth
    settings.opt_tension, settings.opt_forces, settings.force_basis, settings.max_iterations = False, True, "FRAMES", 2
    assert bpy.ops.diffcloth.optimize() == {"FINISHED"}
    n = len(cloth.data.vertices)
    assert len(cloth["diffcloth_result"]["forces"]) == 5 * n * 3
    scene.frame_end = 11
    assert bpy.ops.diffcloth.optimize() == {"FINISHED"}
    assert len(cloth["diffcloth_result"]["forces"]) == 10 * n * 3
    assert len(motion(blank, cloth)) == 11 * n * 3
    scene.frame_end = 4
    target.animation_data_clear()
    target.keyframe_insert("location", frame=4)
    assert bpy.ops.diffcloth.optimize() == {"FINISHED"}
    assert len(cloth["diffcloth_result"]["forces"]) == 3 * n * 3
    assert len(motion(blank, cloth)) == 4 * n * 3


def test_every_vertex_pinned(blank):
    cloth = grid_cloth(pins=False)
    cloth.vertex_groups.new(name="all").add(list(range(len(cloth.data.vertices))), 1.0, "REPLACE")
    cloth.diffcloth.pin_group = "all"
    refused(
        blank, bpy.ops.diffcloth.simulate, "every vertex of 'Cloth' is pinned (pin group 'all'): nothing to simulate"
    )


def test_empty_pin_group(blank):
    cloth = grid_cloth(pins=False)
    cloth.vertex_groups.new(name="pins")
    cloth.diffcloth.pin_group = "pins"
    refused(blank, bpy.ops.diffcloth.simulate, "pin group 'pins' of cloth 'Cloth' has no vertex with a weight: assign")


def test_nan_vertex_is_named(blank):
    cloth = grid_cloth()
    cloth.data.vertices[3].co.x = math.nan
    refused(blank, bpy.ops.diffcloth.simulate, "cloth 'Cloth': vertex 3 has a NaN or infinite coordinate")


def test_non_manifold_edge_names_plain_vertex_indices(blank):
    mesh = bpy.data.meshes.new("Fan")
    mesh.from_pydata([(0, 0, 0), (1, 0, 0), (0, 1, 0), (0, -1, 0), (0, 0, 1)], [], [(0, 1, 2), (1, 0, 3), (0, 1, 4)])
    obj = bpy.data.objects.new("Fan", mesh)
    blank.collection.objects.link(obj)
    obj.diffcloth.role = "CLOTH"
    refused(blank, bpy.ops.diffcloth.simulate, "cloth 'Fan': edge (0, 1) is shared by 3 triangles (non-manifold mesh)")


def test_scale_animated_to_zero_is_refused_and_the_previous_bake_stays(blank):
    scene = blank.scene
    scene.frame_start, scene.frame_end = 1, 6
    cloth = grid_cloth()
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    cloth.keyframe_insert("scale", frame=1)
    cloth.scale = (0.0, 0.0, 0.0)
    cloth.keyframe_insert("scale", frame=6)
    scene.frame_set(1)
    refused(blank, bpy.ops.diffcloth.simulate, "cloth 'Cloth' has a zero scale at frame 6 (scale (0, 0, 0))")


def test_a_bake_that_cannot_be_written_leaves_the_previous_bake(blank):
    """All or nothing at the bake itself: a singular matrix at one frame writes no key."""
    from diffcloth.diffcloth_addon import bake

    scene = blank.scene
    scene.frame_start, scene.frame_end = 1, 6
    cloth = grid_cloth()
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    before = snapshot(blank)
    matrices = np.repeat(np.eye(4)[None], 6, axis=0)
    matrices[3, :3, :3] = 0.0
    with pytest.raises(np.linalg.LinAlgError):
        bake.bake(cloth, np.zeros((6, len(cloth.data.vertices), 3)), 1, matrices)
    assert snapshot(blank) == before


def test_sphere_with_animated_scale_keeps_the_cloth_out_at_every_frame(blank):
    scene = blank.scene
    scene.frame_start, scene.frame_end = 1, 11
    cloth = grid_cloth(pins=False)
    bpy.ops.mesh.primitive_uv_sphere_add(radius=0.25, location=(0, 0, -0.3))
    sphere = bpy.context.active_object
    sphere.diffcloth.role = "SPHERE"
    sphere.keyframe_insert("scale", frame=1)
    sphere.scale = (2.0, 2.0, 2.0)
    sphere.keyframe_insert("scale", frame=11)
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    deepest = []
    for f in range(1, 12):
        scene.frame_set(f)
        radius = 0.25 * sphere.matrix_world.to_scale()[0]
        deepest.append(
            radius - np.linalg.norm(evaluated(cloth) - np.array(sphere.matrix_world.translation), axis=1).min()
        )
    assert max(deepest) < 2e-3, deepest
    assert deepest[-1] > -2e-3  # the cloth does lie on the grown sphere


def test_blender_cloth_physics_on_the_cloth_is_refused(blank):
    cloth = grid_cloth()
    cloth.modifiers.new("Cloth", "CLOTH")
    refused(blank, bpy.ops.diffcloth.simulate, "cloth 'Cloth' also has Blender's own Cloth physics (modifier 'Cloth')")


def test_shape_key_animated_after_the_start_is_refused(blank):
    scene = blank.scene
    scene.frame_start, scene.frame_end = 1, 12
    cloth = grid_cloth()
    cloth.shape_key_add(name="Basis")
    sag = cloth.shape_key_add(name="Sag")
    for p in sag.data:
        p.co.z -= 0.1
    for frame, value in ((1, 0.0), (8, 0.0), (9, 1.0)):
        sag.value = value
        sag.keyframe_insert("value", frame=frame)
    sag.value = 0.0
    scene.frame_set(1)
    refused(blank, bpy.ops.diffcloth.simulate, "shape key 'Sag' change(s) its shape at frame 9")


def animate_location(obj):
    obj.keyframe_insert("location", frame=1)
    obj.location = (0.3, 0.0, 0.2)
    obj.keyframe_insert("location", frame=6)


@pytest.mark.parametrize("how", ["disabled in viewports", "excluded collection", "disabled collection"])
def test_a_cloth_blender_does_not_evaluate_is_refused(blank, how):
    scene = blank.scene
    scene.frame_start, scene.frame_end = 1, 6
    cloth = grid_cloth()
    animate_location(cloth)
    if how == "disabled in viewports":
        cloth.hide_viewport = True
    else:
        col = bpy.data.collections.new("Hidden")
        scene.collection.children.link(col)
        for c in list(cloth.users_collection):
            c.objects.unlink(cloth)
        col.objects.link(cloth)
        if how == "excluded collection":
            blank.view_layer.layer_collection.children["Hidden"].exclude = True
        else:
            col.hide_viewport = True
    scene.frame_set(1)
    refused(blank, bpy.ops.diffcloth.simulate, "cloth 'Cloth' is disabled in viewports or in an excluded collection")


def test_a_cloth_hidden_with_h_simulates_as_when_visible(blank):
    scene = blank.scene
    scene.frame_start, scene.frame_end = 1, 6
    cloth = grid_cloth()
    animate_location(cloth)
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    visible = baked(blank, cloth, range(1, 7))
    cloth.hide_set(True)
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    cloth.hide_set(False)
    assert np.abs(baked(blank, cloth, range(1, 7)) - visible).max() < 1e-6
    pins = [v.index for v in cloth.data.vertices if v.groups]
    assert np.abs(visible[-1][pins] - visible[0][pins] - [0.3, 0.0, 0.2]).max() < 1e-5  # the pins were carried


def test_a_collider_blender_does_not_evaluate_is_ignored_with_a_warning(blank):
    from diffcloth.diffcloth_addon import operators

    scene = blank.scene
    scene.frame_start, scene.frame_end = 1, 6
    grid_cloth()
    bpy.ops.mesh.primitive_uv_sphere_add(radius=0.1, location=(0, 0, -0.2))
    sphere = bpy.context.active_object
    sphere.diffcloth.role = "SPHERE"
    sphere.hide_viewport = True
    warning = (
        "collider 'Sphere' is disabled in viewports or in an excluded collection: ignored, as by Blender's own physics"
    )
    setup, _ = operators.prepare(blank, "simulate")
    assert setup.scene.colliders == [] and setup.warnings == [warning]
    # Blender evaluates it for an enabled object parented to it; its physics still leaves it out
    child = bpy.data.objects.new("Child", None)
    blank.collection.objects.link(child)
    child.parent = sphere
    setup, _ = operators.prepare(blank, "simulate")
    assert sphere.evaluated_get(blank.evaluated_depsgraph_get()).is_evaluated
    assert setup.scene.colliders == [] and setup.warnings == [warning]


@pytest.mark.parametrize(
    "scale,message",
    [
        ((0.0, 0.0, 0.0), "sphere collider 'Sphere' has no size at frame 1 (scale (0, 0, 0))"),
    ],
)
def test_zero_size_sphere_is_named(blank, scale, message):
    grid_cloth()
    bpy.ops.mesh.primitive_uv_sphere_add(radius=0.1, location=(0, 0, -0.5))
    bpy.context.active_object.diffcloth.role = "SPHERE"
    bpy.context.active_object.scale = scale
    refused(blank, bpy.ops.diffcloth.simulate, message)


def add_plane(location=(0, 0, -0.3), rotation=(0, 0, 0), scale=(1, 1, 1)):
    bpy.ops.mesh.primitive_plane_add(size=2.0, location=location, rotation=rotation)
    plane = bpy.context.active_object
    plane.name = "Floor"
    plane.scale = scale
    plane.diffcloth.role = "PLANE"
    return plane


def test_flattened_plane_is_named(blank):
    grid_cloth()
    add_plane(scale=(0.0, 1.0, 1.0))
    refused(blank, bpy.ops.diffcloth.simulate, "plane collider 'Floor' is flattened to a line or a point at frame 1")


def test_plane_with_zero_z_scale_still_collides(blank):
    from diffcloth.diffcloth_addon import convert

    grid_cloth()
    add_plane(scale=(3.0, 3.0, 0.0))
    plane = convert.gather(blank, need_targets=False).scene.colliders[0]
    assert np.allclose(plane.normal, [0, 0, 1])


def test_upside_down_plane_is_refused(blank):
    grid_cloth()
    add_plane(rotation=(math.pi, 0, 0))
    refused(
        blank,
        bpy.ops.diffcloth.simulate,
        "cloth 'Cloth' starts behind plane collider 'Floor' (36 of 36 vertices "
        "at frame 1): a plane pushes along its normal (its local Z axis)",
    )


def test_cloth_starting_inside_a_sphere_is_refused(blank):
    grid_cloth()
    bpy.ops.mesh.primitive_uv_sphere_add(radius=0.1, location=(0.0, 0.0, 0.05))
    bpy.context.active_object.diffcloth.role = "SPHERE"
    refused(
        blank,
        bpy.ops.diffcloth.simulate,
        "cloth 'Cloth' starts inside sphere collider 'Sphere' (4 of 36 vertices at frame 1): move them apart",
    )


@pytest.fixture
def keyed(blank):
    """A cloth and a target keyed at scene frame 13 (the range starts at 2)."""
    scene = blank.scene
    scene.frame_start, scene.frame_end = 2, 13
    cloth = grid_cloth()
    target = bpy.data.objects.new("Target", cloth.data.copy())
    blank.collection.objects.link(target)
    target.diffcloth.role = "TARGET"
    target.location = (0.0, 0.0, -0.05)
    target.keyframe_insert("location", frame=13)
    scene.frame_set(2)
    return cloth, target


def test_nan_in_a_target_names_it_and_the_scene_frame(keyed, blank):
    _, target = keyed
    target.data.vertices[2].co.y = math.nan
    refused(blank, bpy.ops.diffcloth.optimize, "target 'Target' has a NaN or infinite vertex at frame 13")


def test_a_target_blender_does_not_evaluate_is_refused(keyed, blank):
    _, target = keyed
    target.hide_viewport = True
    refused(blank, bpy.ops.diffcloth.optimize, "target 'Target' is disabled in viewports or in an excluded collection")


def test_targets_that_count_for_nothing(keyed, blank):
    from diffcloth.diffcloth_addon import operators

    cloth, target = keyed
    target.diffcloth.weight = 0.0
    refused(
        blank,
        bpy.ops.diffcloth.optimize,
        "every target counts for nothing: 'Target' at frame 13 (Weight 0, or a Weight Group of zero weights)",
    )
    target.diffcloth.weight = 1.0
    target.vertex_groups.new(name="none")
    target.diffcloth.weight_group = "none"
    refused(blank, bpy.ops.diffcloth.optimize, "every target counts for nothing")
    other = bpy.data.objects.new("Other", cloth.data.copy())
    blank.collection.objects.link(other)
    other.diffcloth.role = "TARGET"
    other.keyframe_insert("location", frame=8)
    setup, _ = operators.prepare(blank, "optimize")
    assert (
        "target 'Target' at frame 13 counts for nothing (Weight 0, or a Weight Group of zero weights)" in setup.warnings
    )


# ---------------------------------------------------------------------------------------------
# helpers for the cases below


def ops():
    from diffcloth.diffcloth_addon import operators

    return operators


def conv():
    from diffcloth.diffcloth_addon import convert

    return convert


def run_inline(job, cancel_after=None):
    """An Inline run of job; cancel_after: cancel once that many iterations were reported (0: before the first)."""
    from diffcloth.diffcloth_addon import runner

    run = runner.Inline(job)
    if cancel_after == 0:
        run.cancel()
    elif cancel_after is not None:

        class Infos(list):
            def append(self, info):
                super().append(info)
                if len(self) >= cancel_after:
                    run.cancel()

        run.infos = Infos()
    run.start()
    return run


def bake_names(cloth):
    keys = cloth.data.shape_keys
    return [] if keys is None else [b.name for b in keys.key_blocks if b.name.startswith("DiffCloth_f")]


def matches_plain(context, cloth, atol=1e-5):
    """The bake is, at every frame of the range, core's simulation of the scene as gathered now (with
    the stored design where it fits, on the stored motion's branch where the cloth buckles, as
    Simulate & Bake does); returns the setup."""
    from diffcloth import core

    setup = conv().gather(context, cloth.name, need_targets=False)
    scene = results().apply_stored_result(setup)
    expected = core.simulate(scene, guess=results().stored_motion(setup, scene)).x
    frames = range(setup.start, setup.end + 1)
    assert bake_names(cloth) == [f"DiffCloth_f{f:04d}" for f in frames]
    frame = context.scene.frame_current
    shown = baked(context, cloth, frames)
    context.scene.frame_set(frame)
    assert shown.shape == expected.shape
    assert np.abs(shown - expected).max() < atol, np.abs(shown - expected).max()
    return setup


def short_range(context, start=1, end=6):
    context.scene.frame_start, context.scene.frame_end = start, end
    context.scene.frame_set(start)


def add_target(context, cloth, frame, name="Target", offset=(0.0, 0.0, -0.02)):
    target = bpy.data.objects.new(name, cloth.data.copy())
    context.collection.objects.link(target)
    target.matrix_world = cloth.matrix_world.copy()
    target.diffcloth.role = "TARGET"
    target.location = tuple(np.array(target.location) + offset)
    target.keyframe_insert("location", frame=frame)
    return target


def add_sphere(location=(0.0, 0.0, -0.3), radius=0.15, name="Sphere"):
    bpy.ops.mesh.primitive_uv_sphere_add(radius=radius, location=location, segments=12, ring_count=6)
    sphere = bpy.context.active_object
    sphere.name = name
    sphere.diffcloth.role = "SPHERE"
    return sphere


@pytest.fixture
def aimed(blank):
    """A pinned 5×5 cloth, frames 1-6, and a target keyed at frame 6 whose free vertices are 3 cm
    lower than the cloth's rest; Max Iterations 2."""
    short_range(blank)
    cloth = grid_cloth(n=5)
    target = add_target(blank, cloth, 6, offset=(0.0, 0.0, 0.0))
    for v in target.data.vertices:
        if not v.groups:  # not in the pin group
            v.co.z -= 0.03
    blank.scene.diffcloth.max_iterations = 2
    blank.scene.frame_set(1)
    blank.view_layer.objects.active = cloth
    return cloth, target


# ---------------------------------------------------------------------------------------------
# settings at their bounds

# (setting, value, outcome): None matches a plain simulation, else the refusal's message
CLOTH_BOUNDS = [
    ("mass", 1e-6, None),
    ("mass", 1e4, None),
    ("tension", 1e-6, None),
    ("tension", 1e4, None),
    (
        "tension",
        1e9,
        "cloth 'Cloth': Tension Stiffness 1e+09 N/m is too stiff for this cloth's 13 cm cells at 1/10 s steps: "
        "at most 5.7e+07 (Newton's rounding floor), or Mass at least 8.7 kg; lower it or raise Substeps",
    ),
    ("bending", 1e-9, None),
    ("bending", 0.1, None),
    ("bending", 100.0, None),
    ("damping", 0.0, None),
    ("damping", 10.0, None),
    ("damping", 1e5, None),
    ("substeps", 1, None),
    ("substeps", 64, None),
    ("contact_stiffness", 1.0, None),
    ("contact_stiffness", 1e8, None),
    ("thickness", 0.0, None),
    ("thickness", 0.05, None),
    # 10 m (meant as mm?): the cloth 0.15 m from the sphere shot 12 m up in three frames
    (
        "thickness",
        10.0,
        "cloth 'Cloth' starts closer to sphere collider 'Sphere' than its Thickness (10 m; 16 of 16 "
        "vertices at frame 1), which would fling it away",
    ),
]


@pytest.mark.parametrize("setting,value,outcome", CLOTH_BOUNDS, ids=[f"{s}={v:g}" for s, v, _ in CLOTH_BOUNDS])
def test_cloth_setting_at_its_bounds(blank, setting, value, outcome):
    """The artist dragged a cloth setting to its end (or typed far past its soft limit) and simulated
    a small cloth draping over a sphere."""
    short_range(blank, 1, 4)
    cloth = grid_cloth(n=4)
    add_sphere()
    setattr(cloth.diffcloth, setting, value)
    assert getattr(cloth.diffcloth, setting) == pytest.approx(value)
    blank.view_layer.objects.active = cloth
    if outcome is not None:
        refused(blank, bpy.ops.diffcloth.simulate, outcome)
        return
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    matches_plain(blank, cloth)
    assert len(motion(blank, cloth)) == (3 * cloth.diffcloth.substeps + 1) * 16 * 3


# beyond what the solver simulates right (core.model.scene.check_bounds): refused by the panel's names
# before the run (they diverged, or the linearized step stopped the cloth's swing without a word)
_CELLS = "is too stiff for this cloth's 13 cm cells at 1/10 s steps: at most"
FABRIC_REFUSED = {
    ("LINEARIZED", "density", 1e-4): f"cloth 'Cloth': Stretch Stiffness 90 N/m {_CELLS} 3.5 (the linearized step "
    "locks stiffer stretch), or Density at least 0.0026 kg/m²; lower it, raise Substeps, or use the Converged solver",
    ("LINEARIZED", "stretch", 1e5): f"Stretch Stiffness 1e+05 N/m {_CELLS} 5.3e+03 (the linearized step locks",
    ("LINEARIZED", "stretch", 1e9): f"Stretch Stiffness 1e+09 N/m {_CELLS} 5.3e+03 (the linearized step locks",
    ("NEWTON", "stretch", 1e9): f"Stretch Stiffness 1e+09 N/m {_CELLS} 5.5e+06 (Newton's rounding floor)",
}
# the fabric (the default material) with either solver: (solver, setting, value, outcome)
FABRIC_BOUNDS = [
    (solver, setting, value, None)
    for solver in ("LINEARIZED", "NEWTON")
    for setting, value in (
        ("density", 1e-4),
        ("density", 5.0),
        ("density", 100.0),
        ("stretch", 1e-3),
        ("stretch", 1e5),
        ("stretch", 1e9),
        ("bending", 1e-9),
        ("bending", 0.1),
        ("damping", 0.0),
        ("damping", 1e5),
        ("substeps", 64),
    )
    if (solver, setting, value) not in FABRIC_REFUSED
] + [(*case, message) for case, message in FABRIC_REFUSED.items()]


@pytest.mark.parametrize(
    "solver,setting,value,outcome",
    FABRIC_BOUNDS,
    ids=[f"{solver.lower()}-{s}={v:g}" for solver, s, v, _ in FABRIC_BOUNDS],
)
def test_fabric_setting_at_its_bounds(blank, solver, setting, value, outcome):
    """The same for a fabric, with the linearized and the converged solver."""
    short_range(blank, 1, 4)
    cloth = grid_cloth(n=4, fabric=True)
    add_sphere()
    cloth.diffcloth.solver = solver
    setattr(cloth.diffcloth, setting, value)
    assert getattr(cloth.diffcloth, setting) == pytest.approx(value)
    blank.view_layer.objects.active = cloth
    if outcome is not None:
        refused(blank, bpy.ops.diffcloth.simulate, outcome)
        return
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    matches_plain(blank, cloth)
    assert np.isfinite(motion(blank, cloth)).all()


@pytest.mark.parametrize(
    "setting,value",
    [
        ("mass", 0.0),
        ("tension", -1.0),
        ("bending", 0.0),
        ("damping", -1.0),
        ("substeps", 0),
        ("substeps", 65),
        ("contact_stiffness", 0.0),
        ("thickness", -0.1),
    ],
)
def test_cloth_setting_below_its_minimum_is_clamped(blank, setting, value):
    """Typed past the hard limit: Blender clamps it, and the run uses the clamped value."""
    short_range(blank, 1, 3)
    cloth = grid_cloth(n=3)
    setattr(cloth.diffcloth, setting, value)
    prop = cloth.diffcloth.bl_rna.properties[setting]
    assert getattr(cloth.diffcloth, setting) in (prop.hard_min, prop.hard_max)
    scene = conv().gather(blank, need_targets=False).scene
    assert {
        "mass": scene.cloth.mass,
        "tension": scene.cloth.k_tension[0],
        "bending": scene.cloth.k_bending[0],
        "damping": scene.cloth.damping,
        "substeps": scene.substeps,
        "contact_stiffness": scene.contact_stiffness,
        "thickness": scene.contact_thickness,
    }[setting] == pytest.approx(getattr(cloth.diffcloth, setting))
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    matches_plain(blank, cloth)


# (scene settings, outcome) for an optimization; None: finished, and the bake is the stored design's simulation
RUN_BOUNDS = {
    "target weight huge": (dict(weight=1e6), None),
    "force key spacing at its minimum": (
        dict(opt_tension=False, opt_forces=True, force_key_spacing=1e-3),
        "Force Key Spacing: keys every 0.001 s give",
    ),
    "force key spacing longer than the range": (dict(opt_tension=False, opt_forces=True, force_key_spacing=2.0), None),
    "key forces free of cost": (dict(opt_tension=False, opt_forces=True, force_strength=0.0, force_change=0.0), None),
    "frame forces free of cost": (
        dict(opt_tension=False, opt_forces=True, force_basis="FRAMES", force_strength=0.0, force_change=0.0),
        None,
    ),
    "wind free of cost": (dict(opt_tension=False, opt_wind=True, force_strength=0.0, force_change=0.0), None),
    "one iteration": (dict(max_iterations=1), None),
    "stop within a kilometre": (dict(stop_within=1000.0), None),
    "everything at once": (dict(opt_bending=True, opt_velocity_per_vertex=True, opt_forces=True, opt_wind=True), None),
}


@pytest.mark.parametrize("case", list(RUN_BOUNDS))
def test_run_setting_at_its_bounds(aimed, blank, case):
    """The artist set the optimization's own settings to their ends."""
    cloth, target = aimed
    values, outcome = RUN_BOUNDS[case]
    for key, value in values.items():
        setattr(target.diffcloth if key == "weight" else blank.scene.diffcloth, key, value)
    if outcome is not None:
        refused(blank, bpy.ops.diffcloth.optimize, outcome)
        return
    assert bpy.ops.diffcloth.optimize() == {"FINISHED"}
    stored = cloth["diffcloth_result"]
    assert stored["iterations"] <= blank.scene.diffcloth.max_iterations
    if case == "stop within a kilometre":
        assert stored["reason"] == "within" and stored["iterations"] == 0
    matches_plain(blank, cloth)


def test_a_range_of_one_frame_is_refused(blank):
    """Start and End on the same frame: nothing to simulate."""
    short_range(blank, 5, 5)
    grid_cloth()
    refused(blank, bpy.ops.diffcloth.simulate, "the frame range 5-5 is empty")
    blank.scene.diffcloth.use_scene_range = False
    blank.scene.diffcloth.frame_start, blank.scene.diffcloth.frame_end = 9, 3
    refused(blank, bpy.ops.diffcloth.simulate, "the frame range 9-3 is empty")


def test_a_range_of_one_step(blank):
    short_range(blank, 5, 6)
    cloth = grid_cloth()
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    matches_plain(blank, cloth)


def test_diffcloths_own_range_is_used_not_the_scenes(blank):
    """Scene Frame Range off: DiffCloth's own Start and End (inside a longer scene range) are simulated
    and baked, and a target keyed in the scene's range but outside DiffCloth's is named."""
    short_range(blank, 1, 30)
    settings = blank.scene.diffcloth
    settings.use_scene_range, settings.frame_start, settings.frame_end = False, 4, 9
    cloth = grid_cloth(n=4)
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    matches_plain(blank, cloth)
    target = add_target(blank, cloth, 20)
    refused(blank, bpy.ops.diffcloth.optimize, "target 'Target' has keyframes at [20], outside the frame range 4-9")
    target.keyframe_delete("location", frame=20)
    target.keyframe_insert("location", frame=9)
    settings.max_iterations = 1
    assert bpy.ops.diffcloth.optimize() == {"FINISHED"}
    matches_plain(blank, cloth)


def test_a_range_starting_at_a_negative_frame(blank):
    """DiffCloth's own range may start before frame 0 (the scene's cannot)."""
    settings = blank.scene.diffcloth
    settings.use_scene_range, settings.frame_start, settings.frame_end = False, -4, 1
    cloth = grid_cloth(n=4)
    cloth.keyframe_insert("location", frame=-4)
    cloth.location.x = 0.2
    cloth.keyframe_insert("location", frame=1)
    add_target(blank, cloth, -1)
    settings.max_iterations = 1
    blank.view_layer.objects.active = cloth
    assert bpy.ops.diffcloth.optimize() == {"FINISHED"}
    assert list(cloth["diffcloth_result"]["keyframes"].keys()) == ["-1"]
    matches_plain(blank, cloth)


def test_a_target_duplicated_from_the_baked_cloth(blank):
    """The artist duplicated the baked cloth (Shift+D) at frame 6 and made the copy a Target keyed
    there: the copy carries DiffCloth's bake keys, which are no keyframes of the artist's (they were
    read as target keys at every frame, refused as outside the range); its pose is the baked one."""
    short_range(blank, 1, 6)
    cloth = grid_cloth(n=4)
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    blank.scene.frame_set(6)
    shown = evaluated(cloth)
    bpy.ops.object.select_all(action="DESELECT")
    cloth.select_set(True)
    blank.view_layer.objects.active = cloth
    assert bpy.ops.object.duplicate() == {"FINISHED"}
    copy = blank.active_object
    copy.name, copy.diffcloth.role = "Copy", "TARGET"
    copy.keyframe_insert("location", frame=6)
    assert reading().keyed_frames(copy) == {6}
    blank.view_layer.objects.active = cloth
    blank.scene.frame_set(1)
    setup, _ = ops().prepare(blank, "optimize")
    assert np.abs(setup.loss.targets[5] - shown).max() < 1e-6
    blank.scene.diffcloth.max_iterations = 1
    assert bpy.ops.diffcloth.optimize() == {"FINISHED"}
    matches_plain(blank, cloth)


# ---------------------------------------------------------------------------------------------
# broken meshes


def _grid(n=3, size=0.4, x=0.0):
    """Vertices and quads of an n×n grid in the XY plane."""
    s = np.linspace(-size / 2, size / 2, n)
    verts = [(x + a, b, 0.0) for b in s for a in s]
    quads = [
        (j * n + i, j * n + i + 1, (j + 1) * n + i + 1, (j + 1) * n + i) for j in range(n - 1) for i in range(n - 1)
    ]
    return verts, quads


def _tris(quads):
    return [t for a, b, c, d in quads for t in ((a, b, c), (a, c, d))]


def _mesh_case(kind):
    """(vertices, edges, faces) of a mesh the artist made by hand."""
    verts, quads = _grid()
    if kind == "only vertices":
        return verts, [], []
    if kind == "only edges":
        return verts, [(a, b) for a, b, _, _ in quads], []
    if kind == "a loose vertex":
        return verts + [(0.5, 0.5, 0.0)], [], quads
    if kind == "a loose edge":
        return verts + [(0.5, 0.5, 0.0), (0.6, 0.5, 0.0)], [(9, 10)], quads
    if kind == "duplicate vertices in a face":
        return verts + [verts[4]], [], quads[:3] + [(4, 9, 8, 7)]
    if kind == "a degenerate triangle":
        return verts + [(0.2, -0.1, 0.0)], [], quads + [(5, 9, 2)]
    if kind == "a sliver triangle":
        return [(0, 0, 0), (1, 0, 0), (0.5, 1e-9, 0)], [], [(0, 1, 2)]
    if kind == "quads":
        return verts, [], quads
    if kind == "triangles":
        return verts, [], _tris(quads)
    if kind == "an n-gon":
        ring = [(0.2 * math.cos(a), 0.2 * math.sin(a), 0.0) for a in np.linspace(0, 2 * math.pi, 7)[:-1]]
        return ring, [], [tuple(range(6))]
    if kind == "a concave n-gon":
        return [(0, 0, 0), (0.4, 0, 0), (0.4, 0.4, 0), (0.2, 0.1, 0), (0, 0.4, 0)], [], [(0, 1, 2, 3, 4)]
    if kind == "a single triangle":
        return [(0, 0, 0), (0.3, 0, 0), (0, 0.3, 0)], [], [(0, 1, 2)]
    if kind == "two disconnected pieces":
        v2, q2 = _grid(x=0.6)
        return verts + v2, [], quads + [tuple(i + 9 for i in q) for q in q2]
    if kind == "an unwelded seam":  # two halves whose border vertices overlap, not merged
        left = [(a, b, 0.0) for b in (0, 0.2) for a in (0, 0.2)]
        right = [(a, b, 0.0) for b in (0, 0.2) for a in (0.2, 0.4)]
        return left + right, [], [(0, 1, 3, 2), (4, 5, 7, 6)]
    if kind == "a non-manifold fin":
        return verts + [(0.0, 0.0, 0.2)], [], quads + [(4, 5, 9)]
    raise KeyError(kind)


MESHES = {
    "only vertices": "cloth 'Hand' has no faces",
    "only edges": "cloth 'Hand' has no faces",
    "a loose vertex": "cloth 'Hand': vertex 9 belongs to no triangle (loose vertex)",
    "a loose edge": "cloth 'Hand' has 1 loose edge(s)",
    # Blender's face index, not core's triangle index (it said "triangle 6")
    "duplicate vertices in a face": "cloth 'Hand': face 3 has zero area (degenerate face)",
    "a degenerate triangle": "cloth 'Hand': face 4 has zero area (degenerate face)",
    "a sliver triangle": None,
    "a non-manifold fin": "cloth 'Hand': edge (4, 5) is shared by 3 triangles (non-manifold mesh)",
    "quads": None,
    "triangles": None,
    "an n-gon": None,
    "a concave n-gon": None,
    "a single triangle": None,
    "two disconnected pieces": None,
    "an unwelded seam": None,
}


@pytest.mark.parametrize("kind", list(MESHES))
def test_a_hand_made_mesh(blank, kind):
    """The artist modelled the cloth by hand: broken meshes are named, any sound one simulates."""
    short_range(blank, 1, 4)
    verts, edges, faces = _mesh_case(kind)
    mesh = bpy.data.meshes.new("Hand")
    mesh.from_pydata(verts, edges, faces)
    mesh.update()
    cloth = bpy.data.objects.new("Hand", mesh)
    blank.collection.objects.link(cloth)
    cloth.diffcloth.role = "CLOTH"
    cloth.location.z = 0.5
    if MESHES[kind] is not None:
        refused(blank, bpy.ops.diffcloth.simulate, MESHES[kind])
        return
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    setup = matches_plain(blank, cloth)
    assert setup.scene.cloth.n == len(verts)
    assert len(setup.scene.cloth.tris) == sum(len(f) - 2 for f in faces)


# ---------------------------------------------------------------------------------------------
# broken targets


def _target_case(context, cloth, target, kind):
    """Break the aimed fixture's target as an artist might; returns the cloth to run."""
    if kind == "wrong vertex count":
        bpy.ops.mesh.primitive_plane_add(size=0.4)
        small = context.active_object
        small.name, small.diffcloth.role = "Small", "TARGET"
        small.keyframe_insert("location", frame=3)
    elif kind == "an empty":
        empty = bpy.data.objects.new("Empty", None)
        context.collection.objects.link(empty)
        empty.diffcloth.role = "TARGET"
        empty.keyframe_insert("location", frame=3)
    elif kind == "a curve":
        bpy.ops.curve.primitive_bezier_circle_add()
        curve = context.active_object
        curve.name, curve.diffcloth.role = "Curve", "TARGET"
        curve.keyframe_insert("location", frame=3)
    elif kind == "keyed after the range":
        target.keyframe_insert("location", frame=9)
    elif kind == "keyed before the range":
        target.keyframe_insert("location", frame=0)
    elif kind == "two targets at one frame":
        add_target(context, cloth, 6, name="Second")
    elif kind == "no keyframes":
        target.animation_data_clear()
    elif kind == "its cloth deleted":  # still held by the pointer: out of the scene, not out of the file
        other = grid_cloth("Old", n=5)
        target.diffcloth.cloth = other
        bpy.ops.object.select_all(action="DESELECT")
        other.select_set(True)
        context.view_layer.objects.active = other
        assert bpy.ops.object.delete() == {"FINISHED"}
        assert "Old" in bpy.data.objects and "Old" not in context.scene.objects
    elif kind == "its cloth removed":  # gone from the file: the pointer is cleared, the scene's only cloth
        other = grid_cloth("Old", n=5)
        target.diffcloth.cloth = other
        bpy.data.objects.remove(other)
        assert target.diffcloth.cloth is None
    elif kind == "posing another cloth":  # the active cloth run alone (together, both would be)
        other = grid_cloth("Other", n=5, location=(1.0, 0.0, 0.0))
        target.diffcloth.cloth = other
        bpy.context.scene.diffcloth.together = False
    elif kind == "posing a collider":
        target.diffcloth.cloth = add_sphere(location=(1.0, 0.0, 0.0))
    elif kind == "a missing Weight Group":
        target.diffcloth.weight_group = "nope"
    elif kind == "a Weight Group on half":
        half = [v.index for v in target.data.vertices if v.co.x < 0]
        target.vertex_groups.new(name="half").add(half, 1.0, "REPLACE")
        target.diffcloth.weight_group = "half"
    elif kind == "subdivided":
        target.modifiers.new("Subdivision", "SUBSURF").levels = 1
    elif kind == "keyed at the start frame only":
        target.animation_data_clear()
        target.keyframe_insert("location", frame=1)
    elif kind == "keyed at the start frame too":
        target.keyframe_insert("location", frame=1)
    elif kind in ("its keys pushed down to the NLA", "a second target in the NLA"):
        if kind == "a second target in the NLA":
            target = add_target(context, cloth, 4, name="Second")
        anim = target.animation_data
        strip = anim.nla_tracks.new().strips.new("Pose", 1, anim.action)
        if "action_slot" in anim.bl_rna.properties:  # slotted actions (4.4+)
            strip.action_slot = anim.action_slot
        anim.action = None
    elif kind == "hidden from the render by a key":
        target.hide_render = True
        target.keyframe_insert("hide_render", frame=3)
        target["note"] = 1.0
        target.keyframe_insert('["note"]', frame=4)
        target.diffcloth.keyframe_insert("weight", frame=5)
    else:
        raise KeyError(kind)
    context.scene.frame_set(1)
    context.view_layer.objects.active = cloth


TARGETS = {
    "wrong vertex count": "target 'Small' has 4 vertices, cloth 'Cloth' has 25",
    "an empty": "target 'Empty' is not a mesh",
    "a curve": "target 'Curve' is not a mesh",
    "keyed after the range": "target 'Target' has keyframes at [9], outside the frame range 1-6",
    "keyed before the range": "target 'Target' has keyframes at [0], outside the frame range 1-6",
    "two targets at one frame": "targets 'Target' and 'Second' are both keyed at frame 6",
    "no keyframes": "no targets with keyframes",
    # these two said "no targets: add one with 'New Target from Cloth'"
    "its cloth deleted": "target 'Target' poses 'Old', which is not in this scene",
    "its cloth removed": None,
    "posing another cloth": "no targets pose cloth 'Cloth' ('Target' poses 'Other')",
    "posing a collider": "target 'Target' poses 'Sphere', which is not marked as Cloth",
    "a missing Weight Group": "'Target' has no vertex group 'nope'",
    "a Weight Group on half": None,
    "subdivided": "target 'Target' has 81 vertices, cloth 'Cloth' has 25",
    # nothing can move the cloth at its start frame: it went on to optimize nothing
    "keyed at the start frame only": "every target counts for nothing: 'Target' at frame 1 (the start frame, where the "
    "cloth is as modelled: key it later)",
    "keyed at the start frame too": None,
    # the poll said "no targets with keyframes"; a second target's NLA keys were left out silently
    "its keys pushed down to the NLA": "target 'Target' is animated by NLA strips, whose keyframes DiffCloth does not "
    "read as poses",
    "a second target in the NLA": "target 'Second' is animated by NLA strips",
    # keys of its visibility, a custom property or its Weight made frames 3, 4, 5 target keys
    "hidden from the render by a key": None,
}
# what the run warns about (with outcome None)
TARGET_WARNINGS = {
    "keyed at the start frame too": "target 'Target' at frame 1 counts for nothing (the start frame, where the cloth "
    "is as modelled: key it later)",
}


@pytest.mark.parametrize("kind", list(TARGETS))
def test_a_broken_target(aimed, blank, kind):
    """The artist keyed, pointed or weighted a target carelessly."""
    cloth, target = aimed
    _target_case(blank, cloth, target, kind)
    if TARGETS[kind] is not None:
        refused(blank, bpy.ops.diffcloth.optimize, TARGETS[kind])
        return
    setup = ops().prepare(blank, "optimize")[0]
    assert setup.warnings == ([TARGET_WARNINGS[kind]] if kind in TARGET_WARNINGS else [])
    assert sorted(f + setup.start for f in setup.loss.targets) == ([1, 6] if "start frame" in kind else [6])
    assert bpy.ops.diffcloth.optimize() == {"FINISHED"}
    matches_plain(blank, cloth)


# ---------------------------------------------------------------------------------------------
# colliders


def _collider_case(context, kind):
    """Add a collider under the cloth as an artist might; returns it and what it must collide as:
    ("sphere", center, radius) or ("plane", point, normal), at the start frame."""
    if kind == "an empty as a sphere":
        empty = bpy.data.objects.new("Ball", None)
        context.collection.objects.link(empty)
        empty.empty_display_type, empty.empty_display_size = "SPHERE", 0.1
        empty.location, empty.scale = (0.0, 0.0, -0.3), (1.5, 1.5, 1.5)
        empty.diffcloth.role = "SPHERE"
        return ("sphere", (0.0, 0.0, -0.3), 0.15)
    if kind == "an animated sphere":
        sphere = add_sphere(location=(-0.3, 0.0, -0.3))
        sphere.keyframe_insert("location", frame=1)
        sphere.location.x = 0.3
        sphere.keyframe_insert("location", frame=6)
        return ("sphere", (-0.3, 0.0, -0.3), 0.15)
    if kind == "a sphere parented to an animated empty":
        rig = bpy.data.objects.new("Rig", None)
        context.collection.objects.link(rig)
        rig.location = (0.0, 0.0, -0.5)
        rig.keyframe_insert("location", frame=1)
        rig.location = (0.0, 0.2, -0.3)
        rig.keyframe_insert("location", frame=6)
        sphere = add_sphere(location=(0.0, 0.0, 0.0))
        sphere.parent = rig
        sphere.location = (0.0, 0.0, 0.2)
        return ("sphere", (0.0, 0.0, -0.3), 0.15)
    if kind == "a sphere with a Copy Location constraint":
        mover = bpy.data.objects.new("Mover", None)
        context.collection.objects.link(mover)
        mover.location = (0.0, 0.0, -0.3)
        mover.keyframe_insert("location", frame=1)
        mover.location = (0.1, 0.0, -0.2)
        mover.keyframe_insert("location", frame=6)
        sphere = add_sphere(location=(5.0, 5.0, 5.0))
        sphere.constraints.new("COPY_LOCATION").target = mover
        return ("sphere", (0.0, 0.0, -0.3), 0.15)
    if kind == "a sphere with an animated scale":
        sphere = add_sphere(radius=0.1, location=(0.0, 0.0, -0.4))
        sphere.keyframe_insert("scale", frame=1)
        sphere.scale = (2.5, 2.5, 2.5)
        sphere.keyframe_insert("scale", frame=6)
        return ("sphere", (0.0, 0.0, -0.4), 0.1)
    if kind == "a plane with non-uniform scale":
        plane = add_plane(location=(0, 0, -0.3), rotation=(0.3, 0.0, 0.0), scale=(3.0, 0.5, 2.0))
        return ("plane", (0, 0, -0.3), (0.0, -math.sin(0.3), math.cos(0.3)))
    if kind == "a plane with a negative X scale":
        add_plane(scale=(-1.0, 1.0, 1.0))
        return ("plane", (0, 0, -0.3), (0, 0, 1))
    if kind == "an animated plane":
        plane = add_plane(location=(0, 0, -0.3))
        plane.keyframe_insert("rotation_euler", frame=1)
        plane.rotation_euler.x = 0.4
        plane.keyframe_insert("rotation_euler", frame=6)
        return ("plane", (0, 0, -0.3), (0, 0, 1))
    if kind == "an empty as a plane":
        empty = bpy.data.objects.new("Ground", None)
        context.collection.objects.link(empty)
        empty.location = (0.0, 0.0, -0.2)
        empty.diffcloth.role = "PLANE"
        return ("plane", (0, 0, -0.2), (0, 0, 1))
    raise KeyError(kind)


COLLIDERS = [
    "an empty as a sphere",
    "an animated sphere",
    "a sphere parented to an animated empty",
    "a sphere with a Copy Location constraint",
    "a sphere with an animated scale",
    "a plane with non-uniform scale",
    "a plane with a negative X scale",
    "an animated plane",
    "an empty as a plane",
]


@pytest.mark.parametrize("kind", COLLIDERS)
def test_a_collider_set_up_loosely(blank, kind):
    """The artist used an empty, a parent, a constraint, animation or an odd scale on a collider:
    DiffCloth collides with what the viewport shows, frame by frame."""
    short_range(blank, 1, 6)
    cloth = grid_cloth(n=5, pins=False)
    shape, a, b = _collider_case(blank, kind)
    blank.scene.frame_set(1)
    blank.view_layer.objects.active = cloth
    collider = conv().gather(blank, need_targets=False).scene.colliders[0]
    if shape == "sphere":
        center, radius = collider.at(0.0)
        assert np.allclose(center, a, atol=1e-6) and radius == pytest.approx(b, rel=1e-3)
    else:
        point, normal = collider.at(0.0)
        assert np.allclose(point, a, atol=1e-6) and np.allclose(normal, b, atol=1e-6)
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    matches_plain(blank, cloth)


BAD_COLLIDERS = {
    "a curve as a sphere": "sphere collider 'Circle' must be a mesh or an empty",
    "a mesh with no vertices as a sphere": "sphere collider 'Nothing' has no size at frame 1",
    "a plane with a negative Z scale": "cloth 'Cloth' starts behind plane collider 'Floor'",
    "a plane closer than the Thickness": "cloth 'Cloth' starts closer to plane collider 'Floor' than its Thickness",
    "the target made a sphere": "cloth 'Cloth' starts inside sphere collider 'Target'",
    # these four collided as something else: a huge sphere about the world origin ("starts inside"),
    # a floor 30 cm above the one shown, a plane through the middle of the cube;
    # a mesh without vertices was "not a mesh or an empty"
    "a sphere whose location was applied": "sphere collider 'Sphere': its vertices are centred 0.5 m from its origin "
    "at frame 1",
    "a floor whose location was applied": "plane collider 'Floor': its vertices lie up to 0.3 m off DiffCloth's plane",
    "a cube as a floor": "plane collider 'Cube': its vertices lie up to 0.5 m off DiffCloth's plane",
}


@pytest.mark.parametrize("kind", list(BAD_COLLIDERS))
def test_a_collider_that_cannot_collide_as_shown(blank, kind):
    """Colliders DiffCloth cannot take as the artist meant them are named."""
    short_range(blank, 1, 6)
    cloth = grid_cloth(n=5)
    if kind == "a curve as a sphere":
        bpy.ops.curve.primitive_bezier_circle_add(location=(0, 0, -0.5))
        blank.active_object.name, blank.active_object.diffcloth.role = "Circle", "SPHERE"
    elif kind == "a mesh with no vertices as a sphere":
        nothing = bpy.data.objects.new("Nothing", bpy.data.meshes.new("Nothing"))
        blank.collection.objects.link(nothing)
        nothing.diffcloth.role = "SPHERE"
    elif kind == "a plane with a negative Z scale":
        add_plane(scale=(1.0, 1.0, -1.0))
    elif kind == "a plane closer than the Thickness":
        add_plane()
        cloth.diffcloth.thickness = 0.5
    elif kind == "the target made a sphere":
        add_target(blank, cloth, 6).diffcloth.role = "SPHERE"
    elif kind == "a sphere whose location was applied":
        add_sphere(location=(0.0, 0.0, -0.5))
        bpy.ops.object.transform_apply(location=True, rotation=False, scale=False)
    elif kind == "a floor whose location was applied":
        add_plane(location=(0.0, 0.0, -0.3))
        bpy.ops.object.transform_apply(location=True, rotation=False, scale=False)
        blank.active_object.location = (0.0, 0.0, -0.1)  # moved down: the floor shown at -0.4, its origin at -0.1
    elif kind == "a cube as a floor":
        bpy.ops.mesh.primitive_cube_add(size=1.0, location=(0.0, 0.0, -1.0))
        blank.active_object.diffcloth.role = "PLANE"
    blank.view_layer.objects.active = cloth
    blank.scene.frame_set(1)
    refused(blank, bpy.ops.diffcloth.simulate, BAD_COLLIDERS[kind])


# ---------------------------------------------------------------------------------------------
# a cloth carried by parents, constraints and animation


def _carrier(context, name="Rig"):
    """An empty moved 0.3 m along X over frames 1-6."""
    rig = bpy.data.objects.new(name, None)
    context.collection.objects.link(rig)
    rig.keyframe_insert("location", frame=1)
    rig.location = (0.3, 0.0, 0.0)
    rig.keyframe_insert("location", frame=6)
    return rig


CARRIED = [
    "parented",
    "Child Of",
    "Copy Location",
    "parent with an animated scale",
    "parent disabled in viewports",
    "Subdivision for the render only",
    "its own shape key at 0",
]


@pytest.mark.parametrize("kind", CARRIED)
def test_a_carried_cloth(blank, kind):
    """The cloth rides a moving object (a parent, a constraint), or carries what only the render
    shows: its pins follow what the viewport shows at every frame, and the bake is the simulation."""
    short_range(blank, 1, 6)
    cloth = grid_cloth(n=4)
    rig = _carrier(blank)
    carried = (0.3, 0.0, 0.0)
    if kind == "parented":
        cloth.parent = rig
    elif kind == "Child Of":
        cloth.constraints.new("CHILD_OF").target = rig
    elif kind == "Copy Location":
        c = cloth.constraints.new("COPY_LOCATION")
        c.target, c.use_offset = rig, True
    elif kind == "parent with an animated scale":
        cloth.parent = rig
        rig.keyframe_insert("scale", frame=1)
        rig.scale = (2.0, 2.0, 2.0)
        rig.keyframe_insert("scale", frame=6)
        carried = None
    elif kind == "parent disabled in viewports":
        cloth.parent = rig
        rig.hide_viewport = True
    elif kind == "Subdivision for the render only":
        subsurf = cloth.modifiers.new("Subdivision", "SUBSURF")
        subsurf.show_viewport = False
        carried = (0.0, 0.0, 0.0)
    elif kind == "its own shape key at 0":
        cloth.shape_key_add(name="Basis")
        sag = cloth.shape_key_add(name="Sag")
        sag.data[0].co.z -= 0.1
        sag.value = 0.0
        carried = (0.0, 0.0, 0.0)
    blank.scene.frame_set(1)
    blank.view_layer.objects.active = cloth
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    shown = baked(blank, cloth, range(1, 7))
    pins = [v.index for v in cloth.data.vertices if v.groups]
    if carried is not None:
        assert np.abs(shown[-1][pins] - shown[0][pins] - carried).max() < 1e-5
    else:  # the pins scale about the parent's origin, which moved
        rest = np.array([v.co for v in cloth.data.vertices])[pins]
        assert np.abs(shown[-1][pins] - (2.0 * rest + [0.3, 0.0, 0.0])).max() < 1e-5
    matches_plain(blank, cloth)


EDITED = {
    "its own shape key at 1": "shape key 'Sag' change(s) its shape at frame 1",
    # these two baked a motion that never showed (the viewport showing the rest shape at every frame)
    "a muted shape key shown alone (pinned)": "cloth 'Cloth' has Shape Key Lock on",
    "a baked shape key shown alone (pinned)": "cloth 'Cloth' has Shape Key Lock on",
}


@pytest.mark.parametrize("kind", list(EDITED))
def test_a_cloth_shown_otherwise_than_modelled(blank, kind):
    """The cloth shows a shape other than its mesh: named, since the bake goes under it."""
    short_range(blank, 1, 6)
    cloth = grid_cloth(n=4)
    if kind == "its own shape key at 1":
        cloth.shape_key_add(name="Basis")
        sag = cloth.shape_key_add(name="Sag")
        sag.data[0].co.z -= 0.1
        sag.value = 1.0
    elif kind == "a muted shape key shown alone (pinned)":
        cloth.shape_key_add(name="Basis")
        sag = cloth.shape_key_add(name="Sag")
        sag.data[0].co.z -= 0.1
        sag.mute = True
        cloth.active_shape_key_index = 1
        cloth.show_only_shape_key = True
    elif kind == "a baked shape key shown alone (pinned)":
        assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
        cloth.active_shape_key_index = cloth.data.shape_keys.key_blocks.find("DiffCloth_f0004")
        cloth.show_only_shape_key = True
    blank.scene.frame_set(1)
    if EDITED[kind] is not None:
        refused(blank, bpy.ops.diffcloth.simulate, EDITED[kind])
        return
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    matches_plain(blank, cloth)


def test_a_cloth_in_edit_mode_is_refused(blank):
    """The artist pressed Simulate with the cloth still in Edit Mode: its edits were not in the mesh
    (refused as "something changes its shape"), or without edits the bake was written and then
    overwritten with the rest shape on leaving Edit Mode."""
    short_range(blank, 1, 4)
    cloth = grid_cloth(n=4)
    blank.view_layer.objects.active = cloth
    assert bpy.ops.object.mode_set(mode="EDIT") == {"FINISHED"}
    refused(blank, bpy.ops.diffcloth.simulate, "cloth 'Cloth' is in Edit Mode, whose edits are not in its mesh yet")
    assert bpy.ops.object.mode_set(mode="OBJECT") == {"FINISHED"}
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    matches_plain(blank, cloth)


def test_a_target_in_edit_mode_counts_as_edited(aimed, blank):
    """A target still in Edit Mode is read with its edits."""
    import bmesh

    cloth, target = aimed
    bpy.ops.object.select_all(action="DESELECT")
    blank.view_layer.objects.active = target
    assert bpy.ops.object.mode_set(mode="EDIT") == {"FINISHED"}
    bm = bmesh.from_edit_mesh(target.data)
    bm.verts.ensure_lookup_table()
    bm.verts[12].co.z -= 0.05
    bmesh.update_edit_mesh(target.data)
    setup, _ = ops().prepare(blank, "optimize", cloth_name="Cloth")
    assert setup.loss.targets[5][12, 2] == pytest.approx(-0.08, abs=1e-6)
    assert bpy.ops.diffcloth.optimize(cloth="Cloth") == {"FINISHED"}
    matches_plain(blank, cloth)


# ---------------------------------------------------------------------------------------------
# runs cancelled, failing, or outlived by their cloth


@pytest.mark.parametrize("cancel_after", [0, 2])
def test_an_inline_run_cancelled(aimed, blank, cancel_after):
    """Cancel before the first iteration ends, or after two: the run keeps its best design, the scene
    is untouched until it is written, and what is written is that design's simulation."""
    cloth, _ = aimed
    blank.scene.diffcloth.opt_forces, blank.scene.diffcloth.max_iterations = True, 10
    before = snapshot(blank)
    setup, job = ops().prepare(blank, "optimize")
    run = run_inline(job, cancel_after)
    assert run.error is None and run.result.reason == "stopped"
    assert len(run.result.history) == max(cancel_after, 1)
    assert run.result.loss < run.result.initial_loss
    assert snapshot(blank) == before
    ops().finish(blank, setup, run)
    assert cloth["diffcloth_result"]["reason"] == "stopped"
    assert np.abs(baked(blank, cloth, range(1, 7)) - run.result.trajectory.x).max() < 1e-5
    blank.scene.frame_set(1)
    matches_plain(blank, cloth)


def _worker(job):
    from diffcloth.diffcloth_addon import runner

    return runner.Process(job).start()


@pytest.mark.parametrize("how", ["killed after its first iteration", "failing"])
def test_a_worker_process_that_ends_badly_writes_nothing(aimed, blank, how):
    """The worker is killed mid-run (out of memory, the artist's task manager), or fails on a job it
    cannot read: the run is reported as failed, naming the cloth, and nothing is written; the
    previous bake stays."""
    cloth, _ = aimed
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    blank.scene.diffcloth.opt_forces, blank.scene.diffcloth.max_iterations = True, 10000
    before = snapshot(blank)
    setup, job = ops().prepare(blank, "optimize")
    if how == "failing":
        del job["params"]
    run = _worker(job)
    if how != "failing":
        infos = []
        while not infos:
            more, done = run.drain()
            infos += more
            assert not done
            time.sleep(0.02)
        os.kill(run.proc.pid, signal.SIGKILL)
    _, done = run.wait()
    assert done and run.result is None
    expected = (
        "optimize of 'Cloth' failed: the worker process was killed (signal 9) before finishing"
        if how != "failing"
        else "optimize of 'Cloth' failed: the worker process ended with exit code 1 "
        "before finishing: KeyError: 'params'"
    )
    with pytest.raises(errors().InputError, match=re.escape(expected)):
        ops().finish(blank, setup, run)
    assert snapshot(blank) == before


def test_a_diverging_simulation_keeps_the_previous_bake(blank, monkeypatch):
    """A simulation that fails part way (here: tension and contact stiffness typed a thousand times too
    high, with the check that refuses them before the run switched off): refused naming the cloth and
    the frame, the bake of the last good run stays."""
    short_range(blank, 1, 4)
    cloth = grid_cloth(n=4)
    add_sphere(location=(0.0, 0.0, -0.2), radius=0.15)
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    monkeypatch.setattr(sys.modules["diffcloth.core.model.scene"], "check_bounds", lambda scene: None)
    cloth.diffcloth.tension, cloth.diffcloth.contact_stiffness = 1e9, 1e8
    refused(blank, bpy.ops.diffcloth.simulate, "simulate of 'Cloth' failed: simulation diverged at frame")


def _during_run(context, cloth, kind, path):
    """What the artist did while a run was going."""
    if kind == "deleted the cloth":
        bpy.data.objects.remove(cloth)
    elif kind == "deleted the cloth and named another object after it":
        bpy.data.objects.remove(cloth)
        empty = bpy.data.objects.new("Cloth", None)
        context.collection.objects.link(empty)
    elif kind == "subdivided the cloth":
        apply_edit(context, cloth, dict(side=7))
    elif kind == "renamed the cloth":
        cloth.name = "Sheet"
    elif kind == "went into Edit Mode":
        context.view_layer.objects.active = cloth
        assert bpy.ops.object.mode_set(mode="EDIT") == {"FINISHED"}
    elif kind == "reopened the file":  # as an undo does: every object is a new one
        bpy.ops.wm.open_mainfile(filepath=path)
    elif kind == "reopened a file with a finer cloth":
        apply_edit(context, cloth, dict(side=7))
        bpy.ops.wm.save_as_mainfile(filepath=path)
        bpy.ops.wm.open_mainfile(filepath=path)
    else:
        raise KeyError(kind)


DURING = {
    "deleted the cloth": "cloth 'Cloth' was deleted or changed during the run; nothing was written",
    "deleted the cloth and named another object after it": "cloth 'Cloth' was deleted or changed during the run",
    "subdivided the cloth": "cloth 'Cloth' was deleted or changed during the run",
    "renamed the cloth": "cloth 'Cloth' was deleted or changed during the run",
    "went into Edit Mode": "cloth 'Cloth' was put in Edit Mode during the run; nothing was written",
    "reopened the file": None,
    "reopened a file with a finer cloth": "cloth 'Cloth' was deleted or changed during the run",
}


@pytest.mark.parametrize("kind", list(DURING))
def test_the_scene_changed_during_a_run(aimed, blank, tmp_path, kind):
    """Between the run's start (prepare) and its end (finish) the artist changed the scene: a
    result that no longer fits is named and nothing is written; after a reload (undo) the result
    goes to the reloaded cloth."""
    cloth, _ = aimed
    path = str(tmp_path / "scene.blend")
    bpy.ops.wm.save_as_mainfile(filepath=path)
    setup, job = ops().prepare(blank, "optimize")
    run = run_inline(job)
    _during_run(blank, cloth, kind, path)
    if DURING[kind] is not None:
        blank.view_layer.update()
        before = snapshot(blank)
        with pytest.raises(errors().InputError, match=re.escape(DURING[kind])):
            ops().finish(blank, setup, run)
        assert snapshot(blank) == before
        return
    cloth = bpy.data.objects["Cloth"]
    ops().finish(blank, setup, run)
    assert np.abs(baked(blank, cloth, range(1, 7)) - run.result.trajectory.x).max() < 1e-5
    blank.scene.frame_set(1)
    matches_plain(blank, cloth)


# ---------------------------------------------------------------------------------------------
# re-runs after edits


def _rerun_edit(context, cloth, target, kind):
    if kind == "a target added":
        second = add_target(context, cloth, 4, name="Second", offset=(0.0, 0.0, 0.0))
        for v in second.data.vertices:
            v.co.z -= 0.01 if not v.groups else 0.0
    elif kind == "the target removed, another added":
        bpy.data.objects.remove(target)
        add_target(context, cloth, 5, name="Other", offset=(0.0, 0.0, 0.0)).data.vertices[12].co.z -= 0.05
    elif kind == "the target re-keyed earlier":
        target.keyframe_delete("location", frame=6)
        target.keyframe_insert("location", frame=3)
    elif kind == "the target re-posed":
        target.data.vertices[12].co.z -= 0.05
    elif kind == "the cloth renamed":
        cloth.name = "Sheet"
    elif kind == "Clear Bake":
        assert bpy.ops.diffcloth.clear_bake() == {"FINISHED"}
        assert "diffcloth_motion" not in cloth.keys() and bake_names(cloth) == []
    elif kind == "Discard Result":
        assert bpy.ops.diffcloth.discard_result() == {"FINISHED"}
        assert "diffcloth_result" not in cloth.keys() and "diffcloth_motion" not in cloth.keys()
    elif kind == "Apply Optimized Stiffness":
        assert bpy.ops.diffcloth.apply_result() == {"FINISHED"}
    elif kind == "more frames":
        context.scene.frame_end = 8
    elif kind == "fewer frames":
        context.scene.frame_end = 6
        target.keyframe_delete("location", frame=6)
        target.keyframe_insert("location", frame=5)
        context.scene.frame_end = 5
    elif kind == "more substeps":
        cloth.diffcloth.substeps = 2
    elif kind == "a pin added":
        cloth.vertex_groups["pin"].add([2], 1.0, "REPLACE")
    elif kind == "more vertices":
        apply_edit(context, cloth, dict(side=6))
        cloth.diffcloth.pin_group = ""  # the new mesh has no pin group
        bpy.data.objects.remove(target)  # the target no longer fits: a new one
        add_target(context, cloth, 6, offset=(0.0, 0.0, 0.0)).data.vertices[20].co.z -= 0.05
    else:
        raise KeyError(kind)
    context.scene.frame_set(1)
    if kind not in ("the target removed, another added", "more vertices"):
        context.view_layer.objects.active = cloth


RERUNS = [
    "a target added",
    "the target removed, another added",
    "the target re-keyed earlier",
    "the target re-posed",
    "the cloth renamed",
    "Clear Bake",
    "Discard Result",
    "Apply Optimized Stiffness",
    "more frames",
    "fewer frames",
    "more substeps",
    "a pin added",
    "more vertices",
]
# what of the stored design no longer fits after the edit: named (it was left out silently, the panel
# still saying Simulate used it)
RERUN_UNUSED = {
    "more frames": "control forces",
    "fewer frames": "control forces",
    "more vertices": "tension, control forces",
}


@pytest.mark.parametrize("then", ["simulate", "optimize"])
@pytest.mark.parametrize("kind", RERUNS)
def test_a_rerun_after_an_edit(aimed, blank, kind, then):
    """Optimize, edit, then Simulate or Optimize again: the new run is the simulation of the scene as it
    now is, with whatever of the stored design still fits it."""
    cloth, target = aimed
    settings = blank.scene.diffcloth
    settings.opt_forces, settings.max_iterations = True, 2
    assert bpy.ops.diffcloth.optimize() == {"FINISHED"}
    _rerun_edit(blank, cloth, target, kind)
    settings.max_iterations = 1
    warnings = ops().prepare(blank, then, cloth_name=cloth.name)[0].warnings
    assert warnings == (
        [
            f"the optimization stored on 'Cloth' no longer fits its mesh, pins or frame range: its "
            f"{RERUN_UNUSED[kind]} are left out (Optimize again, or Discard Result)"
        ]
        if kind in RERUN_UNUSED
        else []
    )
    assert getattr(bpy.ops.diffcloth, then)(cloth=cloth.name) == {"FINISHED"}
    setup = matches_plain(blank, cloth)
    n, steps = setup.scene.cloth.n, setup.scene.n_steps
    assert len(motion(blank, cloth)) == (steps + 1) * n * 3
    if then == "optimize":
        assert len(cloth["diffcloth_result"]["forces"]) == setup.scene.steps * n * 3


def test_apply_optimized_stiffness_after_the_mesh_changed(aimed, blank):
    """Optimize, then remodel the cloth finer, then Apply: the optimized tension (per spring, alike at
    any resolution) becomes the cloth's own, and the next run uses it."""
    cloth, target = aimed
    assert bpy.ops.diffcloth.optimize() == {"FINISHED"}
    optimized = results().uniform(cloth["diffcloth_result"], "k_tension")
    apply_edit(blank, cloth, dict(side=6))
    cloth.diffcloth.pin_group = ""
    bpy.data.objects.remove(target)
    assert bpy.ops.diffcloth.apply_result() == {"FINISHED"}
    assert cloth.diffcloth.tension == pytest.approx(optimized)
    assert ops().prepare(blank, "simulate")[0].warnings == []
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    setup = matches_plain(blank, cloth)
    assert np.allclose(setup.scene.cloth.k_tension, optimized)


@pytest.mark.parametrize(
    "frame,message",
    [
        (9, "frame 9 is outside the frame range 1-6: a target of 'Cloth' keyed there would not count"),
        (0, "frame 0 is outside the frame range 1-6"),
        (
            1,
            "frame 1 is the start frame, where the cloth is as modelled: a target of 'Cloth' keyed there would not count",
        ),
    ],
)
def test_new_target_from_cloth_where_it_would_not_count(blank, frame, message):
    """New Target from Cloth on a frame where its key would be refused or count for nothing: named,
    nothing made (it made a target the next Optimize refused, or one that counted for nothing)."""
    short_range(blank, 1, 6)
    cloth = grid_cloth(n=4)
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    blank.scene.frame_set(frame)
    blank.view_layer.objects.active = cloth
    meshes = len(bpy.data.meshes)
    refused(blank, bpy.ops.diffcloth.new_target, message)
    assert len(bpy.data.meshes) == meshes
    blank.scene.frame_set(4)
    assert bpy.ops.diffcloth.new_target() == {"FINISHED"}
    blank.scene.diffcloth.max_iterations = 1
    blank.view_layer.objects.active = cloth
    assert bpy.ops.diffcloth.optimize() == {"FINISHED"}
    matches_plain(blank, cloth)


# ---------------------------------------------------------------------------------------------
# a cloth whose mesh is not its own


@pytest.mark.parametrize("kind", ["linked", "overridden"])
def test_a_cloth_linked_from_a_library(blank, tmp_path, kind):
    """The cloth comes from another file (linked, or a library override of its object): the bake
    was written into the linked mesh in memory, and was gone once the file was saved and reopened."""
    short_range(blank, 1, 4)
    grid_cloth(n=4)
    library = str(tmp_path / "library.blend")
    bpy.ops.wm.save_as_mainfile(filepath=library)
    bpy.ops.wm.read_factory_settings(use_empty=True)
    short_range(bpy.context, 1, 4)
    with bpy.data.libraries.load(library, link=True) as (_, into):
        into.objects = ["Cloth"]
    cloth = into.objects[0]
    bpy.context.collection.objects.link(cloth)
    if kind == "overridden":
        cloth = cloth.override_create(remap_local_usages=True)
    bpy.context.view_layer.objects.active = cloth
    mesh = " has a mesh that" if kind == "overridden" else ""
    refused(
        bpy.context,
        bpy.ops.diffcloth.simulate,
        f"cloth 'Cloth'{mesh} is linked from '{cloth.data.library.filepath}', so this file would not keep its bake",
    )


@pytest.mark.parametrize("role", ["TARGET", "NONE", "CLOTH"])
def test_a_cloth_sharing_its_mesh(blank, role):
    """A linked duplicate (Alt+D) of the cloth, made a target, left as a copy or made a second cloth:
    the bake on the shared mesh moved it too."""
    short_range(blank, 1, 6)
    cloth = grid_cloth(n=4)
    twin = bpy.data.objects.new("Twin", cloth.data)
    blank.collection.objects.link(twin)
    twin.location.x = 1.0
    twin.diffcloth.role = role
    twin.keyframe_insert("location", frame=6)
    blank.view_layer.objects.active = cloth
    refused(blank, bpy.ops.diffcloth.simulate, "cloth 'Cloth' shares its mesh with 'Twin' (a linked duplicate, Alt+D)")


# ---------------------------------------------------------------------------------------------
# which cloth, and how it is placed


@pytest.mark.parametrize(
    "kind,message",
    [
        ("two cloths, neither active", "several cloths (A, B): make one active, or name one (--cloth NAME)"),
        ("a curve marked as cloth", "'Curve' is marked as cloth but is a curve, not a mesh"),
        ("a name that is no cloth", "no object named 'Nope' is marked as DiffCloth cloth"),
        ("an unknown fabric preset", "no fabric preset 'Wool' (presets: "),
    ],
)
def test_the_wrong_cloth(blank, kind, message):
    """The artist ran with no clear cloth, or asked for one that is not there."""
    op, kw = bpy.ops.diffcloth.simulate, {}
    if kind == "two cloths, neither active":
        grid_cloth("A", n=3)
        grid_cloth("B", n=3, location=(1.0, 0.0, 0.0))
        blank.view_layer.objects.active = None
        blank.scene.diffcloth.together = False  # else they run together
    elif kind == "a curve marked as cloth":
        bpy.ops.curve.primitive_bezier_curve_add()
        blank.active_object.name, blank.active_object.diffcloth.role = "Curve", "CLOTH"
    elif kind == "a name that is no cloth":
        grid_cloth(n=3)
        kw = {"cloth": "Nope"}
    elif kind == "an unknown fabric preset":
        grid_cloth(n=3)
        op, kw = bpy.ops.diffcloth.fabric_preset, {"preset": "Wool"}
    refused(blank, lambda: op(**kw), message)


PLACED = {
    "mirrored": dict(scale=(-1.0, 1.0, 1.0)),
    "scaled unevenly": dict(scale=(2.0, 0.5, 1.0)),
    "hanging upright": dict(rotation_euler=(math.pi / 2, 0.0, 0.0)),
    "far from the origin": dict(location=(1000.0, -2000.0, 500.0)),
}


@pytest.mark.parametrize("kind", list(PLACED))
def test_a_cloth_placed_oddly(blank, kind):
    """Mirrored, unevenly scaled, turned upright or far away: the pins stay where the viewport shows
    them, and the bake is the simulation."""
    short_range(blank, 1, 6)
    cloth = grid_cloth(n=4)
    for key, value in PLACED[kind].items():
        setattr(cloth, key, value)
    blank.view_layer.update()
    pins = [v.index for v in cloth.data.vertices if v.groups]
    held = np.array([cloth.matrix_world @ cloth.data.vertices[i].co for i in pins])
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    shown = baked(blank, cloth, range(1, 7))
    assert np.abs(shown[:, pins] - held).max() < 1e-5 * max(1.0, np.abs(held).max())
    assert shown[-1, :, 2].min() < held[:, 2].min() - 0.01  # the rest fell
    matches_plain(blank, cloth, atol=1e-5 * max(1.0, np.abs(held).max()))


@pytest.mark.parametrize("fps,fps_base", [(24, 1.001), (1, 1.0), (120, 1.0)])
def test_an_unusual_frame_rate(blank, fps, fps_base):
    """NTSC, one frame a second, 120 fps: the frame time follows the scene's."""
    short_range(blank, 1, 4)
    blank.scene.render.fps, blank.scene.render.fps_base = fps, fps_base
    cloth = grid_cloth(n=4)
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    setup = matches_plain(blank, cloth)
    assert setup.scene.dt == pytest.approx(fps_base / fps)


def test_the_current_frame_stays_where_it_was(blank):
    """The artist looked at a frame outside the range when pressing Simulate: it stays there."""
    short_range(blank, 1, 6)
    cloth = grid_cloth(n=4)
    blank.scene.frame_set(40)
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    assert blank.scene.frame_current == 40
    matches_plain(blank, cloth)


# ---------------------------------------------------------------------------------------------
# the scene's gravity

GRAVITY = {
    "the Moon's": dict(gravity=(0.0, 0.0, -1.62)),
    "sideways": dict(gravity=(3.0, -2.0, 0.0)),
    "pointing up": dict(gravity=(0.0, 0.0, 4.0)),
    "half of it on the cloth": dict(weight=0.5),
    "ticked off": dict(use_gravity=False),
    "zero": dict(gravity=(0.0, 0.0, 0.0)),
}


@pytest.mark.parametrize("kind", list(GRAVITY))
@pytest.mark.parametrize("fabric", [True, False], ids=["fabric", "springs"])
def test_the_scenes_gravity(blank, kind, fabric):
    """Scene › Gravity as Blender's Cloth takes it: the scene's vector (any direction; none while
    unticked) times the cloth's Field Weights › Gravity. A free cloth falls as a whole, so its
    motion is Earth's fall scaled to that vector; with no force at all it does not move (it
    diverged at frame 1)."""
    short_range(blank, 1, 11)  # one second at 10 fps
    cloth = grid_cloth(n=4, pins=False, fabric=fabric)
    rest = evaluated(cloth)
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    earth = (baked(blank, cloth, [11])[0] - rest).mean(axis=0)
    assert earth[2] < -1.0 and np.abs(earth[:2]).max() < 1e-9  # Blender's default, -9.81 m/s² in z
    case = GRAVITY[kind]
    blank.scene.gravity = case.get("gravity", blank.scene.gravity)
    blank.scene.use_gravity = case.get("use_gravity", True)
    cloth.diffcloth.gravity_weight = case.get("weight", 1.0)
    acting = np.array(blank.scene.gravity) * cloth.diffcloth.gravity_weight * blank.scene.use_gravity
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    moved = baked(blank, cloth, range(1, 12)) - rest
    assert np.allclose(moved[-1], acting / -9.81 * earth[2], rtol=0, atol=1e-9 + 1e-6 * abs(earth[2]))
    if not acting.any():
        assert np.abs(moved).max() == 0.0
    matches_plain(blank, cloth)


# ---------------------------------------------------------------------------------------------
# negative and non-uniform scales of colliders and targets (the cloth's own: PLACED)

MESH_SCALES = {
    "mirrored in x": (-1.0, 1.0, 1.0),
    "upside down": (1.0, 1.0, -1.0),
    "turned inside out": (-1.0, -1.0, -1.0),
    "scaled unevenly": (1.4, 0.7, 1.0),
}


@pytest.mark.parametrize("kind", list(MESH_SCALES))
def test_a_collision_mesh_scaled_oddly(blank, kind):
    """A Single Sided table mirrored by a negative scale is still a table: Blender shows its normals
    pointing out, and the cloth lands on its top (its world triangles' winding had turned, and every
    vertex "started inside")."""
    from test_collision_addon import table

    short_range(blank, 1, 16)
    cloth = grid_cloth(fabric=True, pins=False, n=10, size=0.5)
    top = table(size=0.3, depth=0.4)
    top.scale = tuple(np.array(top.scale) * MESH_SCALES[kind])
    blank.view_layer.objects.active = cloth
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    blank.scene.frame_set(16)
    x = evaluated(cloth)
    half = 0.5 * np.abs(np.array(top.scale[:2])) - 0.01
    on_top = (np.abs(x[:, 0]) < half[0]) & (np.abs(x[:, 1]) < half[1])
    assert on_top.sum() >= 20 and (x[on_top, 2] > -0.2).all()  # held by the top, nothing inside


def test_a_single_sided_collider_whose_scale_turns_negative_is_refused(blank):
    from test_collision_addon import table

    short_range(blank, 1, 6)
    grid_cloth(fabric=True, pins=False)
    top = table(size=0.3, depth=0.4)
    top.keyframe_insert("scale", frame=1)
    top.scale.x = -top.scale.x
    top.keyframe_insert("scale", frame=6)
    blank.scene.frame_set(1)
    refused(
        blank,
        bpy.ops.diffcloth.simulate,
        "collider 'Table' is Single Sided and its scale turns negative or back at frame 4",
    )
    top.collision.use_culling = False  # either side is free: nothing to swap
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}


@pytest.mark.parametrize("scale", [(-1.0, 1.0, 1.0), (1.5, 0.5, 1.0), (1.0, -2.0, 0.5)], ids=str)
def test_a_target_scaled_oddly_poses_what_the_viewport_shows(aimed, blank, scale):
    cloth, target = aimed
    target.scale = scale
    blank.view_layer.update()
    shown = evaluated(target)
    setup = conv().gather(blank)
    assert np.allclose(setup.loss.targets[5], shown, atol=1e-6)
    assert bpy.ops.diffcloth.optimize() == {"FINISHED"}
    matches_plain(blank, cloth)


def test_a_sphere_scaled_unevenly_is_named(blank):
    """An ellipsoid shown, a round sphere simulated: said once, with what to do."""
    from diffcloth.diffcloth_addon import operators

    short_range(blank, 1, 4)
    grid_cloth(n=4)
    sphere = add_sphere(radius=0.1, location=(0.0, 0.0, -0.3))
    sphere.scale = (1.0, 1.0, 0.5)
    setup, _ = operators.prepare(blank, "simulate")
    assert setup.scene.colliders[0].at(0.0)[1] == pytest.approx(0.1, rel=1e-3)
    assert [w for w in setup.warnings if "sphere" in w] == [
        "sphere collider 'Sphere' is scaled unevenly at frame 1 (scale (1, 1, 0.5)): it collides as a round "
        "sphere as wide as its longest axis; give it one scale, or give the mesh Physics › Collision (and Role "
        "None) to collide with the shape shown"
    ]
    sphere.scale = (0.5, 0.5, 0.5)
    assert not operators.prepare(blank, "simulate")[0].warnings
