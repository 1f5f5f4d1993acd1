"""A run's inputs gathered from Blender (main thread only; core never sees bpy): the cloth,
colliders and targets read at every frame and checked, as a Setup of the core scene and loss plus
what bake/store need."""

import contextlib
import re
from dataclasses import dataclass, field

import bpy
import numpy as np

from .. import core as dc
from ..core.design.embedding import EmbeddedLoss, Embedding
from . import fields, proxy, together
from .colliders import FRICTION_SCALE, MeshReader, collision_objects
from .errors import NO_KEYS, NO_TARGETS, InputError
from .reading import (
    BAKE_PREFIX,
    ModifiersOff,
    OwnKeysMuted,
    check_cloth_object,
    check_transform,
    check_undeformed,
    collider_pose,
    evaluated,
    evaluated_coords,
    find_cloth,
    frame_range,
    frame_time,
    group_weights,
    keyed_frames,
    mesh_topology,
    nla_animated,
    nla_message,
    not_evaluated_message,
    physics_objects,
    property_weights,
    read_cloth,
    scene_gravity,
    stack_place,
    to_world,
    uneven_sphere,
)
from .results import refined
from .settings import GROUPS, build_cloth, build_scene, property_factors, self_distance

# how far a target may pose a pinned vertex from its pin (m) before the artist is warned
PIN_SLACK = 1e-3


@dataclass
class Refine:
    """Refine's run, after the proxy's optimization: the cloth itself, posed by the same targets."""

    scene: dc.Scene
    loss: dc.KeyframeLoss
    posed_pins: np.ndarray
    # cloths run together: their Setups, and the cloths' own meshes joined (core.Joined)
    parts: list["Setup"] = field(default_factory=list)
    joined: dc.Joined | None = None


@dataclass
class Setup:
    """Everything gathered for one run: the core scene and loss plus what bake/store need."""

    cloth_obj: bpy.types.Object  # looked up again by cloth_name once the run is done (operators.finish)
    cloth_name: str
    scene: dc.Scene  # of the simulated mesh: the cloth's own, or its proxy's (embedding)
    loss: dc.KeyframeLoss | EmbeddedLoss | None  # None: no target is keyed
    start: int  # the frame range run
    end: int
    matrices: np.ndarray  # (frames, 4, 4): the cloth object's world matrix at each frame
    warnings: list[str]
    posed_pins: np.ndarray  # the pins some target poses off where they are held (Move Pins moves them)
    target_frames: dict[str, list[int]]  # each target of the cloth: the frames it is keyed at
    render_tris: np.ndarray  # the cloth's own triangles and vertex count (the render mesh)
    n_render: int
    collider_names: list[str]  # the objects of scene.colliders, in order
    embedding: Embedding | None = None  # the cloth's rest positions in its proxy (None: no proxy)
    refine: Refine | None = None  # the cloth's own run after the proxy's (Refine)
    # cloths run together (together.joint): each one's Setup, and their scenes joined
    parts: list["Setup"] = field(default_factory=list)
    joined: dc.Joined | None = None
    # set when the run is prepared (operators.prepare)
    kind: str = ""  # "simulate" or "optimize"
    solver: str = ""  # the solver its steps take
    written: list = field(default_factory=list)  # once written (operators.finish): (Setup, result) per cloth


@dataclass
class _Simulated:
    """The cloth at the start frame: the mesh simulated (the cloth's own, or its proxy's) and the
    cloth's own, the render mesh, which targets pose and the bake shows."""

    cloth: dc.Cloth  # its rest: the mesh at the start frame, or the Rest Shape Key
    verts: np.ndarray  # world vertices of the simulated mesh at the start frame
    local_co: np.ndarray  # its vertices in the cloth object's space
    pins: np.ndarray
    goal: np.ndarray  # per vertex, its soft pin's weight (reading.pin_weights)
    carried: bool  # by modifiers before DiffCloth's place (reading.stack_place): pins follow them
    render_verts: np.ndarray
    render_tris: np.ndarray
    render_polygons: np.ndarray  # the face of each triangle (Blender's polygon index)
    render_pins: np.ndarray
    render_pins_local: np.ndarray
    render_factors: dict  # the Property Weights' stiffness factors per render vertex (settings.property_factors)
    render_goal: np.ndarray
    render_goal_local: np.ndarray  # the soft pins' vertices in the cloth object's space
    render_sewing: np.ndarray  # the vertex pairs its loose edges join (L,2), sewn where Sewing is on
    embedding: Embedding | None = None
    carry: Embedding | None = None  # a carried cloth's proxy: its pins, then soft pins, in the cloth's mesh

    @property
    def n_render(self):
        return len(self.render_verts)


