"""Wind on the cloth's triangles as Blender's Cloth presses it (SIM_mass_spring_force_face_wind):
each corner's wind relative to it, along the triangle's normal, pᵢ = (w − vᵢ)·n̂, presses the
triangle with PRESSURE·A·p, shared as Blender shares it,

    fᵢ = PRESSURE·A/12·(p_a + p_b + p_c + pᵢ)·n̂   (a third each where the corners move alike),

so a cloth edge-on to the wind feels nothing, and a cloth moving with it neither. As Blender's,
it is explicit: taken from the step's start state x, v (StepLag.state), it enters the step's
energy as −fᵀy, and the gradient passes carry its derivatives by that start (add_lag_gradient,
add_lag_tangent). With c = ½·(x_b − x_a)×(x_c − x_a) = A·n̂ and sᵢ = (w − vᵢ)·c = A·pᵢ:
fᵢ = PRESSURE/3·tᵢ·c/|c| with t = (s + Σs)/4.
"""

import numpy as np

from ..model.scene import at_step, frame_weights
from .base import Term

# Blender's 0.02 (kg per m² and internal time unit) in SI: its time unit is 1/√1000 s when its
# cloth runs in seconds (time_scale = √1000/fps, docs/benchmarks.md), so 0.02·√1000 kg/(m²·s)
PRESSURE = 0.02 * np.sqrt(1000.0)


def _shared(s):
    """Blender's sharing of a triangle's pressures among its corners, (s + Σs)/4 (symmetric)."""
    return 0.25 * (s + s.sum(axis=1, keepdims=True))


class _Pressure:
    """The wind's per-corner quantities at a step's start: c (T,3), |c|, the relative wind r
    (T,3 corners,3), s = r·c, the shared t, the forces, and half the edge opposite each corner
    (∂c/∂x_k·δ = δ × it)."""

    def __init__(self, x, v, tris, wind):
        a, b, c = (x[tris[:, k]] for k in range(3))
        self.c = 0.5 * np.cross(b - a, c - a)
        self.norm = np.maximum(np.linalg.norm(self.c, axis=1), 1e-300)
        self.r = wind - v[tris]
        self.t = _shared(np.einsum("tkj,tj->tk", self.r, self.c))
        self.opposite = 0.5 * np.stack([b - c, c - a, a - b], axis=1)
        self.scale = PRESSURE / (3 * self.norm)
        self.force = np.zeros_like(x)
        np.add.at(self.force, tris, (self.scale[:, None] * self.t)[:, :, None] * self.c[:, None, :])


class WindPressure(Term):
    fields = ("wind",)

    def __init__(self, pot):
        self.scene, self.tris = pot.scene, pot.scene.cloth.tris

    @classmethod
    def build(cls, pot):
        return [] if pot.scene.wind is None else [cls(pot)]

    def at(self, p):
        x, v = p.lag.state
        return p.y, _Pressure(x, v, self.tris, self.scene.wind_at(p.s)), p.s

    def energy(self, q):
        y, w, _ = q
        return -float(np.sum(w.force * y))

    def add_gradient(self, q, out):
        out -= q[1].force

    def design_gradient(self, q, lam, out):
        """∂(∇Φ·λ)/∂wind = −Σ_T Σ_k μ_k·c (s_k = (w − v_k)·c), shared between the step's frames."""
        w, s = q[1], q[2]
        m = np.einsum("tkj,tj->tk", lam[self.tris], w.c)
        g = -np.einsum("t,tj->j", _shared(w.scale[:, None] * m).sum(axis=1), w.c)
        for frame, weight in frame_weights(s, self.scene.substeps):  # as Scene.wind_at reads it
            out["wind"][frame] += weight * g

    def design_tangent(self, q, dp, out):
        w, s = q[1], q[2]
        dwind = at_step(dp["wind"], s, self.scene.substeps)
        dt = _shared(np.broadcast_to(w.c @ dwind, (3, len(w.c))).T)
        np.subtract.at(out, self.tris, (w.scale[:, None] * dt)[:, :, None] * w.c[:, None, :])

    def add_lag_gradient(self, q, lam, out, out_v):
        """−∂(f·λ)/∂xₛ and −∂(f·λ)/∂vₛ, with f·λ = Σ_k PRESSURE/3·t_k·(c·λ_k)/|c|."""
        w, tris = q[1], self.tris
        lk = lam[tris]
        m = np.einsum("tkj,tj->tk", lk, w.c)
        mu = _shared(w.scale[:, None] * m)  # ∂(f·λ)/∂s
        grad_c = np.einsum("tk,tkj->tj", mu, w.r) + w.scale[:, None] * np.einsum("tk,tkj->tj", w.t, lk)
        grad_c -= (w.scale * np.sum(w.t * m, axis=1) / w.norm**2)[:, None] * w.c
        np.subtract.at(out, tris, np.cross(w.opposite, grad_c[:, None, :]))
        np.add.at(out_v, tris, mu[:, :, None] * w.c[:, None, :])  # s_k = (w − v_k)·c

    def add_lag_tangent(self, q, dxs, dvs, out):
        """−(∂f/∂xₛ)·δxₛ − (∂f/∂vₛ)·δvₛ."""
        w, tris = q[1], self.tris
        dc = np.sum(np.cross(dxs[tris], w.opposite), axis=1)
        dt = _shared(np.einsum("tkj,tj->tk", w.r, dc) - np.einsum("tkj,tj->tk", dvs[tris], w.c))
        cdc = np.sum(w.c * dc, axis=1) / w.norm**2
        df = (w.scale[:, None] * (dt - w.t * cdc[:, None]))[:, :, None] * w.c[:, None, :]
        df += (w.scale[:, None] * w.t)[:, :, None] * dc[:, None, :]
        np.subtract.at(out, tris, df)
