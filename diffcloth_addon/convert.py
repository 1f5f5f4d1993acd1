"""Blender scene → plain numpy arrays and a core Scene (main thread only; core never sees bpy)."""

import re

import numpy as np
from bpy_extras import anim_utils

from .. import core as dc
from ..core.design.embedding import EmbeddedLoss
from ..core.model import scene as scene_model
from . import proxy
from .colliders import FRICTION_SCALE, MeshReader, collision_objects

BAKE_PREFIX = "DiffCloth_f"
RESULT_KEY = "diffcloth_result"
# the last run's positions at every integrator step (Simulate & Bake's or Optimize's)
MOTION_KEY = "diffcloth_motion"
MOTION_SOLVER_KEY = "diffcloth_motion_solver"  # the steps that made it: a preview's, or Optimize's
NO_CLOTH = "no cloth: mark a mesh as DiffCloth Cloth"
# Optimize converges every step whatever the cloth's Solver: a linearized step's motion over
# colliders is chaotic, its exact gradients grow ×10⁴ in two seconds and no optimizer gets far
# (docs/solver.md), while the converged step's stay of the order of the motion
OPTIMIZE_SOLVER = "newton"
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
        raise InputError(
            f"several cloths ({', '.join(o.name for o in cloths)}): make one active, or name one (--cloth NAME)"
        )
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


def action_frames(anim_data, keep=None):
    """Keyframe frames of an animation data block (of the F-curves whose data path keep(path) accepts)."""
    return {
        int(round(k.co[0]))
        for fc in action_fcurves(anim_data)
        if keep is None or keep(fc.data_path)
        for k in fc.keyframe_points
    }


# an object's F-curves that can pose a target: not its visibility, display or custom properties
POSE_PATHS = ("location", "rotation_", "scale", "delta_", "modifiers[", "constraints[")


def keyed_frames(obj):
    """The frames a target is keyed at: keys of its transform, modifiers, constraints, mesh or shape keys."""
    frames = action_frames(obj.animation_data, lambda path: path.startswith(POSE_PATHS))
    if obj.type == "MESH":
        frames |= action_frames(obj.data.animation_data)
        if obj.data.shape_keys is not None:
            # DiffCloth's own bake keys no pose: a copy of a baked cloth (Shift+D) carries them
            frames |= action_frames(
                obj.data.shape_keys.animation_data, lambda path: not path.startswith(f'key_blocks["{BAKE_PREFIX}')
            )
    return frames


def nla_animated(obj):
    """Whether NLA strips animate obj, its mesh or shape keys: keys DiffCloth does not read as poses."""
    blocks = [obj] + ([obj.data, obj.data.shape_keys] if obj.type == "MESH" else [])
    return any(
        not track.mute and not strip.mute and strip.action is not None
        for b in blocks
        if b is not None and b.animation_data is not None
        for track in b.animation_data.nla_tracks
        for strip in track.strips
    )


def nla_message(obj):
    return (
        f"target '{obj.name}' is animated by NLA strips, whose keyframes DiffCloth does not read as poses: key "
        "its poses in its own action (take them out of the NLA, or edit the strip with Tab)"
    )


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


def rest_proxy(context, cloth_obj, budget):
    """proxy.decimated of the cloth as a run reads it: at the start frame, without DiffCloth's bake."""
    scene, original_frame = context.scene, context.scene.frame_current
    try:
        with _OwnKeysMuted(cloth_obj):
            scene.frame_set(frame_range(scene)[0])
            context.view_layer.update()
            return proxy.decimated(cloth_obj, context.evaluated_depsgraph_get(), budget)
    finally:
        scene.frame_set(original_frame)


def evaluated_coords(obj, depsgraph):
    """Local vertex coordinates (n,3) of the evaluated object, and its world matrix."""
    ev = obj.evaluated_get(depsgraph)
    mesh = ev.to_mesh()
    try:
        co = np.empty(len(mesh.vertices) * 3)
        mesh.vertices.foreach_get("co", co)
        return co.reshape(-1, 3), np.array(ev.matrix_world)
    finally:
        ev.to_mesh_clear()


def to_world(co, mw):
    return co @ mw[:3, :3].T + mw[:3, 3]


def mesh_topology(obj, depsgraph):
    """Triangles (T,3) of the evaluated object, the face each comes from, and its count of edges
    that bound no face."""
    ev = obj.evaluated_get(depsgraph)
    mesh = ev.to_mesh()
    try:
        mesh.calc_loop_triangles()
        tris = np.empty(len(mesh.loop_triangles) * 3, np.int64)
        mesh.loop_triangles.foreach_get("vertices", tris)
        faces = np.empty(len(mesh.loop_triangles), np.int64)
        mesh.loop_triangles.foreach_get("polygon_index", faces)
        face_edges = {k for p in mesh.polygons for k in p.edge_keys}
        loose_edges = sum(1 for e in mesh.edges if e.key not in face_edges)
        return tris.reshape(-1, 3), faces, loose_edges
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


