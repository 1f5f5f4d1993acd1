"""Lagged smooth Coulomb friction with the colliders and between the cloth's layers
(core.contact.penalty.Friction: a potential within one step).

Its exact Hessian has no curvature along a sliding contact's slip (the energy grows as μλ|w|
there) and 2μλ/ε at rest, so where the step's solution sticks, Newton from a sliding start
overshoots the stick (a cone's tip, ε = 40 µm across at 24 fps) back and forth while its line
search halves the step. After a step that backtracked, Newton's matrix takes the majorizer's
curvature μλφ(s)·P instead (HessianMode.majorized; φ = f₀′(s)/s, the same in every tangent
direction): the friction energy lies below that quadratic model for any step, so friction cannot
make the next one overshoot (the bound behind iteratively reweighted least squares).
"""

import numpy as np

from .base import Term


class CoulombFriction(Term):
    """Every friction contact of a step: per collider with friction, and the cloth's own pairs
    (Self Friction), each a Friction the step's StepLag made at its start."""

    refits = True
    fields = ("friction", "self_friction", "contact_stiffness", "wind", "wind_drag")

    def __init__(self, pot):
        self.contact_stiffness = pot.scene.contact_stiffness
        self.windy = pot.scene.wind is not None  # the normal force holds against it (StepLag)

    @classmethod
    def build(cls, pot):
        sc = pot.scene
        rubs = any(c.friction > 0 for c in sc.colliders) or (sc.self_distance > 0 and sc.self_friction > 0)
        return [cls(pot)] if rubs else []

    def at(self, p):
        """Per Friction of the step: (its collider's index, None the cloth's own; its terms at y)."""
        return [] if p.lag is None else [(c, f.at(p.y)) for c, f in p.lag.frictions()]

    def energy(self, q):
        return sum(fs.energy for _, fs in q)

    def add_gradient(self, q, out):
        for _, fs in q:
            fs.add_gradient(out)

    def hessian(self, q, acc, mode):  # positive semidefinite as it is
        for col, fs in q:
            hess = fs.majorizer() if mode.majorized else fs.hess
            if col is None:
                acc.add_pairs(fs.f.stencil, fs.f.triangle, hess)
            else:
                acc.add_diagonal(fs.f.stencil[:, 0], hess)

    def add_hess_vec(self, q, v, out):
        for _, fs in q:
            fs.add_hess_vec(out, v)

    def add_lag_gradient(self, q, v, out, out_v, out_u):
        for _, fs in q:
            fs.add_lag_gradient(out, out_v, out_u, v)

    def add_lag_tangent(self, q, dxs, dvs, dus, out):
        for _, fs in q:
            fs.add_lag_tangent(out, dxs, dvs, dus)

    def design_gradient(self, q, v, out):
        """Linear in μ and in λ, whose share `stiff` is the penalty's, linear in the contact stiffness."""
        for col, fs in q:
            per = np.einsum("ai,ai->a", fs.f.combine(v), fs.grad)
            part = float(per.sum())
            out["contact_stiffness"] += float(per @ fs.f.stiff) / self.contact_stiffness
            if col is None:
                out["self_friction"] += part / fs.f.mu
            else:
                out["friction"][col] += part / fs.f.mu
            if self.windy and fs.f.fields is not None:
                out["wind_drag"] += fs.add_wind_gradient(v, out["wind"])

    def design_tangent(self, q, dp, out):
        for col, fs in q:
            dmu = dp["self_friction"] if col is None else dp["friction"][col]
            rate = dp["contact_stiffness"] / self.contact_stiffness * fs.f.stiff + dmu / fs.f.mu
            if rate.any():
                fs.f.spread(out, fs.grad * rate[:, None])
            if self.windy and fs.f.fields is not None and (dp["wind"].any() or dp["wind_drag"]):
                fs.add_wind_tangent(dp["wind"], dp["wind_drag"], out)
