"""Results kept on the cloth object, saved in the .blend: an optimization's design (RESULT_KEY) and
the last run's motion (MOTION_KEY, where the bake does not hold it already); storing them, and
reading them back for the next run."""

import numpy as np

from . import bake, proxy, reach
from .settings import OPTIMIZE_SOLVER, setting_value

RESULT_KEY = "diffcloth_result"
# the last run's positions at every integrator step (Simulate & Bake's or Optimize's), kept where
# the bake is not that motion (a simulation mesh's, or substeps between the frames)
MOTION_KEY = "diffcloth_motion"
MOTION_SOLVER_KEY = "diffcloth_motion_solver"  # the steps that made it: a preview's, or Optimize's


def refined(cloth_obj):
    """Whether the cloth's stored design was refined on the cloth itself (Refine): its arrays are
    the cloth's, not its simulation mesh's."""
    stored = cloth_obj.get(RESULT_KEY)
    return bool(stored and stored.get("refined"))


def render_positions(setup, x):
    """The cloth's (render mesh's) positions of a motion x (frames, n, 3) of the simulated mesh."""
    return x if setup.embedding is None else setup.embedding.apply(x)


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
            ("k_compression", stored_array(stored, "k_compression", cloth.n_tension)),
            ("k_shear", stored_array(stored, "k_shear", cloth.n_shear)),
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
    if stored and "wind_scale" in stored.keys() and sc.wind is not None:
        changes["wind"], changes["wind_drag"] = stored["wind_scale"] * sc.wind, stored["wind_scale"] * sc.wind_drag
    if stored and "friction_scale" in stored.keys():
        changes["colliders"] = [c.replace(friction=stored["friction_scale"] * c.friction) for c in sc.colliders]
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
    obj = setup.cloth_obj
    if MOTION_KEY not in obj:
        return _baked_motion(setup, scene) if MOTION_SOLVER_KEY in obj else None
    motion = stored_array(obj, MOTION_KEY, (scene.n_steps + 1) * scene.cloth.n * 3)
    return None if motion is None else motion.reshape(scene.n_steps + 1, scene.cloth.n, 3)


def _in_bake(setup, scene):
    """Whether the cloth's bake holds its motion: the cloth's own mesh, one step a frame."""
    return setup.embedding is None and scene.substeps == 1


def _baked_motion(setup, scene):
    """The last run's motion read back from the bake, in world space; None where it no longer fits."""
    local = bake.baked_positions(setup.cloth_obj, setup.start, setup.end) if _in_bake(setup, scene) else None
    if local is None or local.shape[1] != scene.cloth.n:
        return None
    return np.einsum("fij,fnj->fni", setup.matrices[:, :3, :3], local) + setup.matrices[:, None, :3, 3]


def per_frame_array(a):
    """An array per frame (or integrator step) as stored: float32, as Blender's point cache and
    shape keys keep positions (half a double array; rounding 10⁻⁷ of the value, far below what a
    run's start guess or a control force needs)."""
    return np.asarray(a, dtype=np.float32).ravel()


def replace_property(owner, key, value):
    """owner[key] = value as a new ID property: assigning an array over an existing array property
    writes into it in place without resizing it (bpy 4.2 and 5.2), leaving a stale tail behind a
    shorter array and writing past the end of a longer one."""
    owner.pop(key, None)
    owner[key] = value


def store_motion(setup, step_x, solver):
    """Keep the run's motion for the next run's start (stored_motion): the bake just written, where
    it holds it, else a float32 copy of every step."""
    if _in_bake(setup, setup.scene):
        setup.cloth_obj.pop(MOTION_KEY, None)
    else:
        replace_property(setup.cloth_obj, MOTION_KEY, per_frame_array(step_x))
    setup.cloth_obj[MOTION_SOLVER_KEY] = solver


def forget_motion(cloth):
    """Drop the stored motion: the next run starts afresh."""
    cloth.pop(MOTION_KEY, None)
    cloth.pop(MOTION_SOLVER_KEY, None)


def baked_solver(cloth):
    """The solver of the cloth's stored or baked motion (None: there is none)."""
    return cloth.get(MOTION_SOLVER_KEY)


def store_result(setup, result, run=()):
    """Keep the optimized design on the cloth, apart from the artist's settings (Apply copies the
    stiffness over): arrays as Blender's compact arrays, saved in the .blend (per-frame ones in
    float32). run: the names of the cloths optimized together with it, itself included."""
    sc = result.scene
    stored = {
        "k_tension": sc.cloth.k_tension,
        "k_shear": sc.cloth.k_shear,
        "k_bending": sc.cloth.k_bending,
        "v0": sc.v0.ravel(),
        "solver": sc.solver,
        # the settings that give the optimized springs and hinges, where one does (they scale together)
        "tension_setting": setting_value(setup, "k_tension", sc.cloth.k_tension),
        "bending_setting": setting_value(setup, "k_bending", sc.cloth.k_bending),
        "loss": float(result.loss),
        "initial_loss": float(result.initial_loss),
        "iterations": len(result.history),
        "reason": result.reason,
        # the design is the cloth's own though it has a simulation mesh (Refine)
        "refined": setup.embedding is None and proxy.wanted(setup.cloth_obj.diffcloth),
    }
    if run:  # Apply makes the shared design every one of their own
        stored["run"] = list(run)
    if sc.cloth.own_compression is not None:
        stored["k_compression"] = sc.cloth.own_compression
    if sc.forces is not None:
        stored["forces"] = per_frame_array(sc.forces)
    if sc.wind is not None and np.any(setup.scene.wind):  # Wind Fields: the factor on their strength
        stored["wind_scale"] = float(np.sum(sc.wind * setup.scene.wind) / np.sum(setup.scene.wind**2))
    mu, optimized = (np.array([c.friction for c in s.colliders]) for s in (setup.scene, sc))
    if np.any(mu) and not np.allclose(optimized, mu):  # Friction: the factor on them
        stored["friction_scale"] = float(optimized @ mu / (mu @ mu))
    if sc.pin_path is not None:  # moved pins, as offsets from the cloth object's own path
        offset = sc.pin_path - setup.scene.pin_frames
        if np.any(offset):
            stored["pin_offset"] = per_frame_array(offset)
    # per keyframe (scene frame): mean and largest distance (m) before, then after
    stored["keyframes"] = {str(f + setup.start): list(d) for f, d in result.keyframes.items()}
    if getattr(result, "refined", False):  # the cloth itself with the proxy's design: where Refine started
        stored["refine_start"] = {str(f + setup.start): list(d) for f, d in result.carried_distances.items()}
    stored["max_control_acceleration"] = sc.max_control_acceleration()
    stored["unreachable"] = reach.stored(setup, result)
    replace_property(setup.cloth_obj, RESULT_KEY, stored)


def setting_result(stored, key):
    """The optimized setting of a stored result's key (k_tension: Stretch or Tension Stiffness;
    k_bending), or None where the optimized values vary apart; results of older versions hold no
    setting: their uniform value."""
    name = key.removeprefix("k_") + "_setting"
    if name not in stored:
        return uniform(stored, key)
    return float(stored[name]) or None


def uniform(stored, key):
    """The stored stiffness as one value if it is uniform, else None."""
    arr = stored_array(stored, key, len(stored[key])) if stored and key in stored else None
    return float(arr[0]) if arr is not None and len(arr) and np.ptp(arr) == 0 else None
