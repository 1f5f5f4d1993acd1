"""Whether a key asks the fabric for more stretch than it has, and how close the cloth can come;
and whether it puts the cloth inside a collider, where it cannot go.

A pose lifted by proportional editing usually stretches the fabric far beyond anything its
springs allow: the optimizer then stalls some distance off, and the artist cannot tell an
unreachable key from a stuck optimizer. This compares the strain each key asks of the mesh's
edges with the strain the cloth shows in its simulated motion, and finds the nearest pose
stretched no more than that: the convex problem

    min ½‖p − t‖²  subject to  ‖p_i − p_j‖ ≤ (1 + ε)·L_ij for every edge,

solved as a penalty ½μ·Σ max(0, ‖p_i − p_j‖ − (1 + ε)·L_ij)² tightened over a few rounds, each
minimized by Newton's method (nearest_within). Its distance from the key says how close the cloth can come by stretching as it does.

A key the cloth still misses asks a third thing of it: to rest where it cannot. Placed at rest in
the key's pose, with the colliders and pins held as they are at its frame and gravity alone
acting, the cloth resting on a collider should stay; where it slides off (a tablecloth hung
farther over the edge than friction holds, a cape laid on a slope steeper than its friction), the
key can be passed through moving at best, never held (`slides`).
"""

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import spsolve

from ..contact.colliders import depths
from ..contact.penalty import thickness_of
from ..model.mesh import edges as mesh_edges
from ..model.scene import Goals
from ..numerics.scatter import scatter_add
from ..solver.integrator import SimulationError
from ..solver.simulate import simulate

# penalty weights of the rounds: the last leaves the edges within ~10⁻⁵ of the displacement
PENALTIES = (1e1, 1e3, 1e5)
NEWTON_ITERATIONS = 30  # a round's Newton steps at most (the active edges settle in a few)
NEWTON_TOL = 1e-6  # a round ends when the gradient is this small against the largest excess
# m: a key missed by more than this at its farthest vertex is placed at rest to see whether it holds
MISSED = 0.01
# frames the placed cloth is left (0.25 s at 24 fps), and how far (m) a vertex resting on a
# collider may move in them (settling into its contact) before it counts as sliding off
RELEASE_FRAMES = 6
SLIDE = 0.01


@dataclass
class KeyReach:
    """One key's demand on the fabric's stretch and room. Strains are relative (0.05: 5% longer
    than at rest).

    demand, demand_p95: the largest and the 95th percentile of the key's edge strains;
    fabric: the stretch the cloth shows in its motion (key_reach says how it is measured);
    closest: (mean, largest) distance (m) from the key of the nearest pose stretched no more
    than the motion stretches; vertex_excess (n,): per vertex, how far the strain of its edges
    in the key exceeds what they may stretch (0 where within: where the key asks too much);
    inside: {collider index: (vertices, deepest in m)} of the colliders the key puts vertices
    inside of, beyond their thickness and the tolerance, and vertex_inside (n,) those vertices;
    slides: {collider index: (vertices, farthest in m)} of the colliders the cloth placed at rest
    in the key slides on (a missed key; see key_reach), and vertex_slides (n,) those vertices;
    reachable: the nearest pose within the stretch is within the tolerance, no vertex is inside
    a collider and none slides."""

    frame: int
    demand: float
    demand_p95: float
    fabric: float
    closest: tuple
    vertex_excess: np.ndarray
    reachable: bool
    inside: dict
    vertex_inside: np.ndarray
    slides: dict
    vertex_slides: np.ndarray


def edge_strains(x, edges, rest_lengths):
    """Relative elongation of each edge at positions x, (E,)."""
    return np.linalg.norm(x[edges[:, 1]] - x[edges[:, 0]], axis=1) / rest_lengths - 1.0


def _solve_blocks(n, i, j, blocks, grad):
    """(I + Σ_e B_e ⊗ [[1, −1], [−1, 1]])⁻¹·grad for the (k,3,3) blocks of edges (i, j)."""
    rows, cols, vals = [np.arange(3 * n)], [np.arange(3 * n)], [np.ones(3 * n)]
    for a, b, sign in ((i, i, 1.0), (j, j, 1.0), (i, j, -1.0), (j, i, -1.0)):
        r = (3 * a[:, None, None] + np.arange(3)[None, :, None]) + np.zeros((1, 1, 3), np.int64)
        c = (3 * b[:, None, None] + np.arange(3)[None, None, :]) + np.zeros((1, 3, 1), np.int64)
        rows.append(r.ravel())
        cols.append(c.ravel())
        vals.append(sign * blocks.ravel())
    matrix = sp.csc_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(3 * n, 3 * n))
    return spsolve(matrix, grad.ravel()).reshape(n, 3)


