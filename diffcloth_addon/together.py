"""Several cloths in one run (Cloths Together): their Setups joined into one run of core.Joined,
colliding with one another through self-collision (on their Simulation Meshes where they have
one), and the run's result written back per cloth."""

import dataclasses

import numpy as np

from .. import core as dc
from ..core.design.embedding import EmbeddedLoss, Embedding
from .colliders import FRICTION_SCALE
from .errors import InputError
from .results import apply_stored_result, stored_motion
from .settings import OPTIMIZE_SOLVER

# what core.Joined's cloths must share, as the panel names it: (Cloth setting, label)
SHARED = {
    "substeps": ("substeps", None),
    "contact_stiffness": ("contact_stiffness", None),
    "contact_thickness": ("thickness", None),
    "solver": ("solver", None),
    "contact_smoothing": ("solver", None),
    "bending": ("model", None),
    "rest_angles": ("use_rest_angles", None),
    "sewing_force": ("sewing_force_max", None),
    "gravity": (None, "Field Weights"),
    "wind": (None, "Field Weights"),
    "wind_drag": (None, "Field Weights"),
    "effectors": (None, "Field Weights"),
}


def joint(parts):
    """One Setup of the cloths' Setups (parts, each read as alone), run together: the joined scene
    and loss, and what the run writes back per cloth (Setup.parts, Setup.joined). Cloths with a
    Simulation Mesh are simulated on it, the others on their own meshes; Refine, where one has it,
    goes on with every cloth on its own mesh (_refine)."""
    joined = _joined(parts, [p.scene for p in parts])
    sizes = [p.n_render for p in parts]
    renders = np.cumsum([0] + sizes)
    embedding = None
    if any(p.embedding is not None for p in parts):  # the loss measures the render meshes
        embedding = Embedding.joined(
            [p.embedding or Embedding(p.scene.x0, p.scene.x0, p.scene.cloth.tris) for p in parts]
        )
    keyed = [render_loss(p) for p in parts]
    loss = None if all(k is None for k in keyed) else dc.joined_loss(keyed, sizes)
    warnings = [w for p in parts for w in p.warnings]
    return dataclasses.replace(
        parts[0],
        cloth_name=", ".join(p.cloth_name for p in parts),
        scene=joined.scene,
        loss=loss if embedding is None or loss is None else EmbeddedLoss(loss, embedding),
        warnings=warnings,
        posed_pins=np.concatenate([p.posed_pins + o for p, o in zip(parts, joined.starts)]),
        target_frames={k: v for p in parts for k, v in p.target_frames.items()},
        render_tris=np.concatenate([p.render_tris + o for p, o in zip(parts, renders)]),
        n_render=int(renders[-1]),
        embedding=embedding,
        refine=_refine(parts, loss),
        parts=parts,
        joined=joined,
    )


def _refine(parts, loss):
    """Refine's run of cloths run together (None unless one of them has it): every cloth on its own
    mesh, joined, posed by the same keys."""
    first = next((p.refine for p in parts if p.refine is not None), None)
    if first is None:
        return None
    own = [p.refine or p for p in parts]
    joined = _joined(parts, [o.scene for o in own])
    pins = np.concatenate([o.posed_pins + start for o, start in zip(own, joined.starts)])
    return dataclasses.replace(first, scene=joined.scene, loss=loss, posed_pins=pins, parts=parts, joined=joined)


def take_refined(setup):
    """A run whose design Refine carried to the cloths' own meshes: each cloth written on its own."""
    setup.scene, setup.embedding = setup.refine.scene, None
    if setup.parts:
        setup.joined = setup.refine.joined
        for p in setup.parts:
            if p.refine is not None:
                p.scene, p.embedding = p.refine.scene, None


def render_loss(part):
    """A cloth's loss on its own (render) mesh, None without keys."""
    return getattr(part.loss, "loss", part.loss)


