"""Bending about the rest mesh's own angles: what turns the quadratic hinge energy ½c‖b‖²
(core.terms.hinges, b = Σwᵢxᵢ) into ½c′‖b − β̄·m(x)‖² for a hinge bent at rest, with
m = N₁/(2Ā₁) + N₂/(2Ā₂), the cross products N of its two triangles over their rest double areas (quadratic in x; the sum of the unit normals while the triangles keep
their areas), β̄ from the rest (Σwᵢx̄ᵢ = β̄·m̄, core.model.mesh.hinge_rest_angles) and
c′ = c·cos²(θ̄/2) (HingeBending takes that c′). Folding the hinge isometrically by θ stores
2·c·|e|²·sin²((θ − θ̄)/2): the flat model's energy about the rest angle θ̄, zero with zero force at
rest, whatever the hinge's orientation (after Garg et al. 2007, Cubic Shells).

This term is the difference, R = c′·(½β̄²‖m‖² − β̄·b·m), cubic and quartic in x. With J = W − β̄M
(W = ∂b/∂x, M = ∂m/∂x) the hinge's Gauss–Newton matrix c′JᵀJ is positive semidefinite; this term's
share of it, H̃ = c′(JᵀJ − WᵀW), is a linearized step's matrix, bounded like the flat hinges' where
that matrix couples mesh edges only (Scene.hinges_bounded; `projected`); the exact Hessian adds
c′·Σₐgₐ∇²mₐ, g = β̄²m − β̄b. Every derivative
is a contraction with the constant second derivatives of the two cross products (NORMALS).
"""

import numpy as np
import scipy.sparse as sp

from ..model.mesh import hinge_weights
from ..numerics.scatter import scatter_add
from .base import Term


def _cross_tensor(p, q, r):
    """∂²N/∂x∂x (3,12,12) for N = (x_q − x_p)×(x_r − x_p) over a hinge's four vertices' 12 dofs:
    N is a homogeneous quadratic, so N(eᵢ + eⱼ) − N(eᵢ) − N(eⱼ) is its Hessian's (i, j) entry."""

    def cross(x):
        x = x.reshape(4, 3)
        return np.cross(x[q] - x[p], x[r] - x[p])

    eye = np.eye(12)
    out = np.zeros((3, 12, 12))
    for i in range(12):
        for j in range(12):
            out[:, i, j] = cross(eye[i] + eye[j]) - cross(eye[i]) - cross(eye[j])
    return out


# ψ's smoothing (per unit c′: the weights' scale is 1), so that the bound is differentiable
BOUND_EPS = 1e-9

# the triangles (x0, x1, x2) and (x1, x0, x3), whose normals agree on a flat hinge
NORMALS = (_cross_tensor(0, 1, 2), _cross_tensor(1, 0, 3))
# the same, stacked for products with both triangles' scaled vectors at once: u (24,) → M (36,)
# and g (6,) → Σₐgₐ∂²mₐ (144,)
ALONG = np.concatenate([T.transpose(2, 0, 1).reshape(12, 36) for T in NORMALS])
CONTRACT = np.concatenate([T.reshape(3, 144) for T in NORMALS])


class _State:
    """A point's per-hinge quantities (C hinges): dofs X (C,12), b, M = ∂m/∂x (C,3,12), m, J,
    g = β̄²m − β̄b, and the gradient per unit c′ (C,12)."""

    def __init__(self, term, y):
        self.X = y[term.hinges].reshape(-1, 12)
        self.b = np.einsum("hai,hi->ha", term.W, self.X)
        self.M = term.along(self.X)
        self.m = 0.5 * np.einsum("hai,hi->ha", self.M, self.X)
        beta = term.beta[:, None]
        self.J = term.W - beta[:, :, None] * self.M
        self.g = beta**2 * self.m - beta * self.b
        self.grad = np.einsum("hai,ha->hi", self.M, self.g) - beta * np.einsum("hai,ha->hi", term.W, self.m)


