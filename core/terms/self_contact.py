"""Contact between the cloth's layers: the penalty of the step's own planes
(core.contact.self_contact.SelfContact)."""

import numpy as np

from ..contact.self_contact import SelfPenalty
from .base import Term


class SelfContact(Term):
    """The cloth's vertices held off its own triangles (Self Collisions: the scene's self distance)."""

    refits = True
    fields = ("contact_stiffness",)

    def __init__(self, pot):
        sc = pot.scene
        self.stiffness, self.distance, self.smoothing = pot.contact_k, sc.self_distance, sc.contact_smoothing
        self.contact_stiffness = sc.contact_stiffness

    @classmethod
    def build(cls, pot):
        return [cls(pot)] if pot.scene.self_distance > 0 else []

    def at(self, p):
        lag = p.lag
        if lag is None or lag.cloth is None or not len(lag.cloth.p):
            return None
        return SelfPenalty(lag.cloth, p.y, self.stiffness, self.distance, self.smoothing)

    def energy(self, q):
        return 0.0 if q is None else q.energy

    def add_gradient(self, q, out):
        if q is not None:
            q.add_gradient(out)

    def hessian(self, q, acc, mode):  # E″·nnᵀ per pair: positive semidefinite as it is
        if q is not None and len(q):
            acc.add_pairs(q.stencil, q.triangle, q.e2[:, None, None] * q.n[:, :, None] * q.n[:, None, :])

    def add_hess_vec(self, q, v, out):
        if q is not None:
            q.add_hess_vec(out, v)

    def add_lag_gradient(self, q, v, out, out_v, out_u):
        if q is not None:
            q.add_lag_gradient(out, v)

    def add_lag_tangent(self, q, dxs, dvs, dus, out):
        if q is not None:
            q.add_lag_tangent(out, dxs)

    def design_gradient(self, q, v, out):
        """The self penalty's stiffness is the contact stiffness."""
        if q is not None:
            grad = np.zeros_like(v)
            q.add_gradient(grad)
            out["contact_stiffness"] += float(np.sum(v * grad)) / self.contact_stiffness

    def design_tangent(self, q, dp, out):
        if q is not None and dp["contact_stiffness"]:
            grad = np.zeros_like(out)
            q.add_gradient(grad)
            out += grad * (dp["contact_stiffness"] / self.contact_stiffness)
