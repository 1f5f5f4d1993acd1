"""Blender scene → plain numpy arrays and a core Scene (main thread only; core never sees bpy)."""

import numpy as np
from bpy_extras import anim_utils

from .. import core as dc

BAKE_PREFIX = "DiffCloth_f"
RESULT_KEY = "diffcloth_result"
# the last run's positions at every integrator step (Simulate & Bake's or Optimize's)
MOTION_KEY = "diffcloth_motion"
NO_CLOTH = "no cloth: mark a mesh as DiffCloth Cloth"
NO_TARGETS = "no targets: add one with 'New Target from Cloth'"
NO_KEYS = "no targets with keyframes: pose a Target copy of the cloth and insert a keyframe"
# how far a target may pose a pinned vertex from its pin (m) before the artist is warned
PIN_SLACK = 1e-3


class InputError(Exception):
    """A user mistake, reported as one line naming the object and the problem."""


def frame_time(scene):
    return scene.render.fps_base / scene.render.fps


def frame_range(scene):
    """The frames a run covers: the scene's range or DiffCloth's own."""
    s = scene.diffcloth
    return (scene.frame_start, scene.frame_end) if s.use_scene_range else (s.frame_start, s.frame_end)


def find_cloth(scene, name=None, active=None):
    """The cloth named, else the active object if it is a cloth, else the scene's only cloth."""
    cloths = [o for o in scene.objects if o.diffcloth.role == "CLOTH"]
    if name:
        match = [o for o in cloths if o.name == name]
        if not match:
            raise InputError(f"no object named '{name}' is marked as DiffCloth cloth")
        cloths = match
    elif active is not None and active in cloths:
        cloths = [active]
    if not cloths:
        raise InputError(NO_CLOTH)
    if len(cloths) > 1:
        raise InputError(f"several cloths ({', '.join(o.name for o in cloths)}): make one active, or name one (--cloth NAME)")
    obj = cloths[0]
    if obj.type != "MESH":
        raise InputError(f"'{obj.name}' is marked as cloth but is a {obj.type.lower()}, not a mesh")
    return obj


def action_fcurves(anim_data):
    """F-curves animating a data block, read the way its Blender version stores them: through the
    assigned slot's channelbag (slotted actions, 4.4+; the only kind from 5.0 on), else the legacy
    `action.fcurves` (4.2, 4.3)."""
    if anim_data is None or anim_data.action is None:
        return []
    if "action_slot" not in anim_data.bl_rna.properties:
        return list(anim_data.action.fcurves)
    bag = anim_utils.action_get_channelbag_for_slot(anim_data.action, anim_data.action_slot)
    return [] if bag is None else list(bag.fcurves)


def action_frames(anim_data):
    """Keyframe frames of an animation data block."""
    return {int(round(k.co[0])) for fc in action_fcurves(anim_data) for k in fc.keyframe_points}


def keyed_frames(obj):
    frames = action_frames(obj.animation_data)
    if obj.type == "MESH":
        frames |= action_frames(obj.data.animation_data)
        if obj.data.shape_keys is not None:
            frames |= action_frames(obj.data.shape_keys.animation_data)
    return frames


class _OwnKeysMuted:
    """Mute DiffCloth's baked shape keys so the cloth is read from its own rest shape."""

    def __init__(self, obj):
        keys = obj.data.shape_keys
        self.blocks = [] if keys is None else [b for b in keys.key_blocks if b.name.startswith(BAKE_PREFIX)]

    def __enter__(self):
        self.state = [b.mute for b in self.blocks]
        for b in self.blocks:
            b.mute = True

    def __exit__(self, *exc):
        for b, mute in zip(self.blocks, self.state):
            b.mute = mute