@dataclass
class _Read:
    """What a run reads over its frame range, before any core scene is built."""

    sim: _Simulated
    colliders: list  # sphere and plane colliders Blender evaluates
    meshes: list  # Collision-physics colliders Blender evaluates, read by `readers`
    readers: list[MeshReader]
    warnings: list[str]
    fields: fields.FieldReader  # the force fields, read at each frame
    poses: dict  # sphere and plane colliders by name: their pose at each frame
    uneven: dict = field(default_factory=dict)  # sphere colliders scaled unevenly: the first frame's warning
    matrices: list = field(default_factory=list)  # the cloth object's world matrix at each frame
    pin_path: list = field(default_factory=list)  # the simulated mesh's pins at each frame
    render_pin_path: list = field(default_factory=list)  # the cloth's own pins at each frame, with a proxy
    goal_path: list = field(default_factory=list)  # the simulated mesh's soft pins' goals at each frame
    render_goal_path: list = field(default_factory=list)  # the cloth's own, with a proxy
    target_pos: dict = field(default_factory=dict)  # frame: (target name, world positions)


def _constant(poses):
    return poses[0] if np.allclose(poses, poses[0]) else poses


def _goals(cs, cloth, goal, path):
    """The soft pins of a cloth with goal weights w⁴ (per vertex, 0 where none), their goals at
    each frame: springs of w⁴ × Pin Stiffness per kg of the vertex, as Blender's pin springs."""
    soft = np.flatnonzero(goal > 0)
    if not len(soft):
        return None
    stiffness = goal[soft] * cs.pin_stiffness * cloth.masses[soft]
    return dc.Goals(soft, stiffness, _pin_path(path, soft))


