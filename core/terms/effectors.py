"""Wind and force fields on the cloth's triangles as Blender's Cloth applies them
(SIM_mass_spring_force_face_wind and _face_extern). Per vertex, the fields give a pressing vector
rᵢ (the scene's uniform wind relative to the vertex, w − vᵢ, plus the Wind-Factor share of
core.Effector fields) and a pushing vector eᵢ (the rest of the fields), both in m/s. A triangle
with c = ½·(x_b − x_a)×(x_c − x_a) = A·n̂ presses with pᵢ = rᵢ·n̂ and pushes with eᵢ:

    fᵢ = PRESSURE·A/12·((p_a + p_b + p_c + pᵢ)·n̂ + (e_a + e_b + e_c + eᵢ)),

(a third each where the corners agree), so a cloth edge-on to the wind feels no wind, and one
moving with it neither. As Blender's, it is explicit: taken from the step's start state x, v
(StepLag.state), it enters the step's energy as −fᵀy, and the gradient passes carry its
derivatives by that start (add_lag_gradient, add_lag_tangent) through the fields' own
(core.model.effectors.field_vectors). With sᵢ = rᵢ·c = A·pᵢ and t = (s + Σs)/4, the pressing
part is PRESSURE/3·tᵢ·c/|c|.
"""

import numpy as np

from ..model.effectors import field_vectors
from ..model.frames import at_step, frame_weights
from ..numerics.scatter import scatter_add
from .base import Term

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


class _Fields:
    """The fields' per-corner quantities at a step's start: c (T,3), |c|, the pressing vectors r
    and pushing vectors e per corner (T,3,3), the shared t, the forces, half the edge opposite
    each corner (∂c/∂x_k·δ = δ × it), and the vertices' Jacobians of r and e by x and v (`jac`,
    when a gradient pass first asks: a forward run needs none)."""

    def __init__(self, x, v, tris, wind, effectors=(), s=0, substeps=1):
        n = len(x)
        self._start = x, v, wind is not None, effectors, s, substeps
        self._jac = None
        a, b, c = (x[tris[:, k]] for k in range(3))
        self.c = 0.5 * np.cross(b - a, c - a)
        self.norm = np.maximum(np.linalg.norm(self.c, axis=1), 1e-300)
        r, e = np.zeros((n, 3)), np.zeros((n, 3))
        if wind is not None:
            r += wind - v
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
        self.force = np.zeros_like(x)
        scatter_add(self.force, tris, per_corner)

    @property
    def jac(self):
        """dr/dx, dr/dv, de/dx, de/dv (4,n,3,3)."""
        if self._jac is None:
            x, v, wind, effectors, s, substeps = self._start
            self._jac = np.zeros((4, len(x), 3, 3))
            if wind:
                self._jac[1] -= np.eye(3)
            if effectors:
                self._jac += np.array(field_vectors(effectors, s, substeps, x, v)[2:])
        return self._jac


class FieldForces(Term):
    fields = ("wind",)

    def __init__(self, pot):
        self.scene, self.tris = pot.scene, pot.scene.cloth.tris

    @classmethod
    def build(cls, pot):
        return [] if pot.scene.wind is None and not pot.scene.effectors else [cls(pot)]

    def at(self, p):
        lag, sc = p.lag, self.scene
        if lag.fields is None:  # from the step's start alone: once for all its Newton iterations
            wind = None if sc.wind is None else sc.wind_at(p.s)
            lag.fields = _Fields(*lag.state, self.tris, wind, sc.effectors, p.s, sc.substeps)
        return p.y, lag.fields, p.s

    def energy(self, q):
        y, w, _ = q
        return -float(np.sum(w.force * y))

    def add_gradient(self, q, out):
        out -= q[1].force

    def design_gradient(self, q, lam, out):
        """∂(∇Φ·λ)/∂wind = −Σ_T Σ_k μ_k·c (s_k = (w − v_k)·c), shared between the step's frames."""
        if self.scene.wind is None:
            return
        w, s = q[1], q[2]
        m = np.einsum("tkj,tj->tk", lam[self.tris], w.c)
        g = -np.einsum("t,tj->j", _shared(w.scale[:, None] * m).sum(axis=1), w.c)
        for frame, weight in frame_weights(s, self.scene.substeps):  # as Scene.wind_at reads it
            out["wind"][frame] += weight * g

    def design_tangent(self, q, dp, out):
        if self.scene.wind is None:
            return
        w, s = q[1], q[2]
        dwind = at_step(dp["wind"], s, self.scene.substeps)
        dt = _shared(np.broadcast_to(w.c @ dwind, (3, len(w.c))).T)
        scatter_add(out, self.tris, -((w.scale[:, None] * dt)[:, :, None] * w.c[:, None, :]))

    def add_lag_gradient(self, q, lam, out, out_v, out_u):
        """−∂(f·λ)/∂xₛ and −∂(f·λ)/∂vₛ: through c (the triangles' corners) and through each
        vertex's r and e (the fields' Jacobians)."""
        w, tris = q[1], self.tris
        lk = lam[tris]
        m = np.einsum("tkj,tj->tk", lk, w.c)
        mu = _shared(w.scale[:, None] * m)  # ∂(f·λ)/∂s
        grad_c = np.einsum("tk,tkj->tj", mu, w.r) + w.scale[:, None] * np.einsum("tk,tkj->tj", w.t, lk)
        grad_c -= (w.scale * np.sum(w.t * m, axis=1) / w.norm**2)[:, None] * w.c
        grad_r, grad_e = np.zeros_like(out), np.zeros_like(out)
        scatter_add(grad_r, tris, mu[:, :, None] * w.c[:, None, :])
        if w.pushing:
            shared = _shared(lk)
            grad_c += (PRESSURE / 3 * np.einsum("tkj,tkj->t", w.e, shared) / w.norm)[:, None] * w.c
            scatter_add(grad_e, tris, (PRESSURE / 3 * w.norm)[:, None, None] * shared)
        scatter_add(out, tris, -np.cross(w.opposite, grad_c[:, None, :]))
        out -= _apply_t(w.jac[0], grad_r) + _apply_t(w.jac[2], grad_e)
        out_v -= _apply_t(w.jac[1], grad_r) + _apply_t(w.jac[3], grad_e)

    def add_lag_tangent(self, q, dxs, dvs, dus, out):
        """−(∂f/∂xₛ)·δxₛ − (∂f/∂vₛ)·δvₛ."""
        w, tris = q[1], self.tris
        dc = np.sum(np.cross(dxs[tris], w.opposite), axis=1)
        dr = (_apply(w.jac[0], dxs) + _apply(w.jac[1], dvs))[tris]
        dt = _shared(np.einsum("tkj,tj->tk", w.r, dc) + np.einsum("tkj,tj->tk", dr, w.c))
        cdc = np.sum(w.c * dc, axis=1) / w.norm**2
        df = (w.scale[:, None] * (dt - w.t * cdc[:, None]))[:, :, None] * w.c[:, None, :]
        df += (w.scale[:, None] * w.t)[:, :, None] * dc[:, None, :]
        if w.pushing:
            de = (_apply(w.jac[2], dxs) + _apply(w.jac[3], dvs))[tris]
            dnorm = cdc * w.norm
            df += PRESSURE / 3 * (dnorm[:, None, None] * _shared(w.e) + w.norm[:, None, None] * _shared(de))
        scatter_add(out, tris, -df)
