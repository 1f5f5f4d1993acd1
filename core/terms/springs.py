"""Springs: the tension, compression and shear of the cloth's edges, and the thesis's bending springs.

Each is a Springs term: a spring law ψ of the stretch s = L − L₀ times a stiffness k per spring,
E = Σ k·ψ(s). The laws: ½s² (both ways: shear, bending springs), and its two branches, R(s) for
stretch (Tension) and R(−s) for compression (Compression), with R a C² ½·max(s, 0)² (R′ = ramp,
below): Tension and Compression of equal k sum to ½k·s² plus a constant."""

import numpy as np
import scipy.sparse as sp

from .base import Term

# width of the smooth ramp that projects a compressed spring's transverse stiffness, as a strain:
# the projected matrix then changes smoothly with the positions (its derivatives enter the
# gradients of a linearized step)
RAMP_STRAIN = 1e-3


def spring_geometry(d):
    """Length and unit direction of spring vectors d (S,3); a zero-length one (a sewing pair
    closed) has no direction, and no force along one."""
    length = np.maximum(np.sqrt(np.einsum("ij,ij->i", d, d)), 1e-300)
    return length, d / length[:, None]


def incidence(edges, n):
    """(n, S) signed edge-vertex incidence: D·f sums per-spring vectors f at their starts minus
    their ends, Dᵀ·x gives the spring vectors x[start] − x[end]."""
    s = np.arange(len(edges))
    return sp.csr_matrix((np.r_[np.ones(len(s)), -np.ones(len(s))], (edges.T.ravel(), np.r_[s, s])), shape=(n, len(s)))


def ramp(t, tau, energy=False):
    """A C¹ max(t, 0) and its derivative: (t + τ)²/4τ within |t| < τ; energy: also its integral
    R (zero below −τ; ½t² + τ²/6 above τ)."""
    inside = np.abs(t) < tau
    r = np.where(t >= tau, t, np.where(inside, (t + tau) ** 2 / (4 * tau), 0.0))
    dr = np.where(t >= tau, 1.0, np.where(inside, (t + tau) / (2 * tau), 0.0))
    if not energy:
        return r, dr
    return r, dr, np.where(t >= tau, 0.5 * t * t + tau * tau / 6, np.where(inside, (t + tau) ** 3 / (12 * tau), 0.0))


def ramp_slope(t, tau):
    """The ramp's second derivative: 1/2τ within |t| < τ."""
    return np.where(np.abs(t) < tau, 0.5 / tau, 0.0)


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

    def __init__(self, geometry, y):
        self.length, self.dir = spring_geometry(geometry.across @ y)
        self.stretch = self.length - geometry.rest


class SpringGeometry:
    """The edges a spring term acts on: rest lengths, incidence, and their pattern's assembler;
    terms on the same edges share one, and its state at a point (core.terms.base.Point.memo)."""

    def __init__(self, pot, edges, zero_length=False):
        cloth = pot.scene.cloth
        self.rest = np.zeros(len(edges)) if zero_length else cloth.spring_lengths(edges)
        self.incidence = incidence(edges, cloth.n)
        self.across = self.incidence.T.tocsr()
        self.assemble = pot.hess_scale * pot.system.assembler(pot.fidx[edges])

    def at(self, p):
        if self not in p.memo:
            p.memo[self] = SpringState(self, p.y)
        return p.memo[self]


