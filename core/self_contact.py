"""The cloth against itself: vertex–triangle planes lagged from each step's start, a distance
query for the colliders' penalty (core.contact.penalty).

At a step's start x, and where free fall would take it, x + h·v + h²·g (where a layer moving
fast would pass a triangle within the step), each vertex p within the search radius of a triangle t = (a, b, c)
(or passing t's plane within the step, its projection within the radius of t), not a corner of
t and not that near t at rest, gets t's plane of the step's start (extended beyond t's edges: a
vertex over an open edge of a sagging layer is held too): t's unit normal turned toward the side p starts on, n.
Within the step

    d = n·(y_p − (y_a + y_b + y_c)/3) − δ,

δ the self distance: linear in the positions y, so the penalty's Hessian E″·ggᵀ with
g = (n, −n/3, −n/3, −n/3) is positive semidefinite as it is, and a function of the start
through n alone, which the adjoint differentiates (SelfContact.lag_gradient). The side is the
start's, so p is held on it for the whole step however far the step would take it. t's centroid
anchors the plane rather than p's projection: its weights are constant, and on the start's plane
both give the same d.

A pair's Hessian couples p with t's corners, which the mesh's sparsity pattern does not hold:
core.linalg.Coupled carries those blocks beside the pattern.
"""

import numpy as np
from scipy.spatial import cKDTree

from .colliders import closest_on_triangles
from .contact import penalty
from .mesh import centroids_and_reach

# the search radius in self distances: pairs within it at the step's start or its prediction
# become planes, pairs within it at rest never do
SEARCH = 2.0
# the stencil's weights: the vertex, then the triangle's centroid
WEIGHTS = np.array([1.0, -1 / 3, -1 / 3, -1 / 3])


def _dot(a, b):
    return np.einsum("ij,ij->i", a, b)


def _candidates(x, tris, radius):
    """(vertex, triangle) pairs (P,) each whose vertex may lie within radius of the triangle at
    positions x, vertices of the triangle left out: a cKDTree of the triangles' centroids."""
    centroids, reach = centroids_and_reach(x, tris)
    pairs = cKDTree(centroids).sparse_distance_matrix(cKDTree(x), radius + float(reach.max()), output_type="ndarray")
    t, p = pairs["i"].astype(np.int64), pairs["j"].astype(np.int64)
    keep = (pairs["v"] <= radius + reach[t]) & (tris[t] != p[:, None]).all(axis=1)
    return p[keep], t[keep]


def _over(x, tris, p, t):
    """For pairs (p, t) at positions x: t's unit normal (P,3), its length |N| (twice the area),
    p's height above t's plane, and how far p's projection on that plane lies outside t."""
    corners = x[tris[t]]
    a = corners[:, 0]
    big = np.cross(corners[:, 1] - a, corners[:, 2] - a)
    length = np.linalg.norm(big, axis=1)
    unit = big / length[:, None]
    height = _dot(x[p] - a, unit)
    q, _ = closest_on_triangles(x[p], a, corners[:, 1], corners[:, 2])
    off = np.sqrt(np.maximum(np.sum((x[p] - q) ** 2, axis=1) - height**2, 0.0))
    return unit, length, height, off


class SelfQuery:
    """A cloth's self-contact search: its triangles, the self distance δ, and the (vertex,
    triangle) pairs within the search radius at rest, which never become planes."""

    def __init__(self, cloth, distance):
        self.tris, self.distance, self.radius = cloth.tris, float(distance), SEARCH * float(distance)
        self.n_tris = len(cloth.tris)
        p, t = _candidates(cloth.rest, self.tris, self.radius)
        # the closest point at rest, in any region of the triangle
        corners = cloth.rest[self.tris[t]]
        q, _ = closest_on_triangles(cloth.rest[p], corners[:, 0], corners[:, 1], corners[:, 2])
        near = np.linalg.norm(cloth.rest[p] - q, axis=1) <= self.radius
        self.excluded = np.unique(p[near] * self.n_tris + t[near])

    def planes(self, x, ends):
        """The step's SelfPlanes from its start x and estimates of its end (a prediction, a
        solve's result): the pairs near at the start or at any end, or passing t's plane between
        the start and an end."""
        keys = np.unique(
            np.concatenate(
                [p * self.n_tris + t for p, t in (_candidates(y, self.tris, self.radius) for y in [x, *ends])]
            )
        )
        keys = keys[~np.isin(keys, self.excluded, assume_unique=True)]
        p, t = np.divmod(keys, self.n_tris)
        _, _, height, off = _over(x, self.tris, p, t)
        near = np.hypot(height, off) <= self.radius
        for y in ends:
            _, _, height1, off1 = _over(y, self.tris, p, t)
            near |= np.hypot(height1, off1) <= self.radius
            near |= (np.minimum(off, off1) <= self.radius) & (np.sign(height) != np.sign(height1))
        return self.of_pairs(x, keys[near])

    def of_pairs(self, x, keys):
        """SelfPlanes of the pairs keys (vertex·triangles + triangle) from the step's start x."""
        p, t = np.divmod(keys, self.n_tris)
        unit, length, height, _ = _over(x, self.tris, p, t)
        side = np.where(height < 0, -1.0, 1.0)
        return SelfPlanes(keys, p, t, self.tris[t], unit * side[:, None], length, x)


