"""Colliders: sphere, plane and triangle mesh, static or with one pose per frame.

Every collider answers the same question for the contact term (core.contact.penalty.Contact): for cloth
vertices x at a time, the signed distance d, its gradient n (unit) and the derivative of n. The
sphere and the plane answer exactly. A mesh answers per integrator step: at the step's start it
finds each nearby vertex's closest point on the surface (face, edge or vertex region; cKDTree
broad phase, vectorized narrow phase) and within the step the vertex is kept on its side of that
point's tangent plane (`begin_step`, a `Planes` lag). A vertex that starts a step above a thin
board is held above the board's top face for the whole step, however far the step would take it:
nothing tunnels. Friction (μ per collider) and thickness (None: the scene's) belong to every
kind.
"""

import numpy as np

from ..model.mesh import centroids_and_reach, face_normals, search_tree


def _pose(value, what):
    arr = np.array(value, dtype=np.float64)
    if arr.shape[-1:] != (3,) or arr.ndim > 2:
        raise ValueError(f"{what} must have shape (3,) or (frames+1, 3), got {arr.shape}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{what} has a NaN or infinite value")
    return arr


def _at(arr, t, static_ndim=1):
    """Pose at fractional frame t (linear between frame poses; static poses have static_ndim)."""
    if arr.ndim == static_ndim:
        return arr
    if not 0 <= t <= len(arr) - 1:
        raise ValueError(f"collider has {len(arr)} poses, none for frame {t:g}")
    f = min(int(t), len(arr) - 2)
    w = t - f
    return arr[f] if w == 0 else (1 - w) * arr[f] + w * arr[f + 1]


def _uv_sphere(rings=16, segments=32):
    """A unit sphere's vertices and triangles (poles included), for drawing."""
    u, v = np.meshgrid(np.linspace(0, np.pi, rings + 1), np.linspace(0, 2 * np.pi, segments + 1), indexing="ij")
    pts = np.stack([np.sin(u) * np.cos(v), np.sin(u) * np.sin(v), np.cos(u)], -1).reshape(-1, 3)
    i, j = np.meshgrid(np.arange(rings), np.arange(segments), indexing="ij")
    a = (i * (segments + 1) + j).ravel()
    b, c, d = a + 1, a + segments + 2, a + segments + 1
    return pts, np.concatenate([np.stack([a, b, c], 1), np.stack([a, c, d], 1)])


_UNIT_SPHERE = _uv_sphere()


class Collider:
    """What every kind shares: friction μ (Coulomb, ≥ 0) and an optional thickness of its own."""

    def __init__(self, friction=0.0, thickness=None):
        if not (np.isfinite(friction) and friction >= 0):
            raise ValueError(f"collider friction must be non-negative, got {friction}")
        if thickness is not None and not (np.isfinite(thickness) and thickness >= 0):
            raise ValueError(f"collider thickness must be non-negative, got {thickness}")
        self.friction = float(friction)
        self.thickness = None if thickness is None else float(thickness)

    def replace(self, **changes):
        """A copy with some attributes changed (friction, thickness)."""
        out = object.__new__(type(self))
        out.__dict__.update(self.__dict__)
        if "friction" in changes or "thickness" in changes:
            Collider.__init__(out, changes.pop("friction", self.friction), changes.pop("thickness", self.thickness))
        if changes:
            raise ValueError(f"unknown collider field(s): {', '.join(sorted(changes))}")
        return out

    def begin_step(self, x, v, t0, t1, h, thickness):
        """Per-step data the distance needs (a mesh's planes), or None."""
        return None

    def signed(self, x, t):
        """The distance of points x from the surface at time t, negative inside (a mesh: see
        MeshCollider.signed)."""
        return self.distance(x, t)[0]

    def kept_distance(self, default):
        """The distance kept from the surface: its own thickness, else the scene's."""
        return default if self.thickness is None else self.thickness

    def motion(self, x, t0, t1, lag):
        """How far the surface under the points x moves from t0 to t1 (friction acts on the slip
        relative to it), and its derivative by x (N,3,3)."""
        return np.zeros_like(x), np.zeros(x.shape + (3,))

    def surface(self, t, centre, reach):
        """The surface at fractional frame t as triangles to draw, (V,3) vertices and (F,3) faces: all
        of it, or for an unbounded one its part within `reach` of the point nearest `centre`."""
        raise NotImplementedError


