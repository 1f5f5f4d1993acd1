"""Hand-posed keys (issue 15): can the default control parameterization reach them, how hard does it
push, and how long does it take?

A 1 m cloth of side×side vertices (the add-on's default fabric, Cotton, two corners pinned) at 24
fps for 48 frames over a sphere (r 0.25 at (0, −0.35, −0.55)) and a floor (z = −1). Targets: the
frame 24 of the motion Optimize simulates (converged steps: New Target bakes a quick preview again
with them before copying) turned 25° about the vertical through its centroid, and frame 48 shifted
15 cm in x. Through core.optimize with the add-on's default control forces (KeyedForces) and its
converged steps, and at 20×20 through the add-on's Simulate & Bake (the default linearized
steps), New Target from Cloth, the edit and Optimize. Optimize starts from the simulation the
keys were posed from (its motion as the guess), as the add-on's does. --preview-poses: the keys
posed on the linearized preview instead, as before New Target baked the converged motion. --springs: the cloth of earlier versions instead (0.5 kg, tension 20, air
damping 0.5, converged steps throughout).
Per case: mean distance at both keys (criterion ≤ 1 cm), largest control acceleration (≤ 2 g), wall
time (≤ 2 min at 32×32, ≤ 8 min at 64×64) split into forward simulations, adjoint and tangent passes
and optimizer overhead, evaluations (simulations) and passes, and the run's cost in
forward-equivalents (its solver time over one Simulate & Bake of the start). --methods compares
optimize's methods; --magnitude, --smoothness, --every replace the add-on's regularization.
--within MM stops each run once both keys' mean distances are that close (the add-on's Stop
Within; default: run until the optimizer stops). --poses: "whole" edits the copies as a whole
(the issue's keys; the pinned corners move with them, which no control force can follow: the
add-on's Move Pins, on by default, lets the control move those pins too), "pins-kept" the same edits faded out within 0.3 m of the pins, as an artist keeps
them in place with proportional editing. --fixed-pins turns Move Pins off. --cape: the cape sample
scene through the add-on (a mesh collider, Collision physics), its hem posed at two keys: flared
out behind the body, and swung along its side. --fold [SIDE ...]: a cloth on a floor with Self
Collisions through the add-on, a corner stood up and then laid over the rest (16×16, 24×24, 32×32).
--slide [SIDE ...]: physically consistent keys on resting cloth, a sheet on a table slid across it
(--proxy N: simulated through a proxy of about N vertices);
--slide-friction [SIDE ...]: the same sheet sliding off the table, the table's Friction the design.
--bar [SIDE ...]: physically consistent keys over a round bar, the sheet pulled across it to hang off-centre.
--consistent: beside each hand-posed add-on row, the keys made consistent (set to the cloth as its
optimized bake shows it) and Optimize run again from no force.
--best-of [l-bfgs-b restarts]: beside each add-on row, what ten times its iterations find: L-BFGS-B
from its fit, and three random restarts (the fit pushed as a whole at every control key).
--repeats N: each hand-posed add-on row (20×20, table, cape, fold) N more times with its posed keys
moved by 1 µm at random per vertex, and the spread (least, median, largest) of what they reach.

    .envs/py313-bpy5.2/bin/python benchmarks/artist_match.py [--sizes 32 64] [--max-iter 100] [--no-addon]
        [--methods auto l-bfgs-b] [--magnitude 1e-6] [--smoothness 1e-4] [--every 0.25] [--poses whole pins-kept]
        [--fixed-pins] [--within 10] [--cape] [--fold [16 24 32]] [--slide [20 32]] [--bar [20 32]] [--slide-friction [20]]
"""

import argparse
import copy
import json
import math
import pathlib
import statistics
import sys
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "scripts"))
from blender_cloth import world_positions  # noqa: E402
from dev_extension import load_extension  # noqa: E402

ext = load_extension()
import diffcloth.core as dc  # noqa: E402

FPS, FRAMES, G = 24, 48, 9.81
LIMIT_S = {32: 120, 64: 480}


def turned(x, degrees):
    c = x.mean(axis=0)
    a = math.radians(degrees)
    rot = np.array([[math.cos(a), -math.sin(a), 0], [math.sin(a), math.cos(a), 0], [0, 0, 1]])
    return (x - c) @ rot.T + c


KEEP_NEAR_PINS = 0.3  # m: proportional editing's radius around the pins in the "pins-kept" poses


