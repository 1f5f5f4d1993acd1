"""Operators: gather inputs on the main thread, call core, write results on the main thread."""

import time

import bpy
from bpy.props import StringProperty

from .. import core as dc
from . import bake, convert
from .runner import OptimizeRunner


def _fail(op, message):
    op.report({"ERROR"}, message)
    return {"CANCELLED"}


def _write(context, setup, positions):
    bake.bake(setup.cloth_obj, positions, setup.start, setup.matrices)
    context.scene.frame_set(context.scene.frame_current)


def prepare_optimize(context, cloth_name=None, max_iter=None):
    """Copy the inputs out of Blender (main thread) into a runner that has not started yet."""
    settings = context.scene.diffcloth
    setup = convert.gather(context, cloth_name)
    params = convert.params_from_settings(settings, setup)
    runner = OptimizeRunner(convert.apply_stored_result(setup), setup.loss, params,
                            max_iter or settings.max_iterations)
    settings.running, settings.iteration, settings.status = True, 0, "starting"
    return setup, runner


def finish_optimize(context, setup, runner):
    """Write a finished run into Blender (main thread): bake, store the result, status. Raises
    InputError if the run failed; nothing is written then."""
    settings = context.scene.diffcloth
    settings.running = False
    if runner.error is not None:
        settings.status = "failed"
        raise convert.InputError(f"optimization of '{setup.cloth_obj.name}' failed: {runner.error}")
    result = runner.result
    _write(context, setup, result.trajectory.x)
    convert.store_result(setup, result)
    settings.loss, settings.normalized_loss = result.loss, result.normalized_loss
    settings.status = result.reason
    return result


def summary(setup, result):
    return (f"'{setup.cloth_obj.name}': loss {result.initial_loss:.4g} → {result.loss:.4g} "
            f"({result.normalized_loss:.2e} of the start) in {len(result.history)} iterations, {result.reason}")


class _ClothName:
    cloth: StringProperty(name="Cloth", description="Cloth object name (empty: the scene's only cloth)")


class DIFFCLOTH_OT_simulate(_ClothName, bpy.types.Operator):
    """Simulate the cloth with its current settings (and last optimized values) and bake it to shape keys"""

    bl_idname = "diffcloth.simulate"
    bl_label = "Simulate & Bake"
    bl_options = {"REGISTER", "UNDO"}

    def execute(self, context):
        try:
            setup = convert.gather(context, self.cloth or None, need_targets=False)
            traj = dc.simulate(convert.apply_stored_result(setup))
            _write(context, setup, traj.x)
        except (convert.InputError, ValueError, dc.SimulationError) as err:
            return _fail(self, str(err))
        self.report({"INFO"}, f"Simulated and baked {len(traj.x)} frames of '{setup.cloth_obj.name}'")
        return {"FINISHED"}


class DIFFCLOTH_OT_optimize(_ClothName, bpy.types.Operator):
    """Find the cloth parameters that pass through the keyframed targets, then bake the result (Esc cancels, keeping the best so far)"""

    bl_idname = "diffcloth.optimize"
    bl_label = "Optimize"
    bl_options = {"REGISTER", "UNDO"}

    def _prepare(self, context):
        self.setup, self.runner = prepare_optimize(context, self.cloth or None)
        self.started = time.perf_counter()

    def _progress(self, context, infos):
        settings = context.scene.diffcloth
        for info in infos:
            settings.iteration = info["iteration"]
            settings.loss = info["loss"]
            settings.normalized_loss = info["normalized_loss"]
        settings.elapsed = time.perf_counter() - self.started

    def _finish(self, context):
        try:
            result = finish_optimize(context, self.setup, self.runner)
        except convert.InputError as err:
            return _fail(self, str(err))
        self.report({"INFO"}, summary(self.setup, result))
        return {"FINISHED"}

    def execute(self, context):
        try:
            self._prepare(context)
        except (convert.InputError, ValueError) as err:
            context.scene.diffcloth.running = False
            return _fail(self, str(err))
        infos, _ = self.runner.start().wait()
        self._progress(context, infos)
        return self._finish(context)

    def invoke(self, context, event):
        if bpy.app.background or context.window is None:
            return self.execute(context)
        try:
            self._prepare(context)
        except (convert.InputError, ValueError) as err:
            context.scene.diffcloth.running = False
            return _fail(self, str(err))
        wm = context.window_manager
        self.timer = wm.event_timer_add(0.2, window=context.window)
        wm.progress_begin(0, max(context.scene.diffcloth.max_iterations, 1))
        wm.modal_handler_add(self)
        self.runner.start()
        return {"RUNNING_MODAL"}

    def modal(self, context, event):
        if event.type == "ESC" and event.value == "PRESS":
            self.runner.cancel.set()
            context.scene.diffcloth.status = "cancelling: keeping the best result so far"
        if event.type != "TIMER":
            return {"PASS_THROUGH"}
        infos, done = self.runner.drain()
        self._progress(context, infos)
        s = context.scene.diffcloth
        context.window_manager.progress_update(s.iteration)
        context.workspace.status_text_set(
            f"DiffCloth: iteration {s.iteration}, loss {s.loss:.4g} ({s.normalized_loss:.2e} of start), "
            f"{s.elapsed:.0f} s — Esc to stop")
        for area in context.screen.areas:
            area.tag_redraw()
        if not done:
            return {"RUNNING_MODAL"}
        context.window_manager.event_timer_remove(self.timer)
        context.window_manager.progress_end()
        context.workspace.status_text_set(None)
        return self._finish(context)


class _OnCloth(_ClothName):
    """Operators acting on one cloth: the named one, or the scene's only cloth."""

    def execute(self, context):
        try:
            obj = convert.find_cloth(context.scene, self.cloth or None)
        except convert.InputError as err:
            return _fail(self, str(err))
        return self.run(context, obj)


class DIFFCLOTH_OT_clear_bake(_OnCloth, bpy.types.Operator):
    """Remove DiffCloth's baked shape keys from the cloth (the Basis and other keys stay)"""

    bl_idname = "diffcloth.clear_bake"
    bl_label = "Clear Bake"
    bl_options = {"REGISTER", "UNDO"}

    def run(self, context, obj):
        removed = bake.clear_bake(obj)
        self.report({"INFO"}, f"Removed {removed} baked shape keys from '{obj.name}'")
        return {"FINISHED"}


class DIFFCLOTH_OT_new_target(_OnCloth, bpy.types.Operator):
    """Copy the cloth as it looks at the current frame into a new Target, keyed at this frame, ready to pose"""

    bl_idname = "diffcloth.new_target"
    bl_label = "New Target from Cloth"
    bl_options = {"REGISTER", "UNDO"}

    def run(self, context, cloth):
        frame = context.scene.frame_current
        evaluated = cloth.evaluated_get(context.evaluated_depsgraph_get())
        mesh = bpy.data.meshes.new_from_object(evaluated)
        mesh.name = f"{cloth.name}_target_f{frame:04d}"
        target = bpy.data.objects.new(mesh.name, mesh)
        target.matrix_world = cloth.matrix_world.copy()
        target.diffcloth.role = "TARGET"
        target.diffcloth.cloth = cloth
        target.display_type = "WIRE"
        context.collection.objects.link(target)
        target.keyframe_insert("location", frame=frame)
        self.report({"INFO"}, f"Target '{target.name}' keyed at frame {frame}: edit its shape to pose the cloth")
        return {"FINISHED"}


CLASSES = (DIFFCLOTH_OT_simulate, DIFFCLOTH_OT_optimize, DIFFCLOTH_OT_clear_bake, DIFFCLOTH_OT_new_target)

