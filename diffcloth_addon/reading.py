"""Reading Blender (main thread only): frames and keyframes, evaluated meshes and transforms,
colliders' poses, and the checks of what is read, refused by name as InputError."""

import numpy as np
from bpy_extras import anim_utils

from .errors import NO_CLOTH, NO_KEYS, NO_TARGETS, InputError

# DiffCloth's baked shape keys (bake.py) start with it
BAKE_PREFIX = "DiffCloth_f"


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


class _SetWhileRead:
    """One attribute of some data blocks set to `value` while the cloth is read, then restored."""

    attr: str
    value: bool

    def __init__(self, blocks):
        self.blocks = blocks

    def __enter__(self):
        self.state = [getattr(b, self.attr) for b in self.blocks]
        for b in self.blocks:
            setattr(b, self.attr, self.value)

    def __exit__(self, *exc):
        for b, old in zip(self.blocks, self.state):
            setattr(b, self.attr, old)


class OwnKeysMuted(_SetWhileRead):
    """Mute DiffCloth's baked shape keys so the cloth is read from its own rest shape."""

    attr, value = "mute", True

    def __init__(self, obj):
        keys = obj.data.shape_keys
        super().__init__([] if keys is None else [b for b in keys.key_blocks if b.name.startswith(BAKE_PREFIX)])


CACHE_MODIFIER = "DiffCloth"  # the Mesh Cache modifier that plays a carried cloth's bake (bake.py)


def ours(m):
    """Whether modifier m is DiffCloth's own bake (a Mesh Cache named CACHE_MODIFIER)."""
    return m.type == "MESH_CACHE" and m.name == CACHE_MODIFIER


def stack_place(obj):
    """DiffCloth's place in obj's modifier stack: right after the last enabled modifier that
    carries the cloth along another object (CARRIERS: an Armature, a Hook, …), which are its input,
    so that its pins follow them; 0 (before every modifier) without one. Modifiers at and after
    the place work on the simulated cloth."""
    place = 0
    for i, m in enumerate(m for m in obj.modifiers if not ours(m)):
        if m.type in CARRIERS and (m.show_viewport or m.show_render):
            place = i + 1
    return place


class ModifiersOff(_SetWhileRead):
    """The cloth as DiffCloth's input: its modifiers from DiffCloth's place on (stack_place),
    and DiffCloth's own bake, off in the viewport while it is read, restored after; keep_bake:
    leave the bake on (the cloth as simulated, before the modifiers that work on it)."""

    attr, value = "show_viewport", False

    def __init__(self, obj, keep_bake=False):
        others = [m for m in obj.modifiers if not ours(m)]
        super().__init__(others[stack_place(obj) :] + [m for m in obj.modifiers if ours(m) and not keep_bake])


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
    """Triangles (T,3) of the evaluated object, the face each comes from, and its edges that bound
    no face (L,2)."""
    ev = obj.evaluated_get(depsgraph)
    mesh = ev.to_mesh()
    try:
        mesh.calc_loop_triangles()
        tris = np.empty(len(mesh.loop_triangles) * 3, np.int64)
        mesh.loop_triangles.foreach_get("vertices", tris)
        faces = np.empty(len(mesh.loop_triangles), np.int64)
        mesh.loop_triangles.foreach_get("polygon_index", faces)
        # the edges no face's loop runs along (each as its key: its two vertices in order)
        used = np.empty(len(mesh.loops), np.int64)
        mesh.loops.foreach_get("edge_index", used)
        ends = np.empty(len(mesh.edges) * 2, np.int64)
        mesh.edges.foreach_get("vertices", ends)
        loose = np.ones(len(mesh.edges), bool)
        loose[used] = False
        return tris.reshape(-1, 3), faces, np.sort(ends.reshape(-1, 2)[loose], axis=1)
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


def property_weights(cloth_obj, cs, groups, depsgraph):
    """{setting: weights (n,)} of the cloth's Property Weights vertex groups (settings `groups`)
    that name one; refused by name where one names no vertex group of the cloth."""
    out = {}
    for setting in groups:
        name = getattr(cs, setting)
        if not name:
            continue
        if cloth_obj.vertex_groups.get(name) is None:
            raise InputError(
                f"cloth '{cloth_obj.name}': its {cs.bl_rna.properties[setting].name} '{name}' is not one of its "
                "vertex groups: pick one, or clear it"
            )
        out[setting] = group_weights(cloth_obj, name, depsgraph)
    return out