def edits(pins, pose):
    """The two keys' edits, {frame: x ↦ posed x}: the copy turned 25° about the vertical through
    its centroid (frame 24) and shifted 15 cm in x (frame 48), as a whole or faded out near the
    pinned vertices (indices pins)."""

    def kept(edit):
        if pose == "whole":
            return edit

        def faded(x):
            near = np.linalg.norm(x[:, None] - x[pins][None], axis=2).min(axis=1) / KEEP_NEAR_PINS
            w = np.clip(near, 0.0, 1.0)
            w = w * w * (3 - 2 * w)  # smoothstep: Blender's smooth falloff
            return x + w[:, None] * (edit(x) - x)

        return faded

    return {24: kept(lambda x: turned(x, 25.0)), 48: kept(lambda x: x + [0.15, 0.0, 0.0])}


SPRINGS = False  # --springs
PREVIEW_POSES = False  # --preview-poses


def scene(side):
    """The scene as Simulate & Bake steps it (the keys are posed on that); Optimize converges."""
    verts, tris = dc.grid(side, side, size=1.0)
    top = np.flatnonzero(np.isclose(verts[:, 1], verts[:, 1].max()))
    if SPRINGS:
        cloth = dc.Cloth(verts, tris, mass=0.5, k_tension=20.0, damping=0.5, pinned=[top[0], top[-1]])
    else:
        cloth = dc.FABRICS["cotton"].cloth(verts, tris, pinned=[top[0], top[-1]])
    return dc.Scene(
        cloth,
        steps=FRAMES,
        dt=1 / FPS,
        solver="newton" if SPRINGS else "linearized",
        colliders=[dc.Sphere((0.0, -0.35, -0.55), 0.25), dc.Plane((0, 0, -1.0), (0, 0, 1))],
    )


def default_settings():
    """The add-on's Control Forces defaults: key spacing, the two costs' weights, Move Pins."""
    import bpy

    ext.register()
    try:
        s = bpy.context.scene.diffcloth
        return dict(
            every=s.force_key_spacing,
            magnitude=dc.weight_for_distance(s.force_strength),
            smoothness=dc.weight_for_distance(s.force_change),
            move_pins=s.force_move_pins,
        )
    finally:
        ext.unregister()


def core_case(side, max_iter, controls, method, pose, within):
    sc = scene(side)
    t0 = time.perf_counter()
    # the simulation the artist poses the keys from
    baked = dc.simulate(sc if PREVIEW_POSES else sc.replace(solver="newton"))
    forward = time.perf_counter() - t0
    x = baked.x
    loss = dc.KeyframeLoss({f: edit(x[f]) for f, edit in edits(sc.cloth.pinned, pose).items()})
    keyed = dict(controls, move_pins=dc.posed_pins(sc, loss) if controls["move_pins"] else False)
    t0 = time.perf_counter()
    # started from that simulation's motion, as the add-on's Optimize after Simulate & Bake, with
    # the add-on's converged steps
    sc = sc.replace(solver="newton")
    result = dc.optimize(
        sc, loss, [dc.KeyedForces(**keyed)], max_iter=max_iter, method=method, guess=baked.step_x, within=within
    )
    wall = time.perf_counter() - t0
    traj = result.trajectory  # the optimized motion (one branch where the cloth buckles)
    scratch = loss.distances(dc.simulate(result.scene).x)  # the design simulated from scratch
    name = (
        f"{side}x{side} core {result.method}, {pose} poses{' on the preview' if PREVIEW_POSES else ''}"
        f"{'' if controls['move_pins'] else ', fixed pins'}"
    )
    out = report(
        name,
        side,
        loss.distances(traj.x),
        len(result.history),
        result.reason,
        result.scene.max_control_acceleration(),
        wall,
    )
    (sims, forward_s), (adjoints, adjoint_s), (tangents, tangent_s) = (
        result.passes[k] for k in ("forward", "adjoint", "tangent")
    )
    out.update(
        normalized_loss=round(result.normalized_loss, 4),
        evaluations=sims,
        evaluations_per_iteration=round(sims / max(len(result.history), 1), 2),
        adjoints=adjoints,
        tangents=tangents,
        forward_s=round(forward_s, 1),
        adjoint_s=round(adjoint_s, 1),
        tangent_s=round(tangent_s, 1),
        optimizer_s=round(wall - forward_s - adjoint_s - tangent_s, 1),
        forward_equivalents=round((forward_s + adjoint_s + tangent_s) / forward, 1),
        from_scratch_mean_mm={f: round(d[0] * 1e3, 1) for f, d in scratch.items()},
    )
    return out


