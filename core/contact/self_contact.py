"""The cloth against itself: vertex–triangle planes lagged from each step's start, a distance
query for the colliders' penalty (core.contact.penalty.penalty).

At a step's start x, and where free fall would take it, x + h·v + h²·g (where a layer moving
fast would pass a triangle within the step), each vertex p within the search radius of a triangle t = (a, b, c)
or passing t's plane within the step, whose projection on t's plane lies within δ of t, not a
corner of t and not within 1.25δ of t at rest, gets t's plane of the step's start (reaching δ beyond
t's edges: a vertex over an open edge of a sagging layer is held too): t's unit normal turned toward the side p starts on, n.
Within the step

    d = n·(y_p − (y_a + y_b + y_c)/3) − δ,

δ the self distance: linear in the positions y, so the penalty's Hessian E″·ggᵀ with
g = (n, −n/3, −n/3, −n/3) is positive semidefinite as it is, and a function of the start
through n alone, which the adjoint differentiates (SelfPenalty.lag_gradient). The side is the
start's, so p is held on it for the whole step however far the step would take it. t's centroid
anchors the plane rather than p's projection: its weights are constant, and on the start's plane
both give the same d.

A pair's Hessian couples p with t's corners, which the mesh's sparsity pattern does not hold:
core.numerics.linalg.Coupled carries those blocks beside the pattern.
"""

import functools

import numpy as np

from ..model.mesh import centroids, centroids_and_reach
from ..numerics.keys import member, sorted_unique
from ..numerics.scatter import scatter_add
from ..numerics.timing import timed
from .compiled import closest_on_triangles, near_pairs
from .penalty import LaggedFriction, combine, deep_penalty, penalty, spread

# the search radius in self distances: pairs within it at the step's start or its prediction
# become planes
SEARCH = 2.0
# pairs within this many self distances at rest never do: already that close, they would push a
# flat cloth apart (the 64×64 fold: 1.0 kept it from crossing at all but took 62 s; 1.25: 23 s,
# no crossing; 1.5 and 2.0: 17 s, 28 crossing pairs at creases, between triangles left out)
REST = 1.25
# the stencil's weights: the vertex, then the triangle's centroid
WEIGHTS = np.array([1.0, -1 / 3, -1 / 3, -1 / 3])


def _dot(a, b):
    return np.einsum("ij,ij->i", a, b)


def _near(shape, radius, blocks, moved=None):
    """(vertex, triangle) pairs (P,) each whose vertex may lie within radius of the triangle in a
    configuration (_Shape; of its centroid, beyond the triangle's reach), the triangle's own
    corners among them (SelfQuery.excluded leaves them out), of the blocks searched
    (SelfQuery.blocks: triangles against vertices); moved (a mask): only the pairs with a moved
    vertex, as the vertex or as a corner. Compiled (core.contact.compiled.near_pairs)."""
    x, tris = shape.x, shape.tris
    p, t = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    for triangles, vertices in blocks:
        if moved is None or moved.all():
            queries = [(triangles, vertices)]
        else:  # the moved vertices against the triangles, the others against the moved triangles
            moved_tris = moved[tris[triangles]].any(axis=1)
            queries = [(triangles, vertices[moved[vertices]]), (triangles[moved_tris], vertices[~moved[vertices]])]
        for tri, vert in queries:
            if len(tri) and len(vert):
                found = near_pairs(x, tris, tri, vert, radius)
                p.append(found[0]), t.append(found[1])
    return np.concatenate(p), np.concatenate(t)


