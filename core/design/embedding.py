"""A render mesh carried by a simulation mesh (a proxy), as Blender's Surface Deform carries it.

Built once at rest: each render vertex p is bound to its closest proxy triangle (a, b, c) by the
closest point's barycentric weights w and its offset o along the triangle's unit normal,
p = w·(a, b, c) + o·n. Applied to proxy positions x, each render vertex follows its triangle:
rigid motions and folds of the proxy carry the render mesh exactly, and the Jacobian is exact
(the normal's derivative included), so a loss on render vertices has exact gradients through a
proxy's simulation (`apply_transpose`).
"""

import numpy as np
import scipy.sparse as sp
from scipy.spatial import cKDTree

from ..contact.colliders import MeshCollider
from ..model.mesh import face_normals
from ..numerics.scatter import scatter_add


class Embedding:
    """render (R,3) rest positions bound to the proxy's rest mesh (verts (P,3), triangles (T,3))."""

    def __init__(self, render, proxy_verts, proxy_tris):
        render = np.asarray(render, dtype=np.float64)
        proxy_verts = np.asarray(proxy_verts, dtype=np.float64)
        self.tris = np.asarray(proxy_tris, dtype=np.int64).reshape(-1, 3)
        self.n_proxy, self.n_render = len(proxy_verts), len(render)
        mask, q, tri, bary = MeshCollider(proxy_verts, self.tris).closest(render, proxy_verts)
        assert mask.all()
        self.face, self.bary = tri, bary
        normal, _ = face_normals(proxy_verts, self.tris)
        self.offset = np.einsum("ij,ij->i", render - q, normal[tri])
        # the in-surface part as a sparse (R, P) weight matrix: apply is one product per axis
        rows = np.repeat(np.arange(self.n_render), 3)
        self.weights = sp.csr_matrix(
            (bary.ravel(), (rows, self.tris[tri].ravel())), shape=(self.n_render, self.n_proxy)
        )
        self.distance = np.linalg.norm(render - q, axis=1)  # how far each render vertex is from the proxy

    @classmethod
    def joined(cls, embeddings):
        """Several cloths' embeddings as one (core.Joined): their render vertices in turn, bound to
        their proxies in turn."""
        out = cls.__new__(cls)
        proxies = np.cumsum([0] + [e.n_proxy for e in embeddings])
        faces = np.cumsum([0] + [len(e.tris) for e in embeddings])
        out.tris = np.concatenate([e.tris + o for e, o in zip(embeddings, proxies)])
        out.face = np.concatenate([e.face + o for e, o in zip(embeddings, faces)])
        out.n_proxy, out.n_render = int(proxies[-1]), sum(e.n_render for e in embeddings)
        for key in ("bary", "offset", "distance"):
            setattr(out, key, np.concatenate([getattr(e, key) for e in embeddings]))
        out.weights = sp.block_diag([e.weights for e in embeddings], format="csr")
        return out

    def apply(self, x):
        """Render positions (R,3) for proxy positions x (P,3) (or (K,P,3) → (K,R,3))."""
        x = np.asarray(x)
        if x.ndim == 3:
            return np.stack([self.apply(xk) for xk in x])
        normal, _ = face_normals(x, self.tris)
        return self.weights @ x + self.offset[:, None] * normal[self.face]

    def apply_transpose(self, x, g):
        """Jᵀ·g: the gradient by proxy positions (P,3) of a function whose gradient by the render
        positions (R,3) at apply(x) is g. The normal n = c/|c|, c = (b − a) × (c − a), changes
        with each corner: dn = (I − nnᵀ)·dc/|c|."""
        out = self.weights.T @ g
        normal, length = face_normals(x, self.tris)
        # per render vertex: o·gᵀ·dn, gathered per triangle
        t = np.zeros((len(self.tris), 3))
        scatter_add(t, self.face, self.offset[:, None] * g)
        t = (t - np.einsum("ij,ij->i", t, normal)[:, None] * normal) / length[:, None]  # (I − nnᵀ)ᵀ·t / |c|
        a, b, c = (x[self.tris[:, k]] for k in range(3))
        # c = (b − a) × (c − a): ∂(t·c)/∂b = (c − a) × t, ∂/∂c = t × (b − a), ∂/∂a = −(both)
        db, dc = np.cross(c - a, t), np.cross(t, b - a)
        scatter_add(out, self.tris[:, 1], db)
        scatter_add(out, self.tris[:, 2], dc)
        scatter_add(out, self.tris[:, 0], -(db + dc))
        return out

    def apply_tangent(self, x, dx):
        """J·dx: how the render positions move (R,3) when the proxy moves by dx (P,3) at x."""
        normal, length = face_normals(x, self.tris)
        a, b, c = (x[self.tris[:, k]] for k in range(3))
        da, db, dc = (dx[self.tris[:, k]] for k in range(3))
        dcross = np.cross(db - da, c - a) + np.cross(b - a, dc - da)
        dn = (dcross - np.einsum("ij,ij->i", dcross, normal)[:, None] * normal) / length[:, None]
        return self.weights @ dx + self.offset[:, None] * dn[self.face]

    def interpolate(self, field):
        """A per-vertex field of the proxy (…, P, 3), e.g. velocities or accelerations, at the
        render vertices (…, R, 3): the barycentric weights, no offset (a field, not a position)."""
        field = np.asarray(field, dtype=np.float64)
        flat = np.moveaxis(field, -2, 0).reshape(self.n_proxy, -1)
        return np.moveaxis((self.weights @ flat).reshape((self.n_render,) + field.shape[:-2] + (3,)), 0, -2)

    def carry(self, proxy_base, proxy_design, render_scene):
        """render_scene (the render mesh's own scene: same frames and colliders) with the design
        found on the proxy (proxy_design; proxy_base: the scene the proxy started from) carried
        over: initial velocities and control accelerations interpolated at the render vertices
        (forces = the render vertices' masses × those), each render pin moved by the offset of the
        proxy pin nearest it at rest, stiffness scaled as the proxy's was, the colliders' friction
        as found. Refine starts from this: the render mesh simulated with it moves as the embedded
        proxy did, but for the detail the proxy's resolution leaves out."""
        changes = {"v0": self.interpolate(proxy_design.v0), "colliders": proxy_design.colliders}
        cloth = render_scene.cloth
        pieces, render_pieces = _pieces(proxy_base), _pieces(render_scene)  # the cloths of joined scenes
        for key in ("k_tension", "k_bending"):
            ratio = getattr(proxy_design.cloth, key) / getattr(proxy_base.cloth, key)
            k = getattr(cloth, key).copy()
            of, render_of = pieces[proxy_base.cloth.first_vertices(key)], render_pieces[cloth.first_vertices(key)]
            for c in np.unique(of):  # each cloth's springs scaled as its proxy's were
                own = ratio[of == c]
                if np.ptp(own) > 1e-9 * np.abs(own).max():
                    raise ValueError(f"the proxy's {key} varies per element, which does not carry to the render mesh")
                k[render_of == c] *= own[0]
            cloth = cloth.replace(**{key: k})
        changes["cloth"] = cloth
        if proxy_design.forces is not None:
            accel = proxy_design.forces / proxy_design.cloth.masses[None, :, None]
            changes["forces"] = cloth.masses[None, :, None] * self.interpolate(accel)
        pinned, render_pinned = proxy_base.cloth.pinned, cloth.pinned
        if proxy_design.pin_path is not None and len(pinned) and len(render_pinned):
            offset = proxy_design.pin_path - proxy_base.pin_frames
            path = render_scene.pin_frames.copy()
            for c in np.unique(render_pieces[render_pinned]):  # the nearest proxy pin of the same cloth
                mine, theirs = np.flatnonzero(render_pieces[render_pinned] == c), np.flatnonzero(pieces[pinned] == c)
                if len(theirs):
                    nearest = cKDTree(proxy_base.x0[pinned[theirs]]).query(render_scene.x0[render_pinned[mine]])[1]
                    path[:, mine] += offset[:, theirs[nearest]]
            changes["pin_path"] = path
        return render_scene.replace(**changes)