def report(name, side, distances, iterations, reason, max_accel, wall):
    out = dict(
        case=name,
        iterations=iterations,
        reason=reason,
        wall_s=round(wall, 1),
        mean_mm={f: round(d[0] * 1e3, 1) for f, d in distances.items()},
        largest_mm={f: round(d[1] * 1e3, 1) for f, d in distances.items()},
        max_control_g=round(max_accel / G, 2),
    )
    out["meets"] = dict(
        within_1cm=all(d[0] <= 0.01 for d in distances.values()),
        within_2g=out["max_control_g"] <= 2.0,
        in_time=wall <= LIMIT_S.get(side, math.inf),
    )
    return out


def addon_scene(side, collider="sphere"):
    """The add-on case's scene, in a new file: a side×side 1 m grid 'Cloth' (Role Cloth, the add-on's
    default fabric, its two +Y corners in the Pin Group 'pins') and its collider; 24 fps, frames 1
    to 49. Returns the cloth and its pinned vertices. collider: "sphere", the sphere (Role Sphere)
    and the floor (Role Plane); "table", a table whose edge the cloth hangs over; "bar", a 3 cm
    horizontal bar 30 cm under the cloth; the last two with Collision physics (Friction 30)."""
    import bpy

    bpy.ops.wm.read_factory_settings(use_empty=True)
    s = bpy.context.scene
    s.render.fps, s.frame_start, s.frame_end = FPS, 1, FRAMES + 1
    bpy.ops.mesh.primitive_grid_add(x_subdivisions=side - 1, y_subdivisions=side - 1, size=1.0)
    cloth = bpy.context.active_object
    cloth.name, cloth.diffcloth.role = "Cloth", "CLOTH"
    if SPRINGS:
        cloth.diffcloth.model, cloth.diffcloth.solver, cloth.diffcloth.damping = "SPRINGS", "NEWTON", 0.5
    co = np.array([v.co for v in cloth.data.vertices])
    top = np.flatnonzero(np.isclose(co[:, 1], co[:, 1].max()))
    cloth.vertex_groups.new(name="pins").add([int(top[0]), int(top[-1])], 1.0, "REPLACE")
    cloth.diffcloth.pin_group = "pins"
    if collider == "sphere":
        bpy.ops.mesh.primitive_uv_sphere_add(radius=0.25, location=(0, -0.35, -0.55))
        bpy.context.active_object.diffcloth.role = "SPHERE"
        bpy.ops.mesh.primitive_plane_add(size=4, location=(0, 0, -1))
        bpy.context.active_object.diffcloth.role = "PLANE"
    else:
        if collider == "table":  # 1.2 m wide, its top 30 cm under the cloth, its +y edge under the pins' side
            bpy.ops.mesh.primitive_cube_add(size=1.0, location=(0.0, -0.35, -0.8))
            bpy.context.active_object.scale = (1.2, 1.0, 1.0)
        else:  # a bar along x
            bpy.ops.mesh.primitive_cylinder_add(
                radius=BAR_RADIUS, depth=1.0, location=(0.0, 0.0, -0.3), rotation=(0.0, math.pi / 2, 0.0)
            )
        body = bpy.context.active_object
        body.name = collider.title()
        body.modifiers.new("Collision", "COLLISION")
        body.collision.cloth_friction, body.collision.thickness_outer = 30.0, 0.01
    bpy.context.view_layer.objects.active = cloth
    return cloth, top[[0, -1]]


def pose_target(cloth, frame, edit):
    """New Target from Cloth at Blender frame `frame`, posed by hand: edit maps the copy's world
    positions to the posed ones."""
    import bpy

    bpy.context.scene.frame_set(frame)
    bpy.context.view_layer.objects.active = cloth
    before = set(bpy.data.objects)
    assert bpy.ops.diffcloth.new_target() == {"FINISHED"}
    (target,) = set(bpy.data.objects) - before
    mw = np.array(target.matrix_world)
    x = edit(np.array([v.co for v in target.data.vertices]) @ mw[:3, :3].T + mw[:3, 3])
    if _noise is not None:  # a repeat (--repeats): the pose moved by what no eye sees
        x = x + NOISE * _noise.normal(size=x.shape)
    set_world(target, x)


REPEATS = 0  # --repeats N: each hand-posed row run N more times, its keys moved by NOISE at random
NOISE = 1e-6  # m
_noise = None  # the repeat's np.random.Generator (pose_target), None: the keys as posed