class SelfPlanes:
    """A step's self-contact planes: per pair (sorted keys p·triangles + t) the vertex p, the
    triangle t and its corners (P,3), the
    normal n (toward p's side at the step's start) and ∂n/∂x_k for the corners at the start
    (P,3,3,3: J_k = ±(I − nnᵀ)[s_k]ₓ/|N|, s = (c − b, a − c, b − a))."""

    def __init__(self, keys, p, t, tri, n, length, x):
        self.keys, self.p, self.t, self.tri, self.n = keys, p, t, tri, n
        # pairs a linearized step holds in contact whatever their distance at its prediction
        self.forced = np.zeros(len(p), bool)
        a, b, c = (x[tri[:, i]] for i in range(3))
        proj = np.eye(3) - n[:, :, None] * n[:, None, :]
        # n = side·N/|N|, N = (b − a)×(c − a): ∂n = side·(I − nnᵀ)·∂N/|N|, ∂N/∂x_k = [s_k]ₓ
        side = np.sign(_dot(n, np.cross(b - a, c - a)))
        self.jac = np.empty((len(p), 3, 3, 3))
        for k, s in enumerate((c - b, a - c, b - a)):
            skew = np.zeros((len(p), 3, 3))
            skew[:, 0, 1], skew[:, 0, 2], skew[:, 1, 2] = -s[:, 2], s[:, 1], -s[:, 0]
            skew -= skew.transpose(0, 2, 1)
            self.jac[:, k] = (side / length)[:, None, None] * (proj @ skew)

    def depth(self, y):
        """d + δ per pair at positions y: the height over the start's plane."""
        return _dot(y[self.p] - y[self.tri].mean(axis=1), self.n)


class SelfContact:
    """The penalty E(d) of a step's planes at positions y (d < 0 active), k the vertex's contact
    stiffness: per active pair its stencil (A,4: vertex, corners), triangle, n, r = y_p − centroid,
    ∂n/∂xₛ, d, E′ and E″."""

    def __init__(self, planes, y, stiffness, distance, smoothing):
        r = y[planes.p] - y[planes.tri].mean(axis=1)
        d = _dot(r, planes.n) - distance
        on = np.flatnonzero((d < 0) | planes.forced)
        self.stencil, self.triangle = np.column_stack([planes.p[on], planes.tri[on]]), planes.t[on]
        self.n, self.r, self.jac, self.d = planes.n[on], r[on], planes.jac[on], d[on]
        k = stiffness[planes.p[on]]
        e, self.e1, self.e2, _ = penalty(np.minimum(self.d, 0.0), k, smoothing)
        forced = planes.forced[on]  # the penalty's deep quadratic, continued to any distance
        dd = self.d[forced] + 0.5 * smoothing
        e[forced] = 0.5 * k[forced] * dd * dd + (0.15 - 0.125) * k[forced] * smoothing**2
        self.e1[forced], self.e2[forced] = k[forced] * dd, k[forced]
        self.energy = float(e.sum())

    def __len__(self):
        return len(self.stencil)

    def _spread(self, out, per_pair):
        """out[stencil] += the stencil's weights times per-pair vectors (A,3)."""
        np.add.at(out, self.stencil.ravel(), (WEIGHTS[None, :, None] * per_pair[:, None, :]).reshape(-1, 3))

    def _g(self, v):
        """g·v per pair: n·(v_p − mean of v over the corners)."""
        return _dot(self.n, np.einsum("k,akj->aj", WEIGHTS, v[self.stencil]))

    def add_gradient(self, out):
        self._spread(out, self.e1[:, None] * self.n)

    def add_hess_vec(self, out, v):
        self._spread(out, (self.e2 * self._g(v))[:, None] * self.n)

    def add_lag_gradient(self, out, v):
        """out += ∂(v·∇E)/∂xₛ: v·∇E = E′·(n·r_v), d = n·r − δ, n = n(corners at the start)."""
        rv = np.einsum("k,akj->aj", WEIGHTS, v[self.stencil])
        u = (self.e2 * _dot(self.n, rv))[:, None] * self.r + self.e1[:, None] * rv
        for k in range(3):
            np.add.at(out, self.stencil[:, k + 1], np.einsum("aji,aj->ai", self.jac[:, k], u))

    def add_lag_tangent(self, out, dxs):
        """out += (∂∇E/∂xₛ)·δxₛ."""
        dn = sum(np.einsum("aij,aj->ai", self.jac[:, k], dxs[self.stencil[:, k + 1]]) for k in range(3))
        self._spread(out, (self.e2 * _dot(dn, self.r))[:, None] * self.n + self.e1[:, None] * dn)