def evaluated(obj, depsgraph):
    """Whether Blender evaluates obj (not disabled in viewports nor in an excluded or disabled
    collection): otherwise its matrix, modifiers and shape keys are stale, whatever the frame."""
    return obj.evaluated_get(depsgraph).is_evaluated


def not_evaluated_message(what, obj):
    return (
        f"{what} '{obj.name}' is disabled in viewports or in an excluded collection, so Blender does not "
        "evaluate its animation, parents and modifiers: enable it for the run (hiding it with H is fine)"
    )


def scale_text(mw):
    return "(" + ", ".join(f"{s:.3g}" for s in np.linalg.norm(mw[:3, :3], axis=0)) + ")"


def collider_pose(obj, role, frame):
    """(center, radius) of a sphere or (point, normal) of a plane from the evaluated object at a
    frame; a collider shrunk to nothing, or a mesh whose vertices are not where its origin puts the
    collider (its location applied, a cube as a floor), is refused by name."""
    mw = np.array(obj.matrix_world)
    lin = mw[:3, :3]
    kind = "sphere" if role == "SPHERE" else "plane"
    if not np.isfinite(mw).all():
        raise InputError(f"{kind} collider '{obj.name}' has a NaN or infinite transform at frame {frame}")
    local = None
    if obj.type == "MESH":
        local = np.empty(len(obj.data.vertices) * 3)
        obj.data.vertices.foreach_get("co", local)
        local = local.reshape(-1, 3)
    if role == "SPHERE":
        scale = float(np.linalg.norm(lin, axis=0).max())
        if local is not None:
            radius = float(np.linalg.norm(local, axis=1).max()) * scale if len(local) else 0.0
        elif obj.type == "EMPTY":
            radius = obj.empty_display_size * scale
        else:
            raise InputError(f"sphere collider '{obj.name}' must be a mesh or an empty")
        if not radius > 0:
            raise InputError(
                f"sphere collider '{obj.name}' has no size at frame {frame} (scale {scale_text(mw)}): "
                "give it a size, or set its Role to None"
            )
        off = float(np.linalg.norm(lin @ (local.max(axis=0) + local.min(axis=0)) / 2)) if local is not None else 0.0
        if off > 0.25 * radius:
            raise InputError(
                f"sphere collider '{obj.name}': its vertices are centred {off:.3g} m from its origin at "
                f"frame {frame}, and DiffCloth's sphere is centred on the origin (location applied?): set "
                "its origin to its geometry (Object › Set Origin)"
            )
        return mw[:3, 3].copy(), radius
    # the normal of the object's XY plane, which stays defined when the Z scale is 0; on the local Z side
    normal = np.cross(lin[:, 0], lin[:, 1])
    length = float(np.linalg.norm(normal))
    if not length > 1e-12 * max(float(np.abs(lin).max()) ** 2, 1e-300):
        raise InputError(
            f"plane collider '{obj.name}' is flattened to a line or a point at frame {frame} "
            f"(scale {scale_text(mw)}): its normal is undefined; give it an X and Y scale"
        )
    if normal @ lin[:, 2] < 0:
        normal = -normal
    normal = normal / length
    world = local @ lin.T if local is not None and len(local) else np.zeros((1, 3))
    off = float(np.abs(world @ normal).max())
    if off > 1e-3 * float(np.ptp(world, axis=0).max()):
        raise InputError(
            f"plane collider '{obj.name}': its vertices lie up to {off:.3g} m off DiffCloth's plane "
            f"(through its origin, along its local X and Y) at frame {frame} (location or rotation "
            "applied, or not a flat plane?): set its origin and rotation to the surface's"
        )
    return mw[:3, 3].copy(), normal


def uneven_sphere(obj, frame):
    """A warning for a sphere collider shown as an ellipsoid (an uneven scale), else None: DiffCloth's
    sphere is round, as large as the ellipsoid's longest axis."""
    mw = np.array(obj.matrix_world)
    scale = np.linalg.norm(mw[:3, :3], axis=0)
    if obj.diffcloth.role != "SPHERE" or scale.max() <= 1.01 * scale.min():
        return None
    return (
        f"sphere collider '{obj.name}' is scaled unevenly at frame {frame} (scale {scale_text(mw)}): "
        "it collides as a round sphere as wide as its longest axis; give it one scale, or give the mesh "
        "Physics › Collision (and Role None) to collide with the shape shown"
    )


