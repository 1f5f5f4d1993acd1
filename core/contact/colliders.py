"""Colliders: sphere, plane and triangle mesh, static or with one pose per frame.

Every collider answers the same question for the contact term (core.contact.penalty.Contact): for cloth
vertices x at a time, the signed distance d, its gradient n (unit) and the derivative of n. The
sphere and the plane answer exactly. A mesh answers per integrator step: at the step's start it
finds each nearby vertex's closest point on the surface (face, edge or vertex region; a compiled
grid search, core.contact.compiled) and within the step the vertex is kept on its side of that
point's tangent plane (`begin_step`, a `Planes` lag). A vertex that starts a step above a thin
board is held above the board's top face for the whole step, however far the step would take it:
nothing tunnels. Friction (μ per collider) and thickness (None: the scene's) belong to every
kind.
"""

import numpy as np

from ..model.mesh import face_normals
from .compiled import closest_points


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
        self._normals_of = None  # (pose array or None if static, its face normals): _face_normals

    def n_poses(self):
        return 1 if self.vertices.ndim == 2 else len(self.vertices)

    def frozen(self, t):
        """This mesh held still as it is at time t."""
        return MeshCollider(self.at(t), self.tris, self.thickness, self.friction, self.one_sided)

    def at(self, t):
        return _at(self.vertices, t, static_ndim=2)

    def surface(self, t, centre, reach):
        return self.at(t), self.tris

    def _face_normals(self, verts):
        """The unit face normals (T,3) of pose verts: computed once for a static mesh; for a moving
        one, kept for the pose array they were last computed for (a step's search and its normals
        ask of the same pose)."""
        if self.vertices.ndim == 2:
            verts = None
        known = self._normals_of
        if known is None or known[0] is not verts:
            known = self._normals_of = (verts, face_normals(self.vertices if verts is None else verts, self.tris)[0])
        return known[1]

    def closest(self, x, verts, radius=None):
        """For points x (N,3) and per-point search radii: which have a surface point within their
        radius (mask), and for those their closest point q, triangle and its barycentric weights
        (per point the nearest; at a shared edge or corner, the lower triangle). radius None:
        every point's closest point. Compiled (core.contact.compiled): a uniform grid of the
        triangles, searched outward from each point."""
        tri, q, bary = closest_points(x, radius, verts, self.tris)
        mask = tri >= 0
        return mask, q[mask], tri[mask], bary[mask]

    def _normals(self, verts):
        """The unit face normals (T,3) (the broad phase's) and the pseudonormals of vertices and
        edges where asked (_Pseudonormals): a contact's side needs only its own feature's."""
        return _Pseudonormals(self, verts, self._face_normals(verts))

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


# m: how much farther than the thickness and the step's motion a mesh's planes reach
SEARCH_MARGIN = 0.01
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