class Springs(Term):
    """k·ψ(L − L₀) per spring of some edges, k the design field `field` (one value per spring) and
    ψ the law of `branch`: 0 both ways (½s²), +1 stretch only, −1 compression only.

    Newton carries each spring's force t = k·ψ′ along its iterations (core.solver.integrator's
    mixed form): its matrix takes the transverse stiffness t/L. A linearized step's matrix H̃
    ramps a compressed spring's t smoothly to 0 (projected)."""

    def __init__(self, pot, edges, k, field, branch=0, geometry=None):
        self.k, self.field, self.fields, self.branch = k, field, (field,) if field else (), branch
        self.geometry = SpringGeometry(pot, edges) if geometry is None else geometry
        self.tau = RAMP_STRAIN * self.geometry.rest

    @classmethod
    def build(cls, pot):
        return []

    def at(self, p):
        return self.geometry.at(p)

    def force(self, s):
        """ψ′(s) (S,): the force per unit k."""
        return s if self.branch == 0 else self.branch * ramp(self.branch * s, self.tau)[0]

    def stiffness(self, s):
        """ψ″(s) (S,, or 1.0 both ways): the along stiffness per unit k."""
        return 1.0 if self.branch == 0 else ramp(self.branch * s, self.tau)[1]

    def projected_law(self, s):
        """H̃'s along stiffness A/k, its derivative in s (scalars where constant), and its
        transverse force r/k and dr/ds:
        the exact law where it is positive semidefinite, a compressed spring's transverse force
        ramped to 0, and a stretch-only spring's along stiffness k whatever its stretch. Exact,
        that one vanishes under compression, and one linear solve from a compressed start cannot
        see the stiffness it meets once stretched: a cloth of Compression at 2% of its Tension fell
        to a third of its converged depth at 0.1 s steps (with the bound: 90%)."""
        if self.branch == -1:
            _, dr = ramp(-s, self.tau)
            zero = np.zeros_like(s)
            return dr, -ramp_slope(-s, self.tau), zero, zero
        r, dr = ramp(s, self.tau)
        return 1.0, 0.0, r, dr

    def energy(self, q):
        s = q.stretch
        psi = 0.5 * s * s if self.branch == 0 else ramp(self.branch * s, self.tau, energy=True)[2]
        return float(np.dot(self.k, psi))

    def add_gradient(self, q, out):
        out += self.geometry.incidence @ ((self.k * self.force(q.stretch))[:, None] * q.dir)

    def hessian(self, q, acc, mode):
        if mode.projected:
            along, _, r, _ = self.projected_law(q.stretch)
            along, t = self.k * along, self.k * r
        else:
            along = self.k * self.stiffness(q.stretch)
            t = mode.carried.get(self)
            t = self.k * self.force(q.stretch) if t is None else t
            if mode.beta != 1.0:
                t = np.where(t < 0, mode.beta * t, t)
        acc.data += self.geometry.assemble @ spring_blocks(q.dir, q.length, along, t).ravel()

    def add_hess_vec(self, q, v, out):
        g = self.geometry
        dv = g.across @ v
        a = self.k * self.force(q.stretch) / q.length
        along = (self.k * self.stiffness(q.stretch) - a) * _dot(q.dir, dv)
        out += g.incidence @ (along[:, None] * q.dir + a[:, None] * dv)

    def newton_forces(self, q):
        return self.k * self.force(q.stretch)

    def newton_update(self, forces, old, step, alpha):
        moved = _dot(old.dir, self.geometry.across @ step)
        return (1 - alpha) * forces + self.k * (self.force(old.stretch) * alpha + self.stiffness(old.stretch) * moved)

    def _third_terms(self, q):
        """Per spring, of H̃'s blocks A·uuᵀ + β(I − uuᵀ), β = r/L: (A − β)/L, dβ/dL and dA/dL."""
        along, dalong, r, dr = self.projected_law(q.stretch)
        beta = self.k * r / q.length
        return (self.k * along - beta) / q.length, (self.k * dr - beta) / q.length, self.k * dalong

    def _parts(self, q, v):
        """Per spring: v's spring difference, its part along u, and the rest across u."""
        dv = self.geometry.across @ v
        along = _dot(dv, q.dir)
        return dv, along, dv - along[:, None] * q.dir

    def add_third(self, q, a, b, out):
        (c1, c2, c3), (da, au, pa), (_, bu, pb) = self._third_terms(q), self._parts(q, a), self._parts(q, b)
        grad = c1[:, None] * (bu[:, None] * pa + au[:, None] * pb) + (c2 * _dot(da, pb) + c3 * au * bu)[:, None] * q.dir
        out += self.geometry.incidence @ grad

    def add_third_tangent(self, q, w, b, out):
        (c1, c2, c3), (_, wu, pw), (db, bu, pb) = self._third_terms(q), self._parts(q, w), self._parts(q, b)
        grad = c1[:, None] * (bu[:, None] * pw + _dot(pw, db)[:, None] * q.dir) + (c2 * wu)[:, None] * pb
        out += self.geometry.incidence @ (grad + (c3 * wu * bu)[:, None] * q.dir)

    def design_gradient(self, q, v, out):
        out[self.field] += self.force(q.stretch) * _dot(q.dir, self.geometry.across @ v)

    def design_tangent(self, q, dp, out):
        out += self.geometry.incidence @ ((dp[self.field] * self.force(q.stretch))[:, None] * q.dir)

    def _unit_blocks(self, q):
        """H̃'s along and transverse stiffness per unit k (H̃ is linear in k)."""
        along, _, r, _ = self.projected_law(q.stretch)
        return along, r / q.length

    def design_hess(self, q, a, b, out):
        along, trans = self._unit_blocks(q)
        da, db = self.geometry.across @ a, self.geometry.across @ b
        au, bu = _dot(da, q.dir), _dot(db, q.dir)
        out[self.field] += along * au * bu + trans * (_dot(da, db) - au * bu)

    def design_hess_tangent(self, q, dp, b, out):
        dk, (along, trans) = dp[self.field], self._unit_blocks(q)
        db = self.geometry.across @ b
        bu = _dot(db, q.dir)
        out += self.geometry.incidence @ ((dk * (along - trans) * bu)[:, None] * q.dir + (dk * trans)[:, None] * db)