def check_undeformed(obj, local_co, frame):
    """Refuse a cloth whose modifiers or (non-DiffCloth) shape keys move or add vertices at a frame.

    DiffCloth simulates the mesh as drawn and bakes the result to shape keys, which Blender
    applies first, under the modifiers: a modifier that moves vertices would act twice on the
    bake, one that adds vertices would leave the bake nothing to match, and another active shape
    key would add its offset on top.
    """
    mesh = obj.data
    basis = np.empty(len(mesh.vertices) * 3)
    mesh.vertices.foreach_get("co", basis)
    moved = len(local_co) != len(mesh.vertices) or not np.allclose(
        local_co, basis.reshape(-1, 3), rtol=0, atol=1e-6 * max(np.ptp(basis), 1e-3)
    )
    if not moved:
        return
    culprits = [f"modifier '{m.name}'" for m in obj.modifiers if m.show_viewport or m.show_render]
    if mesh.shape_keys is not None:
        culprits += [
            f"shape key '{b.name}'"
            for b in mesh.shape_keys.key_blocks[1:]
            if not b.name.startswith(BAKE_PREFIX) and not b.mute and b.value != 0
        ]
    what = (
        f"its vertex count ({len(mesh.vertices)} → {len(local_co)})"
        if len(local_co) != len(mesh.vertices)
        else "its shape"
    )
    raise InputError(
        f"cloth '{obj.name}': {', '.join(culprits) or 'something'} change(s) {what} at frame {frame}; "
        "DiffCloth bakes under the modifiers, so apply or disable them first"
    )


# Blender's own simulations, which would run on top of DiffCloth's bake
BLENDER_PHYSICS = {"CLOTH": "Cloth", "SOFT_BODY": "Soft Body"}


def check_cloth_object(obj):
    """What can be told before evaluating anything: no Blender physics of its own, not in Edit
    Mode, no shape key shown alone in place of the bake, not linked from a library."""
    for m in obj.modifiers:
        if m.type in BLENDER_PHYSICS and (m.show_viewport or m.show_render):
            raise InputError(
                f"cloth '{obj.name}' also has Blender's own {BLENDER_PHYSICS[m.type]} physics "
                f"(modifier '{m.name}'), which would simulate on top of DiffCloth's bake: remove it "
                "(Properties › Physics)"
            )
    if obj.mode == "EDIT":
        raise InputError(
            f"cloth '{obj.name}' is in Edit Mode, whose edits are not in its mesh yet and which would "
            "overwrite the bake on leaving it: switch to Object Mode first"
        )
    if obj.show_only_shape_key:
        raise InputError(
            f"cloth '{obj.name}' has Shape Key Lock on (the pin under Object Data › Shape Keys), which "
            "shows one shape key alone instead of the bake: turn it off"
        )
    library = obj.library or obj.data.library
    if library is not None:  # written into in memory, but not saved with this file
        raise InputError(
            f"cloth '{obj.name}'{'' if obj.library else ' has a mesh that'} is linked from "
            f"'{library.filepath}', so this file would not keep its bake: make it local (Object › "
            "Relations › Make Local › Selected Objects and Data)"
        )


def check_transform(obj, mw, frame):
    """The cloth's world matrix must be invertible: every frame is baked into the cloth's own space."""
    sv = np.linalg.svd(mw[:3, :3], compute_uv=False) if np.isfinite(mw).all() else np.zeros(3)
    if not sv[-1] > 1e-9 * sv[0]:
        raise InputError(
            f"cloth '{obj.name}' has a zero scale at frame {frame} (scale {scale_text(mw)}): DiffCloth "
            "bakes every frame into the cloth's own space, which needs a scale other than 0"
        )


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
        return next((nla_message(o) for o in targets if nla_animated(o)), NO_KEYS)
    return ""


class Setup:
    """Everything gathered for one run: the core scene and loss plus what bake/store need."""

    def __init__(self, **fields):
        self.__dict__.update(fields)


def _constant(poses):
    return poses[0] if np.allclose(poses, poses[0]) else poses


def pin_warnings(settings, pins_off, cloth, target_names, start):
    """A warning per target that poses pinned vertices away from where the pin group holds them
    at its frame (a copy moved or turned as a whole), unless the control forces move those pins
    (Move Pins): else they stay pinned, and the cloth near them can only stretch toward the pose.
    pins_off: {frame: distances} (core.pins_off_targets), None without targets."""
    if pins_off is None or (settings.opt_forces and settings.force_basis == "KEYS" and settings.force_move_pins):
        return []
    out = []
    for f, off in pins_off.items():
        worst = float(off.max()) if len(off) else 0.0
        if worst > PIN_SLACK:
            out.append(
                f"target '{target_names[f]}' at frame {f + start} moves pinned vertices of '{cloth}' by up to "
                f"{worst * 100:.1f} cm: pins follow the cloth object, so they and the cloth around them cannot "
                "reach that pose (use Control Forces with Move Pins, leave the pinned vertices in place, "
                "animate the cloth object, or unpin them)"
            )
    return out


def build_cloth(cs, verts, tris, pins):
    """The core Cloth of a cloth's settings: a fabric in physical units, or springs (older files)."""
    if cs.model == "FABRIC":
        return dc.Fabric(cs.density, cs.stretch, cs.bending, cs.damping).cloth(verts, tris, pinned=pins)
    return dc.Cloth(
        verts, tris, mass=cs.mass, k_tension=cs.tension, k_bending=cs.bending, damping=cs.damping, pinned=pins
    )


# the panel's names of what core's BoundsError names (core.model.scene.API_NAMES)
PANEL_NAMES = {
    "bending": "Bending Stiffness",
    "stretch": "Stretch Stiffness",
    "density": "Density",
    "tension": "Tension Stiffness",
    "mass": "Mass",
    "contact": "Contact Stiffness",
    "substeps": "Substeps",
    "linearized": "the Linearized solver",
    "newton": "the Converged solver",
}