class Sphere(Collider):
    """Sphere collider; center (3,) or one center per frame (frames+1, 3); radius one number or one
    per frame (frames+1,) (a sphere whose scale is animated)."""

    def __init__(self, center, radius, friction=0.0, thickness=None):
        super().__init__(friction, thickness)
        self.center = _pose(center, "sphere center")
        radius = np.array(radius, dtype=np.float64)
        if radius.ndim > 1 or not (np.isfinite(radius).all() and (radius > 0).all()):
            raise ValueError(f"sphere radius must be positive (one number, or one per frame), got {radius}")
        self.radius = float(radius) if radius.ndim == 0 else radius
        # per-frame radii as (frames+1, 1) poses, so that _at interpolates them like the centers
        self._radius = np.reshape(radius, (-1, 1)) if radius.ndim else radius.reshape(1)

    def n_poses(self):
        return max(1 if a.ndim == 1 else len(a) for a in (self.center, self._radius))

    def at(self, t):
        """Center and radius at fractional frame t."""
        return _at(self.center, t), float(_at(self._radius, t)[0])

    def distance(self, x, t, lag=None):
        """Signed distance d, its gradient n (unit) and a function giving ∇n = ∇²d, (len(sel),3,3),
        for a selection of the points."""
        center, radius = self.at(t)
        rel = x - center
        dist = np.linalg.norm(rel, axis=1)
        inv = 1.0 / np.maximum(dist, 1e-12)
        n = rel * inv[:, None]
        return dist - radius, n, lambda sel: (np.eye(3) - n[sel, :, None] * n[sel, None, :]) * inv[sel, None, None]

    def motion(self, x, t0, t1, lag):
        return np.broadcast_to(self.at(t1)[0] - self.at(t0)[0], x.shape), np.zeros(x.shape + (3,))

    def frozen(self, t):
        """This sphere held still as it is at time t."""
        return Sphere(*self.at(t), self.friction, self.thickness)

    def surface(self, t, centre, reach):
        center, radius = self.at(t)
        return center + radius * _UNIT_SPHERE[0], _UNIT_SPHERE[1]


class Plane(Collider):
    """Infinite plane through `point` with `normal` (the free side); (3,) or per frame (frames+1, 3)."""

    def __init__(self, point, normal, friction=0.0, thickness=None):
        super().__init__(friction, thickness)
        self.point = _pose(point, "plane point")
        normal = _pose(normal, "plane normal")
        length = np.linalg.norm(normal, axis=-1)
        if (length < 1e-12).any():
            raise ValueError("plane normal must be non-zero")
        self.normal = normal / length[..., None]

    def n_poses(self):
        return max(1 if a.ndim == 1 else len(a) for a in (self.point, self.normal))

    def at(self, t):
        """Point and unit normal at fractional frame t."""
        nrm = _at(self.normal, t)
        return _at(self.point, t), nrm / np.linalg.norm(nrm)

    def frozen(self, t):
        """This plane held still as it is at time t."""
        return Plane(*self.at(t), self.friction, self.thickness)

    def distance(self, x, t, lag=None):
        """As Sphere.distance; a plane's normal is constant (∇n = 0: None)."""
        point, nrm = self.at(t)
        return (x - point) @ nrm, np.broadcast_to(nrm, x.shape), None

    def surface(self, t, centre, reach):
        point, nrm = self.at(t)
        a = np.cross(nrm, [1.0, 0.0, 0.0] if abs(nrm[0]) < 0.9 else [0.0, 1.0, 0.0])
        a /= np.linalg.norm(a)
        b = np.cross(nrm, a)
        mid = centre - np.dot(centre - point, nrm) * nrm
        quad = [mid + reach * (s * a + u * b) for s, u in ((-1, -1), (1, -1), (1, 1), (-1, 1))]
        return np.array(quad), np.array([(0, 1, 2), (0, 2, 3)])


