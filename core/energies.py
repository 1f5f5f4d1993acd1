"""The cloth's potential energy Φ term by term: springs, hinge bending, gravity, penalty contact.

`Potential` sums the terms and gives what Newton's method and the adjoint read from them, all
through one interface: Φ at a point, ∇Φ, ∇²Φ on a BlockSystem's storage (with the solver's
mixed-form spring tensions and scaled-down negative terms), exact ∇²Φ·v, and the derivatives
of ∇Φ·v with respect to the design's stiffnesses.
"""

import numpy as np
import scipy.sparse as sp

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
    return sp.csr_matrix((np.r_[np.ones(len(s)), -np.ones(len(s))], (edges.T.ravel(), np.r_[s, s])),
                         shape=(n, len(s)))


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
        return (np.einsum("ij,ij->i", e, p - x0) / twice_area,
                np.einsum("ij,ij->i", -e, p - x1) / twice_area, twice_area)

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

    def pair_couplings(self):
        """The constant Hessian as isotropic couplings κ·I₃ between each hinge's vertex pairs:
        ends (6H,2) and κ (6H,). With Σwᵢ = 0, c·wwᵀ = Σ_{i<j} −c·wᵢwⱼ·(eᵢ − eⱼ)(eᵢ − eⱼ)ᵀ, the
        Hessian pattern of a spring between xᵢ and xⱼ."""
        ends = self.hinges[:, HINGE_PAIRS].reshape(-1, 2)
        kappa = -self.c[:, None] * self.w[:, HINGE_PAIRS[:, 0]] * self.w[:, HINGE_PAIRS[:, 1]]
        return ends, kappa.ravel()


class Contact:
    """Penalty contact E = ½·k·min(d, 0)² per vertex, with d the signed distance minus thickness
    and k the vertex's stiffness: the scene's contact stiffness per unit mass (1/s²) times the
    vertex's mass, so a vertex sinks g/κ under its own weight at any mesh resolution.

    `active` indexes the vertices in contact; grad is (len(active), 3), hess and hess_psd
    (len(active), 3, 3): the sphere's curvature term k·d·(I − uuᵀ)/r is negative inside,
    so the projected Hessian drops it. stiffness: per vertex (n,) or one for all.
    """

    def __init__(self, colliders, x, t, stiffness, thickness, vertices=None):
        n = len(x)
        self.energy = 0.0
        idx, grads, hess, hpsd = [], [], [], []
        cand = np.arange(n) if vertices is None else vertices
        xc = x[cand]
        kc = np.broadcast_to(np.asarray(stiffness, dtype=np.float64), (n,))[cand]
        for col in colliders:
            d, u, inv = col.distance(xc, t)
            d = d - thickness
            on = d < 0
            if not on.any():
                continue
            d, u, k = d[on], u[on], kc[on]
            self.energy += 0.5 * float(np.dot(k * d, d))
            idx.append(cand[on])
            grads.append((k * d)[:, None] * u)
            uu = k[:, None, None] * u[:, :, None] * u[:, None, :]
            hpsd.append(uu)
            if inv is None:
                hess.append(uu)
            else:
                curv = k * d * inv[on]
                hess.append(uu + curv[:, None, None] * (np.eye(3) - u[:, :, None] * u[:, None, :]))
        if idx:
            self.active = np.concatenate(idx)
            self.grad = np.concatenate(grads)
            self.hess = np.concatenate(hess)
            self.hess_psd = np.concatenate(hpsd)
        else:
            self.active = np.zeros(0, np.int64)
            self.grad = np.zeros((0, 3))
            self.hess = self.hess_psd = np.zeros((0, 3, 3))


class State:
    """The terms at positions y after integrator step s: spring geometry, hinge bend vectors,
    contact set and Φ(y). The integrator adds its incremental potential as `energy`."""

    def __init__(self, potential, y, s):
        self.y = y
        self.length, self.dir = spring_geometry(potential.springs.across @ y)
        self.stretch = self.length - potential.springs.rest
        sc = potential.scene
        self.contact = Contact(sc.colliders, y, (s + 1) / sc.substeps, potential.contact_k,
                               sc.contact_thickness, potential.free)
        self.phi = potential.springs.energy(self) + self.contact.energy - float(np.sum(potential.gravity * y))
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
        self.contact_k = scene.contact_stiffness * cloth.masses
        self.hinges = self.hinge_data = None
        if cloth.bending == "hinge":
            self.hinges = HingeBending(cloth.rest, cloth.hinges, cloth.k_bending, cloth.n)
            ends, kappa = self.hinges.pair_couplings()
            blocks = hess_scale * kappa[:, None, None] * np.eye(3)
            self.hinge_data = system.assembler(fidx[ends]) @ blocks.ravel()

    def at(self, y, s):
        return State(self, y, s)

    def gradient(self, st):
        """∇Φ (n,3)."""
        grad = self.springs.gradient(st) - self.gravity
        if self.hinges is not None:
            grad += self.hinges.gradient(st.bend)
        if len(st.contact.active):
            np.add.at(grad, st.contact.active, st.contact.grad)
        return grad

    def hessian(self, st, tension=None, beta=1.0):
        """Storage data of hess_scale·∇²Φ at st over the free vertices.

        tension: the springs' t in their transverse stiffness t/L (default the exact k(L − L₀));
        beta scales the negative terms (compressed springs' t, the sphere's curvature), 0 clamps
        them. The hinge term is positive semidefinite and constant.
        """
        k = self.springs.k
        t = k * st.stretch if tension is None else tension
        if beta != 1.0:
            t = np.where(t < 0, beta * t, t)
        data = self.assemble_springs @ spring_blocks(st.dir, st.length, k, t).ravel()
        if self.hinge_data is not None:
            data += self.hinge_data
        c = st.contact
        if len(c.active):
            hess = c.hess if beta == 1.0 else c.hess_psd + beta * (c.hess - c.hess_psd)
            self.system.add_diagonal(data, self.fidx[c.active], self.hess_scale * hess)
        return data

    def hess_vec(self, st, v):
        """∇²Φ·v (n,3), exact, over all vertices."""
        out = self.springs.hess_vec(st, v)
        if self.hinges is not None:
            out += self.hinges.hess_vec(v)
        c = st.contact
        if len(c.active):
            np.add.at(out, c.active, np.einsum("aij,aj->ai", c.hess, v[c.active]))
        return out

    def design_gradient(self, st, v):
        """∂(∇Φ·v)/∂p for the design's stiffnesses: k_tension, k_bending (per spring or hinge),
        contact_stiffness."""
        dk = self.springs.dk(st, v)
        c = st.contact
        return dict(k_tension=dk[:self.n_tension],
                    k_bending=dk[self.n_tension:] if self.hinges is None else self.hinges.dk(st.bend, v),
                    contact_stiffness=float(np.sum(v[c.active] * c.grad)) / self.scene.contact_stiffness)

    def design_tangent(self, st, k_tension, k_bending, contact_stiffness=0.0):
        """(∂∇Φ/∂p)·δp (n,3) for stiffness changes δp: the forward counterpart of
        design_gradient (every term's gradient is linear in its stiffness)."""
        dk = k_tension if self.hinges is not None else np.concatenate([k_tension, k_bending])
        out = self.springs.incidence @ ((dk * st.stretch)[:, None] * st.dir)
        if self.hinges is not None:
            out += self.hinges.weights_t @ ((k_bending * self.hinges.unit)[:, None] * st.bend)
        c = st.contact
        if len(c.active) and contact_stiffness:
            np.add.at(out, c.active, c.grad * (contact_stiffness / self.scene.contact_stiffness))
        return out