def _pin_path(path, pins):
    """The pins' world positions at every frame, or None where they stay where the mesh has them."""
    path = _constant(np.array(path)) if len(pins) else None
    return None if path is None or path.ndim == 2 else path


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
    counts = dc.inside_at_start(core_scene.colliders, x0, (tol, tol - max(thickness, 0.0)))
    for obj, (count, close) in zip(colliders, counts):
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
    use_active: with several cloths and no name, take the active object if it is one (unless the
    scene's cloths run together: then all of them, together.joint)."""
    scene = context.scene
    cloths = run_cloths(scene, cloth_name, context.active_object if use_active else None)
    for cloth_obj in cloths:
        check_cloth_object(cloth_obj)
        _check_single_user(scene, cloth_obj)
    start, end = frame_range(scene)
    if end <= start:
        raise InputError(f"the frame range {start}-{end} is empty")
    picked = [_targets(scene, c, start, end, len(cloths) > 1) for c in cloths]
    reads = _read(context, cloths, picked, start, end)
    if not cloth_name and scene.diffcloth.together:
        reads[0].warnings[:0] = _left_out(scene, cloths)
    if need_targets:
        _check_posed(cloths, picked, reads)
    built = _colliders(reads[0])
    parts = [
        _setup(context, c, read, targets, frames, start, end, need_targets, built)
        for c, read, (targets, _, frames) in zip(cloths, reads, picked)
    ]
    return parts[0] if len(parts) == 1 else together.joint(parts)


def run_cloths(scene, name, active):
    """The cloths a run takes: the one named; else every cloth of the scene Blender evaluates
    where they run together (Cloths Together) and there are several; else the active or the only
    one."""
    cloths = [o for o in scene.objects if o.diffcloth.role == "CLOTH"]
    if not name and len(cloths) > 1 and scene.diffcloth.together:
        depsgraph = bpy.context.evaluated_depsgraph_get()
        return [o for o in cloths if evaluated(o, depsgraph)] or cloths  # none: refused by name
    return [find_cloth(scene, name, active)]


def _left_out(scene, cloths):
    """A warning per cloth of the scene a together run leaves out (Blender does not evaluate it)."""
    return [
        f"cloth '{o.name}' is disabled in viewports or in an excluded collection: left out of the run, as by "
        "Blender's own physics"
        for o in scene.objects
        if o.diffcloth.role == "CLOTH" and o not in cloths
    ]


def _check_single_user(scene, cloth_obj):
    """Refuse a cloth whose mesh other objects share: the bake would move them too."""
    sharing = [f"'{o.name}'" for o in scene.objects if o.data == cloth_obj.data and o != cloth_obj]
    if sharing:
        raise InputError(
            f"cloth '{cloth_obj.name}' shares its mesh with {', '.join(sharing)} (a linked duplicate, Alt+D), "
            "which the bake would move too: make it single-user (Object › Relations › Make Single User)"
        )


def _targets(scene, cloth_obj, start, end, several=False):
    """The targets that pose the cloth (theirs, or the scene's only one), those that pose other
    cloths, and the frames each of the first is keyed at; refused by name where a target names no
    cloth of the scene, or cannot pose one within the frame range. several: the cloth runs with
    others, so a keyed target must name it."""
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
        if owner is None and several and keyed_frames(t):
            raise InputError(
                f"target '{t.name}' names no Cloth, and the scene's cloths run together (Cloths Together): "
                "set the cloth it poses"
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
    return targets, others, target_frames


def _read(context, cloths, picked, start, end):
    """Each cloth (a _Read per cloth), its targets, and the colliders (shared by the reads) read at
    every frame of the range, the cloths as they are without DiffCloth's bake; restores the frame.
    picked: per cloth, its targets and their keyed frames (_targets)."""
    scene = context.scene
    colliders = [o for o in scene.objects if o.diffcloth.role in ("SPHERE", "PLANE")]
    meshes = collision_objects(scene, cloths)
    original_frame = scene.frame_current
    try:
        with contextlib.ExitStack() as stack:
            for c in cloths:
                stack.enter_context(OwnKeysMuted(c))
                stack.enter_context(ModifiersOff(c))
            scene.frame_set(start)
            context.view_layer.update()
            depsgraph = context.evaluated_depsgraph_get()
            warnings = _evaluated_only(cloths, colliders, meshes, picked, depsgraph)
            readers = [MeshReader(o, mesh_topology(o, depsgraph)[0]) for o in meshes]
            poses, uneven = {o.name: [] for o in colliders}, {}
            reads = []
            for c in cloths:
                sim = _read_start(c, depsgraph, start, warnings)
                reader = fields.FieldReader(scene, c.diffcloth, depsgraph)
                reads.append(_Read(sim, colliders, meshes, readers, warnings + reader.warnings, reader, poses, uneven))
                warnings = []
            for f in range(start, end + 1):
                scene.frame_set(f)
                depsgraph = context.evaluated_depsgraph_get()
                for c, read, (targets, _, target_frames) in zip(cloths, reads, picked):
                    _read_frame(read, c, targets, target_frames, f, depsgraph)
                    read.fields.read(depsgraph)
                _read_colliders(reads[0], f, depsgraph)
    finally:
        scene.frame_set(original_frame)
    return reads


def _evaluated_only(cloths, colliders, meshes, picked, depsgraph):
    """Refuse a cloth or keyed target that Blender does not evaluate; leave such colliders out of
    colliders and meshes, as Blender's own physics does, with a warning each (returned)."""
    for cloth_obj, (targets, _, target_frames) in zip(cloths, picked):
        if not evaluated(cloth_obj, depsgraph):
            raise InputError(not_evaluated_message("cloth", cloth_obj))
        for t in targets:
            if target_frames[t.name] and not evaluated(t, depsgraph):
                raise InputError(not_evaluated_message("target", t))
    warnings = []
    enabled = physics_objects(depsgraph.view_layer)
    for group in (colliders, meshes):
        for o in [o for o in group if not (evaluated(o, depsgraph) and o in enabled)]:
            warnings.append(
                f"collider '{o.name}' is disabled in viewports or in an excluded collection: "
                "ignored, as by Blender's own physics"
            )
            group.remove(o)
    return warnings


def _read_start(cloth_obj, depsgraph, start, warnings):
    """The cloth at the start frame as simulated: its own mesh, or the proxy it follows (a
    Simulation Mesh or Proxy Vertices, core.design.embedding); refused by name where the mesh
    simulated is no cloth."""
    cs, name = cloth_obj.diffcloth, cloth_obj.name
    verts, tris, faces, local_co, pins, goal, sewing = read_cloth(cloth_obj, cs, depsgraph, start)
    carried = stack_place(cloth_obj) > 0
    weights = property_weights(cloth_obj, cs, GROUPS, depsgraph)
    factors, more = property_factors(cs, name, weights, len(local_co))
    warnings += more
    render = dict(
        render_verts=verts,
        render_tris=tris,
        render_polygons=faces,
        render_pins=pins,
        render_pins_local=local_co[pins],
        render_factors=factors,
        render_goal=goal,
        render_goal_local=local_co[goal > 0],
        render_sewing=sewing,
    )
    embedding, polygons, carry = None, faces, None
    if proxy.wanted(cs) and refined(cloth_obj):
        warnings.append(
            f"cloth '{name}': its optimized design was refined on the cloth itself, so the cloth is "
            "simulated without its simulation mesh (Discard Result to use the simulation mesh again)"
        )
    elif proxy.wanted(cs) and len(sewing):
        raise InputError(
            f"cloth '{name}': a cloth sewn (loose edges) is simulated without a Simulation Mesh for now: clear "
            "Simulation Mesh and Proxy Vertices"
        )
    elif proxy.wanted(cs):  # simulate a proxy; the cloth follows it
        start_mw = np.array(cloth_obj.evaluated_get(depsgraph).matrix_world)
        local_co, tris, polygons, pins, embedding = proxy.read(
            cloth_obj, cs, depsgraph, local_co, verts, pins, start_mw
        )
        # the Property Weights and soft pins of the cloth vertex nearest each proxy vertex
        nearest = proxy.nearest(render["render_verts"], to_world(local_co, start_mw))
        factors = {kind: f[nearest] for kind, f in factors.items()}
        goal = goal[nearest]
        goal[pins] = 0.0
        verts, faces = to_world(local_co, start_mw), np.arange(len(tris))
        if carried:  # the proxy's pins and soft pins ride the cloth's carried mesh
            held = np.r_[pins, np.flatnonzero(goal > 0)]
            carry = Embedding(verts[held], render["render_verts"], render["render_tris"])
    rest = verts if not cs.rest_shape_key else _rest_shape(cloth_obj, depsgraph, carried or embedding is not None)
    try:
        cloth = build_cloth(cs, rest, tris, pins, polygons, factors, sewing)
    except ValueError as err:  # core's triangle k as the artist's face (Blender's face index)
        message = re.sub(r"\btriangle (\d+)", lambda m: f"face {faces[int(m.group(1))]}", str(err))
        raise InputError(f"cloth '{name}': {message}") from None
    return _Simulated(cloth, verts, local_co, pins, goal, carried, embedding=embedding, carry=carry, **render)


def _rest_shape(cloth_obj, depsgraph, unsupported):
    """The cloth's Rest Shape Key in world space at the start frame, refused by name where it
    is missing or the cloth is carried by modifiers or simulated on a simulation mesh."""
    cs, name = cloth_obj.diffcloth, cloth_obj.name
    keys = cloth_obj.data.shape_keys
    key = None if keys is None else keys.key_blocks.get(cs.rest_shape_key)
    if key is None:
        raise InputError(f"cloth '{name}': its Rest Shape Key '{cs.rest_shape_key}' is not one of its shape keys")
    if key.name.startswith(BAKE_PREFIX):
        raise InputError(f"cloth '{name}': its Rest Shape Key '{key.name}' is DiffCloth's bake: choose a key of yours")
    if unsupported:
        raise InputError(
            f"cloth '{name}': a Rest Shape Key is not followed on a cloth carried by modifiers or simulated on a "
            "Simulation Mesh for now: clear Rest Shape Key"
        )
    co = np.empty(len(key.data) * 3)
    key.data.foreach_get("co", co)
    return to_world(co.reshape(-1, 3), np.array(cloth_obj.evaluated_get(depsgraph).matrix_world))


def _read_frame(read, cloth_obj, targets, target_frames, f, depsgraph):
    """Frame f of one cloth into read: the cloth object's matrix (its mesh checked), the pins'
    poses, and the poses of its targets keyed there."""
    sim = read.sim
    co, mw = evaluated_coords(cloth_obj, depsgraph)
    check_undeformed(cloth_obj, co, f)
    check_transform(cloth_obj, mw, f)
    read.matrices.append(mw)
    held = co if sim.carried else sim.local_co  # where pins and goals are: the modifiers' result, or the mesh
    if sim.carry is not None:  # a proxy's, on the cloth's carried mesh
        at, k = sim.carry.apply(to_world(co, mw)), len(sim.pins)
        pins, goals = at[:k], at[k:]
    else:
        pins, goals = to_world(held[sim.pins], mw), to_world(held[sim.goal > 0], mw)
    if len(sim.pins):
        read.pin_path.append(pins)
    read.goal_path.append(goals)
    if sim.embedding is not None:
        own = co if sim.carried else None
        read.render_pin_path.append(to_world(sim.render_pins_local if own is None else own[sim.render_pins], mw))
        read.render_goal_path.append(to_world(sim.render_goal_local if own is None else own[sim.render_goal > 0], mw))
    for t in targets:
        if f in target_frames[t.name]:
            _read_target(read, t, f, depsgraph, cloth_obj.name)


def _read_colliders(read, f, depsgraph):
    """Frame f of the colliders into read (theirs are shared by every cloth's read)."""
    for o in read.colliders:
        ev = o.evaluated_get(depsgraph)
        read.poses[o.name].append(collider_pose(ev, o.diffcloth.role, f))
        if o.name not in read.uneven and (message := uneven_sphere(ev, f)):
            read.uneven[o.name] = message
    for reader in read.readers:
        co, mw = evaluated_coords(reader.obj, depsgraph)
        reader.read(to_world(co, mw), f, mirrored=np.linalg.det(mw[:3, :3]) < 0)


def _read_target(read, t, f, depsgraph, name):
    """Target t's world positions at frame f, one of its keys, into read.target_pos; refused by name
    unless they pose every vertex of cloth `name`, and no other target is keyed there."""
    tv = to_world(*evaluated_coords(t, depsgraph))
    n_render = read.sim.n_render
    if len(tv) != n_render:
        what = (
            " (its simulation mesh's count: pose a copy of the cloth itself)"
            if (read.sim.embedding is not None and len(tv) == read.sim.cloth.n)
            else ""
        )
        raise InputError(f"target '{t.name}' has {len(tv)} vertices, cloth '{name}' has {n_render}{what}")
    if not np.isfinite(tv).all():
        raise InputError(f"target '{t.name}' has a NaN or infinite vertex at frame {f}")
    if f in read.target_pos:
        raise InputError(f"targets '{read.target_pos[f][0]}' and '{t.name}' are both keyed at frame {f}")
    read.target_pos[f] = (t.name, tv)


def _check_posed(cloths, picked, reads):
    """Refuse an optimization that no target poses (of any of the cloths run)."""
    if any(read.target_pos for read in reads):
        return
    targets = [t for ts, _, _ in picked for t in ts]
    others = {t for _, os, _ in picked for t in os} - set(targets)
    if not targets and others:
        raise InputError(
            f"no targets pose cloth '{cloths[0].name}' ("
            + ", ".join(f"'{t.name}' poses '{t.diffcloth.cloth.name}'" for t in others)
            + "): set a target's Cloth to it, or run the cloth they pose"
        )
    raise InputError(NO_KEYS if targets else NO_TARGETS)


def _setup(context, cloth_obj, read, targets, target_frames, start, end, need_targets, built):
    """The Setup of what was read: the core scene (its start checked; built: its colliders), the
    targets' loss and, with a proxy, Refine's run on the cloth itself."""
    scene, cs, name, sim, warnings = context.scene, cloth_obj.diffcloth, cloth_obj.name, read.sim, read.warnings
    common = dict(
        steps=end - start,
        dt=frame_time(scene),
        gravity=scene_gravity(scene, cs),
        substeps=cs.substeps,
        colliders=built,
        contact_stiffness=cs.contact_stiffness,
        contact_thickness=cs.thickness,
        solver=cs.solver.lower(),
        self_distance=self_distance(cs, name, sim.cloth),
        self_friction=cs.self_friction * FRICTION_SCALE if cs.use_self_collision else 0.0,
        wind=read.fields.wind(),
        wind_drag=read.fields.wind_drag(),
        effectors=read.fields.effectors(),
    )
    core_scene = build_scene(
        name,
        sim.cloth,
        x0=sim.verts,  # the mesh at the start frame, whatever the rest (a Rest Shape Key)
        pin_path=_pin_path(read.pin_path, sim.pins),
        goals=_goals(cs, sim.cloth, sim.goal, read.goal_path),
        **common,
    )
    _check_start(core_scene, name, read.colliders + read.meshes, start)
    loss, refine = None, None
    if read.target_pos:
        loss, zero = _loss(targets, read.target_pos, start, context.evaluated_depsgraph_get, sim.n_render)
        warnings += zero
        if sim.embedding is not None and need_targets and cs.refine_iterations:  # Refine: the cloth's own run
            refine = _refine(name, cs, read, common, loss)
        if sim.embedding is not None:  # the targets pose the cloth; the loss measures it on the proxy's motion
            loss = EmbeddedLoss(loss, sim.embedding)
    names = {f - start: t for f, (t, _) in read.target_pos.items()}
    pins_off, posed = _pins_off(core_scene, loss, read)
    return Setup(
        cloth_obj=cloth_obj,
        cloth_name=name,
        scene=core_scene,
        loss=loss,
        start=start,
        end=end,
        matrices=np.array(read.matrices),
        warnings=warnings + pin_warnings(scene.diffcloth, pins_off, name, names, start),
        posed_pins=posed,
        target_frames=target_frames,
        render_tris=sim.render_tris,
        n_render=sim.n_render,
        collider_names=[o.name for o in read.colliders + read.meshes],
        embedding=sim.embedding,
        refine=refine,
    )


def _colliders(read):
    """The core colliders of what was read: spheres and planes, then Collision-physics meshes;
    their warnings added to read.warnings."""
    built = []
    for o in read.colliders:
        a, b = (_constant(np.array(p)) for p in zip(*read.poses[o.name]))
        mu = o.diffcloth.friction * FRICTION_SCALE
        built.append(dc.Sphere(a, b, friction=mu) if o.diffcloth.role == "SPHERE" else dc.Plane(a, b, friction=mu))
    read.warnings += read.uneven.values()
    for reader in read.readers:
        built.append(reader.build())
        read.warnings += reader.warnings
    return built


def _refine(name, cs, read, common, loss):
    """Refine's run: the cloth itself, with the scene's settings, posed by the targets' loss."""
    sim = read.sim
    full = build_cloth(
        cs,
        sim.render_verts,
        sim.render_tris,
        sim.render_pins,
        sim.render_polygons,
        sim.render_factors,
        sim.render_sewing,
    )
    own = build_scene(
        name,
        full,
        pin_path=_pin_path(read.render_pin_path, sim.render_pins),
        goals=_goals(cs, full, sim.render_goal, read.render_goal_path),
        **dict(common, self_distance=self_distance(cs, name, full, "Refine's")),
    )
    return Refine(scene=own, loss=loss, posed_pins=dc.posed_pins(own, loss, PIN_SLACK))


def _pins_off(core_scene, loss, read):
    """How far the targets pose the cloth's pinned vertices from where they are held ({frame:
    distances}; None without targets), and the simulated mesh's pins Move Pins moves."""
    sim = read.sim
    if loss is None:
        return None, np.zeros(0, np.int64)
    if sim.embedding is None:
        return dc.pins_off_targets(core_scene, loss), dc.posed_pins(core_scene, loss, PIN_SLACK)
    # the targets pose the cloth's pins; Move Pins moves the proxy's pins that hold them
    pins = sim.render_pins
    pins_off = {f: np.linalg.norm(t[pins] - read.render_pin_path[f], axis=1) for f, t in loss.targets.items()}
    return pins_off, proxy.posed_pins(sim.render_verts, pins, pins_off, sim.verts, sim.cloth.pinned, PIN_SLACK)
