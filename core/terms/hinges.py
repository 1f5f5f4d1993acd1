"""Quadratic hinge bending (Bergou et al. 2006, Wardetzky et al. 2007)."""

import numpy as np
import scipy.sparse as sp

from ..model.mesh import hinge_weights
from ..numerics.scatter import scatter_add
from .base import Term

# a hinge's six vertex pairs, (i, j) with i < j in (x0, x1, x2, x3)
HINGE_PAIRS = np.array([(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)])


def _dot(a, b):
    return np.einsum("ij,ij->i", a, b)


class HingeBending(Term):
    """½·(k/A)·‖Σᵢ wᵢxᵢ‖² per hinge, with A the area of the hinge's two triangles and w its
    cotangent weights (core.model.mesh.hinge_weights).

    k is a bending rigidity (N·m): a cylinder of curvature κ bent out of a flat mesh of
    near-equilateral triangles stores ½·k·κ² per unit area at any resolution (Σ over the hinges
    of ‖Σwx‖²/A → κ²·area; Bergou's 3/A would triple it). On grids split along one diagonal the
    discrete energy is anisotropic: bending about either grid axis matches, curvature along the
    split diagonal costs 3×. The energy is quadratic in x, so its Hessian is constant:
    (k/A)·wwᵀ⊗I₃ per hinge. A linearized step's matrix may take a bound of it that couples only
    mesh edges (`bound`, Scene.hinges_bounded).
    """

    fields = ("k_bending",)

    def __init__(self, rest, hinges, k, n, pot=None, curved=None):
        w, area = hinge_weights(rest, hinges)
        self.hinges, self.w = hinges, w
        self.unit = 1.0 / area  # c/k
        if curved is not None:  # hinges bent at rest: c′ = c·cos²(θ̄/2) (core.terms.rest_angles)
            self.unit[curved[0]] *= curved[2]
        self.c = k * self.unit
        rows = np.repeat(np.arange(len(hinges)), 4)
        self.weights_t = sp.csr_matrix((w.ravel(), (hinges.ravel(), rows)), shape=(n, len(hinges)))
        self._hessian = None
        self.bound, self.constant = False, None
        if pot is not None:  # its constant matrix on the scene's system
            self.bound = pot.scene.hinges_bounded
            ends, kappa, at, diag = self.pair_couplings(self.bound)
            self.constant = pot.system.isotropic(pot.fidx[ends], pot.hess_scale * kappa)
            free = pot.fidx[at] >= 0
            pot.system.add_diagonal(
                self.constant, pot.fidx[at][free], pot.hess_scale * diag[free, None, None] * np.eye(3)
            )

    @classmethod
    def build(cls, pot):
        cloth = pot.scene.cloth
        if cloth.bending != "hinge":
            return []
        return [cls(cloth.rest, cloth.hinges, cloth.k_bending, cloth.n, pot, cloth.curved_hinges)]

    def bend(self, y):
        """Σᵢ wᵢyᵢ = Σᵢ wᵢ(yᵢ − y₀) per hinge (H,3): from the edge vectors, whose rounding scales
        with the mesh's cells, not with the positions' distance from the origin."""
        d = y[self.hinges[:, 1:]] - y[self.hinges[:, :1]]
        return np.einsum("hi,hij->hj", self.w[:, 1:], d)

    def at(self, p):
        return self.bend(p.y)

    def energy(self, b):
        return 0.5 * float(np.dot(self.c, _dot(b, b)))

    def gradient(self, b):
        return self.weights_t @ (self.c[:, None] * b)

    def add_gradient(self, b, out):
        out += self.gradient(b)

    def hessian(self, b, acc, mode):
        acc.data += self.constant

    def hess_vec(self, v):
        """∇²Φ·v by the constant Hessian, assembled on first use: passes apply it at every step,
        where the gather through the hinges cost 6× the sparse product."""
        if self._hessian is None:
            self._hessian = (self.weights_t @ sp.diags(self.c) @ self.weights_t.T).tocsr()
        return self._hessian @ v

    def add_hess_vec(self, b, v, out):
        out += self.hess_vec(v)

    def dk(self, b, v):
        """∂(∇Φ·v)/∂k per hinge: ∇Φ is linear in each k."""
        return self.unit * _dot(b, self.bend(v))

    def design_gradient(self, b, v, out):
        out["k_bending"] += self.dk(b, v)

    def design_tangent(self, b, dp, out):
        out += self.weights_t @ ((dp["k_bending"] * self.unit)[:, None] * b)

    def design_hess(self, b, x, y, out):
        out["k_bending"] += self.dk_bound(x, y) if self.bound else self.dk(self.bend(x), y)

    def design_hess_tangent(self, b, dp, y, out):
        if self.bound:
            out += self.dk_bound_tangent(dp["k_bending"], y)
        else:
            out += self.weights_t @ ((dp["k_bending"] * self.unit)[:, None] * self.bend(y))

    def pair_couplings(self, bound=False):
        """The constant Hessian as isotropic couplings κ·I₃ between each hinge's vertex pairs:
        ends (P,2) and κ (P,), plus isotropic diagonal terms at vertices (D,) with values (D,).
        With Σwᵢ = 0, c·wwᵀ = Σ_{i<j} −c·wᵢwⱼ·(eᵢ − eⱼ)(eᵢ − eⱼ)ᵀ, the Hessian pattern of a spring
        between xᵢ and xⱼ (no diagonal terms).

        bound: the coupling of the two vertices opposite the edge is replaced by an upper bound
        without it, κ₂₃(e₂ − e₃)(e₂ − e₃)ᵀ ≼ 2·max(κ₂₃, 0)·(e₂e₂ᵀ + e₃e₃ᵀ): a matrix that couples
        only mesh edges, whose band is half as wide (a grid's factorization 2.2× faster), and
        that is stiffer than the Hessian, as a linearized step's matrix may be."""
        pairs = HINGE_PAIRS[:5] if bound else HINGE_PAIRS
        ends = self.hinges[:, pairs].reshape(-1, 2)
        kappa = -self.c[:, None] * self.w[:, pairs[:, 0]] * self.w[:, pairs[:, 1]]
        if not bound:
            return ends, kappa.ravel(), np.zeros(0, np.int64), np.zeros(0)
        k23 = 2.0 * np.maximum(-self.c * self.w[:, 2] * self.w[:, 3], 0.0)
        return ends, kappa.ravel(), self.hinges[:, 2:].ravel(), np.repeat(k23, 2)

    def _opposite(self, a):
        return a[self.hinges[:, 2]], a[self.hinges[:, 3]]

    def dk_bound(self, a, b):
        """∂(aᵀ·B·b)/∂k per hinge, B the bounded matrix term (pair_couplings(bound=True))."""
        k23 = -self.unit * self.w[:, 2] * self.w[:, 3]
        (a2, a3), (b2, b3) = self._opposite(a), self._opposite(b)
        return (
            self.dk(self.bend(a), b)
            - k23 * _dot(a2 - a3, b2 - b3)
            + 2 * np.maximum(k23, 0.0) * (_dot(a2, b2) + _dot(a3, b3))
        )

    def dk_bound_tangent(self, dk, b):
        """(∂B/∂k·δk)·b (n,3)."""
        unit23 = -self.unit * self.w[:, 2] * self.w[:, 3]
        k23 = dk * unit23
        b2, b3 = self._opposite(b)
        out = self.weights_t @ ((dk * self.unit)[:, None] * self.bend(b))
        opp = (dk * np.maximum(unit23, 0.0))[:, None]
        scatter_add(out, self.hinges[:, 2], -k23[:, None] * (b2 - b3) + 2 * opp * b2)
        scatter_add(out, self.hinges[:, 3], k23[:, None] * (b2 - b3) + 2 * opp * b3)
        return out
