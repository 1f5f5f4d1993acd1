"""The add-on against the real Blender (bpy module): build scenes, run operators, read back."""

import math
import os
import signal
import subprocess
import sys
import time
import types

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")

from conftest import REPO  # noqa: E402


def grid_cloth(name="Cloth", n=6, size=0.4, pins=True, location=(0, 0, 0), fabric=False):
    """A grid marked as cloth: springs of tension 10, converged steps (the settings these tests were
    written for), or with fabric=True the defaults (Cotton, linearized steps)."""
    bpy.ops.mesh.primitive_grid_add(x_subdivisions=n - 1, y_subdivisions=n - 1, size=size, location=location)
    obj = bpy.context.active_object
    obj.name = name
    obj.diffcloth.role = "CLOTH"
    if not fabric:
        obj.diffcloth.model, obj.diffcloth.solver, obj.diffcloth.tension = "SPRINGS", "NEWTON", 10.0
    if pins:
        co = np.array([v.co for v in obj.data.vertices])
        top = co[:, 1].max()
        idx = [
            int(i)
            for i in np.flatnonzero((np.abs(co[:, 1] - top) < 1e-6) & (np.abs(np.abs(co[:, 0]) - size / 2) < 1e-6))
        ]
        obj.vertex_groups.new(name="pin").add(idx, 1.0, "REPLACE")
        obj.diffcloth.pin_group = "pin"
    return obj


def target_from_simulation(context, frame):
    """Simulate & Bake the scene's cloth, copy it at `frame` (New Target from Cloth), clear the bake
    and go back to the start: the target, a pose the cloth is known to reach."""
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    context.scene.frame_set(frame)
    assert bpy.ops.diffcloth.new_target() == {"FINISHED"}
    target = next(o for o in context.scene.objects if o.diffcloth.role == "TARGET")
    bpy.ops.diffcloth.clear_bake()
    context.scene.frame_set(context.scene.frame_start)
    return target


def ops_report(op, **kw):
    """Run an operator, returning its result set (errors are reported, not raised, by our operators)."""
    try:
        return op(**kw)
    except RuntimeError as err:  # bpy turns ERROR reports of a cancelled operator into RuntimeError
        return str(err)


def evaluated(obj):
    dg = bpy.context.evaluated_depsgraph_get()
    ev = obj.evaluated_get(dg)
    mesh = ev.to_mesh()
    co = np.array([ev.matrix_world @ v.co for v in mesh.vertices])
    ev.to_mesh_clear()
    return co


def convert():
    from diffcloth.diffcloth_addon import convert as c

    return c


def errors():
    from diffcloth.diffcloth_addon import errors as e

    return e


def reading():
    from diffcloth.diffcloth_addon import reading as r

    return r


def results():
    from diffcloth.diffcloth_addon import results as r

    return r


