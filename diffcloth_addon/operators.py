"""Operators: gather inputs on the main thread, call core, write results on the main thread."""

import time

import bpy
import numpy as np
from bpy.props import StringProperty

from .. import core as dc
from . import bake, convert, proxy, reach, runner, together
from .colliders import collision_objects
from .errors import InputError
from .reading import ModifiersOff, find_cloth, frame_range, not_ready, stack_place
from .results import (
    RESULT_KEY,
    apply_stored_result,
    baked_solver,
    forget_motion,
    render_positions,
    setting_result,
    store_motion,
    store_result,
    stored_motion,
)
from .settings import OPTIMIZE_SOLVER, OWN_STIFFNESS, bounded, params_from_settings, tension_setting

G = 9.81  # control accelerations are reported in g: an artist tells physics from puppetry by it


def _fail(op, message):
    op.report({"ERROR"}, message)
    return {"CANCELLED"}


def prepare(context, kind, cloth_name=None, max_iter=None, use_active=True, within=None, converged=False):
    """Copy a run's inputs out of Blender (main thread): the Setup and the worker's job. max_iter and
    within (m) override the scene's Max Iterations and Stop Within; converged: a simulation with
    Optimize's steps, whatever the cloth's Solver."""
    settings = context.scene.diffcloth
    setup = convert.gather(context, cloth_name, need_targets=kind == "optimize", use_active=use_active)
    setup.kind = kind
    converge = kind == "optimize" or converged
    if setup.parts:  # cloths run together: each with its stored design, joined
        scene, guess = together.run_scene(setup, OPTIMIZE_SOLVER if converge else None)
        scene = bounded(setup.cloth_name, scene)
    else:
        scene = apply_stored_result(setup)
        if converge:
            scene = bounded(setup.cloth_name, scene.replace(solver=OPTIMIZE_SOLVER))
        guess = stored_motion(setup, scene)
    setup.solver = scene.solver
    job = {"kind": kind, "scene": scene, "guess": guess}
    if kind == "optimize":
        job.update(
            loss=setup.loss,
            params=params_from_settings(settings, setup),
            max_iter=max_iter or settings.max_iterations,
            render_tris=setup.render_tris,
            within=within or settings.stop_within or None,
            parts=together.job_parts(setup) if setup.parts else None,
        )
        if setup.refine is not None:  # then the design found through the proxy, on the cloth itself
            job["refine"] = dict(
                scene=bounded(setup.cloth_name, setup.refine.scene.replace(solver=OPTIMIZE_SOLVER)),
                loss=setup.refine.loss,
                params=params_from_settings(settings, setup.refine),
                iterations=max(p.cloth_obj.diffcloth.refine_iterations for p in setup.parts or [setup] if p.refine),
            )
    return setup, job


def finish(context, setup, run):
    """Write a finished run into Blender (main thread): bake each cloth, and for an optimization
    store its result. Raises InputError if the run failed or a cloth is gone; nothing is written
    then. setup.written: (Setup, result) per cloth."""
    if run.error is not None:
        raise InputError(f"{setup.kind} of '{setup.cloth_name}' failed: {run.error}")
    for part in setup.parts or [setup]:
        part.cloth_obj = _still_there(context, part)  # an undo during the run reloads the data
    if getattr(run.result, "refined", False):  # Refine's result is the cloths' own motion and design
        together.take_refined(setup)
    setup.written = together.per_cloth(setup, run.result)
    for part, result in setup.written:
        motion = result if setup.kind == "simulate" else result.trajectory
        try:
            bake.bake(part.cloth_obj, render_positions(part, motion.x), part.start, part.matrices)
        except np.linalg.LinAlgError as err:
            raise InputError(f"cloth '{part.cloth_name}': {err}; nothing more was written") from None
        store_motion(part, motion.step_x, setup.solver)
        if setup.kind == "optimize":
            store_result(part, result, [p.cloth_name for p in setup.parts or ()])
            reach.mark_targets(part, result, context.scene.objects)
    context.scene.frame_set(context.scene.frame_current)
    return run.result