class RestAngles(Term):
    fields = ("k_bending",)

    def __init__(self, cloth, pot=None, bounded=False):
        idx, self.beta, cos2, self.scale = cloth.curved_hinges
        self.bounded = pot.scene.hinges_bounded if pot is not None else bounded
        w, area = hinge_weights(cloth.rest, cloth.hinges[idx])
        self.idx, self.hinges, self.n = idx, cloth.hinges[idx], cloth.n
        self.unit = cos2 / area  # c′/k, as HingeBending's
        self.k = cloth.k_bending[idx]
        self.W = np.einsum("hi,ab->haib", w, np.eye(3)).reshape(-1, 3, 12)
        self.WtW = np.einsum("hai,haj->hij", self.W, self.W)
        self.assemble = None if pot is None else self._assembler(pot)

    @classmethod
    def build(cls, pot):
        cloth = pot.scene.cloth
        return [] if cloth.curved_hinges is None else [cls(cloth, pot)]

    def _assembler(self, pot):
        """Sparse map from h²-scaled per-hinge 12×12 blocks to the system's storage."""
        free = pot.fidx[self.hinges]
        r, c = np.divmod(np.arange(9), 3)
        rows, cols = [], []
        for i in range(4):
            for j in range(4):
                if self.bounded and {i, j} == {2, 3}:  # a bounded matrix couples mesh edges only
                    continue
                ok = (free[:, i] >= 0) & (free[:, j] >= 0)
                rows.append(pot.system.slots(free[ok, i], free[ok, j]).ravel())
                h = np.flatnonzero(ok)[:, None]
                cols.append((h * 144 + (3 * i + r) * 12 + 3 * j + c).ravel())
        rows, cols = np.concatenate(rows), np.concatenate(cols)
        vals = np.full(len(rows), pot.hess_scale)
        return sp.csr_matrix((vals, (rows, cols)), shape=(pot.system.size, 144 * len(self.hinges)))

    def along(self, u):
        """Σₖ sₖ·∂²Nₖ·u (C,3,12): M at positions u, or ∂(M·u)/∂x: one matrix product for both
        triangles (einsum's contractions cost a 5.5k-vertex dress's step as much as its
        factorization)."""
        scaled = np.concatenate([self.scale[:, :1] * u, self.scale[:, 1:] * u], axis=1)
        return (scaled @ ALONG).reshape(-1, 3, 12)

    def contract(self, g):
        """Σₐ gₐ·∂²mₐ (C,12,12), likewise one product."""
        scaled = np.concatenate([self.scale[:, :1] * g, self.scale[:, 1:] * g], axis=1)
        return (scaled @ CONTRACT).reshape(-1, 12, 12)

    @property
    def c(self):
        return self.k * self.unit

    def at(self, p):
        return _State(self, p.y)

    def energy(self, q):
        return float(np.sum(self.c * self.beta * (0.5 * self.beta * _dot(q.m, q.m) - _dot(q.b, q.m))))

    def _scatter(self, per_hinge, out):
        scatter_add(out, self.hinges, per_hinge.reshape(-1, 4, 3))

    def _gather(self, v):
        return v[self.hinges].reshape(-1, 12)

    def add_gradient(self, q, out):
        self._scatter(self.c[:, None] * q.grad, out)

    def gauss_newton(self, q):
        """JᵀJ − WᵀW per unit c′ (C,12,12): this term's share of the hinge's Gauss–Newton matrix."""
        return np.matmul(q.J.transpose(0, 2, 1), q.J) - self.WtW

    def projected(self, q):
        """H̃ per unit c′ (C,12,12): the Gauss–Newton share, bounded where the step's matrix couples
        mesh edges only (Scene.hinges_bounded): the block B between the two opposite corners
        dropped and ψ = (‖B‖²_F + ε²)^½ ≥ ‖B‖₂ put on both their diagonals, since
        2a₂ᵀBa₃ ≤ ‖B‖₂(|a₂|² + |a₃|²)."""
        P = self.gauss_newton(q)
        if self.bounded:
            psi = self._psi(P)
            P[:, 6:9, 9:12] = P[:, 9:12, 6:9] = 0.0
            P[:, 6:9, 6:9] += psi[:, None, None] * np.eye(3)
            P[:, 9:12, 9:12] += psi[:, None, None] * np.eye(3)
        return P

    @staticmethod
    def _psi(P):
        return np.sqrt(np.sum(P[:, 6:9, 9:12] ** 2, axis=(1, 2)) + BOUND_EPS**2)

    def exact(self, q, beta=1.0):
        return self.gauss_newton(q) + beta * self.contract(q.g)

    def hessian(self, q, acc, mode):
        blocks = self.projected(q) if mode.projected else self.exact(q, mode.beta)
        if self.bounded and not mode.projected:  # the pattern lacks the opposite corners' block
            blocks[:, 6:9, 9:12] = blocks[:, 9:12, 6:9] = 0.0
        acc.data += self.assemble @ (self.c[:, None, None] * blocks).ravel()

    def add_hess_vec(self, q, v, out):
        self._scatter(self.c[:, None] * np.einsum("hij,hj->hi", self.exact(q), self._gather(v)), out)

    def _third(self, q, A, B):
        """∇ₓ(Aᵀ(JᵀJ)B) per unit c′ (C,12): −β̄·(Σₐ(JB)ₐ∂²mₐ·A + Σₐ(JA)ₐ∂²mₐ·B)."""
        Ja, Jb = np.einsum("hai,hi->ha", q.J, A), np.einsum("hai,hi->ha", q.J, B)
        d = np.einsum("hij,hj->hi", self.contract(Jb), A) + np.einsum("hij,hj->hi", self.contract(Ja), B)
        return -self.beta[:, None] * d

    def _third_tangent(self, q, W, B):
        """(∂(JᵀJ)[W])·B per unit c′ (C,12): −β̄·(Σₐ(JB)ₐ∂²mₐ·W + Jᵀ·∂²m[W, B])."""
        Jb = np.einsum("hai,hi->ha", q.J, B)
        second = np.einsum("hai,hi->ha", self.along(W), B)
        d = np.einsum("hij,hj->hi", self.contract(Jb), W) + np.einsum("hai,ha->hi", q.J, second)
        return -self.beta[:, None] * d

    def _psi_gradient(self, q):
        """∇ₓψ (C,12): Σᵢⱼ Bᵢⱼ∇Bᵢⱼ/ψ, Bᵢⱼ = e₂ᵢᵀ(JᵀJ)e₃ⱼ, so Σⱼ of the third derivative along
        (column j of B on the corner 2, e_j on the corner 3)."""
        P = self.gauss_newton(q)
        B = P[:, 6:9, 9:12]
        out = np.zeros((len(P), 12))
        for j in range(3):
            e3 = np.zeros((len(P), 12))
            e3[:, 9 + j] = 1.0
            out += self._third(q, _on(B[:, :, j], 2), e3)
        return out / self._psi(P)[:, None]

    def add_third(self, q, a, b, out):
        """∇ₓ(aᵀH̃b), with the bound's: the dropped block's −∇(a₂ᵀBb₃ + a₃ᵀBᵀb₂), ∇ψ·(a₂·b₂ + a₃·b₃)."""
        A, B = self._gather(a), self._gather(b)
        d = self._third(q, A, B)
        if self.bounded:
            d -= self._third(q, _part(A, 2), _part(B, 3)) + self._third(q, _part(B, 2), _part(A, 3))
            d += self._psi_gradient(q) * (_dot(A[:, 6:9], B[:, 6:9]) + _dot(A[:, 9:12], B[:, 9:12]))[:, None]
        self._scatter(self.c[:, None] * d, out)

    def add_third_tangent(self, q, w, b, out):
        """(∂H̃[w])·b, with the bound's: −(∂B[w]·b₃ on 2, ∂Bᵀ[w]·b₂ on 3), ∂ψ[w]·(b₂ on 2, b₃ on 3)."""
        W, B = self._gather(w), self._gather(b)
        d = self._third_tangent(q, W, B)
        if self.bounded:
            d -= _part(self._third_tangent(q, W, _part(B, 3)), 2) + _part(self._third_tangent(q, W, _part(B, 2)), 3)
            d += np.sum(self._psi_gradient(q) * W, axis=1)[:, None] * (_part(B, 2) + _part(B, 3))
        self._scatter(self.c[:, None] * d, out)

    # c′ = k·unit: every derivative by k is the quantity per unit c′, times unit
    def design_gradient(self, q, v, out):
        out["k_bending"][self.idx] += self.unit * np.sum(q.grad * self._gather(v), axis=1)

    def design_tangent(self, q, dp, out):
        self._scatter((dp["k_bending"][self.idx] * self.unit)[:, None] * q.grad, out)

    def design_hess(self, q, a, b, out):
        H = self.projected(q)
        out["k_bending"][self.idx] += self.unit * np.einsum("hi,hij,hj->h", self._gather(a), H, self._gather(b))

    def design_hess_tangent(self, q, dp, b, out):
        dk = dp["k_bending"][self.idx] * self.unit
        self._scatter(dk[:, None] * np.einsum("hij,hj->hi", self.projected(q), self._gather(b)), out)


def _dot(a, b):
    return np.einsum("ij,ij->i", a, b)


def _part(V, corner):
    """Per hinge, the 12-vector V with only `corner`'s three entries kept."""
    out = np.zeros_like(V)
    out[:, 3 * corner : 3 * corner + 3] = V[:, 3 * corner : 3 * corner + 3]
    return out


def _on(v, corner):
    """A 3-vector per hinge (C,3) as the 12-vector on `corner`."""
    out = np.zeros((len(v), 12))
    out[:, 3 * corner : 3 * corner + 3] = v
    return out
