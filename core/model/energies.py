"""The cloth's potential energy Φ term by term: springs, hinge bending, gravity; contact and
friction (core.contact.penalty).

`Potential` sums the terms and gives what Newton's method and the adjoint read from them, all
through one interface: Φ at a point, ∇Φ, ∇²Φ on a BlockSystem's storage (with the solver's
mixed-form spring tensions and scaled-down negative terms), exact ∇²Φ·v, and the derivatives
of ∇Φ·v with respect to the design's stiffnesses.
"""

import numpy as np
import scipy.sparse as sp

from ..contact.penalty import Contact, StepLag
from ..contact.self_contact import SelfContact, SelfQuery
from ..solver.linalg import Coupled

# a hinge's six vertex pairs, (i, j) with i < j in (x0, x1, x2, x3)
HINGE_PAIRS = np.array([(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)])


def spring_geometry(d):
    """Length and unit direction of spring vectors d (S,3)."""
    length = np.sqrt(np.einsum("ij,ij->i", d, d))
    return length, d / length[:, None]


def incidence(edges, n):
    """(n, S) signed edge-vertex incidence: D·f sums per-spring vectors f at their starts minus
    their ends, Dᵀ·x gives the spring vectors x[start] − x[end]."""
    s = np.arange(len(edges))
    return sp.csr_matrix((np.r_[np.ones(len(s)), -np.ones(len(s))], (edges.T.ravel(), np.r_[s, s])), shape=(n, len(s)))


# width of the smooth ramp that projects a compressed spring's transverse stiffness, as a strain:
# the projected matrix then changes smoothly with the positions (its derivatives enter the
# gradients of a linearized step)
RAMP_STRAIN = 1e-3


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


class Springs:
    """½·k·(L − L₀)² per spring: the tension springs, and in the thesis's model the bending springs."""

    def __init__(self, edges, rest_lengths, k, n):
        self.k, self.rest = k, rest_lengths
        self.incidence = incidence(edges, n)
        self.across = self.incidence.T.tocsr()

    def energy(self, st):
        return 0.5 * float(np.dot(self.k * st.stretch, st.stretch))

    def gradient(self, st):
        return self.incidence @ ((self.k * st.stretch)[:, None] * st.dir)

    def hess_vec(self, st, v):
        dv = self.across @ v
        a = self.k * st.stretch / st.length
        along = (self.k - a) * np.einsum("ij,ij->i", st.dir, dv)
        return self.incidence @ (along[:, None] * st.dir + a[:, None] * dv)

    def dk(self, st, v):
        """∂(∇Φ·v)/∂k per spring."""
        return st.stretch * np.einsum("ij,ij->i", st.dir, self.across @ v)

    def projected(self, st):
        """The projected transverse stiffness r = k·ramp(L − L₀) (the tension ramped smoothly to
        0 under compression, over a stretch that scales with L₀ only, so r is linear in k) and
        dr/dL."""
        e, de = ramp(st.stretch, RAMP_STRAIN * self.rest)
        return self.k * e, self.k * de

    def _third_terms(self, st):
        """Per spring: the along-minus-transverse stiffness over L, and the transverse stiffness's
        derivative in L, of the projected blocks k·uuᵀ + β(I − uuᵀ), β = r/L."""
        r, dr = self.projected(st)
        beta = r / st.length
        return (self.k - beta) / st.length, (dr - beta) / st.length

    def third(self, st, a, b):
        """∇ₓ(aᵀ·H̃(x)·b) (n,3), H̃ the projected Hessian: the adjoint's term of a linearized step."""
        u, da, db = st.dir, self.across @ a, self.across @ b
        c1, c2 = self._third_terms(st)
        au, bu = np.einsum("ij,ij->i", da, u), np.einsum("ij,ij->i", db, u)
        pa, pb = da - au[:, None] * u, db - bu[:, None] * u
        grad = c1[:, None] * (bu[:, None] * pa + au[:, None] * pb) + (c2 * np.einsum("ij,ij->i", da, pb))[:, None] * u
        return self.incidence @ grad

    def third_tangent(self, st, w, b):
        """(∂H̃[w])·b (n,3): the derivative of H̃·b along positions w (the tangent's term)."""
        u, dw, db = st.dir, self.across @ w, self.across @ b
        c1, c2 = self._third_terms(st)
        wu, bu = np.einsum("ij,ij->i", dw, u), np.einsum("ij,ij->i", db, u)
        pw, pb = dw - wu[:, None] * u, db - bu[:, None] * u
        out = c1[:, None] * (bu[:, None] * pw + np.einsum("ij,ij->i", pw, db)[:, None] * u) + (c2 * wu)[:, None] * pb
        return self.incidence @ out

    def dk_projected(self, st, a, b):
        """∂(aᵀ·H̃·b)/∂k per spring: H̃'s blocks are linear in k."""
        trans = self.projected(st)[0] / (self.k * st.length)
        da, db = self.across @ a, self.across @ b
        au, bu = np.einsum("ij,ij->i", da, st.dir), np.einsum("ij,ij->i", db, st.dir)
        return au * bu + trans * (np.einsum("ij,ij->i", da, db) - au * bu)

    def dk_projected_tangent(self, st, dk, b):
        """(∂H̃/∂k·δk)·b (n,3)."""
        trans = self.projected(st)[0] / (self.k * st.length)
        db = self.across @ b
        bu = np.einsum("ij,ij->i", db, st.dir)
        out = (dk * (1 - trans) * bu)[:, None] * st.dir + (dk * trans)[:, None] * db
        return self.incidence @ out