def _still_there(context, setup):
    """The run's cloth object, looked up again by name; InputError if it is gone or changed."""
    name = setup.cloth_name
    cloth = context.scene.objects.get(name)
    if cloth is None or cloth.type != "MESH" or len(cloth.data.vertices) != setup.n_render:
        raise InputError(f"cloth '{name}' was deleted or changed during the run; nothing was written")
    if cloth.mode == "EDIT":  # leaving Edit Mode would overwrite the bake with the edit mesh
        raise InputError(f"cloth '{name}' was put in Edit Mode during the run; nothing was written")
    return cloth


def progress_text(setup, info):
    """One optimization iteration as the artist reads it: loss and each key's distances in mm."""
    keys = "".join(
        f", frame {int(f) + setup.start} {d[0] * 1e3:.1f} mm (largest {d[1] * 1e3:.1f})"
        for f, d in sorted(info.get("distances", {}).items(), key=lambda item: int(item[0]))
    )
    refining = " (Refine, on the cloth itself)" if info.get("refining") else ""
    return f"iteration {info['iteration']}{refining}: {info['normalized_loss']:.2e} of the start loss{keys}"


def reason_text(reason):
    """Why an optimization stopped, as the artist reads it (core's reasons are codes or messages)."""
    return "every key within Stop Within" if reason == "within" else reason


def summary(setup, result):
    cloth = bpy.data.objects.get(setup.cloth_name)
    temporary = (
        " (its Mesh Cache is in Blender's temporary folder until the .blend is saved)"
        if cloth is not None and stack_place(cloth) and not bpy.data.filepath
        else ""
    )
    if setup.kind == "simulate":
        cost = getattr(result, "self_collision_s", 0.0)
        return (
            f"Simulated and baked {len(result.x)} frames of '{setup.cloth_name}'"
            + (f" (Self Collisions: {cost:.1f} s of the run)" if cost else "")
            + temporary
        )
    carried = getattr(result, "carried_distances", None)  # Refine's start, on the cloth itself
    keys = "; ".join(
        f"frame {f + setup.start} {d[0] * 1e3:.1f} → "
        + ("" if carried is None else f"{carried[f][0] * 1e3:.1f} on the cloth itself, Refine → ")
        + f"{d[2] * 1e3:.1f} mm"
        for f, d in result.keyframes.items()
    )
    return (
        f"'{setup.cloth_name}': loss {result.initial_loss:.4g} → {result.loss:.4g} "
        f"({result.normalized_loss:.2e} of the start) in {len(result.history)} iterations, {reason_text(result.reason)}; "
        f"mean distance {keys}; control {result.scene.max_control_acceleration() / G:.2f} g at most{temporary}"
    )


class _ClothName:
    cloth: StringProperty(
        name="Cloth", description="Cloth object name (empty: the active cloth, or the scene's only one)"
    )