def build_scene(name, cloth, **kw):
    """The core Scene of cloth `name`, checked by bounded."""
    return bounded(name, dc.Scene(cloth, bounds=False, **kw))


def bounded(name, scene):
    """scene, if its settings are within what its solver simulates right (core's check_bounds), else
    an InputError naming the setting by its name on the panel: before the run, with whatever solver
    the run takes (Optimize converges every step, whatever the preview's Solver)."""
    try:
        scene_model.check_bounds(scene)
    except scene_model.BoundsError as err:
        raise InputError(f"cloth '{name}': {err.message(PANEL_NAMES)}") from None
    return scene


def tension_setting(cs):
    """The setting that scales the tension springs: Stretch Stiffness (fabric) or Tension Stiffness."""
    return "stretch" if cs.model == "FABRIC" else "tension"


def _read_cloth(cloth_obj, cs, depsgraph, start):
    """The cloth at the start frame: world vertices, triangles, the face of each, local vertices, pin indices."""
    name = cloth_obj.name
    local_co, mw = evaluated_coords(cloth_obj, depsgraph)
    bad = ~np.isfinite(local_co).all(axis=1)
    if bad.any():
        raise InputError(
            f"cloth '{name}': vertex {int(np.argmax(bad))} has a NaN or infinite coordinate "
            f"({int(bad.sum())} such vertices)"
        )
    check_undeformed(cloth_obj, local_co, start)
    tris, faces, loose_edges = mesh_topology(cloth_obj, depsgraph)
    if len(tris) == 0:
        raise InputError(f"cloth '{name}' has no faces")
    if loose_edges:
        raise InputError(f"cloth '{name}' has {loose_edges} loose edge(s); delete them or fill faces")
    pins = np.zeros(0, np.int64)
    if cs.pin_group:
        pins = np.flatnonzero(group_weights(cloth_obj, cs.pin_group, depsgraph) > 0.5)
        if len(pins) == 0:
            raise InputError(
                f"pin group '{cs.pin_group}' of cloth '{name}' has no vertex with a weight above 0.5: "
                "assign the vertices to pin, or clear Pin Group"
            )
        if len(pins) == len(local_co):
            raise InputError(f"every vertex of '{name}' is pinned (pin group '{cs.pin_group}'): nothing to simulate")
    return to_world(local_co, mw), tris, faces, local_co, pins


def _self_distance(cs, name, cloth, mesh="its simulated"):
    """The cloth's self distance (0: Self Collisions off), refused by name beyond what the mesh
    simulated (the Simulation Mesh's, or the cloth's own for Refine) allows."""
    if not cs.use_self_collision:
        return 0.0
    limit = dc.max_self_distance(cloth)
    if cs.self_distance > limit:
        raise InputError(
            f"cloth '{name}': Self Collisions Distance {cs.self_distance * 1e3:.3g} mm is more than {mesh} "
            f"mesh allows ({limit * 1e3:.3g} mm, twice its shortest edge): lower it"
            + (", or simulate through a coarser Simulation Mesh" if mesh == "its simulated" else ", or Refine 0")
        )
    return cs.self_distance


def _check_start(core_scene, cloth_name, colliders, start):
    """Refuse a cloth that starts inside a collider, or closer to it than the Thickness (a penalty
    would fling it out)."""
    x0 = core_scene.x0
    if core_scene.self_distance > 0:
        crossing = len(dc.crossing_pairs(x0, core_scene.cloth.tris))
        if crossing:
            raise InputError(
                f"cloth '{cloth_name}' passes through itself at frame {start} ({crossing} pairs of "
                "triangles cross): Self Collisions keeps layers on the side they start on; untangle "
                "it, or turn Self Collisions off"
            )
    tol = 1e-3 * float(np.ptp(x0, axis=0).max())
    thickness = core_scene.contact_thickness
    inside = dc.inside_at_start(core_scene.colliders, x0, tol)
    near = dc.inside_at_start(core_scene.colliders, x0, tol - thickness) if thickness > 0 else inside
    for obj, count, close in zip(colliders, inside, near):
        kind = {"PLANE": "plane", "SPHERE": "sphere"}.get(obj.diffcloth.role, "mesh")
        if count and kind == "mesh":
            raise InputError(
                f"cloth '{cloth_name}' starts inside collider '{obj.name}' ({count} of {len(x0)} vertices "
                f"at frame {start}; it is Single Sided, so its faces' normals say what is inside): move "
                "the cloth out, or flip the collider's normals"
            )
        if count and kind == "plane":
            raise InputError(
                f"cloth '{cloth_name}' starts behind plane collider '{obj.name}' ({count} of {len(x0)} "
                f"vertices at frame {start}): a plane pushes along its normal (its local Z axis), which "
                "points away from the cloth here; turn the plane over or move the cloth in front of it"
            )
        if count:
            raise InputError(
                f"cloth '{cloth_name}' starts inside sphere collider '{obj.name}' ({count} of {len(x0)} "
                f"vertices at frame {start}): move them apart"
            )
        if close:
            raise InputError(
                f"cloth '{cloth_name}' starts closer to {kind} collider '{obj.name}' than its Thickness "
                f"({thickness:g} m; {close} of {len(x0)} vertices at frame {start}), which would fling it "
                "away: lower the Thickness or move them apart"
            )