def hinge_weights(rest, hinges):
    """Per hinge (x0, x1 the edge, x2, x3 opposite): cotangent weights w (H,4) and the area of
    its two triangles (H,).

    w is the one combination (up to scale) with Σwᵢ = 0 and Σwᵢx̄ᵢ = 0 over the hinge unfolded
    flat: with αⱼ, βⱼ the angles at xⱼ in triangles (x0,x1,x2), (x0,x1,x3),
    w = (−cot α₁ − cot β₁, −cot α₀ − cot β₀, cot α₀ + cot α₁, cot β₀ + cot β₁)
    (Bergou et al. 2006, up to sign). Folding the hinge by θ about its edge makes
    ‖Σwᵢxᵢ‖ = 2·|e|·sin(θ/2) ≈ |e|·θ. Angles are intrinsic, so a curved rest mesh gets the weights
    of its flat development and has Σwᵢx̄ᵢ ≠ 0: its rest shape carries bending energy.
    """
    x0, x1, x2, x3 = (rest[hinges[:, i]] for i in range(4))
    e = x1 - x0

    def cotangents(p):  # at x0 and x1 of triangle (x0, x1, p), and twice its area
        twice_area = np.linalg.norm(np.cross(e, p - x0), axis=1)
        return (
            np.einsum("ij,ij->i", e, p - x0) / twice_area,
            np.einsum("ij,ij->i", -e, p - x1) / twice_area,
            twice_area,
        )

    a0, a1, twice_a = cotangents(x2)
    b0, b1, twice_b = cotangents(x3)
    w = np.stack([np.zeros_like(a0), -(a0 + b0), a0 + a1, b0 + b1], axis=1)
    w[:, 0] = -w[:, 1:].sum(axis=1)  # Σwᵢ = 0 exactly: rigid translations cost nothing
    return w, 0.5 * (twice_a + twice_b)