class _Run(_ClothName, bpy.types.Operator):
    """Simulate or optimize: execute() runs in this process (blender -b, scripts, tests); invoke()
    in a worker process, with a timer reading its progress into the window manager's run state,
    Esc or Cancel stopping it (an optimization keeps its best design), and one undo step once the
    result is written."""

    bl_options = {"UNDO"}  # no REGISTER: F9 would re-run the whole job
    kind = ""

    @classmethod
    def poll(cls, context):
        why = (
            "a DiffCloth run is in progress: wait for it or cancel it"
            if context.window_manager.diffcloth.running
            else not_ready(context.scene, cls.kind)
        )
        if why:
            cls.poll_message_set(why)
        return not why

    def _start(self, context, runner_class):
        self.setup, job = prepare(context, self.kind, self.cloth or None, converged=getattr(self, "converged", False))
        for warning in self.setup.warnings:
            self.report({"WARNING"}, warning)
        self.run = runner_class(job)
        state = context.window_manager.diffcloth
        state.running, state.cancel_requested, state.kind = True, False, self.bl_label
        state.iteration, state.progress, state.elapsed, state.status = 0, 0.0, 0.0, "starting"
        self.started = time.perf_counter()
        self.run.start()

    def _progress(self, context, infos):
        state = context.window_manager.diffcloth
        for info in infos:
            if self.kind == "simulate":
                state.progress, state.status = (
                    info["frame"] / info["frames"],
                    f"frame {info['frame']} of {info['frames']}",
                )
            else:
                state.iteration, state.loss, state.normalized_loss = (
                    info["iteration"],
                    info["loss"],
                    info["normalized_loss"],
                )
                state.progress = min(state.iteration / max(context.scene.diffcloth.max_iterations, 1), 1.0)
                state.status = progress_text(self.setup, info)
        state.elapsed = time.perf_counter() - self.started

    def _end(self, context):
        """Write the finished run; the run state records how it went."""
        state = context.window_manager.diffcloth
        state.running = False
        try:
            result = finish(context, self.setup, self.run)
        except InputError as err:
            state.status = "failed"
            return _fail(self, str(err))
        if self.kind == "optimize":
            far = reach.unreachable_keys(self.setup)
            state.loss, state.normalized_loss, state.status = (
                result.loss,
                result.normalized_loss,
                reason_text(result.reason)
                + (f"; frame {', '.join(str(f) for _, f, _ in far)} out of the cloth's reach" if far else ""),
            )
            for part, frame, r in far:
                self.report({"WARNING"}, reach.message(part, frame, r))
        else:
            cost = getattr(result, "self_collision_s", 0.0)  # the sidebar shows what they cost
            state.status, state.progress = "done" + (f", Self Collisions {cost:.1f} s of it" if cost else ""), 1.0
        self.report({"INFO"}, summary(self.setup, result))
        return {"FINISHED"}

    def execute(self, context):
        try:
            self._start(context, runner.Inline)
        except (InputError, ValueError) as err:
            context.window_manager.diffcloth.running = False
            return _fail(self, str(err))
        self._progress(context, self.run.wait()[0])
        return self._end(context)

    def invoke(self, context, event):
        if bpy.app.background or context.window is None:
            return self.execute(context)
        try:
            self._start(context, runner.Process)
        except (InputError, ValueError, OSError) as err:
            context.window_manager.diffcloth.running = False
            return _fail(self, str(err))
        wm = context.window_manager
        self.timer = wm.event_timer_add(0.2, window=context.window)
        wm.modal_handler_add(self)
        return {"RUNNING_MODAL"}

    def modal(self, context, event):
        state = context.window_manager.diffcloth
        if (event.type == "ESC" and event.value == "PRESS") or state.cancel_requested:
            state.cancel_requested = False
            self.run.cancel()
            state.status = "stopping: keeping the best so far" if self.kind == "optimize" else "stopping"
            if self.kind == "simulate":  # a simulation has nothing to keep
                self.cancel(context)
                self.report({"INFO"}, "Simulation cancelled; nothing was baked")
                return {"CANCELLED"}
        if event.type == "Z" and (event.ctrl or event.oskey):
            self.report({"WARNING"}, "Undo is off while DiffCloth runs (Esc stops the run)")
            return {"RUNNING_MODAL"}
        if event.type != "TIMER":
            return {"PASS_THROUGH"}
        infos, done = self.run.drain()
        self._progress(context, infos)
        context.workspace.status_text_set(
            f"DiffCloth {state.kind}: {state.status}, {state.elapsed:.0f} s — Esc to stop"
        )
        for area in context.screen.areas:
            area.tag_redraw()
        if not done:
            return {"RUNNING_MODAL"}
        self._stop_ui(context)
        return self._end(context)

    def _stop_ui(self, context):
        context.window_manager.event_timer_remove(self.timer)
        if context.workspace is not None:  # None while a file is being loaded
            context.workspace.status_text_set(None)

    def cancel(self, context):
        """Blender ends the operator (window closed, file loaded): end the worker, write nothing."""
        self.run.kill()
        self._stop_ui(context)
        state = context.window_manager.diffcloth
        state.running, state.status = False, "cancelled"