def test_register_unregister_leaves_nothing(addon):
    assert hasattr(bpy.types.Object, "diffcloth") and hasattr(bpy.types.Scene, "diffcloth")
    assert "DIFFCLOTH_PT_main" in dir(bpy.types)
    # a clean process registers and unregisters, then exits promptly (no leftover timers or classes)
    code = (
        f"import sys; sys.path.insert(0, {str(REPO / 'scripts')!r});"
        "from dev_extension import load_extension; import bpy; ext = load_extension(); ext.register();"
        "ext.unregister(); assert not hasattr(bpy.types.Object, 'diffcloth');"
        "assert not hasattr(bpy.types, 'DIFFCLOTH_PT_main'); print('clean')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "clean" in out.stdout, out.stderr


def test_cloth_conversion_in_world_space_with_parent_and_modifier(blank):
    parent = bpy.data.objects.new("Rig", None)
    blank.collection.objects.link(parent)
    parent.location = (1.0, 2.0, 3.0)
    parent.rotation_euler = (0.0, 0.0, math.pi / 2)
    cloth = grid_cloth(n=3, pins=False)
    bpy.ops.mesh.primitive_plane_add(size=1.0)  # a quad mesh subdivided by a modifier
    quad = bpy.context.active_object
    cloth.parent = parent
    cloth.location = (0.5, 0.0, 0.0)
    cloth.scale = (2.0, 2.0, 2.0)
    bpy.context.view_layer.update()
    setup = convert().gather(blank, "Cloth", need_targets=False)
    local = np.array([v.co for v in cloth.data.vertices])
    mw = np.array(cloth.matrix_world)
    assert np.allclose(setup.scene.x0, local @ mw[:3, :3].T + mw[:3, 3], atol=1e-6)
    assert np.allclose(setup.scene.x0.mean(axis=0), [1.0, 2.5, 3.0], atol=1e-6)  # parent rotates +x to +y
    # a quad: faces triangulated; a modifier that leaves the vertices as they are is fine
    cloth.diffcloth.role = "NONE"
    quad.name, quad.diffcloth.role = "Quad", "CLOTH"
    quad.modifiers.new("Solidify", "SOLIDIFY").show_viewport = False
    bpy.context.view_layer.update()
    setup = convert().gather(blank, "Quad", need_targets=False)
    assert setup.scene.cloth.n == 4 and len(setup.scene.cloth.tris) == 2


def test_bake_of_a_cloth_carried_by_an_animated_rotating_object(blank):
    """Each frame is baked into that frame's object space: pinned vertices ride the carrier."""
    scene = blank.scene
    scene.frame_start, scene.frame_end = 1, 11
    rig = bpy.data.objects.new("Rig", None)
    blank.collection.objects.link(rig)
    for frame, x, angle in ((1, 0.0, 0.0), (11, 2.0, math.pi / 2)):
        rig.location, rig.rotation_euler = (x, 0.0, 1.0), (0.0, 0.0, angle)
        rig.keyframe_insert("location", frame=frame)
        rig.keyframe_insert("rotation_euler", frame=frame)
    cloth = grid_cloth()
    cloth.parent = rig
    pins = [v.index for v in cloth.data.vertices if v.groups]  # the pin group is its only group
    rest = np.array([v.co for v in cloth.data.vertices])
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    for frame in range(1, 12):
        scene.frame_set(frame)
        mw = np.array(cloth.matrix_world)
        carried = rest[pins] @ mw[:3, :3].T + mw[:3, 3]
        assert np.abs(evaluated(cloth)[pins] - carried).max() <= 1e-4, frame
    scene.frame_set(11)
    assert np.ptp(evaluated(cloth)[:, 2]) > 0.02  # the free part hangs: it was simulated, not just carried


def test_baked_motion_is_linear_between_frames(blank):
    scene = blank.scene
    scene.frame_start, scene.frame_end = 1, 6
    cloth = grid_cloth(pins=False)
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    for frame in (2, 4):
        scene.frame_set(frame)
        a = evaluated(cloth)
        scene.frame_set(frame + 1)
        b = evaluated(cloth)
        scene.frame_set(frame, subframe=0.25)
        blend = 0.75 * a + 0.25 * b
        motion = np.abs(b - a).max()
        assert motion > 1e-3 and np.abs(evaluated(cloth) - blend).max() <= 0.01 * motion, frame


def test_after_its_last_frame_the_bake_holds_its_last_pose(blank):
    """As Blender's Cloth: past the frame range, and past a shorter range baked again, the cloth
    stays where it was last simulated, not back at its rest shape."""
    scene = blank.scene
    scene.frame_start, scene.frame_end = 1, 6
    cloth = grid_cloth(pins=False)
    for end in (6, 4):
        scene.frame_end = end
        assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
        scene.frame_set(end)
        last = evaluated(cloth)
        assert last[:, 2].mean() < -0.01  # it fell
        for later in (end + 1, 12):
            scene.frame_set(later)
            assert np.abs(evaluated(cloth) - last).max() < 1e-6, (end, later)


def test_colliders_sampled_per_frame(blank):
    scene = blank.scene
    scene.frame_start, scene.frame_end = 1, 5
    grid_cloth()
    bpy.ops.mesh.primitive_uv_sphere_add(radius=0.5, location=(0, 0, -1))
    sphere = bpy.context.active_object
    sphere.diffcloth.role = "SPHERE"
    sphere.scale = (0.6, 0.6, 0.6)
    sphere.keyframe_insert("location", frame=1)
    sphere.location = (0.4, 0, -1)
    sphere.keyframe_insert("location", frame=5)
    for fc in reading().action_fcurves(sphere.animation_data):
        for k in fc.keyframe_points:
            k.interpolation = "LINEAR"
    bpy.ops.mesh.primitive_plane_add(location=(0, 0, -2), rotation=(math.radians(30), 0, 0))
    bpy.context.active_object.diffcloth.role = "PLANE"
    empty = bpy.data.objects.new("Ball", None)
    blank.collection.objects.link(empty)
    empty.empty_display_size = 0.3
    empty.scale = (2, 2, 2)
    empty.location = (0, 1, 0)
    empty.diffcloth.role = "SPHERE"
    setup = convert().gather(blank, need_targets=False)
    spheres = [c for c in setup.scene.colliders if hasattr(c, "radius")]
    moving = next(s for s in spheres if s.center.ndim == 2)
    assert moving.center.shape == (5, 3)
    assert np.allclose(moving.center[:, 0], np.linspace(0, 0.4, 5), atol=1e-5)
    assert moving.radius == pytest.approx(0.3, rel=1e-3)
    ball = next(s for s in spheres if s.center.ndim == 1)
    assert np.allclose(ball.center, [0, 1, 0]) and ball.radius == pytest.approx(0.6)
    plane = next(c for c in setup.scene.colliders if hasattr(c, "normal"))
    assert np.allclose(plane.normal, [0, -math.sin(math.radians(30)), math.cos(math.radians(30))], atol=1e-6)
    assert np.allclose(plane.point, [0, 0, -2])
    assert blank.scene.frame_current == 1  # the frame is restored


def test_target_frames_from_object_mesh_and_shape_key_animation(blank):
    scene = blank.scene
    scene.frame_start, scene.frame_end = 1, 12
    cloth = grid_cloth()

    def target(name):
        mesh = cloth.data.copy()
        obj = bpy.data.objects.new(name, mesh)
        blank.collection.objects.link(obj)
        obj.diffcloth.role = "TARGET"
        return obj

    by_object = target("ByObject")
    by_object.location = (0, 0, -0.1)
    by_object.keyframe_insert("location", frame=4)
    by_object.location = (0, 0, -0.3)
    by_object.keyframe_insert("location", frame=9)
    by_mesh = target("ByMesh")
    by_mesh.data.vertices[0].co.z = -0.25
    by_mesh.data.vertices[0].keyframe_insert("co", frame=6)
    by_keys = target("ByKeys")
    by_keys.shape_key_add(name="Basis")
    sag = by_keys.shape_key_add(name="Sag")
    for p in sag.data:
        p.co.z -= 0.2
    sag.value = 1.0
    sag.keyframe_insert("value", frame=11)
    assert reading().keyed_frames(by_object) == {4, 9}
    assert reading().keyed_frames(by_mesh) == {6}
    assert reading().keyed_frames(by_keys) == {11}
    setup = convert().gather(blank)
    targets = setup.loss.targets
    assert sorted(targets) == [3, 5, 8, 10]  # core frames count from the start frame
    rest = np.array([v.co for v in cloth.data.vertices])
    assert np.allclose(targets[3], rest + [0, 0, -0.1], atol=1e-6)
    assert np.allclose(targets[8], rest + [0, 0, -0.3], atol=1e-6)
    assert targets[5][0, 2] == pytest.approx(-0.25) and np.allclose(targets[5][1:], rest[1:])
    assert np.allclose(targets[10], rest + [0, 0, -0.2], atol=1e-6)


@pytest.fixture
def posed(blank):
    """A cloth and a target posed from a known simulation (tension 10) at frame 11."""
    scene = blank.scene
    scene.frame_start, scene.frame_end = 1, 11
    bpy.ops.mesh.primitive_uv_sphere_add(radius=0.1, location=(0, 0, -0.35))
    bpy.context.active_object.diffcloth.role = "SPHERE"
    cloth = grid_cloth()
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    scene.frame_set(11)
    assert bpy.ops.diffcloth.new_target() == {"FINISHED"}
    target = next(o for o in scene.objects if o.diffcloth.role == "TARGET")
    bpy.ops.diffcloth.clear_bake()
    cloth.diffcloth.tension = 4.0
    scene.frame_set(1)
    return cloth, target


def test_a_target_that_moves_the_pins_is_reported(posed, blank):
    """A copy moved as a whole drags its pinned vertices along: the artist hears that those cannot
    follow, naming the target, the frame and the cloth; the run still goes on."""
    cloth, target = posed
    assert operators().prepare(blank, "optimize")[0].warnings == []
    co = np.array([v.co for v in target.data.vertices])
    target.data.vertices.foreach_set("co", (co + [0.0, 0.0, 0.05]).ravel())
    target.data.update()
    setup, _ = operators().prepare(blank, "optimize")
    assert setup.warnings == [
        f"target '{target.name}' at frame 11 moves pinned vertices of 'Cloth' by up to 5.0 cm: "
        "pins follow the cloth object, so they and the cloth around them cannot reach that pose "
        "(use Control Forces with Move Pins, leave the pinned vertices in place, animate the "
        "cloth object, or unpin them)"
    ]
    assert bpy.ops.diffcloth.optimize() == {"FINISHED"}


def test_move_pins_reaches_a_copy_moved_as_a_whole(posed, blank):
    """With Control Forces and Move Pins (the default) a target moved as a whole, pins included,
    is no longer warned about: the pins move there, the baked cloth reaches the pose, and Simulate
    & Bake reproduces it from the stored result."""
    cloth, target = posed
    settings = blank.scene.diffcloth
    settings.opt_tension, settings.opt_forces, settings.max_iterations = False, True, 15
    assert settings.force_move_pins
    cloth.diffcloth.tension = 10.0  # the tension the target was simulated with: only the move is left
    co = np.array([v.co for v in target.data.vertices])
    target.data.vertices.foreach_set("co", (co + [0.04, 0.0, 0.03]).ravel())
    target.data.update()
    setup, _ = operators().prepare(blank, "optimize")
    assert setup.warnings == []
    pins = np.flatnonzero(
        [any(g.group == cloth.vertex_groups["pin"].index for g in v.groups) for v in cloth.data.vertices]
    )
    assert sorted(setup.posed_pins) == sorted(pins)
    assert bpy.ops.diffcloth.optimize() == {"FINISHED"}
    stored = cloth["diffcloth_result"]
    mean_before, _, mean_after, largest_after = stored["keyframes"]["11"]
    assert mean_before > 0.045 and mean_after < 0.005 and largest_after < 0.01, (mean_before, mean_after, largest_after)
    assert len(stored["pin_offset"]) == 11 * len(pins) * 3
    labels = []
    draw_all(blank, labels)  # the result panel says how far the pins went
    moved = [t for t in labels if t.startswith("Pins moved (Move Pins): up to ")]
    assert len(moved) == 1 and 3.0 <= float(moved[0].split()[-2]) <= 8.0, moved
    blank.scene.frame_set(11)
    baked = evaluated(cloth)
    assert np.abs(baked[pins] - evaluated(target)[pins]).max() < 0.01  # the pins went with the pose
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    blank.scene.frame_set(11)
    assert np.allclose(evaluated(cloth), baked, atol=1e-5)
    settings.force_move_pins = False  # the artist's choice: pins stay, and the warning says so
    assert "Move Pins" in operators().prepare(blank, "optimize")[0].warnings[0]


def test_optimize_end_to_end(posed, blank):
    cloth, target = posed
    scene = blank.scene
    assert bpy.ops.diffcloth.optimize() == {"FINISHED"}
    assert blank.window_manager.diffcloth.normalized_loss < 1e-6
    # the optimized stiffness is kept apart from the artist's until applied
    assert cloth.diffcloth.tension == 4.0
    assert results().uniform(cloth["diffcloth_result"], "k_tension") == pytest.approx(10.0, rel=1e-3)
    assert bpy.ops.diffcloth.apply_result() == {"FINISHED"}
    assert cloth.diffcloth.tension == pytest.approx(10.0, rel=1e-3)
    mean_before, largest_before, mean_after, largest_after = cloth["diffcloth_result"]["keyframes"]["11"]
    assert mean_before > 1e-3 and largest_after < 1e-4 and mean_after <= largest_after
    names = [k.name for k in cloth.data.shape_keys.key_blocks]
    assert names[0] == "Basis" and names[1:] == [f"DiffCloth_f{f:04d}" for f in range(1, 12)]
    scene.frame_set(11)
    assert np.abs(evaluated(cloth) - evaluated(target)).max() < 1e-3
    scene.frame_set(6)  # the keys animate: mid-run the cloth is neither at rest nor at the target
    mid = evaluated(cloth)
    assert np.abs(mid - np.array([v.co for v in cloth.data.vertices])).max() > 1e-3
    # re-baking replaces the bake; a second optimize starts from the stored result, not the baked pose
    assert bpy.ops.diffcloth.optimize() == {"FINISHED"}
    assert len(cloth.data.shape_keys.key_blocks) == 12
    assert "diffcloth_result" in cloth.keys()
    assert bpy.ops.diffcloth.discard_result() == {"FINISHED"} and "diffcloth_result" not in cloth.keys()
    assert "no stored optimization" in ops_report(bpy.ops.diffcloth.apply_result)


def test_stop_within_ends_once_the_key_is_close_enough(posed, blank):
    """Stop Within: the run stops at the first iteration whose key is that close (reason "within"),
    and the baked cloth is."""
    cloth, target = posed
    settings = blank.scene.diffcloth
    settings.max_iterations = 1
    assert bpy.ops.diffcloth.optimize() == {"FINISHED"}
    mean_before, _, after_one, _ = cloth["diffcloth_result"]["keyframes"]["11"]
    assert after_one < 0.9 * mean_before
    assert bpy.ops.diffcloth.discard_result() == {"FINISHED"}
    settings.max_iterations, settings.stop_within = 30, 0.5 * (mean_before + after_one)
    assert bpy.ops.diffcloth.optimize() == {"FINISHED"}
    stored = cloth["diffcloth_result"]
    assert stored["reason"] == "within" and stored["iterations"] == 1, (stored["reason"], stored["iterations"])
    assert stored["keyframes"]["11"][2] == pytest.approx(after_one, rel=1e-9)
    blank.scene.frame_set(11)
    assert np.linalg.norm(evaluated(cloth) - evaluated(target), axis=1).mean() <= settings.stop_within


def test_optimize_starts_from_the_baked_simulation(posed, blank):
    """Simulate & Bake's motion is its bake (no second copy on the cloth): the next Optimize starts
    every step from it (the motion the artist saw and posed from, on its branch where the cloth
    buckles, in a few Newton iterations a step), and Clear Bake forgets it."""
    cloth, _ = posed
    assert "diffcloth_motion_solver" not in cloth.keys()  # the fixture cleared its bake
    assert operators().prepare(blank, "optimize")[1]["guess"] is None
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    assert "diffcloth_motion" not in cloth.keys()  # the shape keys hold it
    setup, job = operators().prepare(blank, "optimize")
    motion = job["guess"]
    assert motion.shape == (11, 36, 3)
    blank.scene.frame_set(11)
    assert np.allclose(evaluated(cloth), motion[10], atol=1e-6)  # the bake's own motion
    from diffcloth import core

    cold, warm = core.simulate(job["scene"]), core.simulate(job["scene"], guess=job["guess"])
    assert np.abs(warm.x - motion[:: job["scene"].substeps]).max() < 1e-6
    assert warm.stats.iterations.sum() < 0.5 * cold.stats.iterations.sum()
    assert bpy.ops.diffcloth.clear_bake() == {"FINISHED"} and "diffcloth_motion_solver" not in cloth.keys()
    assert operators().prepare(blank, "optimize")[1]["guess"] is None


def test_a_motion_the_bake_does_not_hold_is_kept_in_float32(posed, blank):
    """With substeps between the frames the bake lacks the steps between: the motion is kept on the
    cloth, float32 as Blender's own caches."""
    cloth, _ = posed
    cloth.diffcloth.substeps = 2
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    assert cloth["diffcloth_motion"].typecode == "f" and len(cloth["diffcloth_motion"]) == 21 * 36 * 3
    guess = operators().prepare(blank, "optimize")[1]["guess"]
    assert guess.shape == (21, 36, 3)
    blank.scene.frame_set(11)
    assert np.allclose(evaluated(cloth), guess[20], atol=1e-6)


def test_simulate_reproduces_optimized_forces(posed, blank):
    cloth, _ = posed
    s = blank.scene.diffcloth
    s.opt_tension, s.opt_forces, s.max_iterations = False, True, 5
    assert bpy.ops.diffcloth.optimize() == {"FINISHED"}
    forces = cloth["diffcloth_result"]["forces"]  # stored as Blender's compact float32 array, not a list
    assert type(forces).__name__ == "IDPropertyArray" and forces.typecode == "f" and len(forces) == 10 * 36 * 3
    blank.scene.frame_set(11)
    after_optimize = evaluated(cloth)
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    blank.scene.frame_set(11)
    assert np.allclose(evaluated(cloth), after_optimize, atol=1e-6)


def operators():
    from diffcloth.diffcloth_addon import operators as o

    return o


def runner():
    from diffcloth.diffcloth_addon import runner as r

    return r


def untouched(cloth, tension):
    keys = cloth.data.shape_keys
    return cloth.diffcloth.tension == tension and (
        keys is None or not any(k.name.startswith("DiffCloth_") for k in keys.key_blocks)
    )


def test_inline_cancel_keeps_best_and_scene_untouched(posed, blank):
    cloth, _ = posed
    before = cloth.diffcloth.tension
    setup, job = operators().prepare(blank, "optimize")
    run = runner().Inline(job)
    run.cancel()  # cancel arrives before the first iteration ends: stop after it
    infos, done = run.start().wait()
    assert done and run.error is None
    assert run.result.reason == "stopped" and len(infos) == 1
    assert run.result.loss <= run.result.initial_loss
    assert untouched(cloth, before)  # nothing written until finish()


def test_worker_process_streams_progress_and_cancel_keeps_the_best(posed, blank):
    cloth, _ = posed
    s = blank.scene.diffcloth
    s.opt_tension, s.opt_forces, s.force_change, s.max_iterations = True, True, 1e-5, 400
    before = cloth.diffcloth.tension
    setup, job = operators().prepare(blank, "optimize")
    run = runner().Process(job).start()
    infos, done = [], False
    while not infos and not done:
        more, done = run.drain()
        infos += more
        time.sleep(0.02)
    assert not done and infos[0]["iteration"] == 1  # progress arrives while the worker runs
    run.cancel()
    more, done = run.wait()
    infos += more
    assert done and run.error is None and run.result.reason == "stopped" and len(infos) < 400
    assert run.result.loss <= min(i["loss"] for i in infos) * (1 + 1e-12)  # the best design seen
    assert untouched(cloth, before)
    operators().finish(blank, setup, run)  # the main thread writes it
    assert not untouched(cloth, before)
    blank.scene.frame_set(11)
    assert np.allclose(evaluated(cloth), run.result.trajectory.x[-1], atol=1e-5)


def test_worker_process_that_dies_or_fails_is_reported_and_nothing_is_written(posed, blank):
    cloth, _ = posed
    before = cloth.diffcloth.tension
    blank.scene.diffcloth.max_iterations = 10000
    setup, job = operators().prepare(blank, "optimize")
    run = runner().Process(job).start()
    os.kill(run.proc.pid, signal.SIGKILL)
    _, done = run.wait()
    assert done and run.result is None and "was killed (signal 9)" in run.error
    with pytest.raises(errors().InputError, match="optimize of 'Cloth' failed: the worker process was killed"):
        operators().finish(blank, setup, run)
    assert untouched(cloth, before)
    # a failure in the worker (a simulation that diverges: its settings' check before the run
    # switched off) comes back as its message
    cloth.diffcloth.tension, cloth.diffcloth.contact_stiffness = 1e9, 1e9
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys.modules["diffcloth.core.model.scene"], "check_bounds", lambda scene: None)
        setup, job = operators().prepare(blank, "simulate")
    run = runner().Process(job).start()
    run.wait()
    assert run.result is None and "diverged at frame" in run.error