class HingeBending:
    """Quadratic (isometric) bending, ½·(k/A)·‖Σᵢ wᵢxᵢ‖² per hinge (Bergou et al. 2006,
    Wardetzky et al. 2007), with A the area of the hinge's two triangles.

    k is a bending rigidity (N·m): a cylinder of curvature κ bent out of a flat mesh of
    near-equilateral triangles stores ½·k·κ² per unit area at any resolution (Σ over the hinges
    of ‖Σwx‖²/A → κ²·area; Bergou's 3/A would triple it). On grids split along one diagonal the
    discrete energy is anisotropic: bending about either grid axis matches, curvature along the
    split diagonal costs 3×. The energy is quadratic in x, so its Hessian is constant:
    (k/A)·wwᵀ⊗I₃ per hinge.
    """

    def __init__(self, rest, hinges, k, n):
        w, area = hinge_weights(rest, hinges)
        self.hinges, self.w = hinges, w
        self.unit = 1.0 / area  # c/k
        self.c = k * self.unit
        rows = np.repeat(np.arange(len(hinges)), 4)
        self.weights_t = sp.csr_matrix((w.ravel(), (hinges.ravel(), rows)), shape=(n, len(hinges)))
        self._hessian = None

    def bend(self, y):
        """Σᵢ wᵢyᵢ = Σᵢ wᵢ(yᵢ − y₀) per hinge (H,3): from the edge vectors, whose rounding scales
        with the mesh's cells, not with the positions' distance from the origin."""
        d = y[self.hinges[:, 1:]] - y[self.hinges[:, :1]]
        return np.einsum("hi,hij->hj", self.w[:, 1:], d)

    def energy(self, b):
        return 0.5 * float(np.dot(self.c, np.einsum("ij,ij->i", b, b)))

    def gradient(self, b):
        return self.weights_t @ (self.c[:, None] * b)

    def hess_vec(self, v):
        """∇²Φ·v by the constant Hessian, assembled on first use: passes apply it at every step,
        where the gather through the hinges cost 6× the sparse product."""
        if self._hessian is None:
            self._hessian = (self.weights_t @ sp.diags(self.c) @ self.weights_t.T).tocsr()
        return self._hessian @ v

    def dk(self, b, v):
        """∂(∇Φ·v)/∂k per hinge: ∇Φ is linear in each k."""
        return self.unit * np.einsum("ij,ij->i", b, self.bend(v))

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
            - k23 * np.einsum("ij,ij->i", a2 - a3, b2 - b3)
            + 2 * np.maximum(k23, 0.0) * (np.einsum("ij,ij->i", a2, b2) + np.einsum("ij,ij->i", a3, b3))
        )

    def dk_bound_tangent(self, dk, b):
        """(∂B/∂k·δk)·b (n,3)."""
        unit23 = -self.unit * self.w[:, 2] * self.w[:, 3]
        k23 = dk * unit23
        b2, b3 = self._opposite(b)
        out = self.weights_t @ ((dk * self.unit)[:, None] * self.bend(b))
        opp = (dk * np.maximum(unit23, 0.0))[:, None]
        np.add.at(out, self.hinges[:, 2], -k23[:, None] * (b2 - b3) + 2 * opp * b2)
        np.add.at(out, self.hinges[:, 3], k23[:, None] * (b2 - b3) + 2 * opp * b3)
        return out


class State:
    """The terms at positions y after integrator step s: spring geometry, hinge bend vectors,
    contact set and Φ(y). The integrator adds its incremental potential as `energy`."""

    def __init__(self, potential, y, s, lag=None):
        self.y = y
        self.length, self.dir = spring_geometry(potential.springs.across @ y)
        self.stretch = self.length - potential.springs.rest
        sc = potential.scene
        self.contact = Contact(sc, y, (s + 1) / sc.substeps, potential.contact_k, potential.free, lag)
        # per Friction of the step: (its collider's index, None the cloth's own; its terms at y)
        self.friction = [] if lag is None else [(c, f.at(y)) for c, f in lag.frictions()]
        self.self_contact = None
        if lag is not None and lag.cloth is not None and len(lag.cloth.p):
            self.self_contact = SelfContact(lag.cloth, y, potential.contact_k, sc.self_distance, sc.contact_smoothing)
        self.phi = (
            potential.springs.energy(self)
            + self.contact.energy
            + (0.0 if self.self_contact is None else self.self_contact.energy)
            - float(np.sum(potential.gravity * y))
            + sum(fs.energy for _, fs in self.friction)
        )
        self.bend = None
        if potential.hinges is not None:
            self.bend = potential.hinges.bend(y)
            self.phi += potential.hinges.energy(self.bend)
        self.energy = None