def _loss(targets, target_pos, start, depsgraph_get, n):
    """The keyframe loss of the targets' poses (frame: (name, positions)), and warnings for keys
    that count for nothing; refused when every key does."""
    by_name = {t.name: t for t in targets}
    weights, vertex_weights, nothing = {}, {}, {}
    for f, (name, _) in target_pos.items():
        t = by_name[name]
        weights[f - start] = t.diffcloth.weight
        if t.diffcloth.weight_group:
            vertex_weights[f - start] = group_weights(t, t.diffcloth.weight_group, depsgraph_get())
        if f == start:  # the cloth starts as modelled, whatever may change
            nothing[f"'{name}' at frame {f}"] = "the start frame, where the cloth is as modelled: key it later"
        elif weights[f - start] * (vertex_weights[f - start].sum() if f - start in vertex_weights else n) <= 0:
            nothing[f"'{name}' at frame {f}"] = "Weight 0, or a Weight Group of zero weights"
    if len(nothing) == len(target_pos):
        raise InputError("every target counts for nothing: " + ", ".join(f"{k} ({why})" for k, why in nothing.items()))
    loss = dc.KeyframeLoss(
        {f - start: pos for f, (_, pos) in target_pos.items()}, weights=weights, vertex_weights=vertex_weights or None
    )
    return loss, [f"target {k} counts for nothing ({why})" for k, why in nothing.items()]