def _joined(parts, scenes):
    """core.Joined of the cloths' scenes: between them the largest Self Collisions Distance and
    Friction of theirs; refused by name where they differ in what they must share, or the
    distance is more than their meshes allow."""
    try:
        joined = dc.Joined(scenes, *_between(parts))
    except dc.JoinError as err:
        setting, label = SHARED.get(err.key, (None, err.key))
        a, b = parts[0].cloth_obj, parts[err.index].cloth_obj
        what = label or a.diffcloth.bl_rna.properties[setting].name
        raise InputError(
            f"cloths '{a.name}' and '{b.name}' run together, but their {what} differ: set them alike, or "
            "turn off Cloths Together to run one at a time"
        ) from None
    limit = dc.max_self_distance(joined.scene.cloth)
    if joined.scene.self_distance > limit:
        raise InputError(
            f"cloths {', '.join(repr(p.cloth_name) for p in parts)} keep {joined.scene.self_distance * 1e3:.3g} mm "
            f"apart (the largest Self Collisions Distance of theirs), more than their meshes allow "
            f"({limit * 1e3:.3g} mm, twice the shortest edge): lower it"
        )
    sc = joined.scene
    # those within a cloth colliding with itself were refused by name with it (convert._check_start)
    crossing = sc.crossing_kept_apart(sc.x0)
    pieces = sc.self_pieces[sc.cloth.tris[crossing, 0]]  # the cloth of each triangle of a pair
    between = int(np.sum(pieces[:, 0] != pieces[:, 1]))
    if between:
        raise InputError(
            f"cloths {', '.join(repr(p.cloth_name) for p in parts)} pass through one another at frame "
            f"{parts[0].start} ({between} pairs of triangles cross): they keep the sides they start on; move them apart"
        )
    return joined


def _between(parts):
    """The distance the cloths keep from one another, and their friction: the largest of theirs."""
    settings = [p.cloth_obj.diffcloth for p in parts]
    return max(cs.self_distance for cs in settings), max(cs.self_friction for cs in settings) * FRICTION_SCALE


def run_scene(setup, solver=None):
    """The joined scene of a run: each cloth's with its stored design (results.apply_stored_result,
    whose warnings join the Setup's), on one solver: `solver`, else theirs if they agree, else
    converged steps (which reproduce optimized designs); and the start guess of their stored
    motions where every cloth has one."""
    scenes = []
    for p in setup.parts:
        known = len(p.warnings)
        scenes.append(apply_stored_result(p))
        setup.warnings += p.warnings[known:]
    solver = solver or (scenes[0].solver if len({s.solver for s in scenes}) == 1 else OPTIMIZE_SOLVER)
    scenes = [s.replace(solver=solver) if s.solver != solver else s for s in scenes]
    setup.joined = dc.Joined(scenes, *_between(setup.parts))  # as checked when they were read (joint)
    guesses = [stored_motion(p, s) for p, s in zip(setup.parts, scenes)]
    guess = None if any(g is None for g in guesses) else np.concatenate(guesses, axis=1)
    return setup.joined.scene, guess


def job_parts(setup):
    """What the worker measures per cloth: its render vertices' range, triangles and keys."""
    renders = np.cumsum([0] + [p.n_render for p in setup.parts])
    return [(int(renders[i]), int(renders[i + 1]), p.render_tris, render_loss(p)) for i, p in enumerate(setup.parts)]


def per_cloth(setup, result):
    """(Setup, result) per cloth of a run: the run's own for one cloth; for cloths run together,
    each one's motion, design, keys and reach (an optimization's), and its share of a simulation."""
    if not setup.parts:
        return [(setup, result)]
    motion = getattr(result, "trajectory", result)
    xs, steps = setup.joined.parts(motion.x), setup.joined.parts(motion.step_x)
    designs = setup.joined.split(result.scene) if hasattr(result, "scene") else [None] * len(setup.parts)
    out = []
    for i, (p, x, step_x, design) in enumerate(zip(setup.parts, xs, steps, designs)):
        own = {"x": x, "step_x": step_x}
        if design is None:
            out.append((p, type(result)(**{**vars(result), **own})))
            continue
        frames = set(p.loss.targets) if p.loss is not None else set()
        refined = {}
        if getattr(result, "refined", False):  # where Refine started, for the cloths it ran on
            carried = {f: d for f, d in result.carried_distances.items() if f in frames}
            refined = dict(refined=p.refine is not None, carried_distances=carried)
        out.append(
            (
                p,
                dataclasses.replace(
                    result,
                    scene=design,
                    trajectory=type(motion)(**{**vars(motion), **own}),
                    keyframes={f: d for f, d in result.keyframes.items() if f in frames},
                    reach=result.part_reach[i],
                    **refined,
                ),
            )
        )
    return out