class DIFFCLOTH_OT_simulate(_Run):
    """Simulate the cloth with its current settings (and last optimized values) and bake it to shape keys"""

    bl_idname = "diffcloth.simulate"
    bl_label = "Simulate & Bake"
    kind = "simulate"

    converged: bpy.props.BoolProperty(
        name="Converged Steps",
        description="Bake the motion Optimize simulates (every step converged, whatever the cloth's "
        "Solver): the one to pose targets on",
        default=False,
        options={"SKIP_SAVE"},
    )


class DIFFCLOTH_OT_optimize(_Run):
    """Find the cloth parameters that pass through the keyframed targets, then bake the result (Esc cancels, keeping the best so far)"""

    bl_idname = "diffcloth.optimize"
    bl_label = "Optimize"
    kind = "optimize"


class DIFFCLOTH_OT_cancel(bpy.types.Operator):
    """Stop the DiffCloth run in progress (an optimization keeps its best result so far)"""

    bl_idname = "diffcloth.cancel"
    bl_label = "Cancel"
    bl_options = {"INTERNAL"}

    @classmethod
    def poll(cls, context):
        if not context.window_manager.diffcloth.running:
            cls.poll_message_set("No DiffCloth run is in progress")
            return False
        return True

    def execute(self, context):
        context.window_manager.diffcloth.cancel_requested = True
        return {"FINISHED"}


class _OnCloth(_ClothName, bpy.types.Operator):
    """Operators acting on one cloth: the named one, the active one, or the scene's only cloth."""

    bl_options = {"REGISTER", "UNDO"}

    def execute(self, context):
        try:
            obj = find_cloth(context.scene, self.cloth or None, context.active_object)
        except InputError as err:
            return _fail(self, str(err))
        return self.run(context, obj)


class DIFFCLOTH_OT_clear_bake(_OnCloth):
    """Remove DiffCloth's bake from the cloth: its shape keys (the Basis and other keys stay), or its Mesh Cache"""

    bl_idname = "diffcloth.clear_bake"
    bl_label = "Clear Bake"

    def run(self, context, obj):
        removed = bake.clear_bake(obj)
        forget_motion(obj)
        self.report({"INFO"}, f"Removed {removed} from '{obj.name}'")
        return {"FINISHED"}


class DIFFCLOTH_OT_apply_result(_OnCloth):
    """Make the optimized stiffness the cloth's own Stretch (or Tension) and Bending settings (and the
    Wind Fields' optimized strength its Field Weights › Wind, the optimized friction the colliders')"""

    bl_idname = "diffcloth.apply_result"
    bl_label = "Apply Optimized Stiffness"

    def run(self, context, obj):
        if not obj.get(RESULT_KEY):
            return _fail(self, f"cloth '{obj.name}' has no stored optimization")
        # cloths optimized together share the run's design (and must share Field Weights): all of them
        names = list(obj[RESULT_KEY].get("run", ())) or [obj.name]
        cloths = [c for c in map(context.scene.objects.get, names) if c is not None and c.get(RESULT_KEY)]
        applied = [
            (c, setting_result(c[RESULT_KEY], "k_tension"), setting_result(c[RESULT_KEY], "k_bending")) for c in cloths
        ]
        for cloth, tension, bending in applied:  # all checked before anything changes
            if tension is None and bending is None:
                return _fail(
                    self,
                    f"the optimized stiffness of '{cloth.name}' varies per spring: no single setting holds "
                    "it (Simulate uses it from the stored result)",
                )
        # the colliders are the scene's, shared by the run: their friction is scaled once
        scale = obj[RESULT_KEY].get("friction_scale")
        frictions = [] if scale is None else _frictions(context.scene, cloths)
        for owner, key in frictions:
            scaled, largest = getattr(owner, key) * scale, owner.bl_rna.properties[key].hard_max
            if scaled > largest:
                return _fail(
                    self,
                    f"the optimized friction of '{owner.id_data.name}' ({scaled:.4g}) is above Blender's "
                    f"largest Friction, {largest:g}",
                )
        for owner, key in frictions:
            setattr(owner, key, getattr(owner, key) * scale)
        done = [_apply(cloth, cloth[RESULT_KEY], tension, bending) for cloth, tension, bending in applied]
        self.report({"INFO"}, "; ".join(done) + ("" if scale is None else f"; the colliders' Friction {scale:.3g}×"))
        return {"FINISHED"}