def gather(context, cloth_name=None, need_targets=True, use_active=True):
    """Read the scene into a Setup; raises InputError for user mistakes. Restores the frame.
    use_active: with several cloths and no name, take the active object if it is one."""
    scene = context.scene
    settings = scene.diffcloth
    cloth_obj = find_cloth(scene, cloth_name, context.active_object if use_active else None)
    check_cloth_object(cloth_obj)
    cs = cloth_obj.diffcloth
    name = cloth_obj.name
    sharing = [f"'{o.name}'" for o in scene.objects if o.data == cloth_obj.data and o != cloth_obj]
    if sharing:
        raise InputError(
            f"cloth '{name}' shares its mesh with {', '.join(sharing)} (a linked duplicate, Alt+D), which "
            "the bake would move too: make it single-user (Object › Relations › Make Single User)"
        )
    start, end = frame_range(scene)
    if end <= start:
        raise InputError(f"the frame range {start}-{end} is empty")
    targets = [o for o in scene.objects if o.diffcloth.role == "TARGET"]
    for t in targets:
        owner = t.diffcloth.cloth
        if owner is not None and (owner.type != "MESH" or owner.diffcloth.role != "CLOTH"):
            raise InputError(f"target '{t.name}' poses '{owner.name}', which is not marked as Cloth")
        if owner is not None and scene.objects.get(owner.name) != owner:  # deleted, but held by the pointer
            raise InputError(
                f"target '{t.name}' poses '{owner.name}', which is not in this scene: set its Cloth, "
                "or clear it to pose the scene's only cloth"
            )
    others = [t for t in targets if t.diffcloth.cloth not in (None, cloth_obj)]
    targets = [t for t in targets if t.diffcloth.cloth in (None, cloth_obj)]
    target_frames = {o.name: sorted(keyed_frames(o)) for o in targets}
    for t in targets:
        if nla_animated(t):
            raise InputError(nla_message(t))
        outside = [f for f in target_frames[t.name] if not start <= f <= end]
        if outside:
            raise InputError(f"target '{t.name}' has keyframes at {outside}, outside the frame range {start}-{end}")
        if target_frames[t.name] and t.type != "MESH":
            raise InputError(f"target '{t.name}' is not a mesh")
    colliders = [o for o in scene.objects if o.diffcloth.role in ("SPHERE", "PLANE")]
    meshes = collision_objects(scene, cloth_obj)
    warnings = []
    poses = {o.name: [] for o in colliders}
    uneven = {}  # sphere colliders scaled unevenly: the first frame's warning
    pin_path, matrices, target_pos = [], [], {}
    original_frame = scene.frame_current
    try:
        with _OwnKeysMuted(cloth_obj):  # read the cloth as it is without DiffCloth's bake, at every frame
            scene.frame_set(start)
            context.view_layer.update()
            depsgraph = context.evaluated_depsgraph_get()
            if not evaluated(cloth_obj, depsgraph):
                raise InputError(not_evaluated_message("cloth", cloth_obj))
            for group in (colliders, meshes):
                for o in [o for o in group if not evaluated(o, depsgraph)]:
                    warnings.append(
                        f"collider '{o.name}' is disabled in viewports or in an excluded collection: "
                        "ignored, as by Blender's own physics"
                    )
                    group.remove(o)
            readers = [MeshReader(o, mesh_topology(o, depsgraph)[0], InputError) for o in meshes]
            for t in targets:
                if target_frames[t.name] and not evaluated(t, depsgraph):
                    raise InputError(not_evaluated_message("target", t))
            verts, tris, faces, local_co, pins = _read_cloth(cloth_obj, cs, depsgraph, start)
            n_render, render_tris, embedding = len(verts), tris, None
            render_verts, render_pins, render_pins_local, render_pin_path = verts, pins, local_co[pins], []
            if proxy.wanted(cs) and refined(cloth_obj):
                warnings.append(
                    f"cloth '{name}': its optimized design was refined on the cloth itself, so the cloth is "
                    "simulated without its simulation mesh (Discard Result to use the simulation mesh again)"
                )
            elif proxy.wanted(cs):  # simulate a proxy; the cloth follows it (core.design.embedding)
                start_mw = np.array(cloth_obj.evaluated_get(depsgraph).matrix_world)
                local_co, tris, pins, embedding = proxy.read(
                    cloth_obj,
                    cs,
                    depsgraph,
                    local_co,
                    verts,
                    pins,
                    start_mw,
                    InputError,
                    evaluated_coords,
                    mesh_topology,
                )
                verts, faces = to_world(local_co, start_mw), np.arange(len(tris))
            try:
                cloth = build_cloth(cs, verts, tris, pins)
            except ValueError as err:  # core's triangle k as the artist's face (Blender's face index)
                message = re.sub(r"\btriangle (\d+)", lambda m: f"face {faces[int(m.group(1))]}", str(err))
                raise InputError(f"cloth '{name}': {message}") from None
            for f in range(start, end + 1):
                scene.frame_set(f)
                depsgraph = context.evaluated_depsgraph_get()
                co, mw = evaluated_coords(cloth_obj, depsgraph)
                check_undeformed(cloth_obj, co, f)
                check_transform(cloth_obj, mw, f)
                matrices.append(mw)
                if len(pins):
                    pin_path.append(to_world(local_co[pins], mw))
                if embedding is not None:
                    render_pin_path.append(to_world(render_pins_local, mw))
                for o in colliders:
                    ev = o.evaluated_get(depsgraph)
                    poses[o.name].append(collider_pose(ev, o.diffcloth.role, f))
                    if o.name not in uneven and (message := uneven_sphere(ev, f)):
                        uneven[o.name] = message
                for reader in readers:
                    co, mw = evaluated_coords(reader.obj, depsgraph)
                    reader.read(to_world(co, mw), f, mirrored=np.linalg.det(mw[:3, :3]) < 0)
                for t in targets:
                    if f not in target_frames[t.name]:
                        continue
                    tv = to_world(*evaluated_coords(t, depsgraph))
                    if len(tv) != n_render:
                        what = (
                            " (its simulation mesh's count: pose a copy of the cloth itself)"
                            if (embedding is not None and len(tv) == cloth.n)
                            else ""
                        )
                        raise InputError(
                            f"target '{t.name}' has {len(tv)} vertices, cloth '{name}' has {n_render}{what}"
                        )
                    if not np.isfinite(tv).all():
                        raise InputError(f"target '{t.name}' has a NaN or infinite vertex at frame {f}")
                    if f in target_pos:
                        raise InputError(f"targets '{target_pos[f][0]}' and '{t.name}' are both keyed at frame {f}")
                    target_pos[f] = (t.name, tv)
    finally:
        scene.frame_set(original_frame)

    if need_targets and not targets and others:
        raise InputError(
            f"no targets pose cloth '{name}' ("
            + ", ".join(f"'{t.name}' poses '{t.diffcloth.cloth.name}'" for t in others)
            + "): set a target's Cloth to it, or run the cloth they pose"
        )
    if need_targets and not target_pos:
        raise InputError(NO_KEYS if targets else NO_TARGETS)
    built = []
    for o in colliders:
        a, b = (_constant(np.array(p)) for p in zip(*poses[o.name]))
        mu = o.diffcloth.friction * FRICTION_SCALE
        built.append(dc.Sphere(a, b, friction=mu) if o.diffcloth.role == "SPHERE" else dc.Plane(a, b, friction=mu))
    warnings += uneven.values()
    for reader in readers:
        built.append(reader.build())
        warnings += reader.warnings
    common = dict(
        steps=end - start,
        dt=frame_time(scene),
        gravity=scene_gravity(scene, cs),
        substeps=cs.substeps,
        colliders=built,
        contact_stiffness=cs.contact_stiffness,
        contact_thickness=cs.thickness,
        solver=cs.solver.lower(),
        self_distance=_self_distance(cs, name, cloth),
        self_friction=cs.self_friction * FRICTION_SCALE if cs.use_self_collision else 0.0,
    )
    core_scene = build_scene(name, cloth, pin_path=_pin_path(pin_path, pins), **common)
    _check_start(core_scene, name, colliders + meshes, start)
    loss, refine = None, None
    if target_pos:
        loss, zero = _loss(targets, target_pos, start, context.evaluated_depsgraph_get, n_render)
        warnings += zero
        if embedding is not None and need_targets and cs.refine_iterations:  # Refine: the cloth's own run
            full = build_cloth(cs, render_verts, render_tris, render_pins)
            own = build_scene(
                name,
                full,
                pin_path=_pin_path(render_pin_path, render_pins),
                **dict(common, self_distance=_self_distance(cs, name, full, "Refine's")),
            )
            refine = Setup(scene=own, loss=loss, posed_pins=dc.posed_pins(own, loss, PIN_SLACK))
        if embedding is not None:  # the targets pose the cloth; the loss measures it on the proxy's motion
            loss = EmbeddedLoss(loss, embedding)
    names = {f - start: t for f, (t, _) in target_pos.items()}
    pins_off, posed = None, np.zeros(0, np.int64)
    if loss is not None and embedding is None:
        pins_off, posed = dc.pins_off_targets(core_scene, loss), dc.posed_pins(core_scene, loss, PIN_SLACK)
    elif loss is not None:  # the targets pose the cloth's pins; Move Pins moves the proxy's pins that hold them
        pins_off = {f: np.linalg.norm(t[render_pins] - render_pin_path[f], axis=1) for f, t in loss.targets.items()}
        posed = proxy.posed_pins(render_verts, render_pins, pins_off, verts, cloth.pinned, PIN_SLACK)
    return Setup(
        cloth_obj=cloth_obj,
        scene=core_scene,
        loss=loss,
        start=start,
        end=end,
        matrices=np.array(matrices),
        warnings=warnings + pin_warnings(settings, pins_off, name, names, start),
        posed_pins=posed,
        target_frames=target_frames,
        embedding=embedding,
        render_tris=render_tris,
        n_render=n_render,
        refine=refine,
    )


