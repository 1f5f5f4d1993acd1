"""Contact with the colliders: the penalty of core.contact.penalty.Contact at every vertex."""

import numpy as np

from ..contact.penalty import Contact
from ..numerics.scatter import scatter_add
from .base import Term


def _dot(a, b):
    return np.einsum("ai,ai->a", a, b)


class ColliderContact(Term):
    """Penalty contact of the cloth's vertices with every collider (spheres, planes, meshes: their
    distance queries), stiffness the scene's contact stiffness per unit mass."""

    fields = ("contact_stiffness",)

    def __init__(self, pot):
        self.scene, self.stiffness, self.free = pot.scene, pot.contact_k, pot.free
        # a linearized step that refits friction linearizes the penalty again where its first solve
        # went (StepLag.contact_at): linearized at the prediction alone, cloth resting in the
        # penalty's smoothing settles into a period-2 cycle of depth whose lagged normal forces
        # average 1.5 times its weight (docs/solver.md, Friction)
        self.refits = any(col.friction > 0 for col in pot.scene.colliders)

    @classmethod
    def build(cls, pot):
        return [cls(pot)] if pot.scene.colliders else []

    def at(self, p):
        t = (p.s + 1) / self.scene.substeps
        at = None if p.lag is None else p.lag.contact_at
        if at is None:
            return Contact(self.scene, p.y, t, self.stiffness, self.free, p.lag)
        return Contact(self.scene, at, t, self.stiffness, self.free, p.lag).recentred(p.y)

    def energy(self, c):
        return c.energy

    def add_gradient(self, c, out):
        scatter_add(out, c.active, c.grad)

    def hessian(self, c, acc, mode):
        if len(c.active):
            beta = mode.beta
            hess = (
                c.hess_psd if mode.projected else c.hess if beta == 1.0 else c.hess_psd + beta * (c.hess - c.hess_psd)
            )
            acc.add_diagonal(c.active, hess)

    def add_hess_vec(self, c, v, out):
        scatter_add(out, c.active, np.einsum("aij,aj->ai", c.hess, v[c.active]))

    def add_third(self, c, a, b, out):
        scatter_add(out, c.active, c.third(a[c.active], b[c.active]))

    def add_third_tangent(self, c, w, b, out):
        scatter_add(out, c.active, c.third_tangent(w[c.active], b[c.active]))

    def add_lag_gradient(self, c, v, out, out_v, out_u):
        scatter_add(out, c.active, c.lag_gradient(c.y, v[c.active]))

    def add_lag_tangent(self, c, dxs, dvs, dus, out):
        scatter_add(out, c.active, c.lag_tangent(c.y, dxs[c.active]))

    # E is linear in the stiffness: its derivative is E's terms over the stiffness
    def design_gradient(self, c, v, out):
        out["contact_stiffness"] += float(np.sum(v[c.active] * c.grad)) / self.scene.contact_stiffness

    def design_tangent(self, c, dp, out):
        if dp["contact_stiffness"]:
            scatter_add(out, c.active, c.grad * (dp["contact_stiffness"] / self.scene.contact_stiffness))

    def design_hess(self, c, a, b, out):
        hess = float(_dot(a[c.active], c.n) @ (c.e2 * _dot(b[c.active], c.n)))
        out["contact_stiffness"] += hess / self.scene.contact_stiffness

    def design_hess_tangent(self, c, dp, b, out):
        if len(c.active) and dp["contact_stiffness"]:
            bn = _dot(b[c.active], c.n)
            scatter_add(
                out, c.active, (c.e2 * bn * dp["contact_stiffness"] / self.scene.contact_stiffness)[:, None] * c.n
            )