class EmbeddedLoss:
    """A keyframe loss on the render mesh of an embedding, as a loss on the proxy's states: the
    proxy's frames are carried to the render mesh (Embedding.apply) and the loss's gradient comes
    back through Jᵀ (exact). Position targets only (a render velocity would need the Jacobian's
    own derivative). Gauss–Newton's Hessian products use Jᵀ·H·J, its usual approximation."""

    def __init__(self, loss, embedding):
        if loss.velocity_targets:
            raise ValueError("a loss on an embedded render mesh takes position targets only")
        self.loss, self.embedding = loss, embedding
        self.targets, self.velocity_targets = loss.targets, {}

    def check(self, n, frames):
        if n != self.embedding.n_proxy:
            raise ValueError(
                f"the embedding is bound to a proxy of {self.embedding.n_proxy} vertices, the cloth has {n}"
            )
        self.loss.check(self.embedding.n_render, frames)

    def _render(self, x):
        return self.embedding.apply(x)

    def evaluate(self, x, v):
        self.check(x.shape[1], x.shape[0] - 1)
        value, gx, _ = self.loss.evaluate(self._render(x), np.zeros((len(x), self.embedding.n_render, 3)))
        out = np.zeros_like(x)
        for f in self.targets:
            out[f] = self.embedding.apply_transpose(x[f], gx[f])
        return value, out, np.zeros_like(v)

    def at_frame(self, frame, x, v):
        if frame not in self.targets:
            return 0.0
        return self.loss.at_frame(frame, self.embedding.apply(x), np.zeros((self.embedding.n_render, 3)))

    def hess_vec(self, dx, dv, x):
        """Jᵀ·H·J times a change (dx, dv) of the proxy's frame states, J at the frame states x."""
        out = np.zeros_like(dx)
        render = np.zeros((len(dx), self.embedding.n_render, 3))
        for f in self.targets:
            render[f] = self.embedding.apply_tangent(x[f], dx[f])
        hx, _ = self.loss.hess_vec(render, np.zeros_like(render))
        for f in self.targets:
            out[f] = self.embedding.apply_transpose(x[f], hx[f])
        return out, np.zeros_like(dv)

    def distances(self, x):
        return self.loss.distances(self._render(x))

    def __call__(self, traj):
        return self.evaluate(traj.x, traj.v)[0]


def _pieces(scene):
    """Each vertex's cloth in a joined scene (core.Joined), all 0 in a scene of one cloth."""
    return np.zeros(scene.cloth.n, np.int64) if scene.self_pieces is None else scene.self_pieces