def scene_gravity(scene, cs):
    """The gravity acting on the cloth, as Blender's Cloth takes it: the scene's (Scene › Gravity, a
    vector; none while unticked) times the cloth's Field Weights › Gravity."""
    return np.array(scene.gravity) * cs.gravity_weight if scene.use_gravity else np.zeros(3)


def _pin_path(path, pins):
    """The pins' world positions at every frame, or None where they stay where the mesh has them."""
    path = _constant(np.array(path)) if len(pins) else None
    return None if path is None or path.ndim == 2 else path


def refined(cloth_obj):
    """Whether the cloth's stored design was refined on the cloth itself (Refine): its arrays are
    the cloth's, not its simulation mesh's."""
    stored = cloth_obj.get(RESULT_KEY)
    return bool(stored and stored.get("refined"))


def render_positions(setup, x):
    """The cloth's (render mesh's) positions of a motion x (frames, n, 3) of the simulated mesh."""
    return x if setup.embedding is None else setup.embedding.apply(x)


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
        keyed = dc.KeyedForces(
            settings.force_key_spacing,
            strength,
            change,
            move_pins=setup.posed_pins if settings.force_move_pins else False,
        )
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
    """A copy of a stored result's array (through the buffer of Blender's compact double array, no
    Python list), or None if absent or no longer of that size (the mesh or frame range changed
    since). A copy, not a view: the next run replaces the property and frees its memory."""
    value = stored.get(key) if stored else None
    if value is None or len(value) != size:
        return None
    return np.array(value, dtype=np.float64).ravel()


def apply_stored_result(setup):
    """The scene with the last optimization's design (stiffness, initial velocities, control
    forces) wherever it still fits: Simulate reproduces the optimized motion, Optimize continues
    from it. What no longer fits is named in setup.warnings."""
    stored = setup.cloth_obj.get(RESULT_KEY)
    sc = setup.scene
    cloth, n, steps = sc.cloth, sc.cloth.n, sc.steps
    stiffness = {
        k: v
        for k, v in (
            ("k_tension", stored_array(stored, "k_tension", cloth.n_tension)),
            ("k_bending", stored_array(stored, "k_bending", cloth.n_bending)),
        )
        if v is not None
    }
    changes = {"cloth": cloth.replace(**stiffness)} if stiffness else {}
    v0 = stored_array(stored, "v0", n * 3)
    if v0 is not None:
        changes["v0"] = v0.reshape(n, 3)
    forces = stored_array(stored, "forces", steps * n * 3)
    if forces is not None:
        changes["forces"] = forces.reshape(steps, n, 3)
    offset = stored_array(stored, "pin_offset", (steps + 1) * len(cloth.pinned) * 3)
    if offset is not None:
        changes["pin_path"] = sc.pin_frames + offset.reshape(steps + 1, -1, 3)
    if stored and changes:  # the optimized motion is reproduced by the solver that found it
        changes["solver"] = stored.get("solver", OPTIMIZE_SOLVER)
    # what no longer fits the mesh, pins or frames and would have made a difference is named
    own = {"k_tension": setup.cloth_obj.diffcloth.tension, "k_bending": setup.cloth_obj.diffcloth.bending}
    unused = [
        what
        for key, what, used in (
            ("k_tension", "tension", "k_tension" in stiffness),
            ("k_bending", "bending", "k_bending" in stiffness),
            ("v0", "initial velocities", v0 is not None),
            ("forces", "control forces", forces is not None),
            ("pin_offset", "moved pins", offset is not None),
        )
        if stored
        and key in stored
        and not used
        and (key not in own or uniform(stored, key) is None or not np.isclose(uniform(stored, key), own[key]))
        and (key != "v0" or np.any(stored_array(stored, key, len(stored[key]))))
    ]
    if unused:
        setup.warnings.append(
            f"the optimization stored on '{setup.cloth_obj.name}' no longer fits its mesh, pins or "
            f"frame range: its {', '.join(unused)} are left out (Optimize again, or Discard Result)"
        )
    return sc.replace(**changes) if changes else sc