def closest_on_triangles(p, a, b, c):
    """Closest points q on triangles (a, b, c) to points p, all (N,3), and barycentric weights
    (N,3) of q (Ericson, Real-Time Collision Detection §5.1.5, vectorized): a face's interior has
    three positive weights, an edge's two, a vertex's one."""
    if not len(p):  # a search that found nothing (most steps of a cloth apart from itself)
        return np.zeros((0, 3)), np.zeros((0, 3))
    ab, ac, ap = b - a, c - a, p - a
    d1, d2 = np.einsum("ij,ij->i", ab, ap), np.einsum("ij,ij->i", ac, ap)
    bp = p - b
    d3, d4 = np.einsum("ij,ij->i", ab, bp), np.einsum("ij,ij->i", ac, bp)
    cp = p - c
    d5, d6 = np.einsum("ij,ij->i", ab, cp), np.einsum("ij,ij->i", ac, cp)
    va, vb, vc = d3 * d6 - d5 * d4, d5 * d2 - d1 * d6, d1 * d4 - d3 * d2
    with np.errstate(divide="ignore", invalid="ignore"):
        t_ab = d1 / (d1 - d3)
        t_ac = d2 / (d2 - d6)
        t_bc = (d4 - d3) / ((d4 - d3) + (d5 - d6))
        denom = 1.0 / (va + vb + vc)
    conditions = [
        (d1 <= 0) & (d2 <= 0),
        (d3 >= 0) & (d4 <= d3),
        (vc <= 0) & (d1 >= 0) & (d3 <= 0),
        (d6 >= 0) & (d5 <= d6),
        (vb <= 0) & (d2 >= 0) & (d6 <= 0),
        (va <= 0) & (d4 - d3 >= 0) & (d5 - d6 >= 0),
    ]
    # every region's weights are computed for every point and the point's own selected, the first
    # region that holds it winning (np.where from the last: np.select took 1.3× as long): the
    # others' may overflow or divide by zero (a point far from its triangle in a diverging trial)
    with np.errstate(over="ignore", invalid="ignore"):
        weights = []
        for choices, default in (
            ((1.0, 0.0, 1 - t_ab, 0.0, 1 - t_ac, 0.0), 1 - (vb + vc) * denom),
            ((0.0, 1.0, t_ab, 0.0, 0.0, 1 - t_bc), vb * denom),
            ((0.0, 0.0, 0.0, 1.0, t_ac, t_bc), vc * denom),
        ):
            w = default
            for condition, choice in zip(conditions[::-1], choices[::-1]):
                w = np.where(condition, choice, w)
            weights.append(w)
    bary = np.stack(weights, axis=1)
    q = bary[:, :1] * a + bary[:, 1:2] * b + bary[:, 2:] * c
    return q, bary


class Planes:
    """A mesh's contacts for one step: per vertex near it (`vertices`), the closest point q at the
    step's end pose, the outward normal n of the distance there, fixed for the step, and ∇n
    (`curv`, zero in face regions) at the step's start, through which the planes depend on it."""

    def __init__(self, vertices, q, n, curv, face, bary):
        self.vertices, self.q, self.n, self.curv, self.face, self.bary = vertices, q, n, curv, face, bary
        self.slot = {int(v): i for i, v in enumerate(vertices)}