class _Shape:
    """The triangles at positions x: centroids and reaches, unit normals and |N| (twice the
    areas), of all triangles when first read for many (kept), else of the few asked row by row (a
    configuration whose search finds few pairs or none needs few or none of them)."""

    def __init__(self, x, tris):
        self.x, self.tris = x, tris

    @functools.cached_property
    def _middle(self):
        return centroids_and_reach(self.x, self.tris)

    def middle(self, t):
        """Centroids (P,3) and reaches (P,) of triangles t."""
        if "_middle" not in self.__dict__ and 8 * len(t) < len(self.tris):
            return centroids_and_reach(self.x, self.tris[t])
        middle, reach = self._middle
        return middle[t], reach[t]

    @functools.cached_property
    def _normals(self):
        return self._rows(slice(None))

    def _rows(self, t):
        a, b, c = (self.x[self.tris[t, i]] for i in range(3))
        big = np.cross(b - a, c - a)
        length = np.linalg.norm(big, axis=1)
        return big / length[:, None], length

    def normals(self, t):
        """Unit normals (P,3) and |N| (P,) of triangles t."""
        if "_normals" not in self.__dict__ and 8 * len(t) < len(self.tris):
            return self._rows(t)
        unit, length = self._normals
        return unit[t], length[t]

    def height(self, p, t):
        """p's height over t's plane (P,)."""
        return _dot(self.x[p] - self.middle(t)[0], self.normals(t)[0])

    def offset(self, p, t, height, delta):
        """How far p's projection on t's plane lies outside t (its height given), exact where it
        may be within delta; beyond, a lower bound over delta (the projection's distance from
        the centroid less the reach: a flat layer's neighbours, most candidates, cost no
        closest point)."""
        middle, reach = self.middle(t)
        lateral = np.sqrt(np.maximum(np.sum((self.x[p] - middle) ** 2, axis=1) - height**2, 0.0))
        out = lateral - reach
        near = np.flatnonzero(out <= delta)
        corners = self.x[self.tris[t[near]]]
        q, _ = closest_on_triangles(self.x[p[near]], corners[:, 0], corners[:, 1], corners[:, 2])
        out[near] = np.sqrt(np.maximum(np.sum((self.x[p[near]] - q) ** 2, axis=1) - height[near] ** 2, 0.0))
        return out