def evaluated(obj, depsgraph):
    """Whether Blender evaluates obj (not disabled in viewports nor in an excluded or disabled
    collection): otherwise its matrix, modifiers and shape keys are stale, whatever the frame."""
    return obj.evaluated_get(depsgraph).is_evaluated


def physics_objects(view_layer):
    """The objects Blender's physics takes into account (their bases enabled in viewports): not
    disabled in viewports themselves, and in some collection of the view layer that is neither
    excluded nor disabled in viewports, nor are its parents. Hidden (H, the eye) still count.
    Blender may evaluate an object that is not among them, for another that depends on it."""
    out = set()

    def walk(layer):
        if not (layer.exclude or layer.collection.hide_viewport):
            out.update(o for o in layer.collection.objects if not o.hide_viewport)
            for child in layer.children:
                walk(child)

    walk(view_layer.layer_collection)
    return out


def collection_objects(collection):
    """The objects of a collection as Blender's physics reads one set as a cloth's Effector or
    Collision Collection: its own and its children's, but not those of a child disabled in
    viewports; the objects' own flags and the view layer do not count."""
    out = list(collection.objects)
    for child in collection.children:
        if not child.hide_viewport:
            out += [o for o in collection_objects(child) if o not in out]
    return out


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
    """Refuse a cloth whose (non-DiffCloth) shape keys move its vertices at a frame (local_co: read
    with its modifiers off, ModifiersOff).

    DiffCloth simulates the mesh as modelled and bakes the result to shape keys, which Blender
    applies first: another active shape key would add its offset on top of the bake. A cloth
    carried by modifiers (stack_place) is their result, which may move, but not gain vertices.
    """
    mesh = obj.data
    if stack_place(obj):
        if len(local_co) != len(mesh.vertices):
            named = [f"'{m.name}'" for m in _count_changers(obj) if m.show_viewport]
            raise InputError(
                f"cloth '{obj.name}': the modifiers before DiffCloth's place "
                + (f"({', '.join(named)}) " if named else "")
                + f"change its vertex count ({len(mesh.vertices)} → {len(local_co)}) at frame {frame}; move them "
                "after the last Armature or Hook"
            )
        return
    basis = np.empty(len(mesh.vertices) * 3)
    mesh.vertices.foreach_get("co", basis)
    moved = len(local_co) != len(mesh.vertices) or not np.allclose(
        local_co, basis.reshape(-1, 3), rtol=0, atol=1e-6 * max(np.ptp(basis), 1e-3)
    )
    if not moved:
        return
    keys = [] if mesh.shape_keys is None else mesh.shape_keys.key_blocks[1:]
    culprits = [
        f"shape key '{b.name}'" for b in keys if not b.name.startswith(BAKE_PREFIX) and not b.mute and b.value != 0
    ]
    what = (
        f"its vertex count ({len(mesh.vertices)} → {len(local_co)})"
        if len(local_co) != len(mesh.vertices)
        else "its shape"
    )
    raise InputError(
        f"cloth '{obj.name}': {', '.join(culprits) or 'something'} change(s) {what} at frame {frame}; "
        "DiffCloth's bake is shape keys, which Blender adds up: apply or mute it first"
    )


# Blender's own simulations, which would run on top of DiffCloth's bake
BLENDER_PHYSICS = {"CLOTH": "Cloth", "SOFT_BODY": "Soft Body"}
# deformers that carry a mesh along another object: on a cloth, its input (stack_place)
CARRIERS = {
    "ARMATURE": "Armature",
    "HOOK": "Hook",
    "LATTICE": "Lattice",
    "CURVE": "Curve",
    "MESH_DEFORM": "Mesh Deform",
    "SURFACE_DEFORM": "Surface Deform",
    "MESH_CACHE": "Mesh Cache",
}


# modifiers that move a mesh's vertices but keep them (beside CARRIERS): before DiffCloth's place
# their render-only effect is overwritten by the bake; any other would change what it plays on
KEEP_VERTICES = {
    "CAST",
    "CORRECTIVE_SMOOTH",
    "DATA_TRANSFER",
    "DISPLACE",
    "LAPLACIANDEFORM",
    "LAPLACIANSMOOTH",
    "NORMAL_EDIT",
    "SHRINKWRAP",
    "SIMPLE_DEFORM",
    "SMOOTH",
    "UV_PROJECT",
    "UV_WARP",
    "VERTEX_WEIGHT_EDIT",
    "VERTEX_WEIGHT_MIX",
    "VERTEX_WEIGHT_PROXIMITY",
    "WARP",
    "WAVE",
    "WEIGHTED_NORMAL",
}