def stored_motion(setup, scene):
    """The last run's positions at every integrator step (the bake the artist saw and posed the
    targets from, or the optimized motion), to start the next run's steps from, so that it follows
    the same branch where the cloth buckles and its start needs a few Newton iterations a step; or
    None if there is none or it no longer fits the frames, substeps or mesh."""
    motion = stored_array(setup.cloth_obj, MOTION_KEY, (scene.n_steps + 1) * scene.cloth.n * 3)
    return None if motion is None else motion.reshape(scene.n_steps + 1, scene.cloth.n, 3)


def replace_property(owner, key, value):
    """owner[key] = value as a new ID property: assigning an array over an existing array property
    writes into it in place without resizing it (bpy 4.2 and 5.2), leaving a stale tail behind a
    shorter array and writing past the end of a longer one."""
    owner.pop(key, None)
    owner[key] = value


def store_motion(setup, step_x, solver):
    replace_property(setup.cloth_obj, MOTION_KEY, np.asarray(step_x, dtype=np.float64).ravel())
    setup.cloth_obj[MOTION_SOLVER_KEY] = solver


def forget_motion(cloth):
    """Drop the stored motion: the next run starts afresh."""
    cloth.pop(MOTION_KEY, None)
    cloth.pop(MOTION_SOLVER_KEY, None)


def baked_solver(cloth):
    """The solver of the cloth's stored motion (None: there is none)."""
    return cloth.get(MOTION_SOLVER_KEY) if MOTION_KEY in cloth else None


def store_result(setup, result):
    """Keep the optimized design on the cloth, apart from the artist's settings (Apply copies the
    stiffness over): arrays as Blender's compact double arrays, saved in the .blend."""
    sc = result.scene
    stored = {
        "k_tension": sc.cloth.k_tension,
        "k_bending": sc.cloth.k_bending,
        "v0": sc.v0.ravel(),
        "solver": sc.solver,
        # the tension setting that gives the optimized springs, where one does (they scale together)
        "tension_setting": tension_value(setup, sc.cloth.k_tension),
        "loss": float(result.loss),
        "initial_loss": float(result.initial_loss),
        "iterations": len(result.history),
        "reason": result.reason,
        # the design is the cloth's own though it has a simulation mesh (Refine)
        "refined": setup.embedding is None and proxy.wanted(setup.cloth_obj.diffcloth),
    }
    if sc.forces is not None:
        stored["forces"] = sc.forces.ravel()
    if sc.pin_path is not None:  # moved pins, as offsets from the cloth object's own path
        offset = sc.pin_path - setup.scene.pin_frames
        if np.any(offset):
            stored["pin_offset"] = offset.ravel()
    # per keyframe (scene frame): mean and largest distance (m) before, then after
    stored["keyframes"] = {str(f + setup.start): list(d) for f, d in result.keyframes.items()}
    if getattr(result, "refined", False):  # the cloth itself with the proxy's design: where Refine started
        stored["refine_start"] = {str(f + setup.start): list(d) for f, d in result.carried_distances.items()}
    stored["max_control_acceleration"] = sc.max_control_acceleration()
    replace_property(setup.cloth_obj, RESULT_KEY, stored)


def tension_value(setup, k_tension):
    """The cloth's tension setting (Stretch or Tension Stiffness) that makes these springs, or 0
    if no single value does (per-spring stiffness)."""
    ratio = k_tension / setup.scene.cloth.k_tension
    if np.ptp(ratio) > 1e-9 * ratio.mean():
        return 0.0
    cs = setup.cloth_obj.diffcloth
    return float(getattr(cs, tension_setting(cs)) * ratio.mean())


def tension_result(stored):
    """The optimized tension setting (Stretch or Tension Stiffness) of a stored result, or None if
    the optimized springs vary apart (results of older versions: their uniform spring constant)."""
    if "tension_setting" not in stored:
        return uniform(stored, "k_tension")
    return float(stored["tension_setting"]) or None


def uniform(stored, key):
    """The stored stiffness as one value if it is uniform, else None."""
    arr = stored_array(stored, key, len(stored[key])) if stored and key in stored else None
    return float(arr[0]) if arr is not None and len(arr) and np.ptp(arr) == 0 else None