def nearest_within(target, edges, max_lengths):
    """The pose nearest to target (n,3) whose edges are no longer than max_lengths (E,): Newton's
    method on each round's penalty (convex, so a backtracking line search is all it needs)."""
    i, j = edges[:, 0], edges[:, 1]
    n = len(target)

    def excess(p):
        d = p[j] - p[i]
        length = np.linalg.norm(d, axis=1)
        return d, length, np.maximum(length - max_lengths, 0.0)

    def energy(p, mu):
        over = excess(p)[2]
        return 0.5 * float(np.sum((p - target) ** 2)) + 0.5 * mu * float(over @ over)

    p = target.copy()
    for mu in PENALTIES:
        for _ in range(NEWTON_ITERATIONS):
            d, length, over = excess(p)
            on = over > 0
            if not on.any():
                break
            u = d[on] / length[on, None]
            pull = mu * over[on, None] * u
            grad = p - target
            scatter_add(grad, j[on], pull)
            scatter_add(grad, i[on], -pull)
            if np.abs(grad).max() < NEWTON_TOL * over.max():
                break
            # the penalty's Hessian per stretched edge: μ·(uuᵀ + (1 − L/l)·(I − uuᵀ)), positive
            uu = u[:, :, None] * u[:, None, :]
            block = mu * (uu + (over[on] / length[on])[:, None, None] * (np.eye(3) - uu))
            step = _solve_blocks(n, i[on], j[on], block, grad)
            e0, slope, t = energy(p, mu), float(np.sum(grad * step)), 1.0
            while t > 1e-8 and energy(p - t * step, mu) > e0 - 1e-4 * t * slope:
                t *= 0.5
            p = p - t * step
    return p


def key_reach(tris, motion, targets, tolerance=0.005, scene=None, placed=None):
    """Per key frame, its KeyReach: tris (T,3) of the mesh, motion (frames+1, n, 3) of the cloth
    simulated from its rest pose at frame 0, targets {frame: (n,3)}, and the scene whose colliders
    the keys must keep out of (None: none). Each edge may stretch as far as it does anywhere in
    the motion, and at least as far as the motion's bulk: the 99th percentile of its edges'
    strains at its most stretched frame (pins and fast swings stretch a few edges far beyond the
    rest). A key is reachable when the nearest pose within that is within `tolerance` (m) of it
    at every vertex, it puts no vertex deeper than `tolerance` inside a collider, and the cloth
    placed at rest in it does not slide: placed (scene motion (frames+1, N, 3), first vertex)
    says where the cloth's vertices sit among the scene's (the scene simulates this mesh, from
    `first`), and then a key the motion misses by more than MISSED, and that is otherwise within
    reach (a stretched or buried pose would move placed anywhere), is placed (place_at_rest)."""
    motion = np.asarray(motion, dtype=np.float64)
    edges, _ = mesh_edges(np.asarray(tris, dtype=np.int64).reshape(-1, 3))
    rest = np.linalg.norm(motion[0][edges[:, 1]] - motion[0][edges[:, 0]], axis=1)
    strains = np.array([edge_strains(x, edges, rest) for x in motion])
    bulk = max(0.0, float(np.percentile(strains, 99, axis=1).max()))
    allowed = np.maximum(strains.max(axis=0), bulk)
    out = {}
    for frame, target in sorted(targets.items()):
        target = np.asarray(target, dtype=np.float64)
        strain = edge_strains(target, edges, rest)
        excess = np.zeros(len(target))
        np.maximum.at(excess, edges.ravel(), np.repeat(np.maximum(strain - allowed, 0.0), 2))
        gap = np.zeros(len(target))
        if (strain > allowed).any():
            gap = np.linalg.norm(nearest_within(target, edges, (1.0 + allowed) * rest) - target, axis=1)
        inside, vertex_inside = _inside(scene, target, frame, tolerance)
        slides, vertex_slides = {}, np.zeros(len(target), bool)
        # a pose the cloth can take (within its stretch, outside the colliders) that it is missed by
        fits = gap.max() <= tolerance and not inside
        if placed is not None and fits and np.linalg.norm(motion[frame] - target, axis=1).max() > MISSED:
            slides, vertex_slides = place_at_rest(scene, placed, target, frame, tolerance)
        out[frame] = KeyReach(
            frame=frame,
            demand=float(strain.max()),
            demand_p95=float(np.percentile(strain, 95)),
            fabric=bulk,
            closest=(float(gap.mean()), float(gap.max())),
            vertex_excess=excess,
            reachable=bool(gap.max() <= tolerance and not inside and not slides),
            inside=inside,
            vertex_inside=vertex_inside,
            slides=slides,
            vertex_slides=vertex_slides,
        )
    return out


