"""Springs: ½·k·(L − L₀)² per spring, the tension springs and the thesis's bending springs."""

import numpy as np
import scipy.sparse as sp

from .base import Term

# width of the smooth ramp that projects a compressed spring's transverse stiffness, as a strain:
# the projected matrix then changes smoothly with the positions (its derivatives enter the
# gradients of a linearized step)
RAMP_STRAIN = 1e-3


def spring_geometry(d):
    """Length and unit direction of spring vectors d (S,3)."""
    length = np.sqrt(np.einsum("ij,ij->i", d, d))
    return length, d / length[:, None]


def incidence(edges, n):
    """(n, S) signed edge-vertex incidence: D·f sums per-spring vectors f at their starts minus
    their ends, Dᵀ·x gives the spring vectors x[start] − x[end]."""
    s = np.arange(len(edges))
    return sp.csr_matrix((np.r_[np.ones(len(s)), -np.ones(len(s))], (edges.T.ravel(), np.r_[s, s])), shape=(n, len(s)))


def ramp(t, tau):
    """A C¹ max(t, 0) and its derivative: (t + τ)²/4τ within |t| < τ."""
    inside = np.abs(t) < tau
    r = np.where(t >= tau, t, np.where(inside, (t + tau) ** 2 / (4 * tau), 0.0))
    dr = np.where(t >= tau, 1.0, np.where(inside, (t + tau) / (2 * tau), 0.0))
    return r, dr


def spring_blocks(u, length, k, tension):
    """3×3 blocks k·uuᵀ + (t/L)(I − uuᵀ); with t = k(L − L₀) the exact Hessian of ½k(L − L₀)²."""
    a = tension / length
    blocks = np.einsum("si,sj->sij", u * (k - a)[:, None], u)
    for i in range(3):
        blocks[:, i, i] += a
    return blocks


def _dot(a, b):
    return np.einsum("ij,ij->i", a, b)


class SpringState:
    """Springs at positions y: length, unit direction, stretch L − L₀."""

    def __init__(self, springs, y):
        self.length, self.dir = spring_geometry(springs.across @ y)
        self.stretch = self.length - springs.rest


class Springs(Term):
    """½·k·(L − L₀)² per spring of `edges`, k the design field `field` (one value per spring).

    Newton carries each spring's tension t along its iterations (core.solver.integrator's mixed
    form): its matrix takes the transverse stiffness t/L. A linearized step's matrix ramps a
    compressed spring's t smoothly to 0 (projected)."""

    def __init__(self, pot, edges, k, field):
        cloth = pot.scene.cloth
        self.k, self.field, self.fields = k, field, (field,)
        self.rest = np.linalg.norm(cloth.rest[edges[:, 0]] - cloth.rest[edges[:, 1]], axis=1)
        self.incidence = incidence(edges, cloth.n)
        self.across = self.incidence.T.tocsr()
        self.assemble = pot.hess_scale * pot.system.assembler(pot.fidx[edges])

    @classmethod
    def build(cls, pot):
        cloth = pot.scene.cloth
        out = [cls(pot, cloth.tension_edges, cloth.k_tension, "k_tension")]
        if cloth.bending == "springs":
            out.append(cls(pot, cloth.bending_edges, cloth.k_bending, "k_bending"))
        return out

    def at(self, y, s, lag):
        return SpringState(self, y)

    def energy(self, q):
        return 0.5 * float(np.dot(self.k * q.stretch, q.stretch))

    def add_gradient(self, q, out):
        out += self.incidence @ ((self.k * q.stretch)[:, None] * q.dir)

    def hessian(self, q, acc, mode):
        if mode.projected:
            t = self.projected(q)[0]
        else:
            t = mode.carried.get(self)
            t = self.k * q.stretch if t is None else t
            if mode.beta != 1.0:
                t = np.where(t < 0, mode.beta * t, t)
        acc.data += self.assemble @ spring_blocks(q.dir, q.length, self.k, t).ravel()

    def add_hess_vec(self, q, v, out):
        dv = self.across @ v
        a = self.k * q.stretch / q.length
        along = (self.k - a) * _dot(q.dir, dv)
        out += self.incidence @ (along[:, None] * q.dir + a[:, None] * dv)

    def newton_forces(self, q):
        return self.k * q.stretch

    def newton_update(self, forces, old, step, alpha):
        moved = _dot(old.dir, self.across @ step)
        return (1 - alpha) * forces + self.k * (old.stretch * alpha + moved)

    def projected(self, q):
        """The projected transverse stiffness r = k·ramp(L − L₀) (the tension ramped smoothly to
        0 under compression, over a stretch that scales with L₀ only, so r is linear in k) and
        dr/dL."""
        e, de = ramp(q.stretch, RAMP_STRAIN * self.rest)
        return self.k * e, self.k * de

    def _third_terms(self, q):
        """Per spring: the along-minus-transverse stiffness over L, and the transverse stiffness's
        derivative in L, of the projected blocks k·uuᵀ + β(I − uuᵀ), β = r/L."""
        r, dr = self.projected(q)
        beta = r / q.length
        return (self.k - beta) / q.length, (dr - beta) / q.length

    def add_third(self, q, a, b, out):
        u, da, db = q.dir, self.across @ a, self.across @ b
        c1, c2 = self._third_terms(q)
        au, bu = _dot(da, u), _dot(db, u)
        pa, pb = da - au[:, None] * u, db - bu[:, None] * u
        grad = c1[:, None] * (bu[:, None] * pa + au[:, None] * pb) + (c2 * _dot(da, pb))[:, None] * u
        out += self.incidence @ grad

    def add_third_tangent(self, q, w, b, out):
        u, dw, db = q.dir, self.across @ w, self.across @ b
        c1, c2 = self._third_terms(q)
        wu, bu = _dot(dw, u), _dot(db, u)
        pw, pb = dw - wu[:, None] * u, db - bu[:, None] * u
        grad = c1[:, None] * (bu[:, None] * pw + _dot(pw, db)[:, None] * u) + (c2 * wu)[:, None] * pb
        out += self.incidence @ grad

    def design_gradient(self, q, v, out):
        out[self.field] += q.stretch * _dot(q.dir, self.across @ v)

    def design_tangent(self, q, dp, out):
        out += self.incidence @ ((dp[self.field] * q.stretch)[:, None] * q.dir)

    def _transverse_share(self, q):
        return self.projected(q)[0] / (self.k * q.length)

    def design_hess(self, q, a, b, out):
        """H̃'s blocks are linear in k."""
        trans = self._transverse_share(q)
        da, db = self.across @ a, self.across @ b
        au, bu = _dot(da, q.dir), _dot(db, q.dir)
        out[self.field] += au * bu + trans * (_dot(da, db) - au * bu)

    def design_hess_tangent(self, q, dp, b, out):
        dk, trans = dp[self.field], self._transverse_share(q)
        db = self.across @ b
        bu = _dot(db, q.dir)
        out += self.incidence @ ((dk * (1 - trans) * bu)[:, None] * q.dir + (dk * trans)[:, None] * db)