def world_mesh(obj, depsgraph):
    """World-space vertices (n,3) and triangles (T,3) of the evaluated object."""
    ev = obj.evaluated_get(depsgraph)
    mesh = ev.to_mesh()
    try:
        n = len(mesh.vertices)
        co = np.empty(n * 3)
        mesh.vertices.foreach_get("co", co)
        co = co.reshape(n, 3)
        mw = np.array(ev.matrix_world)
        verts = co @ mw[:3, :3].T + mw[:3, 3]
        mesh.calc_loop_triangles()
        tris = np.empty(len(mesh.loop_triangles) * 3, np.int64)
        mesh.loop_triangles.foreach_get("vertices", tris)
        face_edges = {k for p in mesh.polygons for k in p.edge_keys}
        loose_edges = sum(1 for e in mesh.edges if e.key not in face_edges)
        return verts, tris.reshape(-1, 3), loose_edges, co, mw
    finally:
        ev.to_mesh_clear()


def group_weights(obj, name, depsgraph):
    """Per-vertex weights of a vertex group on the evaluated mesh (0 where unassigned)."""
    group = obj.vertex_groups.get(name)
    if group is None:
        raise InputError(f"'{obj.name}' has no vertex group '{name}'")
    ev = obj.evaluated_get(depsgraph)
    mesh = ev.to_mesh()
    try:
        w = np.zeros(len(mesh.vertices))
        for v in mesh.vertices:
            for g in v.groups:
                if g.group == group.index:
                    w[v.index] = g.weight
        return w
    finally:
        ev.to_mesh_clear()


def collider_pose(obj, role):
    """(center, radius) of a sphere or (point, normal) of a plane, from the (evaluated) object."""
    mw = np.array(obj.matrix_world)
    loc = mw[:3, 3].copy()
    scale = float(np.linalg.norm(mw[:3, :3], axis=0).max())
    if role == "SPHERE":
        if obj.type == "MESH" and len(obj.data.vertices):
            co = np.empty(len(obj.data.vertices) * 3)
            obj.data.vertices.foreach_get("co", co)
            radius = float(np.linalg.norm(co.reshape(-1, 3), axis=1).max()) * scale
        elif obj.type == "EMPTY":
            radius = obj.empty_display_size * scale
        else:
            raise InputError(f"sphere collider '{obj.name}' must be a mesh or an empty")
        return loc, radius
    normal = mw[:3, :3] @ np.array([0.0, 0.0, 1.0])
    return loc, normal / np.linalg.norm(normal)


def check_undeformed(obj, local_co):
    """Refuse a cloth whose modifiers or (non-DiffCloth) shape keys move or add vertices.

    DiffCloth simulates the mesh as drawn and bakes the result to shape keys, which Blender
    applies first, under the modifiers: a modifier that moves vertices would act twice on the
    bake, one that adds vertices would leave the bake nothing to match, and another active shape
    key would add its offset on top.
    """
    mesh = obj.data
    basis = np.empty(len(mesh.vertices) * 3)
    mesh.vertices.foreach_get("co", basis)
    moved = len(local_co) != len(mesh.vertices) or not np.allclose(local_co, basis.reshape(-1, 3), rtol=0,
                                                                      atol=1e-6 * max(np.ptp(basis), 1e-3))
    if not moved:
        return
    culprits = [f"modifier '{m.name}'" for m in obj.modifiers if m.show_viewport or m.show_render]
    if mesh.shape_keys is not None:
        culprits += [f"shape key '{b.name}'" for b in mesh.shape_keys.key_blocks[1:]
                     if not b.name.startswith(BAKE_PREFIX) and not b.mute and b.value != 0]
    what = (f"its vertex count ({len(mesh.vertices)} → {len(local_co)})" if len(local_co) != len(mesh.vertices)
            else "its shape")
    raise InputError(f"cloth '{obj.name}': {', '.join(culprits) or 'something'} change(s) {what}; DiffCloth "
                     "bakes under the modifiers, so apply or disable them first")


def not_ready(scene, kind):
    """Why no `kind` run ("simulate", "optimize") can start in this scene whatever cloth is named,
    or "": what the operators' poll shows on their disabled buttons."""
    objs = scene.objects
    if not any(o.diffcloth.role == "CLOTH" for o in objs):
        return NO_CLOTH
    targets = [o for o in objs if o.diffcloth.role == "TARGET"]
    if kind == "optimize" and not targets:
        return NO_TARGETS
    if kind == "optimize" and not any(keyed_frames(o) for o in targets):
        return NO_KEYS
    return ""