def test_worker_process_simulates(posed, blank):
    cloth, _ = posed
    setup, job = operators().prepare(blank, "simulate")
    run = runner().Process(job).start()
    infos, _ = run.wait()
    assert run.error is None and run.result.x.shape == (11, len(cloth.data.vertices), 3)
    assert [(i["frame"], i["frames"]) for i in infos] == [(f, 10) for f in range(1, 11)]
    inline = runner().Inline(job).start()
    assert np.array_equal(run.result.step_x, inline.result.step_x)  # deterministic, the same solver in both


def test_a_second_run_is_refused_while_one_is_going(posed, blank):
    state = blank.window_manager.diffcloth
    state.running = True
    try:
        assert "in progress" in ops_report(bpy.ops.diffcloth.optimize)
        assert "in progress" in ops_report(bpy.ops.diffcloth.simulate)
    finally:
        state.running = False
    assert "No DiffCloth run" in ops_report(bpy.ops.diffcloth.cancel)


class Layout:
    """Records what a panel draws; every property it shows must exist on the real data."""

    def __init__(self):
        self.shown, self.labels = [], []

    def label(self, text="", **kw):
        self.labels.append(text)
        return self

    def __getattr__(self, name):  # row(), column(), box(), label(), separator(), operator(), …
        return lambda *args, **kw: self

    def prop(self, data, name, **kw):
        assert name in data.bl_rna.properties, name
        self.shown.append(name)
        return self

    def menu(self, menu, text="", **kw):
        assert hasattr(bpy.types, menu), menu
        self.labels.append(text)
        return self

    def prop_search(self, data, name, search_data, search_name, **kw):
        assert name in data.bl_rna.properties and search_name in search_data.bl_rna.properties
        self.shown.append(name)


