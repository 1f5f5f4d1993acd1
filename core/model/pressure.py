"""Wind and force fields on the cloth's triangles as Blender's Cloth applies them
(SIM_mass_spring_force_face_wind and _face_extern), from a step's start state: the force itself
and its derivatives by that start and by the wind. Per vertex, the fields give a pressing vector
rᵢ (the scene's uniform wind relative to the vertex, w − κ·vᵢ, plus the Wind-Factor share of
core.Effector fields) and a pushing vector eᵢ (the rest of the fields), both in m/s. A triangle
with c = ½·(x_b − x_a)×(x_c − x_a) = A·n̂ presses with pᵢ = rᵢ·n̂ and pushes with eᵢ:

    fᵢ = PRESSURE·A/12·((p_a + p_b + p_c + pᵢ)·n̂ + (e_a + e_b + e_c + eᵢ)),

(a third each where the corners agree), so a cloth edge-on to the wind feels no wind, and one
moving with it neither. With sᵢ = rᵢ·c = A·pᵢ and t = (s + Σs)/4, the pressing part is
PRESSURE/3·tᵢ·c/|c|. What feels it: the cloth (core.terms.effectors) and friction's normal force
at a contact's first steps, which holds against it as against gravity (core.contact.penalty).
"""

import numpy as np

from ..numerics.scatter import scatter_add
from .effectors import field_vectors
from .frames import field_frame

# Blender's 0.02 (kg per m² and internal time unit) in SI: its time unit is 1/√1000 s when its
# cloth runs in seconds (time_scale = √1000/fps, docs/benchmarks.md), so 0.02·√1000 kg/(m²·s)
PRESSURE = 0.02 * np.sqrt(1000.0)


def _shared(s):
    """Blender's sharing of a triangle's per-corner quantities among its corners, (s + Σs)/4
    (symmetric), along axis 1."""
    return 0.25 * (s + s.sum(axis=1, keepdims=True))


def _apply(jac, a):
    """J·a per vertex (n,3,3)·(n,3)."""
    return np.einsum("nab,nb->na", jac, a)


def _apply_t(jac, a):
    """Jᵀ·a per vertex."""
    return np.einsum("nab,na->nb", jac, a)


def _scattered(n, tris, per_corner):
    """Per-corner vectors (T,3,3) summed at the vertices (n,3)."""
    out = np.zeros((n, 3))
    scatter_add(out, tris, per_corner)
    return out