def _count_changers(obj):
    """The modifiers before DiffCloth's place that may change the cloth's vertex count."""
    before = [m for m in obj.modifiers if not ours(m)][: stack_place(obj)]
    return [m for m in before if m.type not in CARRIERS and m.type not in KEEP_VERTICES]


def check_cloth_object(obj):
    """What can be told before evaluating anything: no Blender physics of its own, no modifier
    before DiffCloth's place that renders another mesh than the viewport's (the run reads the
    viewport's), not in Edit Mode, no shape key shown alone in place of the bake, not linked from
    a library."""
    for m in obj.modifiers:
        if m.type in BLENDER_PHYSICS and (m.show_viewport or m.show_render):
            raise InputError(
                f"cloth '{obj.name}' also has Blender's own {BLENDER_PHYSICS[m.type]} physics "
                f"(modifier '{m.name}'), which would simulate on top of DiffCloth's bake: remove it "
                "(Properties › Physics)"
            )
    for m in _count_changers(obj):
        if m.show_render and not m.show_viewport:
            raise InputError(
                f"cloth '{obj.name}': modifier '{m.name}' before DiffCloth's place is on for render only, so "
                "the render's mesh is not the one simulated (the run reads the viewport's) and the bake "
                "would not play on it: show it in the viewport too, or turn it off in render"
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


SOFTGOALSNAP = 0.999  # Blender's: a pin group weight w pins its vertex outright where w⁴ reaches this


def pin_weights(cloth_obj, cs, depsgraph, n):
    """The pin group as Blender's Cloth reads it: the vertices pinned outright (w⁴ ≥ SOFTGOALSNAP)
    and, per vertex, the goal weight w⁴ of those a pin spring pulls (0 elsewhere). Cloths of files
    from before soft pins (legacy_pins) are pinned outright above 0.5 and nowhere softly."""
    goal = np.zeros(n)
    if not cs.pin_group:
        return np.zeros(0, np.int64), goal
    w = group_weights(cloth_obj, cs.pin_group, depsgraph)
    if cs.legacy_pins:
        hard = w > 0.5
    else:
        goal = w**4
        hard = goal >= SOFTGOALSNAP
        goal[hard] = 0.0
    if not hard.any() and not goal.any():
        raise InputError(
            f"pin group '{cs.pin_group}' of cloth '{cloth_obj.name}' has no vertex with a weight"
            + (" above 0.5" if cs.legacy_pins else "")
            + ": assign the vertices to pin, or clear Pin Group"
        )
    if hard.all():
        raise InputError(
            f"every vertex of '{cloth_obj.name}' is pinned (pin group '{cs.pin_group}'): nothing to simulate"
        )
    return np.flatnonzero(hard), goal


def read_cloth(cloth_obj, cs, depsgraph, start):
    """The cloth at the start frame: world vertices, triangles, the face of each, local vertices,
    pin indices, the soft pins' goal weights (pin_weights) and its loose edges, which Sewing sews."""
    name = cloth_obj.name
    local_co, mw = evaluated_coords(cloth_obj, depsgraph)
    bad = ~np.isfinite(local_co).all(axis=1)
    if bad.any():
        raise InputError(
            f"cloth '{name}': vertex {int(np.argmax(bad))} has a NaN or infinite coordinate "
            f"({int(bad.sum())} such vertices)"
        )
    check_undeformed(cloth_obj, local_co, start)
    tris, faces, loose = mesh_topology(cloth_obj, depsgraph)
    if len(tris) == 0:
        raise InputError(f"cloth '{name}' has no faces")
    if len(loose) and not cs.use_sewing_springs:
        raise InputError(
            f"cloth '{name}' has {len(loose)} loose edge(s): delete them, fill faces, or tick Sewing (Shape) "
            "to sew the vertices they join"
        )
    faceless = np.setdiff1d(loose, tris)
    if len(faceless):
        raise InputError(
            f"cloth '{name}': vertex {int(faceless[0])} belongs to no face ({len(faceless)} such vertices on "
            "loose edges): sewing joins vertices of faces; delete it or fill a face"
        )
    pins, goal = pin_weights(cloth_obj, cs, depsgraph, len(local_co))
    return to_world(local_co, mw), tris, faces, local_co, pins, goal, loose


def scene_gravity(scene, cs):
    """The gravity acting on the cloth, as Blender's Cloth takes it: the scene's (Scene › Gravity, a
    vector; none while unticked) times the cloth's Field Weights › Gravity."""
    return np.array(scene.gravity) * cs.gravity_weight if scene.use_gravity else np.zeros(3)