def repeated(case, *args):
    """case(*args)'s row; with --repeats, and its spread over REPEATS more runs whose posed keys are
    moved by NOISE per vertex at random (seeds 1, 2, …): an optimization through contact and
    buckling is chaotic in rounding (a 10⁻¹⁶ change of every step's matrix has moved a row by
    centimetres), so one run says little of what the method reaches."""
    global _noise
    row = case(*args)
    if not REPEATS:
        return row
    runs = [row]
    for seed in range(1, REPEATS + 1):
        _noise = np.random.default_rng(seed)
        try:
            runs.append(case(*args))
        finally:
            _noise = None

    def spread(values):
        return [round(float(v), 2) for v in (min(values), statistics.median(values), max(values))]

    row["spread"] = dict(
        runs=len(runs),
        mean_mm={f: spread([r["mean_mm"][f] for r in runs]) for f in row["mean_mm"]},
        wall_s=spread([r["wall_s"] for r in runs]),
        max_control_g=spread([r["max_control_g"] for r in runs]),
        iterations=[r["iterations"] for r in runs],
    )
    return row


def set_world(target, x):
    """Pose the target's mesh at world positions x (n,3)."""
    inv = np.linalg.inv(np.array(target.matrix_world))
    target.data.vertices.foreach_set("co", (x @ inv[:3, :3].T + inv[:3, 3]).ravel())
    target.data.update()


def optimized_row(cloth, name, side, max_iter, within, move_pins=None, friction=False):
    """The add-on's Optimize from frame 1 with Control Forces (no stiffness; friction: the colliders'
    Friction instead), Max Iterations, Stop Within and (unless None) Move Pins set: the row (report)
    and the result stored on the cloth."""
    import bpy

    s = bpy.context.scene
    s.frame_set(1)
    d = s.diffcloth
    d.opt_tension, d.opt_forces, d.opt_friction = False, not friction, friction
    d.max_iterations, d.stop_within = max_iter, within or 0.0
    if move_pins is not None:
        d.force_move_pins = move_pins
    bpy.context.view_layer.objects.active = cloth
    t0 = time.perf_counter()
    assert bpy.ops.diffcloth.optimize() == {"FINISHED"}
    wall = time.perf_counter() - t0
    stored = cloth["diffcloth_result"]
    distances = {int(f): (v[2], v[3]) for f, v in stored["keyframes"].items()}
    row = report(
        name, side, distances, stored["iterations"], stored["reason"], stored["max_control_acceleration"], wall
    )
    # why a key is out of reach, as the sidebar tells it: stretch asked and the fabric's, the
    # nearest such pose (mm), vertices inside colliders, vertices that slide off placed at rest
    row["unreachable"] = {
        f: dict(
            stretch_pct=round(v[0] * 100, 1),
            fabric_pct=round(v[2] * 100, 1),
            closest_mm=round(v[4] * 1e3, 1),
            inside=int(v[5]),
            slide=int(v[7]),
            farthest_mm=round(v[8] * 1e3),
        )
        for f, v in stored["unreachable"].items()
    }
    if friction:
        row["friction_scale"] = round(stored.get("friction_scale", 1.0), 4)
    row["objective"] = round(float(stored["loss"]), 5)
    if BEST_OF:
        row["best_of_10x"] = best_of(stored["iterations"])
    return row, stored


CONSISTENT = False  # --consistent: beside each hand-posed add-on row, the same keys made reachable


def consistent_row(cloth, name, side, max_iter, within):
    """Physically consistent keys from a hand-posed row: each target set to the cloth as the
    optimized bake shows it at the target's frame (the motion of a design Optimize found, which
    the physics allows), the stored design discarded, then Optimize again from no force."""
    import bpy

    from diffcloth.diffcloth_addon.reading import keyed_frames

    sc = bpy.context.scene
    for target in [o for o in sc.objects if o.diffcloth.role == "TARGET"]:
        (frame,) = keyed_frames(target)
        sc.frame_set(frame)
        set_world(target, world_positions(cloth))
    bpy.context.view_layer.objects.active = cloth
    assert bpy.ops.diffcloth.discard_result() == {"FINISHED"}
    return optimized_row(cloth, f"{name}, keys from its optimized bake", side, max_iter, within)[0]


BEST_OF = ()  # --best-of: beside each add-on row, what ten times its iterations find (by these methods)


RESTARTS = 3  # random restarts of best_of
RESTART_PUSH = 0.3  # g: the spread of a restart's push per control key