class Setup:
    """Everything gathered for one run: the core scene and loss plus what bake/store need."""

    def __init__(self, **fields):
        self.__dict__.update(fields)


def _constant(poses):
    return poses[0] if np.allclose(poses, poses[0]) else poses


def pin_warnings(settings, scene, loss, cloth, target_names, start):
    """A warning per target that poses pinned vertices away from where the pin group holds them
    at its frame (a copy moved or turned as a whole), unless the control forces move those pins
    (Move Pins): else they stay pinned, and the cloth near them can only stretch toward the pose."""
    if loss is None or (settings.opt_forces and settings.force_basis == "KEYS" and settings.force_move_pins):
        return []
    out = []
    for f, off in dc.pins_off_targets(scene, loss).items():
        worst = float(off.max()) if len(off) else 0.0
        if worst > PIN_SLACK:
            out.append(f"target '{target_names[f]}' at frame {f + start} moves pinned vertices of '{cloth}' by up to "
                       f"{worst * 100:.1f} cm: pins follow the cloth object, so they and the cloth around them cannot "
                       "reach that pose (use Control Forces with Move Pins, leave the pinned vertices in place, "
                       "animate the cloth object, or unpin them)")
    return out


def gather(context, cloth_name=None, need_targets=True, use_active=True):
    """Read the scene into a Setup; raises InputError for user mistakes. Restores the frame.
    use_active: with several cloths and no name, take the active object if it is one."""
    scene = context.scene
    settings = scene.diffcloth
    cloth_obj = find_cloth(scene, cloth_name, context.active_object if use_active else None)
    cs = cloth_obj.diffcloth
    start, end = frame_range(scene)
    if end <= start:
        raise InputError(f"the frame range {start}-{end} is empty")
    frames = list(range(start, end + 1))
    targets = [o for o in scene.objects if o.diffcloth.role == "TARGET"]
    for t in targets:
        owner = t.diffcloth.cloth
        if owner is not None and (owner.type != "MESH" or owner.diffcloth.role != "CLOTH"):
            raise InputError(f"target '{t.name}' poses '{owner.name}', which is not marked as Cloth")
    targets = [t for t in targets if t.diffcloth.cloth in (None, cloth_obj)]
    original_frame = scene.frame_current
    try:
        scene.frame_set(start)
        with _OwnKeysMuted(cloth_obj):
            context.view_layer.update()
            depsgraph = context.evaluated_depsgraph_get()
            verts, tris, loose_edges, local_co, _ = world_mesh(cloth_obj, depsgraph)
            check_undeformed(cloth_obj, local_co)
            pins = (np.flatnonzero(group_weights(cloth_obj, cs.pin_group, depsgraph) > 0.5)
                    if cs.pin_group else np.zeros(0, np.int64))
        if len(tris) == 0:
            raise InputError(f"cloth '{cloth_obj.name}' has no faces")
        if loose_edges:
            raise InputError(f"cloth '{cloth_obj.name}' has {loose_edges} loose edge(s); delete them or fill faces")
        try:
            cloth = dc.Cloth(verts, tris, mass=cs.mass, k_tension=cs.tension, k_bending=cs.bending,
                             damping=cs.damping, pinned=pins)
        except ValueError as err:
            raise InputError(f"cloth '{cloth_obj.name}': {err}") from None

        colliders = [o for o in scene.objects if o.diffcloth.role in ("SPHERE", "PLANE")]
        poses = {o.name: [] for o in colliders}
        pin_path, matrices = [], []
        target_pos = {}
        target_frames = {o.name: sorted(keyed_frames(o)) for o in targets}
        for t in targets:
            outside = [f for f in target_frames[t.name] if not start <= f <= end]
            if outside:
                raise InputError(f"target '{t.name}' has keyframes at {outside}, outside the frame range "
                                 f"{start}-{end}")
        for f in frames:
            scene.frame_set(f)
            depsgraph = context.evaluated_depsgraph_get()
            for o in colliders:
                poses[o.name].append(collider_pose(o.evaluated_get(depsgraph), o.diffcloth.role))
            mw = np.array(cloth_obj.evaluated_get(depsgraph).matrix_world)
            matrices.append(mw)
            if len(pins):
                pin_path.append(local_co[pins] @ mw[:3, :3].T + mw[:3, 3])
            for t in targets:
                if f in target_frames[t.name]:
                    if t.type != "MESH":
                        raise InputError(f"target '{t.name}' is not a mesh")
                    tv = world_mesh(t, depsgraph)[0]
                    if len(tv) != cloth.n:
                        raise InputError(f"target '{t.name}' has {len(tv)} vertices, cloth '{cloth_obj.name}' "
                                         f"has {cloth.n}")
                    if f in target_pos:
                        raise InputError(f"targets '{target_pos[f][0]}' and '{t.name}' are both keyed at frame {f}")
                    target_pos[f] = (t.name, tv)
    finally:
        scene.frame_set(original_frame)

    if need_targets and not target_pos:
        raise InputError(NO_KEYS if targets else NO_TARGETS)
    built = []
    for o in colliders:
        pose = poses[o.name]
        if o.diffcloth.role == "SPHERE":
            center = _constant(np.array([p[0] for p in pose]))
            built.append(dc.Sphere(center, pose[0][1]))
        else:
            built.append(dc.Plane(_constant(np.array([p[0] for p in pose])),
                                  _constant(np.array([p[1] for p in pose]))))
    pin_path = _constant(np.array(pin_path)) if len(pins) else None
    if pin_path is not None and pin_path.ndim == 2:
        pin_path = None  # static pins stay where the mesh has them
    core_scene = dc.Scene(cloth, steps=end - start, dt=frame_time(scene), substeps=cs.substeps,
                          colliders=built, contact_stiffness=cs.contact_stiffness, contact_thickness=cs.thickness,
                          pin_path=pin_path)
    by_name = {t.name: t for t in targets}
    loss = None
    if target_pos:
        vertex_weights = {}
        for f, (name, _) in target_pos.items():
            t = by_name[name]
            if t.diffcloth.weight_group:
                vertex_weights[f - start] = group_weights(t, t.diffcloth.weight_group,
                                                          context.evaluated_depsgraph_get())
        loss = dc.KeyframeLoss({f - start: pos for f, (_, pos) in target_pos.items()},
                               weights={f - start: by_name[name].diffcloth.weight for f, (name, _) in target_pos.items()},
                               vertex_weights=vertex_weights or None)
    names = {f - start: name for f, (name, _) in target_pos.items()}
    return Setup(cloth_obj=cloth_obj, scene=core_scene, loss=loss, start=start, end=end,
                 matrices=np.array(matrices),
                 warnings=pin_warnings(settings, core_scene, loss, cloth_obj.name, names, start),
                 posed_pins=dc.posed_pins(core_scene, loss, PIN_SLACK) if loss else np.zeros(0, np.int64),
                 target_frames={n: fr for n, fr in target_frames.items()})