class MeshCollider(Collider):
    """A triangle mesh: vertices (V,3), or one pose per frame (frames+1, V,3), linear between
    frames; triangles (T,3). one_sided: the triangles' winding gives the outside (closed meshes,
    Blender's Single Sided); else either side is free, and a vertex keeps the side it starts each
    step on. thickness: the distance kept from the surface (Blender's Thickness Outer; None: the
    scene's)."""

    def __init__(self, vertices, triangles, thickness=None, friction=0.0, one_sided=False):
        super().__init__(friction, thickness)
        verts = np.array(vertices, dtype=np.float64)
        if verts.ndim not in (2, 3) or verts.shape[-1] != 3 or verts.shape[-2] == 0:
            raise ValueError(f"mesh collider vertices must have shape (V, 3) or (frames+1, V, 3), got {verts.shape}")
        if not np.isfinite(verts).all():
            raise ValueError("mesh collider has a NaN or infinite vertex")
        tris = np.array(triangles, dtype=np.int64).reshape(-1, 3) if len(triangles) else np.zeros((0, 3), np.int64)
        if len(tris) == 0:
            raise ValueError("mesh collider has no triangles")
        if tris.min() < 0 or tris.max() >= verts.shape[-2]:
            raise ValueError(f"a mesh collider triangle index is out of range 0..{verts.shape[-2] - 1}")
        rest = verts if verts.ndim == 2 else verts[0]
        area2 = face_normals(rest, tris)[1]
        scale = max(float(np.ptp(rest, axis=0).max()), 1e-300)
        bad = area2 <= 1e-12 * scale**2
        if bad.any():
            raise ValueError(f"mesh collider triangle {int(np.argmax(bad))} has zero area ({int(bad.sum())} such)")
        self.vertices, self.tris, self.one_sided = verts, tris, bool(one_sided)
        self._edge_normal_index = _edge_slots(tris)
        # the triangles' corners by vertex (corner-major, k·T + t) and their edge slots by edge, in
        # order: a pseudonormal sums its faces as a bincount over every vertex would
        self._by_vertex = _groups(tris.T.ravel(), verts.shape[-2])
        self._by_edge = _groups(self._edge_normal_index[0].ravel(), self._edge_normal_index[1])
        self._broad_of = None  # (pose array or None if static, its broad phase): _broad

    def n_poses(self):
        return 1 if self.vertices.ndim == 2 else len(self.vertices)

    def frozen(self, t):
        """This mesh held still as it is at time t."""
        return MeshCollider(self.at(t), self.tris, self.thickness, self.friction, self.one_sided)

    def at(self, t):
        return _at(self.vertices, t, static_ndim=2)

    def surface(self, t, centre, reach):
        return self.at(t), self.tris

    def _broad(self, verts):
        """cKDTree of the triangles' centroids, each one's largest centroid-to-corner distance, and
        its plane (unit normal, offset; a degenerate pose's triangle gets none: 0, 0). Built once
        for a static mesh; for a moving one, kept for the pose array it was last built for (a
        step's search and its normals ask of the same pose)."""
        if self.vertices.ndim == 2:
            verts = None
        built = self._broad_of
        if built is None or built[0] is not verts:
            built = self._broad_of = (verts, self._build_broad(self.vertices if verts is None else verts))
        return built[1]

    def _build_broad(self, verts):
        centroids, reach = centroids_and_reach(verts, self.tris)
        normal = face_normals(verts, self.tris)[0]
        return search_tree(centroids, self.vertices.ndim == 3), reach, normal, _rows(normal, verts[self.tris[:, 0]])

    def closest(self, x, verts, radius=None):
        """For points x (N,3) and per-point search radii: which have a surface point within their
        radius (mask), and for those their closest point q, triangle and its barycentric weights.
        radius None: every point's closest point (within its nearest centroid's distance)."""
        tree, reach, normal, offset = self._broad(verts)
        if radius is None:
            nearest = tree.query(x)[0]
            radius = nearest * (1 + 1e-9) + 1e-12
        else:  # the nearest centroid only where it can matter (inf beyond: the far ones end early)
            radius = np.broadcast_to(radius, (len(x),))
            nearest = tree.query(x, distance_upper_bound=(float(radius.max()) + reach.max()) * (1 + 1e-9))[0]
        # only points with a centroid in reach ask for all of theirs (most of a cloth is far away)
        near = np.flatnonzero(nearest <= radius + reach.max())
        # every (centroid, point) pair within the largest radius, by one dual-tree traversal, kept
        # where the triangle can hold a point within the radius and nearer than the nearest centroid
        pairs = tree.sparse_distance_matrix(
            search_tree(x[near]), float(radius[near].max(initial=0.0)) + reach.max(), output_type="ndarray"
        )
        bound = np.minimum(radius, nearest)[near]
        pairs = pairs[pairs["v"] <= bound[pairs["j"]] + reach[pairs["i"]]]
        # and where the triangle's plane is within it: a thin collider (a bar) has all its faces within
        # reach of every point near it, most of them facing away (the narrow phase is the cost)
        height = _heights(x[near], pairs["j"], pairs["i"], normal, offset)
        pairs = pairs[np.abs(height) <= bound[pairs["j"]]]
        if not len(pairs):
            return np.zeros(len(x), bool), np.zeros((0, 3)), np.zeros(0, np.int64), np.zeros((0, 3))
        point, tri = near[pairs["j"]], pairs["i"].astype(np.int64)
        corners = verts[self.tris[tri]]
        q, bary = closest_on_triangles(x[point], corners[:, 0], corners[:, 1], corners[:, 2])
        dist = np.linalg.norm(x[point] - q, axis=1)
        order = np.lexsort((tri, dist, point))  # per point, nearest first (a shared edge: the lower triangle)
        first = order[np.r_[True, point[order][1:] != point[order][:-1]]]
        keep = dist[first] <= radius[point[first]]
        first = first[keep]
        mask = np.zeros(len(x), bool)
        mask[point[first]] = True
        return mask, q[first], tri[first], bary[first]

    def _normals(self, verts):
        """The unit face normals (T,3) (the broad phase's) and the pseudonormals of vertices and
        edges where asked (_Pseudonormals): a contact's side needs only its own feature's."""
        return _Pseudonormals(self, verts, self._broad(verts)[2])

    def signed(self, x, t, radius=None):
        """Signed distance of points x (within radius of the surface; None: all) at time t
        (one-sided: negative inside; two-sided: unsigned), +inf elsewhere."""
        verts = self.at(t)
        out = np.full(len(x), np.inf)
        mask, q, tri, bary = self.closest(x, verts, radius)
        if mask.any():
            rel = x[mask] - q
            out[mask] = np.linalg.norm(rel, axis=1)
            if self.one_sided:
                out[mask] *= self._side(rel, tri, bary, self._normals(verts))
        return out

    def _side(self, rel, tri, bary, normals):
        """+1 or −1 per point: on which side of the surface it lies, by the pseudonormal of the
        feature its closest point is on (Bærentzen & Aanæs 2005)."""
        nonzero = bary > 1e-12
        count = nonzero.sum(axis=1)
        pseudo = normals.face[tri].copy()
        at_vertex = count == 1
        if at_vertex.any():
            pseudo[at_vertex] = normals.vertex(self.tris[tri[at_vertex], np.argmax(bary[at_vertex], axis=1)])
        at_edge = count == 2
        if at_edge.any():
            missing = np.argmin(bary[at_edge], axis=1)  # the edge opposite the corner with weight 0
            pseudo[at_edge] = normals.edge(self._edge_normal_index[0][tri[at_edge], (missing + 1) % 3])
        return np.where(np.einsum("ij,ij->i", rel, pseudo) < 0, -1.0, 1.0)

    def begin_step(self, x, v, t0, t1, h, thickness):
        """The step's Planes for the vertices that can reach the surface within it: within the
        thickness plus twice the distance their velocity covers plus a margin."""
        verts = self.at(t1)
        radius = thickness + 2 * h * np.linalg.norm(v, axis=1) + SEARCH_MARGIN
        mask, q, tri, bary = self.closest(x, verts, radius)
        idx = np.flatnonzero(mask)
        rel = x[idx] - q
        dist = np.linalg.norm(rel, axis=1)
        normals = self._normals(verts)
        face_n = normals.face[tri]
        interior = (bary > 1e-12).all(axis=1) | (dist < 1e-12)
        if self.one_sided:  # inside or out, a face pushes along its outward normal
            side = self._side(rel, tri, bary, normals)
            face_side = np.ones(len(idx))
        else:  # the side the vertex starts on (within the shell, the side it came from); beyond an open edge, away
            height = np.einsum("ij,ij->i", rel, face_n)
            came = np.einsum("ij,ij->i", rel - h * v[idx], face_n)
            height = np.where((np.abs(height) < thickness) & (came != 0), came, height)
            side = face_side = np.where(interior & (height < 0), -1.0, 1.0)
        u = rel / np.maximum(dist, 1e-300)[:, None]
        n = np.where(interior[:, None], face_n * face_side[:, None], u * side[:, None])
        curv = np.zeros((len(idx), 3, 3))
        rim = ~interior
        if rim.any():  # ∇n about an edge (a cylinder) or a vertex (a sphere)
            proj = np.eye(3) - u[rim, :, None] * u[rim, None, :]
            on_edge = (bary[rim] > 1e-12).sum(axis=1) == 2
            if on_edge.any():
                corners = verts[self.tris[tri[rim][on_edge]]]
                kept = bary[rim][on_edge] > 1e-12
                ends = corners[kept].reshape(-1, 2, 3)
                e = ends[:, 1] - ends[:, 0]
                e /= np.linalg.norm(e, axis=1)[:, None]
                proj[on_edge] -= e[:, :, None] * e[:, None, :]
            curv[rim] = proj * (side[rim] / dist[rim])[:, None, None]
        return Planes(idx, q, n, curv, tri, bary)

    def kept_distance(self, default):
        """A two-sided mesh keeps at least TWO_SIDED_SHELL: a vertex resting on it sinks g/κ into
        its contact zone and must stay on the side it came from."""
        kept = super().kept_distance(default)
        return kept if self.one_sided else max(kept, TWO_SIDED_SHELL)

    def distance(self, x, t, lag=None):
        """As Sphere.distance for the vertices of the step's Planes (lag), +inf for the others; n is
        fixed within a step (∇n = 0: None)."""
        d = np.full(len(x), np.inf)
        n = np.zeros_like(x)
        if lag is not None and len(lag.vertices):
            n[lag.vertices] = lag.n
            d[lag.vertices] = np.einsum("ij,ij->i", x[lag.vertices] - lag.q, lag.n)
        return d, n, None

    def motion(self, x, t0, t1, lag):
        """The closest points' own motion over the step (their barycentric weights on both poses),
        and its derivative by x through those weights."""
        out, jac = np.zeros_like(x), np.zeros(x.shape + (3,))
        if lag is None or not len(lag.vertices) or self.vertices.ndim == 2:
            return out, jac
        corners1 = self.at(t1)[self.tris[lag.face]]
        moved = corners1 - self.at(t0)[self.tris[lag.face]]  # (P,3 corners,3)
        out[lag.vertices] = np.einsum("ij,ijk->ik", lag.bary, moved)
        dbary = np.zeros((len(lag.vertices), 3, 3))  # ∂(weight of corner k)/∂x, per contact
        kept = lag.bary > 1e-12
        count = kept.sum(axis=1)
        face = count == 3
        if face.any():
            e1, e2 = (corners1[face, k] - corners1[face, 0] for k in (1, 2))
            gram = np.stack(
                [np.stack([_rows(e1, e1), _rows(e1, e2)], -1), np.stack([_rows(e1, e2), _rows(e2, e2)], -1)], -2
            )
            duv = np.linalg.solve(gram, np.stack([e1, e2], axis=1))  # (F,2,3)
            dbary[face, 1:] = duv
            dbary[face, 0] = -duv.sum(axis=1)
        edge = np.flatnonzero(count == 2)
        if len(edge):
            ends = np.argsort(~kept[edge], axis=1, kind="stable")[:, :2]  # the two corners with weight
            p0 = corners1[edge, ends[:, 0]]
            e = corners1[edge, ends[:, 1]] - p0
            dt = e / _rows(e, e)[:, None]
            dbary[edge, ends[:, 1]] = dt
            dbary[edge, ends[:, 0]] = -dt
        jac[lag.vertices] = np.einsum("pkj,pki->pji", moved, dbary)
        return out, jac