class Potential:
    """Φ = springs + hinge bending (cloth.bending == "hinge") + gravity + contact of a scene.

    Matrices are BlockSystem storage data over the free vertices holding hess_scale·∇²Φ (the
    integrator's h²). The hinges' constant part is assembled once, here.
    """

    def __init__(self, scene, system, fidx, hess_scale):
        cloth = scene.cloth
        self.scene, self.system, self.fidx, self.hess_scale = scene, system, fidx, hess_scale
        self.free = np.flatnonzero(fidx >= 0)
        self.n_tension = cloth.n_tension
        self.springs = Springs(cloth.edges, cloth.rest_lengths, cloth.stiffness, cloth.n)
        self.assemble_springs = hess_scale * system.assembler(fidx[cloth.edges])
        self.gravity = cloth.masses[:, None] * scene.gravity[None, :]
        self.masses = cloth.masses
        self.contact_k = scene.contact_stiffness * cloth.masses
        self.self_query = self.self_slots = None
        if scene.self_distance > 0:
            self.self_query = SelfQuery(cloth, scene.self_distance)
            self.self_slots = system.triangle_slots(fidx[cloth.tris])
        self.hinges = self.hinge_data = None
        self.bound = scene.hinges_bounded
        if cloth.bending == "hinge":
            self.hinges = HingeBending(cloth.rest, cloth.hinges, cloth.k_bending, cloth.n)
            ends, kappa, at, diag = self.hinges.pair_couplings(self.bound)
            self.hinge_data = system.assembler(fidx[ends]) @ (hess_scale * kappa[:, None, None] * np.eye(3)).ravel()
            free = fidx[at] >= 0
            system.add_diagonal(self.hinge_data, fidx[at][free], hess_scale * diag[free, None, None] * np.eye(3))

    def lag(self, x, v, s, pairs=None):
        """What step s takes from its start state (contact.StepLag), or None when nothing does;
        pairs: the self-contact pairs the step used (a step replayed)."""
        return StepLag(self, x, v, s, pairs) if StepLag.needed(self.scene) else None

    def grow_self_pairs(self, lag, x, end):
        """Add to lag's self-contact planes the pairs within the self distance, or crossed, at end
        (a solve's result); whether any was new."""
        grown = lag.cloth.grown(x, end)
        if grown is not None:
            lag.set_cloth(grown)
        return grown is not None

    def at(self, y, s, lag=None):
        return State(self, y, s, lag)

    def gradient(self, st):
        """∇Φ (n,3)."""
        grad = self.springs.gradient(st) - self.gravity
        if self.hinges is not None:
            grad += self.hinges.gradient(st.bend)
        if len(st.contact.active):
            np.add.at(grad, st.contact.active, st.contact.grad)
        for _, fs in st.friction:
            fs.add_gradient(grad)
        if st.self_contact is not None:
            st.self_contact.add_gradient(grad)
        return grad

    def hessian(self, st, tension=None, beta=1.0, projected=False):
        """Storage data of hess_scale·∇²Φ at st over the free vertices.

        tension: the springs' t in their transverse stiffness t/L (default the exact k(L − L₀));
        beta scales the negative terms (compressed springs' t, the contact curvature), 0 clamps
        them. projected: the smooth positive-semidefinite H̃ of a linearized step instead, compressed
        springs' t ramped to 0 (springs.projected), contact curvature dropped. The hinge term is
        positive semidefinite and constant.
        """
        k = self.springs.k
        if projected:
            t = self.springs.projected(st)[0]
        else:
            t = k * st.stretch if tension is None else tension
            if beta != 1.0:
                t = np.where(t < 0, beta * t, t)
        data = self.assemble_springs @ spring_blocks(st.dir, st.length, k, t).ravel()
        if self.hinge_data is not None:
            data += self.hinge_data
        c = st.contact
        if len(c.active):
            hess = c.hess_psd if projected else c.hess if beta == 1.0 else c.hess_psd + beta * (c.hess - c.hess_psd)
            self.system.add_diagonal(data, self.fidx[c.active], self.hess_scale * hess)
        # positive semidefinite as they are: friction's, and the self-contact pairs' E″·nnᵀ
        pairs = []
        for col, fs in st.friction:
            if col is None:
                pairs.append((fs.f.stencil, fs.f.triangle, fs.hess))
            else:
                self.system.add_diagonal(data, self.fidx[fs.f.stencil[:, 0]], self.hess_scale * fs.hess)
        sc = st.self_contact
        if sc is not None and len(sc):
            pairs.append((sc.stencil, sc.triangle, sc.e2[:, None, None] * sc.n[:, :, None] * sc.n[:, None, :]))
        if pairs:
            data = self._add_pairs(data, *(np.concatenate(a) for a in zip(*pairs)))
        return data

    def _add_pairs(self, data, stencil, triangle, blocks):
        """data plus blocks M (P,3,3) of vertex–triangle pairs (stencils (P,4): the vertex, then
        the triangle's corners; their triangles (P,); weights core.contact.self_contact.WEIGHTS): wₖwₗ·M on the vertex's
        and the triangle's blocks in the pattern, and on the vertex–corner blocks beside it (a
        linalg.Coupled matrix)."""
        m = self.hess_scale * blocks
        p = self.fidx[stencil[:, 0]]
        free = p >= 0
        self.system.add_diagonal(data, p[free], m[free])
        slots = self.self_slots[triangle]  # (P,9,9)
        held = slots >= 0
        np.add.at(data, slots[held], np.broadcast_to((m / 9).reshape(-1, 1, 9), slots.shape)[held])
        corners = self.fidx[stencil[:, 1:]]
        both = free[:, None] & (corners >= 0)
        rows = np.broadcast_to(p[:, None], corners.shape)[both]
        blocks = np.broadcast_to(-m[:, None] / 3, corners.shape + (3, 3))[both]
        return Coupled(data, self.system.coupling(rows, corners[both], blocks))

    def third(self, st, a, b):
        """∇ₓ(aᵀ·H̃(x)·b) (n,3) for the projected Hessian H̃ (the hinges' is constant)."""
        out = self.springs.third(st, a, b)
        c = st.contact
        if len(c.active):
            np.add.at(out, c.active, c.third(a[c.active], b[c.active]))
        return out

    def third_tangent(self, st, w, b):
        """(∂H̃[w])·b (n,3): the derivative of H̃·b along positions w."""
        out = self.springs.third_tangent(st, w, b)
        c = st.contact
        if len(c.active):
            np.add.at(out, c.active, c.third_tangent(w[c.active], b[c.active]))
        return out

    def design_hess(self, st, a, b):
        """∂(aᵀ·H̃·b)/∂p for the design's stiffnesses, as design_gradient gives ∂(∇Φ·v)/∂p."""
        dk = self.springs.dk_projected(st, a, b)
        c = st.contact
        contact = float(np.einsum("ai,ai->a", a[c.active], c.n) @ (c.e2 * np.einsum("ai,ai->a", b[c.active], c.n)))
        bending = (
            dk[self.n_tension :]
            if self.hinges is None
            else self.hinges.dk_bound(a, b)
            if self.bound
            else self.hinges.dk(self.hinges.bend(a), b)
        )
        return dict(
            k_tension=dk[: self.n_tension], k_bending=bending, contact_stiffness=contact / self.scene.contact_stiffness
        )

    def design_hess_tangent(self, st, k_tension, k_bending, contact_stiffness, b):
        """(∂H̃/∂p·δp)·b (n,3): the forward counterpart of design_hess."""
        dk = k_tension if self.hinges is not None else np.concatenate([k_tension, k_bending])
        out = self.springs.dk_projected_tangent(st, dk, b)
        if self.hinges is not None and self.bound:
            out += self.hinges.dk_bound_tangent(k_bending, b)
        elif self.hinges is not None:
            out += self.hinges.weights_t @ ((k_bending * self.hinges.unit)[:, None] * self.hinges.bend(b))
        c = st.contact
        if len(c.active) and contact_stiffness:
            bn = np.einsum("ai,ai->a", b[c.active], c.n)
            np.add.at(out, c.active, (c.e2 * bn * contact_stiffness / self.scene.contact_stiffness)[:, None] * c.n)
        return out

    def hess_vec(self, st, v):
        """∇²Φ·v (n,3), exact, over all vertices."""
        out = self.springs.hess_vec(st, v)
        if self.hinges is not None:
            out += self.hinges.hess_vec(v)
        c = st.contact
        if len(c.active):
            np.add.at(out, c.active, np.einsum("aij,aj->ai", c.hess, v[c.active]))
        for _, fs in st.friction:
            fs.add_hess_vec(out, v)
        if st.self_contact is not None:
            st.self_contact.add_hess_vec(out, v)
        return out

    def lag_gradient(self, st, v):
        """∂(∇Φ·v)/∂xₛ and ∂(∇Φ·v)/∂vₛ (n,3 each): how the step's start moves its contact terms (a
        mesh's planes, friction's lagged normal force, normal and anchor; zero without them)."""
        out, out_v = np.zeros_like(st.y), np.zeros_like(st.y)
        c = st.contact
        if len(c.active):
            np.add.at(out, c.active, c.lag_gradient(st.y, v[c.active]))
        for _, fs in st.friction:
            fs.add_lag_gradient(out, out_v, v)
        if st.self_contact is not None:
            st.self_contact.add_lag_gradient(out, v)
        return out, out_v

    def lag_tangent(self, st, dxs, dvs):
        """(∂∇Φ/∂xₛ)·δxₛ + (∂∇Φ/∂vₛ)·δvₛ (n,3): the forward counterpart of lag_gradient."""
        out = np.zeros_like(st.y)
        c = st.contact
        if len(c.active):
            np.add.at(out, c.active, c.lag_tangent(st.y, dxs[c.active]))
        for _, fs in st.friction:
            fs.add_lag_tangent(out, dxs, dvs)
        if st.self_contact is not None:
            st.self_contact.add_lag_tangent(out, dxs)
        return out

    def design_gradient(self, st, v):
        """∂(∇Φ·v)/∂p for the design's stiffnesses: k_tension, k_bending (per spring or hinge),
        contact_stiffness (friction's normal forces where they are the penalty's scale with it too),
        friction (per collider), self_friction."""
        dk = self.springs.dk(st, v)
        c = st.contact
        friction, self_friction = np.zeros(len(self.scene.colliders)), 0.0
        contact = float(np.sum(v[c.active] * c.grad))
        for col, fs in st.friction:  # linear in μ and in λ, whose share `stiff` is in the contact stiffness
            per = np.einsum("ai,ai->a", fs.f.combine(v), fs.grad)
            part = float(per.sum())
            contact += float(per @ fs.f.stiff)
            if col is None:
                self_friction = part / fs.f.mu
            else:
                friction[col] = part / fs.f.mu
        if st.self_contact is not None:  # the self penalty's stiffness is the contact stiffness too
            self_grad = np.zeros_like(v)
            st.self_contact.add_gradient(self_grad)
            contact += float(np.sum(v * self_grad))
        return dict(
            k_tension=dk[: self.n_tension],
            k_bending=dk[self.n_tension :] if self.hinges is None else self.hinges.dk(st.bend, v),
            contact_stiffness=contact / self.scene.contact_stiffness,
            friction=friction,
            self_friction=self_friction,
        )

    def design_tangent(self, st, k_tension, k_bending, contact_stiffness=0.0, friction=None, self_friction=0.0):
        """(∂∇Φ/∂p)·δp (n,3) for stiffness changes δp: the forward counterpart of
        design_gradient (every term's gradient is linear in its stiffness)."""
        dk = k_tension if self.hinges is not None else np.concatenate([k_tension, k_bending])
        out = self.springs.incidence @ ((dk * st.stretch)[:, None] * st.dir)
        if self.hinges is not None:
            out += self.hinges.weights_t @ ((k_bending * self.hinges.unit)[:, None] * st.bend)
        c = st.contact
        if len(c.active) and contact_stiffness:
            np.add.at(out, c.active, c.grad * (contact_stiffness / self.scene.contact_stiffness))
        if st.self_contact is not None and contact_stiffness:
            self_grad = np.zeros_like(out)
            st.self_contact.add_gradient(self_grad)
            out += self_grad * (contact_stiffness / self.scene.contact_stiffness)
        for col, fs in st.friction:
            dmu = self_friction if col is None else 0.0 if friction is None else friction[col]
            rate = contact_stiffness / self.scene.contact_stiffness * fs.f.stiff + dmu / fs.f.mu
            if rate.any():
                fs.f.spread(out, fs.grad * rate[:, None])
        return out