def _frictions(scene, cloths):
    """(settings, property) of every collider of the cloths' run that has friction: a Sphere's or
    Plane's, a mesh's Collision physics'."""
    return [(o.diffcloth, "friction") for o in scene.objects if o.diffcloth.role in ("SPHERE", "PLANE")] + [
        (o.collision, "cloth_friction") for o in collision_objects(scene, cloths)
    ]


def _apply(obj, stored, tension, bending):
    """Make a cloth's stored optimized stiffness (tension, bending: None where not one setting) and
    wind factor its own settings; what it now has, as the report says it."""
    if "wind_scale" in stored.keys():  # the Wind Fields' factor, now the cloth's Field Weights › Wind
        obj.diffcloth.wind_weight *= stored["wind_scale"]
        del stored["wind_scale"]
    if "friction_scale" in stored.keys():  # now the colliders' own (applied once for the run)
        del stored["friction_scale"]
    cs, setting = obj.diffcloth, tension_setting(obj.diffcloth)
    if tension is not None:
        # Compression and Shear of their own, and the Property Weights' Max, scale with it, as
        # the optimization scaled them
        ratio = tension / getattr(cs, setting)
        for key in OWN_STIFFNESS if setting == "stretch" else ():
            if getattr(cs, "use_" + key):
                setattr(cs, key, getattr(cs, key) * ratio)
        for key in ("tension_max", "compression_max", "shear_max"):
            setattr(cs, key, getattr(cs, key) * ratio)
        setattr(cs, setting, tension)
    if bending is not None:
        cs.bending_max *= bending / cs.bending
        cs.bending = bending
    return f"'{obj.name}': {setting} {getattr(cs, setting):.4g}, bending {cs.bending:.4g}"


class DIFFCLOTH_OT_discard_result(_OnCloth):
    """Forget the stored optimization: Simulate and Optimize start from the cloth's own settings again (the bake stays until cleared)"""

    bl_idname = "diffcloth.discard_result"
    bl_label = "Discard Result"

    def run(self, context, obj):
        if RESULT_KEY not in obj.keys():
            return _fail(self, f"cloth '{obj.name}' has no stored optimization")
        del obj[RESULT_KEY]
        forget_motion(obj)
        self.report({"INFO"}, f"Discarded the optimization stored on '{obj.name}'")
        return {"FINISHED"}


class DIFFCLOTH_OT_fabric_preset(_OnCloth):
    """Give the cloth a fabric preset: its density, stretch, compression and shear stiffness, bending rigidity and air damping"""

    bl_idname = "diffcloth.fabric_preset"
    bl_label = "Fabric Preset"

    preset: StringProperty(name="Preset", description="The fabric: cotton, silk, denim, leather or rubber")

    def run(self, context, obj):
        fabric = dc.FABRICS.get(self.preset.lower())
        if fabric is None:
            return _fail(self, f"no fabric preset '{self.preset}' (presets: {', '.join(dc.FABRICS)})")
        cs = obj.diffcloth
        cs.model = "FABRIC"
        cs.density, cs.stretch, cs.bending, cs.damping = fabric.density, fabric.stretch, fabric.bending, fabric.damping
        for key in OWN_STIFFNESS:  # the preset's own, else the stretch stiffness
            value = getattr(fabric, key)
            setattr(cs, "use_" + key, value is not None)
            setattr(cs, key, fabric.stretch if value is None else value)
        self.report({"INFO"}, f"'{obj.name}': {fabric.name}")
        return {"FINISHED"}