class _Pseudonormals:
    """A mesh pose's unit face normals and, for the vertices and edges asked, their pseudonormals:
    a vertex's the angle-weighted sum of its faces' normals, an edge's the sum of its two."""

    def __init__(self, mesh, verts, face):
        self.mesh, self.verts, self.face = mesh, verts, face

    def vertex(self, ids):
        order, ptr = self.mesh._by_vertex
        flat, group = _members(order, ptr, ids)
        k, t = np.divmod(flat, len(self.face))
        tris = self.mesh.tris
        at = self.verts[tris[t, k]]
        a, b = self.verts[tris[t, (k + 1) % 3]] - at, self.verts[tris[t, (k + 2) % 3]] - at
        cos = _rows(a, b) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
        weighted = np.arccos(np.clip(cos, -1, 1))[:, None] * self.face[t]
        return np.stack([np.bincount(group, weighted[:, c], len(ids)) for c in range(3)], 1)

    def edge(self, slots):
        order, ptr = self.mesh._by_edge
        flat, group = _members(order, ptr, slots)
        return np.stack([np.bincount(group, self.face[flat // 3, c], len(slots)) for c in range(3)], 1)


def _groups(keys, n):
    """Positions of keys (ints below n) sorted by key, in order within a key, and where each key's
    run starts (n+1,)."""
    order = np.argsort(keys, kind="stable")
    return order, np.searchsorted(keys[order], np.arange(n + 1))


def _members(order, ptr, ids):
    """The positions of every member of the groups ids (_groups), and which of ids each is of."""
    counts = ptr[np.asarray(ids) + 1] - ptr[ids]
    group = np.repeat(np.arange(len(counts)), counts)
    starts = np.repeat(ptr[ids] - np.cumsum(counts) + counts, counts)
    return order[starts + np.arange(len(group))], group


def _rows(a, b):
    return np.einsum("ij,ij->i", a, b)


def _heights(x, j, i, normal, offset):
    """Signed heights of points x[j] over the planes (normal[i], offset[i]): from the dense table of
    every point over every plane where the pairs fill a third of it or more (one product instead of
    two gathers: ~6 ns an entry against ~19 ns a pair), else pair by pair (a character's body: 2,060
    pairs of a 188 × 864 table, 1.0 ms dense, 0.05 ms by pairs)."""
    if len(x) * len(normal) <= DENSE_FILL * len(j):
        return (x @ normal.T - offset)[j, i]
    return _rows(x[j], normal[i]) - offset[i]


# m: how much farther than the thickness and the step's motion a mesh's planes reach
SEARCH_MARGIN = 0.01
# a mesh's broad phase takes the table of every point's height over every plane when it has at most
# this many entries a pair
DENSE_FILL = 3
# m: the least distance a two-sided mesh keeps (its side test needs the contact zone's depth)
TWO_SIDED_SHELL = 2e-3


def _edge_slots(tris):
    """Per triangle and local edge (i, i+1), the index of that unique edge, and the edge count."""
    e = np.sort(np.stack([tris, np.roll(tris, -1, axis=1)], axis=2).reshape(-1, 2), axis=1)
    _, inverse = np.unique(e, axis=0, return_inverse=True)
    inverse = inverse.ravel()
    return inverse.reshape(-1, 3), int(inverse.max()) + 1


def depths(colliders, x, t):
    """Per collider, the signed distance of the points x from it at time t where it has an
    inside (behind a plane, inside a sphere or a one-sided mesh; +inf for a two-sided mesh)."""
    two_sided = [isinstance(col, MeshCollider) and not col.one_sided for col in colliders]
    return [np.full(len(x), np.inf) if two else col.signed(x, t) for col, two in zip(colliders, two_sided)]


def inside_at_start(colliders, x0, tol):
    """Per collider, how many of the positions x0 start deeper than tol inside it (behind a plane,
    inside a one-sided mesh); tol a sequence: per collider a list, a count per tolerance."""
    tols = np.atleast_1d(tol)
    counts = [[int((d < -t).sum()) for t in tols] for d in depths(colliders, x0, 0.0)]
    return counts if np.ndim(tol) else [c[0] for c in counts]