class FaceForces:
    """The fields' force on every vertex (`force`, n×3) at a step's start x, v (integrator step s),
    its per-corner quantities: c (T,3), |c|, the pressing vectors r and pushing vectors e per
    corner (T,3,3), the shared t, half the edge opposite each corner (∂c/∂x_k·δ = δ × it), and the
    vertices' Jacobians of r and e by x and v (`jac`, when a gradient pass first asks: a forward
    run needs none). wind: the scene's uniform wind during the step (3,), or None; drag its κ."""

    def __init__(self, x, v, tris, wind, effectors=(), s=0, substeps=1, drag=1.0):
        self.n = n = len(x)
        self.tris, self.s, self.substeps, self.drag = tris, s, substeps, drag
        self._start = x, v, wind is not None, effectors
        self._jac = None
        a, b, c = (x[tris[:, k]] for k in range(3))
        self.c = 0.5 * np.cross(b - a, c - a)
        self.norm = np.maximum(np.linalg.norm(self.c, axis=1), 1e-300)
        r, e = np.zeros((n, 3)), np.zeros((n, 3))
        if wind is not None:
            r += wind - drag * v
        if effectors:
            wr, we = field_vectors(effectors, s, substeps, x, v, jacobians=False)
            r += wr
            e += we
        self.pushing = bool(effectors) and bool(np.any(e))
        self.r, self.e = r[tris], e[tris]
        self.t = _shared(np.einsum("tkj,tj->tk", self.r, self.c))
        self.opposite = 0.5 * np.stack([b - c, c - a, a - b], axis=1)
        self.scale = PRESSURE / (3 * self.norm)
        per_corner = (self.scale[:, None] * self.t)[:, :, None] * self.c[:, None, :]
        if self.pushing:
            per_corner += (PRESSURE / 3 * self.norm)[:, None, None] * _shared(self.e)
        self.force = _scattered(n, tris, per_corner)

    @property
    def jac(self):
        """dr/dx, dr/dv, de/dx, de/dv (4,n,3,3)."""
        if self._jac is None:
            x, v, wind, effectors = self._start
            self._jac = np.zeros((4, self.n, 3, 3))
            if wind:
                self._jac[1] -= self.drag * np.eye(3)
            if effectors:
                self._jac += np.array(field_vectors(effectors, self.s, self.substeps, x, v)[2:])
        return self._jac

    def pullback(self, lam, out, out_v):
        """out += ∂(f·λ)/∂xₛ and out_v += ∂(f·λ)/∂vₛ for vectors λ (n,3) at the vertices: through
        c (the triangles' corners) and through each vertex's r and e (the fields' Jacobians)."""
        tris = self.tris
        lk = lam[tris]
        m = np.einsum("tkj,tj->tk", lk, self.c)
        mu = _shared(self.scale[:, None] * m)  # ∂(f·λ)/∂s
        grad_c = np.einsum("tk,tkj->tj", mu, self.r) + self.scale[:, None] * np.einsum("tk,tkj->tj", self.t, lk)
        grad_c -= (self.scale * np.sum(self.t * m, axis=1) / self.norm**2)[:, None] * self.c
        grad_r = _scattered(self.n, tris, mu[:, :, None] * self.c[:, None, :])
        grad_e = np.zeros_like(grad_r)
        if self.pushing:
            shared = _shared(lk)
            grad_c += (PRESSURE / 3 * np.einsum("tkj,tkj->t", self.e, shared) / self.norm)[:, None] * self.c
            grad_e = _scattered(self.n, tris, (PRESSURE / 3 * self.norm)[:, None, None] * shared)
        out += _scattered(self.n, tris, np.cross(self.opposite, grad_c[:, None, :]))
        out += _apply_t(self.jac[0], grad_r) + _apply_t(self.jac[2], grad_e)
        out_v += _apply_t(self.jac[1], grad_r) + _apply_t(self.jac[3], grad_e)

    def push(self, dxs, dvs):
        """(∂f/∂xₛ)·δxₛ + (∂f/∂vₛ)·δvₛ (n,3)."""
        tris = self.tris
        dc = np.sum(np.cross(dxs[tris], self.opposite), axis=1)
        dr = (_apply(self.jac[0], dxs) + _apply(self.jac[1], dvs))[tris]
        dt = _shared(np.einsum("tkj,tj->tk", self.r, dc) + np.einsum("tkj,tj->tk", dr, self.c))
        cdc = np.sum(self.c * dc, axis=1) / self.norm**2
        df = (self.scale[:, None] * (dt - self.t * cdc[:, None]))[:, :, None] * self.c[:, None, :]
        df += (self.scale[:, None] * self.t)[:, :, None] * dc[:, None, :]
        if self.pushing:
            de = (_apply(self.jac[2], dxs) + _apply(self.jac[3], dvs))[tris]
            dnorm = cdc * self.norm
            df += PRESSURE / 3 * (dnorm[:, None, None] * _shared(self.e) + self.norm[:, None, None] * _shared(de))
        return _scattered(self.n, tris, df)

    def wind_pullback(self, lam, out_wind):
        """out_wind (frames+1, 3) += ∂(f·λ)/∂(the scene's wind per frame) = Σ_T Σ_k μ_k·c (s_k =
        (w − κ·v_k)·c), at the frame Scene.wind_at reads; returns
        ∂(f·λ)/∂κ = −Σ_T Σ_k μ_k·(c·v_k)."""
        tris = self.tris
        mu = _shared(self.scale[:, None] * np.einsum("tkj,tj->tk", lam[tris], self.c))
        g = np.einsum("t,tj->j", mu.sum(axis=1), self.c)
        out_wind[field_frame(self.s, self.substeps)] += g
        return -float(np.einsum("tk,tkj,tj->", mu, self._start[1][tris], self.c))

    def wind_push(self, dwind, ddrag=0.0):
        """(∂f/∂wind)·δwind + (∂f/∂κ)·δκ (n,3) for a change δwind (frames+1, 3) of the scene's wind
        and δκ of its drag."""
        dr = dwind[field_frame(self.s, self.substeps)][None, :] - ddrag * self._start[1]
        dt = _shared(np.einsum("tkj,tj->tk", dr[self.tris], self.c))
        return _scattered(self.n, self.tris, (self.scale[:, None] * dt)[:, :, None] * self.c[:, None, :])