class Tension(Springs):
    """The cloth's edges resisting stretch (Blender's Tension): k_tension per edge. Where the
    cloth's compression is its tension (no k_compression of its own), both ways: the two branches
    are one spring then, evaluated once (a third of a converged step's time at 64×64)."""

    @classmethod
    def build(cls, pot):
        cloth = pot.scene.cloth
        branch = 0 if cloth.own_compression is None else 1
        return [cls(pot, cloth.tension_edges, cloth.k_tension, "k_tension", branch, pot.edge_geometry())]


class Compression(Springs):
    """The cloth's edges resisting compression (Blender's Compression): k_compression per edge,
    where the cloth has its own (else Tension's springs resist compression too)."""

    @classmethod
    def build(cls, pot):
        cloth = pot.scene.cloth
        if cloth.own_compression is None:
            return []
        return [cls(pot, cloth.tension_edges, cloth.k_compression, "k_compression", -1, pot.edge_geometry())]


class Shear(Springs):
    """The diagonals that triangulating the mesh's quads and polygons added (Blender's shear
    springs): k_shear per diagonal, both ways (one diagonal per quad must resist shear in either
    direction; Blender's two resist stretch only)."""

    @classmethod
    def build(cls, pot):
        cloth = pot.scene.cloth
        return [cls(pot, cloth.shear_edges, cloth.k_shear, "k_shear")] if len(cloth.shear_edges) else []


class BendingSprings(Springs):
    """The thesis's bending springs (Cloth(bending="springs")), between the vertices opposite each
    interior edge: k_bending per spring, both ways."""

    @classmethod
    def build(cls, pot):
        cloth = pot.scene.cloth
        return [cls(pot, cloth.bending_edges, cloth.k_bending, "k_bending")] if cloth.bending == "springs" else []


class Sewing(Springs):
    """Blender's sewing springs: each of the cloth's sewing pairs pulled together by a zero-length
    spring of k_sewing, its force capped at the cloth's sewing_force F where F > 0,
    ψ(L) = ½k·L² while k·L ≤ F, else F·L − F²/2k: its matrix is k·I, then F/L across the pair
    (positive semidefinite either way). k and F are not designs."""

    def __init__(self, pot):
        cloth = pot.scene.cloth
        geometry = SpringGeometry(pot, cloth.sewing_edges, zero_length=True)
        super().__init__(pot, cloth.sewing_edges, cloth.k_sewing, None, geometry=geometry)
        cap = cloth.sewing_force
        self.reach = np.inf if cap == 0 else cap / self.k  # the length beyond which the force is capped

    @classmethod
    def build(cls, pot):
        return [cls(pot)] if len(pot.scene.cloth.sewing_edges) else []

    def force(self, s):
        return np.minimum(s, self.reach)

    def stiffness(self, s):
        return (s < self.reach).astype(float)

    def projected_law(self, s):
        pulled = self.stiffness(s)
        return pulled, 0.0, self.force(s), pulled

    def energy(self, q):
        s = q.stretch
        capped = np.where(s < self.reach, 0.5 * s * s, self.reach * (s - 0.5 * self.reach))
        return float(np.dot(self.k, capped))

    # no design fields
    design_gradient, design_tangent = Term.design_gradient, Term.design_tangent
    design_hess, design_hess_tangent = Term.design_hess, Term.design_hess_tangent