def best_of(iterations, seed=1):
    """What other methods find with ten times the iterations (at least 30), through core on the
    add-on's own job: L-BFGS-B from the design Optimize stored (the fit, which the add-on's next
    run continues from), and RESTARTS random restarts, each Optimize ("auto", a third of that
    budget) from the fit pushed as a whole, at every control key, by an acceleration drawn from
    N(0, RESTART_PUSH² g²) per axis (the same for every vertex: another motion, not noise). Their
    distances beside the row's say whether the optimizer or the physics stopped there (criterion:
    the row within 1.2× of the best)."""
    import bpy

    from diffcloth.diffcloth_addon import operators

    setup, job = operators.prepare(bpy.context, "optimize", use_active=False)
    budget = max(10 * iterations, 30)

    def run(method, params, max_iter, guess):
        t0 = time.perf_counter()
        result = dc.optimize(job["scene"], job["loss"], params, method=method, max_iter=max_iter, guess=guess)
        distances = result.history[-1]["distances"] if result.history else result.initial_distances
        return dict(
            method=method,
            iterations=len(result.history),
            reason=result.reason,
            wall_s=round(time.perf_counter() - t0, 1),
            mean_mm={str(f + setup.start): round(d[0] * 1e3, 1) for f, d in distances.items()},
            largest_mm={str(f + setup.start): round(d[1] * 1e3, 1) for f, d in distances.items()},
            max_control_g=round(result.scene.max_control_acceleration() / G, 2),
            objective=round(float(result.loss), 5),  # the keys' loss and the regularizers, as Optimize's
        )

    rows = (
        [dict(run("l-bfgs-b", job["params"], budget, job["guess"]), start="the fit")] if "l-bfgs-b" in BEST_OF else []
    )
    rng = np.random.default_rng(seed)
    for _ in range(RESTARTS if "restarts" in BEST_OF else 0):
        params = []
        for p in job["params"]:  # the control forces start at the push (their regularizer counts it)
            if isinstance(p, dc.KeyedForces):
                p = copy.copy(p)
                keys = len(p.key_times(job["scene"]))
                push = rng.normal(0.0, RESTART_PUSH * G, (keys, 1, 3))
                theta = np.broadcast_to(push, (keys, job["scene"].cloth.n, 3)).ravel().copy()
                p.initial = lambda scene, theta=theta: theta.copy()
            params.append(p)
        try:
            rows.append(dict(run("auto", params, max(budget // 3, 10), None), start="a random push"))
        except dc.SimulationError as err:
            rows.append(dict(start="a random push", failed=str(err)))
    return rows


def addon_case(side, max_iter, pose, move_pins, within, table=False, proxy=None, refine=0):
    """The add-on's Optimize on targets made with New Target from Cloth, then edited by hand
    (scene: addon_scene). proxy: Proxy Vertices (the cloth simulated through a proxy of about
    that many vertices, set before Simulate & Bake); the row then also names the proxy's vertex
    count and Simulate & Bake's seconds. refine: the proxy's Refine iterations (on the cloth
    itself, after the proxy's run)."""
    import bpy

    ext.register()
    try:
        cloth, pins = addon_scene(side, "table" if table else "sphere")
        if proxy is not None:
            cloth.diffcloth.proxy_vertices, cloth.diffcloth.refine_iterations = proxy, refine
        t0 = time.perf_counter()
        assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
        simulate_s = time.perf_counter() - t0
        for frame, edit in edits(pins, pose).items():
            pose_target(cloth, frame + 1, edit)  # Blender's frame 1 is the start
        name = (
            f"{side}x{side} add-on{' over a table edge' if table else ''}"
            f"{'' if proxy is None else f', proxy {proxy}'}{f', Refine {refine}' if refine else ''}, {pose} poses"
            f"{'' if move_pins else ', fixed pins'}"
        )
        out, stored = optimized_row(cloth, name, side, max_iter, within, move_pins)
        if CONSISTENT:
            out["consistent"] = consistent_row(cloth, name, side, max_iter, within)
        if proxy is not None:
            from diffcloth.diffcloth_addon import proxy as proxy_module

            vertices = len(proxy_module.decimated_at_start(bpy.context, cloth, proxy)[0])
            out.update(proxy_vertices=vertices, refine=refine, simulate_s=round(simulate_s, 2))
            if refine:  # the cloth itself simulated with the proxy's design, before Refine's iterations
                out["refine_start_mm"] = {k: round(v[0] * 1e3, 1) for k, v in stored["refine_start"].items()}
        return out
    finally:
        ext.unregister()


# the cape's hem moved at frames 13 and 25 (smoothly from nothing at the shoulders): flared out
# behind the body and up, or swung along its side
CAPE_POSES = {
    "flare": {13: (0.0, -0.06, 0.02), 25: (0.03, -0.04, 0.0)},
    "along": {13: (0.08, 0.0, 0.0), 25: (-0.06, -0.05, 0.03)},
}


def cape_case(pose, max_iter, within):
    """The cape sample scene (a 12×12 cape pinned at the shoulders of a body swaying by shape keys,
    Collision physics with Friction 20), through the add-on: Simulate & Bake, New Target at frames
    13 and 25, the hem posed (CAPE_POSES) in world space, Control Forces, Optimize."""
    import bpy

    def hem(shift):
        def edit(x):
            w = np.clip((x[:, 2].max() - x[:, 2]) / np.ptp(x[:, 2]), 0.0, 1.0)
            return x + (w * w * (3 - 2 * w))[:, None] * np.array(shift)  # smoothstep from the shoulders

        return edit

    ext.register()
    try:
        bpy.ops.wm.open_mainfile(filepath=str(HERE.parent / "sample_scenes" / "cape.blend"))
        cloth = bpy.data.objects["Cape"]
        for t in [o for o in bpy.context.scene.objects if o.diffcloth.role == "TARGET"]:  # the sample's own key
            bpy.data.objects.remove(t)
        bpy.context.view_layer.objects.active = cloth
        assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
        for frame, shift in CAPE_POSES[pose].items():
            pose_target(cloth, frame, hem(shift))
        name = f"cape on a swaying body (Collision physics), {pose} poses"
        row = optimized_row(cloth, name, 12, max_iter, within)[0]
        if CONSISTENT:
            row["consistent"] = consistent_row(cloth, name, 12, max_iter, within)
        return row
    finally:
        ext.unregister()


SLIDE = 0.12  # m: how much farther over the table's edge the slide case's keys lie
BAR_RADIUS = 0.03  # m: the bar case's bar
BAR_OFFSET = 0.08  # m: how far off-centre the bar case's keys hang the sheet
KEYED_FRICTION = 20.0  # the table's Friction in the keys of the slide case with Friction as the design


def sheet_scene(side, size, collider):
    """addon_scene's cloth as a size×size sheet without pins, over the collider."""
    cloth, _ = addon_scene(side, collider)
    cloth.vertex_groups.clear()
    cloth.diffcloth.pin_group = ""
    co = np.array([v.co for v in cloth.data.vertices]) * [size, size, 1.0]
    cloth.data.vertices.foreach_set("co", co.ravel())
    cloth.data.update()
    return cloth


def slide_case(side, max_iter, within, size=0.5, friction=None, proxy=None):
    """Physically consistent keys on resting cloth: a side×side sheet (no pins) lying on
    the table (Collision physics, Friction 30) 2 cm from its edge, keyed at frames 25 and 49 with
    the motion of the same sheet placed SLIDE farther out (10 cm over the edge, where friction
    holds it): Simulate & Bake there, New Target at both frames (the converged motion), the sheet
    put back, the bake cleared; Control Forces, Optimize. The keys are reachable by sliding the
    sheet across the table. friction (a Friction): the sheet placed 20 cm over the edge, where it
    slides off at KEYED_FRICTION (held at 30), keyed with that motion at frames 13 and 25 (the
    scene's last) and started at this Friction, where it slides faster; Optimize varies the
    Friction alone (What May Change › Friction): a cloth that should slide less. proxy: Proxy
    Vertices, set before the keys are made (they are then the proxy's motion, as the artist sees it)."""
    import bpy

    ext.register()
    try:
        cloth = sheet_scene(side, size, "table")
        if proxy is not None:
            cloth.diffcloth.proxy_vertices = proxy
        top = -0.3 + 0.01 + 0.002  # the table's top, its Thickness Outer and 2 mm
        start = (0.0, 0.15 - size / 2 - 0.02, top)  # the table's +y edge at y = 0.15
        frames = (25, 49)
        if friction is not None:  # 20 cm over the edge, for a second: it slides off at Friction 20, held at 30
            cloth.location = (start[0], start[1] + 0.22, start[2])
            bpy.data.objects["Table"].collision.cloth_friction = KEYED_FRICTION
            frames = (13, 25)
            bpy.context.scene.frame_end = frames[-1]
        else:
            cloth.location = (start[0], start[1] + SLIDE, start[2])
        keys_from_here(cloth, frames)
        if friction is not None:
            bpy.data.objects["Table"].collision.cloth_friction = friction
            name = (
                f"{side}x{side} sheet sliding off a table at Friction {KEYED_FRICTION:g}, from Friction "
                f"{friction:g} (Friction alone)"
            )
            return optimized_row(cloth, name, side, max_iter, within, friction=True)[0]
        cloth.location = start
        name = (
            f"{side}x{side} sheet slid {SLIDE * 100:.0f} cm across a table (keys from its simulation)"
            f"{'' if proxy is None else f', proxy {proxy}'}"
        )
        return optimized_row(cloth, name, side, max_iter, within)[0]
    finally:
        ext.unregister()


def keys_from_here(cloth, frames):
    """Physically consistent keys: Simulate & Bake of the cloth where it is, New Target at frames (the
    converged motion), the bake cleared."""
    import bpy

    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}  # New Target bakes it again converged
    for frame in frames:
        pose_target(cloth, frame, lambda x: x)
    bpy.ops.diffcloth.clear_bake()


def bar_case(side, max_iter, within, size=0.5):
    """Physically consistent keys over a round bar: a side×side sheet (no pins) dropped centred
    across a horizontal bar (a 3 cm cylinder with Collision physics, Friction 30), keyed at frames 25
    and 49 with the motion of the same sheet dropped BAR_OFFSET off-centre (it hangs lopsided, its
    long side lower); Control Forces, Optimize from the centred drop. The keys are reached by pulling
    the sheet across the bar."""

    ext.register()
    try:
        cloth = sheet_scene(side, size, "bar")
        top = -0.3 + BAR_RADIUS + 0.01 + 0.002  # the bar's top, its Thickness Outer and 2 mm
        cloth.location = (0.0, BAR_OFFSET, top)
        keys_from_here(cloth, (25, 49))
        cloth.location = (0.0, 0.0, top)
        name = (
            f"{side}x{side} sheet hung {BAR_OFFSET * 100:.0f} cm off-centre over a round bar (keys from its simulation)"
        )
        return optimized_row(cloth, name, side, max_iter, within)[0]
    finally:
        ext.unregister()


def fold_case(max_iter, within, side=16, size=0.5):
    """A side×side cloth lying on a floor (Role Plane) with Self Collisions on (Distance 10 mm),
    through the add-on: Simulate & Bake, New Target at frames 13 and 25, posed by hand: the corner
    beyond a diagonal fold line stood up (frame 13) and laid over the rest 2 cm above it (frame
    25); Control Forces, Optimize. Also the most triangle pairs crossing at any frame of the bake."""
    import bpy

    def folded(degrees, lift=0.0):
        def edit(x):
            u = np.array([1.0, 1.0, 0.0]) / math.sqrt(2)
            beyond = x @ u - 0.1  # distance past the fold line x + y = 0.1·√2
            out = x.copy()
            on = beyond > 0
            a = math.radians(degrees)
            out[on] += (beyond[on] * (math.cos(a) - 1))[:, None] * u + (beyond[on] * math.sin(a) + lift)[:, None] * [
                0.0,
                0.0,
                1.0,
            ]
            return out

        return edit

    ext.register()
    try:
        bpy.ops.wm.read_factory_settings(use_empty=True)
        sc = bpy.context.scene
        sc.render.fps, sc.frame_start, sc.frame_end = FPS, 1, 25
        bpy.ops.mesh.primitive_grid_add(
            x_subdivisions=side - 1, y_subdivisions=side - 1, size=size, location=(0, 0, 0.01)
        )
        cloth = bpy.context.active_object
        cloth.name, cloth.diffcloth.role = "Cloth", "CLOTH"
        cloth.diffcloth.use_self_collision, cloth.diffcloth.self_distance = True, 0.01
        bpy.ops.mesh.primitive_plane_add(size=4)
        bpy.context.active_object.diffcloth.role = "PLANE"
        bpy.context.view_layer.objects.active = cloth
        assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
        pose_target(cloth, 13, folded(90))
        pose_target(cloth, 25, folded(180, 0.02))
        name = f"{side}x{side} fold with Self Collisions"
        row = optimized_row(cloth, name, side, max_iter, within)[0]
        if CONSISTENT:
            row["consistent"] = consistent_row(cloth, name, side, max_iter, within)
        tris = np.array([p.vertices[:] for p in cloth.data.polygons])
        tris = np.concatenate([tris[:, [0, 1, 2]], tris[:, [0, 2, 3]]])
        most = 0
        for f in range(1, 26):
            sc.frame_set(f)
            ev = cloth.evaluated_get(bpy.context.evaluated_depsgraph_get())
            co = np.array([ev.matrix_world @ v.co for v in ev.data.vertices])
            most = max(most, len(dc.crossing_pairs(co, tris)))
        row["crossing_pairs_in_bake"] = most
        return row
    finally:
        ext.unregister()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="*", default=[32, 64])
    ap.add_argument("--max-iter", type=int, default=100)
    ap.add_argument("--no-addon", action="store_true")
    ap.add_argument("--methods", nargs="+", default=["auto"], choices=("auto", "gauss-newton", "l-bfgs-b"))
    ap.add_argument("--magnitude", type=float)
    ap.add_argument("--smoothness", type=float)
    ap.add_argument("--every", type=float)
    ap.add_argument("--poses", nargs="*", default=["whole", "pins-kept"], choices=("whole", "pins-kept"))
    ap.add_argument("--fixed-pins", action="store_true", help="Move Pins off: the pins stay where the cloth holds them")
    ap.add_argument("--within", type=float, metavar="MM", help="stop once both keys are this close (Stop Within)")
    ap.add_argument("--springs", action="store_true", help="the cloth of earlier versions (0.5 kg, tension 20)")
    ap.add_argument(
        "--best-of",
        nargs="*",
        choices=("l-bfgs-b", "restarts"),
        help="beside each add-on row, what 10x its iterations find: L-BFGS-B from its fit, random restarts (default both)",
    )
    ap.add_argument(
        "--consistent",
        action="store_true",
        help="beside each hand-posed add-on row, Optimize again from no force on keys set to its optimized bake",
    )
    ap.add_argument("--table", action="store_true", help="the add-on case over a table edge (Collision physics)")
    ap.add_argument(
        "--repeats",
        type=int,
        default=0,
        metavar="N",
        help="each hand-posed add-on row N more times, its keys moved by 1 µm at random: their spread",
    )
    ap.add_argument("--preview-poses", action="store_true", help="core cases: the keys posed on the linearized preview")
    ap.add_argument("--cape", action="store_true", help="the add-on case on the cape sample scene (a mesh collider)")
    ap.add_argument(
        "--slide",
        type=int,
        nargs="*",
        metavar="SIDE",
        help="consistent keys: a sheet on a table slid across it (default 20)",
    )
    ap.add_argument(
        "--slide-friction",
        type=int,
        nargs="*",
        metavar="SIDE",
        help="a sheet sliding off a table keyed at Friction 20, started at 12, Friction alone optimized (default 20)",
    )
    ap.add_argument(
        "--fold",
        type=int,
        nargs="*",
        metavar="SIDE",
        help="the add-on case of a cloth folding over itself (Self Collisions), side×side (default 16, 24, 32)",
    )
    ap.add_argument("--proxy", type=int, metavar="N", help="--slide: Proxy Vertices N (the keys the proxy's motion)")
    ap.add_argument(
        "--bar",
        type=int,
        nargs="*",
        metavar="SIDE",
        help="the add-on case of physically consistent keys over a round bar, side×side (default 20)",
    )
    args = ap.parse_args()
    global SPRINGS, PREVIEW_POSES, BEST_OF, CONSISTENT, REPEATS
    best = args.best_of
    REPEATS = args.repeats
    SPRINGS, PREVIEW_POSES, CONSISTENT = args.springs, args.preview_poses, args.consistent
    BEST_OF = () if best is None else tuple(best) or ("l-bfgs-b", "restarts")
    controls = default_settings()
    for key in ("every", "magnitude", "smoothness"):
        if getattr(args, key) is not None:
            controls[key] = getattr(args, key)
    controls["move_pins"] = controls["move_pins"] and not args.fixed_pins
    within = args.within and args.within * 1e-3
    print(json.dumps(dict(controls, within_mm=args.within)))
    for pose in args.poses:
        for side in args.sizes:
            for method in args.methods:
                print(json.dumps(core_case(side, args.max_iter, controls, method, pose, within)), flush=True)
        if not args.no_addon:
            row = repeated(addon_case, 20, args.max_iter, pose, controls["move_pins"], within)
            print(json.dumps(row), flush=True)
        if args.table:
            row = repeated(addon_case, 20, args.max_iter, pose, controls["move_pins"], within, True)
            print(json.dumps(row), flush=True)
    if args.cape:
        for pose in CAPE_POSES:
            print(json.dumps(repeated(cape_case, pose, args.max_iter, within)), flush=True)
    if args.slide is not None:
        for side in args.slide or [20]:
            print(json.dumps(slide_case(side, args.max_iter, within, proxy=args.proxy)), flush=True)
    if args.slide_friction is not None:
        for side in args.slide_friction or [20]:
            print(json.dumps(slide_case(side, args.max_iter, within, friction=12.0)), flush=True)
    if args.bar is not None:
        for side in args.bar or [20]:
            print(json.dumps(bar_case(side, args.max_iter, within)), flush=True)
    if args.fold is not None:
        for side in args.fold or [16, 24, 32]:
            print(json.dumps(repeated(fold_case, args.max_iter, within, side)), flush=True)


if __name__ == "__main__":
    main()