def draw_all(context, labels=None):
    """Draw every panel whose poll passes for the context; the properties shown (and the labels'
    texts into `labels`)."""
    from diffcloth.diffcloth_addon import ui

    shown = []
    for cls in ui.CLASSES:
        if hasattr(cls, "poll") and not cls.poll(context):
            continue
        layout = Layout()
        # draw() reads self.layout and the class's own attributes: run it on a stand-in instance
        cls.draw(types.SimpleNamespace(layout=layout, props=getattr(cls, "props", ())), context)
        shown += layout.shown
        if labels is not None:
            labels += layout.labels
    return shown


def test_every_panel_draws_with_and_without_a_setup(posed, blank):
    cloth, target = posed
    blank.view_layer.objects.active = None
    assert "role" not in draw_all(blank)  # no active object: only the scene's run
    for obj, expected in (
        (cloth, {"role", "mass", "tension", "bending", "pin_group", "contact_stiffness", "refine_iterations"}),
        (target, {"role", "cloth", "weight", "weight_group"}),
    ):
        blank.view_layer.objects.active = obj
        assert expected <= set(draw_all(blank))
    blank.scene.diffcloth.opt_forces = True
    blank.window_manager.diffcloth.running = True
    try:
        assert {"force_strength", "force_change", "force_move_pins", "max_iterations", "stop_within"} <= set(
            draw_all(blank)
        )
    finally:
        blank.window_manager.diffcloth.running = False
    assert bpy.ops.diffcloth.optimize() == {"FINISHED"}  # the stored result drawn beside the settings
    blank.view_layer.objects.active = cloth
    assert "role" in draw_all(blank)
    bpy.ops.wm.read_factory_settings(use_empty=True)
    draw_all(bpy.context)  # an empty scene