class SelfQuery:
    """A cloth's self-contact search: its triangles, the self distance δ, and the (vertex,
    triangle) pairs within REST·δ of each other at rest in one piece (Scene.self_pieces; a
    triangle's own corners among them), which never become planes, nor do pairs within a piece
    that does not collide with itself (within: per piece; None: all do)."""

    def __init__(self, cloth, distance, pieces=None, within=None):
        # int64 once: the compiled search takes them so, and would copy others on each of its calls
        self.tris = np.ascontiguousarray(cloth.tris, dtype=np.int64)
        self.distance, self.radius = float(distance), SEARCH * float(distance)
        self.n_tris = len(cloth.tris)
        self.pieces, self.within = pieces, within
        self.blocks = self._blocks(len(cloth.rest))
        p, t = _near(_Shape(cloth.rest, self.tris), self.radius, self.blocks)
        if pieces is not None:
            p, t = (a[pieces[p] == pieces[self.tris[t, 0]]] for a in (p, t))
        # the closest point at rest, in any region of the triangle
        corners = cloth.rest[self.tris[t]]
        q, _ = closest_on_triangles(cloth.rest[p], corners[:, 0], corners[:, 1], corners[:, 2])
        near = np.linalg.norm(cloth.rest[p] - q, axis=1) <= REST * self.distance
        self.excluded = sorted_unique(p[near] * self.n_tris + t[near])

    def _blocks(self, n):
        """What the search looks at: every triangle against every vertex, or per piece its triangles
        against the other pieces' vertices, and its own where it collides with itself."""
        if self.within is None or self.within.all():
            return [(np.arange(self.n_tris), np.arange(n))]
        own = self.pieces[self.tris[:, 0]]
        return [
            (np.flatnonzero(own == i), np.arange(n) if inside else np.flatnonzero(self.pieces != i))
            for i, inside in enumerate(self.within)
        ]

    @timed("self-collision")
    def planes(self, x, end):
        """The step's SelfPlanes from its start x and an estimate of its end: of the pairs whose
        vertex is within the search radius of the triangle's centroid and reach at either, those
        over the triangle and within the radius of its plane at either, or passing it between."""
        shapes = _Shape(x, self.tris), _Shape(end, self.tris)
        keys = np.concatenate(
            [p * self.n_tris + t for p, t in (_near(shape, self.radius, self.blocks) for shape in shapes)]
        )
        cands = Candidates(self, shapes[0], self.allowed(sorted_unique(keys)), end)
        start = np.flatnonzero((cands.off <= self.distance) & (np.abs(cands.height) <= self.radius))
        return SelfPlanes(cands, sorted_unique(np.concatenate([start, cands.select(shapes[1], self.radius)])), x)

    def allowed(self, keys):
        """The keys of pairs not near at rest, nor within a piece that does not collide with itself."""
        keys = keys[~member(self.excluded, keys)]
        if self.within is None or self.within.all():
            return keys
        own = self.pieces[keys // self.n_tris]
        return keys[self.within[own] | (own != self.pieces[self.tris[keys % self.n_tris, 0]])]

    def of_pairs(self, x, keys):
        """SelfPlanes of the pairs keys (vertex·triangles + triangle, sorted) from the step's start x."""
        return SelfPlanes(Candidates(self, _Shape(x, self.tris), keys, x), np.arange(len(keys)), x)


class Candidates:
    """A step's candidate pairs (sorted keys vertex·triangles + triangle; p, t) and their geometry at
    its start: the triangle's unit normal and |N|, the vertex's height and lateral offset."""

    def __init__(self, query, shape, keys, end, geometry=None):
        """shape: the triangles at the step's start (_Shape); geometry: the pairs' unit, length,
        height and off, else computed (off exact only within δ: every use compares it with δ)."""
        self.query, self.shape, self.x, self.keys, self.end = query, shape, shape.x, keys, end
        self.p, self.t = np.divmod(keys, query.n_tris)
        if geometry is None and not len(keys):  # no normals to compute (pieces apart)
            geometry = np.zeros((0, 3)), np.zeros(0), np.zeros(0), np.zeros(0)
        if geometry is None:
            height = shape.height(self.p, self.t)
            off = shape.offset(self.p, self.t, height, query.distance)
            geometry = *shape.normals(self.t), height, off
        self.unit, self.length, self.height, self.off = geometry

    def widened(self, stop):
        """These candidates and the pairs near at stop (_Shape of a solve's result) that involve a
        vertex more than half the search radius's margin over δ from both places the candidates
        were searched at (a result that strays from them), or None if there are none."""
        q, end = self.query, stop.x
        strayed = np.minimum(np.linalg.norm(end - self.x, axis=1), np.linalg.norm(end - self.end, axis=1))
        moved = strayed > 0.5 * (q.radius - q.distance)
        p, t = _near(stop, q.radius, q.blocks, moved)
        keys = q.allowed(sorted_unique(p * q.n_tris + t))
        keys = keys[~member(self.keys, keys)]
        if not len(keys):
            return None
        more = Candidates(q, self.shape, keys, self.end)  # merged in key order, the known ones' geometry kept
        order = np.argsort(np.concatenate([self.keys, keys]), kind="stable")
        fields = [np.concatenate([a, b])[order] for a, b in zip(self.geometry(), more.geometry())]
        return Candidates(q, self.shape, np.concatenate([self.keys, keys])[order], self.end, fields)

    def geometry(self):
        return self.unit, self.length, self.height, self.off

    def select(self, shape, radius, known=()):
        """Indices of the candidates, not in known, over their triangle (within δ of its edges) at
        the start or at an end (_Shape) and within radius of its plane there or passed to its
        other side: a
        plane says nothing of points beside the triangle (the same layer, brought near as a cloth
        compresses)."""
        left = np.ones(len(self.keys), bool)
        left[np.asarray(known, dtype=np.int64)] = False
        sel = np.flatnonzero(left)
        delta = self.query.distance
        height1 = shape.height(self.p[sel], self.t[sel])
        near = (np.sign(self.height[sel]) != np.sign(height1)) | (np.abs(height1) <= radius)  # or crossed
        sel, height1 = sel[near], height1[near]
        beside = np.flatnonzero(self.off[sel] > delta)  # over at the start, else perhaps at end
        over = np.ones(len(sel), bool)
        over[beside] = shape.offset(self.p[sel[beside]], self.t[sel[beside]], height1[beside], delta) <= delta
        return sel[over]


class SelfPlanes:
    """A step's self-contact planes, `chosen` of its Candidates: per pair (keys) the vertex p, the
    triangle t and its corners (P,3) and the normal n (toward p's side at the step's start)."""

    def __init__(self, cands, chosen, x):
        self.cands, self.chosen, self.x = cands, chosen, x
        self.keys, self.p, self.t = cands.keys[chosen], cands.p[chosen], cands.t[chosen]
        self.tri = cands.query.tris[self.t]
        self.side = np.where(cands.height[chosen] < 0, -1.0, 1.0)
        self.n = cands.unit[chosen] * self.side[:, None]
        # pairs a linearized step holds in contact whatever their distance at its prediction
        self.forced = np.zeros(len(chosen), bool)

    def jacobian(self, idx):
        """∂n/∂x_k for the corners at the start of planes idx (I,3,3,3): J_k = ±(I − nnᵀ)[s_k]ₓ/|N|,
        s = (c − b, a − c, b − a). Only the contacts' (a forward run without gradients or friction
        needs none)."""
        n, side, length = self.n[idx], self.side[idx], self.cands.length[self.chosen[idx]]
        a, b, c = (self.x[self.tri[idx, i]] for i in range(3))
        proj = np.eye(3) - n[:, :, None] * n[:, None, :]
        # n = side·N/|N|, N = (b − a)×(c − a): ∂n = side·(I − nnᵀ)·∂N/|N|, ∂N/∂x_k = [s_k]ₓ
        jac = np.empty((len(idx), 3, 3, 3))
        for k, s in enumerate((c - b, a - c, b - a)):
            skew = np.zeros((len(idx), 3, 3))
            skew[:, 0, 1], skew[:, 0, 2], skew[:, 1, 2] = -s[:, 2], s[:, 1], -s[:, 0]
            skew -= skew.transpose(0, 2, 1)
            jac[:, k] = (side / length)[:, None, None] * (proj @ skew)
        return jac

    def friction(self, v, stiffness, scene, eps, linearized):
        """The lagged friction (core.contact.penalty.LaggedFriction) of the pairs in contact at the step's
        start: the vertex's slip against the triangle's centroid, tangent to n, under the normal
        force λ = −E′(dₛ), dₛ = n·rₛ − δ; None if there are none. Every pair the plane holds
        counts, those whose vertex only comes over the triangle within the step too (a layer
        sliding 2 cm a step over 2 cm triangles: half of what holds it up). The centroid's
        weights, like the plane's, are constant: a pair's friction is a function of the start
        through λ, n and the anchor rₛ alone, which the adjoint differentiates. (On a triangle a
        few millimetres across, the centroid's motion is the contact point's.)"""
        if not len(self.p):
            return None
        r = self.x[self.p] - self.cands.shape.middle(self.t)[0]
        d = _dot(r, self.n) - scene.self_distance
        on = np.flatnonzero(d < 0)
        if not len(on):
            return None
        stencil = np.column_stack([self.p[on], self.tri[on]])
        n, r, jac = self.n[on], r[on], self.jacobian(on)
        _, e1, e2, _ = penalty(d[on], stiffness[self.p[on]], scene.contact_smoothing)
        # ∂dₛ/∂xₘ = wₘ·n + ∂n/∂xₘᵀ·rₛ (n depends on the corners only)
        dn = np.zeros((len(on), 4, 3, 3))
        dn[:, 1:] = jac
        dd = WEIGHTS[None, :, None] * n[:, None, :] + np.einsum("amji,aj->ami", dn, r)
        previous = None
        if linearized:  # its slip over the last step: see LaggedFriction
            slip = scene.h * combine(WEIGHTS, stencil, v)
            previous = np.linalg.norm(slip - _dot(slip, n)[:, None] * n, axis=1)
        out = LaggedFriction(
            stencil,
            WEIGHTS,
            n,
            -e1,
            r,
            -e2[:, None, None] * dd,
            dn,
            np.broadcast_to(WEIGHTS[None, :, None, None] * np.eye(3), (len(on), 4, 3, 3)),
            scene.self_friction,
            eps,
            previous,
        )
        out.triangle = self.t[on]  # where its Hessian's blocks lie (Potential._add_pairs)
        out.keys = self.keys[on]
        return out

    def depth(self, y):
        """d + δ per pair at positions y: the height over the start's plane."""
        return _dot(y[self.p] - centroids(y, self.tri), self.n)

    def grown(self, x, end):
        """These planes and those of the candidates within δ of their plane at end (a solve's
        result) or passed through it, forced flags kept; None if there are none."""
        stop = _Shape(end, self.cands.query.tris)
        cands, old = self.cands.widened(stop), self.chosen
        if cands is None:
            cands = self.cands
        else:  # the chosen ones' indices among the widened candidates
            old = np.searchsorted(cands.keys, self.keys)
        new = cands.select(stop, cands.query.distance, old)
        if not len(new):
            return None
        chosen = sorted_unique(np.concatenate([old, new]))
        out = SelfPlanes(cands, chosen, x)
        out.forced[np.searchsorted(chosen, old)] = self.forced
        return out


class SelfPenalty:
    """The penalty E(d) of a step's planes at positions y (d < 0 active), k the vertex's contact
    stiffness: per active pair its stencil (A,4: vertex, corners), triangle, n, r = y_p − centroid,
    ∂n/∂xₛ, d, E′ and E″."""

    def __init__(self, planes, y, stiffness, distance, smoothing):
        r = y[planes.p] - centroids(y, planes.tri)
        d = _dot(r, planes.n) - distance
        on = np.flatnonzero((d < 0) | planes.forced)
        self.stencil, self.triangle = np.column_stack([planes.p[on], planes.tri[on]]), planes.t[on]
        self.n, self.r, self.d = planes.n[on], r[on], d[on]
        self._planes, self._on, self._jac = planes, on, None
        k = stiffness[planes.p[on]]
        e, self.e1, self.e2, _ = penalty(np.minimum(self.d, 0.0), k, smoothing)
        forced = planes.forced[on]
        e[forced], self.e1[forced], self.e2[forced], _ = deep_penalty(self.d[forced], k[forced], smoothing)
        self.energy = float(e.sum())

    def __len__(self):
        return len(self.stencil)

    @property
    def jac(self):
        """∂n/∂xₛ of the corners per active pair (SelfPlanes.jacobian), for the lag terms."""
        if self._jac is None:
            self._jac = self._planes.jacobian(self._on)
        return self._jac

    def _spread(self, out, per_pair):
        spread(out, WEIGHTS, self.stencil, per_pair)

    def _combine(self, v):
        """Σ w_m v_m per pair (A,3): v at the vertex less its mean over the corners."""
        return combine(WEIGHTS, self.stencil, v)

    def add_gradient(self, out):
        self._spread(out, self.e1[:, None] * self.n)

    def add_hess_vec(self, out, v):
        self._spread(out, (self.e2 * _dot(self.n, self._combine(v)))[:, None] * self.n)

    def add_lag_gradient(self, out, v):
        """out += ∂(v·∇E)/∂xₛ: v·∇E = E′·(n·r_v), d = n·r − δ, n = n(corners at the start)."""
        rv = self._combine(v)
        u = (self.e2 * _dot(self.n, rv))[:, None] * self.r + self.e1[:, None] * rv
        for k in range(3):
            scatter_add(out, self.stencil[:, k + 1], np.einsum("aji,aj->ai", self.jac[:, k], u))

    def add_lag_tangent(self, out, dxs):
        """out += (∂∇E/∂xₛ)·δxₛ."""
        dn = sum(np.einsum("aij,aj->ai", self.jac[:, k], dxs[self.stencil[:, k + 1]]) for k in range(3))
        self._spread(out, (self.e2 * _dot(dn, self.r))[:, None] * self.n + self.e1[:, None] * dn)