class DIFFCLOTH_OT_new_target(_OnCloth):
    """Copy the cloth as it looks at the current frame into a new Target, keyed at this frame, ready to pose (a cloth without a bake, or with a quick preview's, is first baked with Optimize's converged steps)"""

    bl_idname = "diffcloth.new_target"
    bl_label = "New Target from Cloth"

    def run(self, context, cloth):
        frame = context.scene.frame_current
        start, end = frame_range(context.scene)
        if not start < frame <= end:  # a key there would be refused, or count for nothing
            where = (
                "the start frame, where the cloth is as modelled"
                if frame == start
                else f"outside the frame range {start}-{end}"
            )
            return _fail(
                self,
                f"frame {frame} is {where}: a target of '{cloth.name}' keyed there would not count; "
                "go to a frame after the start, within the range",
            )
        solver = baked_solver(cloth)
        if solver != OPTIMIZE_SOLVER:
            # Optimize converges every step, and a quick preview's motion differs from that by a
            # few cm where stiff cloth buckles: keys posed on it are out of Optimize's reach; with
            # no bake at all the copy would be the cloth as modelled, not where it is at this frame
            run = "" if len(convert.run_cloths(context.scene, None, cloth)) > 1 else cloth.name  # together: all
            if not bpy.app.background and context.window is not None:
                bpy.ops.diffcloth.simulate("INVOKE_DEFAULT", cloth=run, converged=True)
                why = (
                    "it has no bake yet"
                    if solver is None
                    else "with every step converged; it differs from the quick preview by a few cm"
                )
                self.report(
                    {"INFO"},
                    f"Baking the motion Optimize starts from ('{cloth.name}': {why}): press New Target from "
                    "Cloth again when it is done",
                )
                return {"CANCELLED"}
            if bpy.ops.diffcloth.simulate(cloth=run, converged=True) != {"FINISHED"}:
                return {"CANCELLED"}  # the simulation named why
            context.scene.frame_set(frame)
        with ModifiersOff(cloth, keep_bake=True):  # the cloth's own vertices as baked, before the modifiers after it
            context.view_layer.update()
            mesh = bpy.data.meshes.new_from_object(cloth.evaluated_get(context.evaluated_depsgraph_get()))
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


class DIFFCLOTH_OT_make_proxy(_OnCloth):
    """Make the cloth's proxy (Proxy Vertices, or 1000 if unset) as an object you can see and edit, and simulate that as its Simulation Mesh"""

    bl_idname = "diffcloth.make_proxy"
    bl_label = "Make Simulation Mesh"

    def run(self, context, cloth):
        budget = cloth.diffcloth.proxy_vertices or proxy.DEFAULT_BUDGET
        if budget >= len(cloth.data.vertices):
            return _fail(
                self,
                f"cloth '{cloth.name}' has {len(cloth.data.vertices)} vertices, not more than a "
                f"{budget}-vertex proxy: simulate it directly",
            )
        sim = proxy.new_object(cloth, *proxy.decimated_at_start(context, cloth, budget))
        cloth.diffcloth.sim_mesh = sim
        self.report(
            {"INFO"}, f"'{sim.name}' ({len(sim.data.vertices)} vertices) is now the Simulation Mesh of '{cloth.name}'"
        )
        return {"FINISHED"}


CLASSES = (
    DIFFCLOTH_OT_simulate,
    DIFFCLOTH_OT_optimize,
    DIFFCLOTH_OT_cancel,
    DIFFCLOTH_OT_clear_bake,
    DIFFCLOTH_OT_apply_result,
    DIFFCLOTH_OT_discard_result,
    DIFFCLOTH_OT_fabric_preset,
    DIFFCLOTH_OT_new_target,
    DIFFCLOTH_OT_make_proxy,
)