def params_from_settings(settings, setup):
    """The parameterizations the artist ticked."""
    params = []
    if settings.opt_tension or settings.opt_bending:
        params.append(dc.GlobalStiffness(tension=settings.opt_tension, bending=settings.opt_bending))
    if settings.opt_velocity_per_vertex:
        params.append(dc.InitialVelocity(per_vertex=True))
    elif settings.opt_velocity:
        params.append(dc.InitialVelocity())
    # the costs are distances off a key; per-frame forces sum over frames instead of integrating
    # over time, so their weights take the frame time in
    strength, change = (dc.weight_for_distance(d) for d in (settings.force_strength, settings.force_change))
    dt = setup.scene.dt
    if settings.opt_forces and settings.force_basis == "KEYS":
        keyed = dc.KeyedForces(settings.force_key_spacing, strength, change,
                               move_pins=setup.posed_pins if settings.force_move_pins else False)
        try:
            keyed.size(setup.scene)
        except ValueError as err:
            raise InputError(f"Force Key Spacing: {str(err).split(': ', 1)[1]}") from None
        params.append(keyed)
    elif settings.opt_forces:
        params.append(dc.ControlForces(strength * dt, change / dt))
    if settings.opt_wind:
        params.append(dc.Wind(strength * dt, change / dt))
    if not params:
        raise InputError("nothing to optimize: tick at least one quantity under 'Optimize'")
    return params