def test_save_and_reopen_keeps_settings_and_bake(posed, blank, tmp_path):
    cloth, _ = posed
    blank.scene.diffcloth.max_iterations = 7
    assert bpy.ops.diffcloth.optimize() == {"FINISHED"}
    cloth.diffcloth.substeps = 2
    blank.scene.frame_set(11)
    baked = evaluated(cloth)
    path = str(tmp_path / "saved.blend")
    bpy.ops.wm.save_as_mainfile(filepath=path)
    bpy.ops.wm.read_factory_settings(use_empty=True)
    bpy.ops.wm.open_mainfile(filepath=path)
    cloth = bpy.data.objects["Cloth"]
    assert bpy.context.scene.diffcloth.max_iterations == 7
    assert cloth.diffcloth.role == "CLOTH" and cloth.diffcloth.substeps == 2
    assert cloth.diffcloth.tension == 4.0  # the artist's, and the optimized one stored apart:
    assert results().uniform(cloth["diffcloth_result"], "k_tension") == pytest.approx(10.0, rel=1e-3)
    bpy.context.scene.frame_set(11)
    assert np.allclose(evaluated(cloth), baked, atol=1e-6)


@pytest.mark.parametrize(
    "problem,message",
    [
        ("no cloth", "no cloth"),
        ("not a mesh", "is a curve, not a mesh"),
        ("vertex count", "has 4 vertices, cloth 'Cloth' has 36"),
        ("no targets", "no targets"),
        ("no keyframes", "no targets with keyframes"),
        ("outside range", "outside the frame range"),
        ("loose edge", "loose edge"),
        ("pin group", "has no vertex group 'nope'"),
        ("too stiff", "cloth 'Cloth': Tension Stiffness 1e+09 N/m is too stiff for this cloth's"),
        ("nothing to optimize", "nothing to optimize"),
        ("target of a non-cloth", "target 'Target' poses 'Other', which is not marked as Cloth"),
        ("key spacing", "Force Key Spacing: keys every 0.01 s give"),
    ],
)
def test_bad_input_reports_and_leaves_scene_untouched(blank, problem, message):
    scene = blank.scene
    scene.frame_start, scene.frame_end = 1, 6
    cloth = grid_cloth()
    target = bpy.data.objects.new("Target", cloth.data.copy())
    blank.collection.objects.link(target)
    target.diffcloth.role = "TARGET"
    target.keyframe_insert("location", frame=6)
    if problem == "no cloth":
        cloth.diffcloth.role = "NONE"
    elif problem == "not a mesh":
        cloth.diffcloth.role = "NONE"
        bpy.ops.curve.primitive_bezier_curve_add()
        bpy.context.active_object.diffcloth.role = "CLOTH"
    elif problem == "vertex count":
        bpy.ops.mesh.primitive_plane_add()
        small = bpy.context.active_object
        small.diffcloth.role = "TARGET"
        small.keyframe_insert("location", frame=3)
    elif problem == "no targets":
        target.diffcloth.role = "NONE"
    elif problem == "no keyframes":
        target.animation_data_clear()
    elif problem == "outside range":
        target.keyframe_insert("location", frame=40)
    elif problem == "loose edge":
        cloth.data.vertices.add(2)
        cloth.data.edges.add(1)
        cloth.data.edges[-1].vertices = (len(cloth.data.vertices) - 2, len(cloth.data.vertices) - 1)
        cloth.data.update()
    elif problem == "pin group":
        cloth.diffcloth.pin_group = "nope"
    elif problem == "too stiff":
        cloth.diffcloth.tension = 1e9
        cloth.diffcloth.contact_stiffness = 1e9
        bpy.ops.mesh.primitive_uv_sphere_add(radius=0.2, location=(0, 0, -0.25))
        bpy.context.active_object.diffcloth.role = "SPHERE"
    elif problem == "nothing to optimize":
        scene.diffcloth.opt_tension = False
    elif problem == "key spacing":
        scene.diffcloth.opt_forces, scene.diffcloth.force_key_spacing = True, 0.01
    elif problem == "target of a non-cloth":
        bpy.ops.mesh.primitive_plane_add()
        bpy.context.active_object.name = "Other"
        target.diffcloth.cloth = bpy.data.objects["Other"]
    snapshot = {
        o.name: (o.diffcloth.tension, o.data.shape_keys is None if o.type == "MESH" else None) for o in scene.objects
    }
    out = ops_report(bpy.ops.diffcloth.optimize)
    assert out != {"FINISHED"}
    assert message in str(out)
    assert snapshot == {
        o.name: (o.diffcloth.tension, o.data.shape_keys is None if o.type == "MESH" else None) for o in scene.objects
    }
    assert not blank.window_manager.diffcloth.running


def test_addon_type_checks():
    mypy = pytest.importorskip("mypy.api")
    # Blender's `name: FloatProperty(...)` idiom is not a valid annotation for mypy: that code is off
    out, err, status = mypy.run(
        [
            str(REPO / "diffcloth_addon"),
            "--ignore-missing-imports",
            "--follow-imports=silent",
            "--disable-error-code=valid-type",
        ]
    )
    assert status == 0, out + err