def _inside(scene, x, frame, tolerance):
    """{collider index: (vertices, deepest)} of the colliders x is inside of at frame, beyond
    their thickness and the tolerance, and which vertices are."""
    found, anywhere = {}, np.zeros(len(x), bool)
    colliders = [] if scene is None else scene.colliders
    for c, d in enumerate(depths(colliders, x, float(frame))):
        depth = thickness_of(colliders[c], scene) - d
        deep = depth > tolerance
        if deep.any():
            found[c] = (int(deep.sum()), float(depth[deep].max()))
            anywhere |= deep
    return found, anywhere


def place_at_rest(scene, placed, x, frame, tolerance):
    """{collider index: (vertices, farthest)} of the colliders that vertices of pose x (n,3),
    resting on them (within `tolerance` beyond their thickness), slide off within RELEASE_FRAMES
    when the cloth is placed at rest in x: the rest of the scene as its motion has it at frame
    (placed: that motion and where x's vertices start among the scene's), colliders, pins and
    soft pins held still as they are then, gravity alone acting (no fields, forces or wind); and
    those vertices (n,) bool. Nothing slides where no vertex rests on a collider, or where the
    placed cloth cannot be simulated."""
    motion, first = placed
    cloth = slice(first, first + len(x))
    pose = np.array(motion[frame], dtype=np.float64)
    pose[cloth] = x
    gap = np.array([g[cloth] for g in gaps(scene, pose, float(frame))]).reshape(-1, len(x))
    resting = (gap <= tolerance).any(axis=0)
    none = {}, np.zeros(len(x), bool)
    if not resting.any():
        return none
    goals = scene.goals
    if goals is not None:
        held = goals.at(scene, frame * scene.substeps)
        goals = Goals(goals.vertices, goals.stiffness, np.repeat(held[None], RELEASE_FRAMES + 1, axis=0))
    still = scene.replace(
        x0=pose,
        v0=0.0,
        steps=RELEASE_FRAMES,
        colliders=[col.frozen(float(frame)) for col in scene.colliders],
        pin_path=None,
        goals=goals,
        forces=None,
        wind=None,
        effectors=(),
    )
    try:
        end = simulate(still, keep_factors=False).x[-1, cloth]
    except SimulationError:
        return none
    moved = np.linalg.norm(end - x, axis=1)
    slid = resting & (moved > SLIDE)
    on = np.argmin(gap, axis=0)
    found = {int(c): (int((slid & (on == c)).sum()), float(moved[slid & (on == c)].max())) for c in np.unique(on[slid])}
    return found, slid


def gaps(scene, x, t):
    """Per collider, how far beyond the distance it keeps the points x are at time t (a two-sided
    mesh's distance unsigned)."""
    return [col.signed(x, t) - thickness_of(col, scene) for col in scene.colliders]


# m beyond a collider's thickness: a vertex nearer than this lies on it
TOUCHING = 2e-3


def friction_under(scene, x, t):
    """Per point of x (n,3) at time t, Coulomb's μ of the collider it lies on (within TOUCHING of
    its thickness; the largest where several), 0 where it lies on none with friction."""
    out = np.zeros(len(x))
    for col, gap in zip(scene.colliders, gaps(scene, x, t)):
        if col.friction > 0:
            out = np.where(gap < TOUCHING, np.maximum(out, col.friction), out)
    return out