def stored_array(stored, key, size):
    """A stored result's array (read in place from Blender's compact double array), or None if
    absent or no longer of that size (the mesh or frame range changed since)."""
    value = stored.get(key) if stored else None
    if value is None:
        return None
    arr = np.asarray(value, dtype=np.float64).ravel()
    return arr if arr.size == size else None


def apply_stored_result(setup):
    """The scene with the last optimization's design (stiffness, initial velocities, control
    forces) wherever it still fits: Simulate reproduces the optimized motion, Optimize continues
    from it."""
    stored = setup.cloth_obj.get(RESULT_KEY)
    sc = setup.scene
    cloth, n, steps = sc.cloth, sc.cloth.n, sc.steps
    stiffness = {k: v for k, v in (("k_tension", stored_array(stored, "k_tension", cloth.n_tension)),
                                   ("k_bending", stored_array(stored, "k_bending", cloth.n_bending)))
                 if v is not None}
    changes = {"cloth": cloth.replace(**stiffness)} if stiffness else {}
    v0 = stored_array(stored, "v0", n * 3)
    if v0 is not None:
        changes["v0"] = v0.reshape(n, 3)
    forces = stored_array(stored, "forces", steps * n * 3)
    if forces is not None:
        changes["forces"] = forces.reshape(steps, n, 3)
    offset = stored_array(stored, "pin_offset", (steps + 1) * len(cloth.pinned) * 3)
    if offset is not None:
        changes["pin_path"] = pin_base(sc) + offset.reshape(steps + 1, -1, 3)
    return sc.replace(**changes) if changes else sc


def stored_motion(setup, scene):
    """The last run's positions at every integrator step (the bake the artist saw and posed the
    targets from, or the optimized motion), to start the next run's steps from, so that it follows
    the same branch where the cloth buckles and its start needs a few Newton iterations a step; or
    None if there is none or it no longer fits the frames, substeps or mesh."""
    motion = stored_array(setup.cloth_obj, MOTION_KEY, (scene.n_steps + 1) * scene.cloth.n * 3)
    return None if motion is None else motion.reshape(scene.n_steps + 1, scene.cloth.n, 3)


def store_motion(setup, step_x):
    setup.cloth_obj[MOTION_KEY] = np.asarray(step_x, dtype=np.float64).ravel()


def pin_base(scene):
    """(frames+1, n_pinned, 3): where the cloth object holds the pins at every frame."""
    if scene.pin_path is not None:
        return scene.pin_path
    return np.repeat(scene.x0[None, scene.cloth.pinned], scene.steps + 1, axis=0)


def store_result(setup, result):
    """Keep the optimized design on the cloth, apart from the artist's settings (Apply copies the
    stiffness over): arrays as Blender's compact double arrays, saved in the .blend."""
    sc = result.scene
    stored = {"k_tension": sc.cloth.k_tension, "k_bending": sc.cloth.k_bending, "v0": sc.v0.ravel(),
              "loss": float(result.loss),
              "initial_loss": float(result.initial_loss), "iterations": len(result.history), "reason": result.reason}
    if sc.forces is not None:
        stored["forces"] = sc.forces.ravel()
    if sc.pin_path is not None:  # moved pins, as offsets from the cloth object's own path
        offset = sc.pin_path - pin_base(setup.scene)
        if np.any(offset):
            stored["pin_offset"] = offset.ravel()
    # per keyframe (scene frame): mean and largest distance (m) before, then after
    stored["keyframes"] = {str(f + setup.start): list(d) for f, d in result.keyframes.items()}
    stored["max_control_acceleration"] = sc.max_control_acceleration()
    setup.cloth_obj[RESULT_KEY] = stored


def uniform(stored, key):
    """The stored stiffness as one value if it is uniform, else None."""
    arr = stored_array(stored, key, len(stored[key])) if stored and key in stored else None
    return float(arr[0]) if arr is not None and len(arr) and np.ptp(arr) == 0 else None
