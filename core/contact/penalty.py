"""Contact with colliders of every kind: penalty on the signed distance, and smooth Coulomb friction.

One mechanism for all colliders (core.contact.colliders answers the distance queries):

- `StepLag`, made once per integrator step from its start state (x_s, v_s): each collider's
  per-step data (a mesh's tangent planes), the cloth's own planes (core.contact.self_contact: the cloth
  as a collider of itself, a distance query over vertex–triangle pairs) and the friction contacts, whose normal force λ,
  normal n and anchor are lagged from the step's start (Li et al. 2020, Incremental Potential
  Contact §5). A collider's λ is its penalty's force −E′(dₛ), or where more, the force that holds
  the vertex against its momentum and gravity: friction acts from the first step of a contact, not
  once the penalty has built up. Everything in it is a function of x_s (λ of v_s too), and the
  adjoint differentiates it (`Contact.lag_gradient`, `FrictionAt.add_lag_gradient`).
- `Contact` at positions y: the penalty E(d) per vertex and collider (see penalty).
- `LaggedFriction` at positions y: μ·λ·f₀(‖P(Σwₖ(yₖ − x_sₖ) − m)‖) per friction contact, a stencil of
  vertices k with weights wₖ (a collider's contact: its vertex; a self-contact pair: its vertex
  less its triangle's centroid), P = I − nnᵀ the
  tangent projector, m the surface's own motion over the step, f₀ the C² mollifier that is
  quadratic below a slip of ε_v·h and linear above: Coulomb's force μλ while sliding, a stiff
  spring while sticking (a held cloth creeps at most at ε_v). The force is a potential's
  gradient, so Newton's matrix stays symmetric and the step still minimizes one energy.
"""

import numpy as np

from ..model.pressure import FaceForces
from ..numerics.scatter import scatter_add
from .colliders import MeshCollider

# m/s: the slip speed below which friction acts as a spring (static friction creeps at most this fast)
FRICTION_EPS_V = 1e-3


def penalty(d, k, delta):
    """Contact energy per unit of its stiffness k at depth −d (d < 0) and its first three
    derivatives in d. Quadratic, ½k·d², when delta = 0; else its curvature rises smoothly (a
    smoothstep) over the first delta of depth and the energy is C³: a linearized step's
    matrix, and so the step, then change smoothly as a vertex enters contact."""
    if delta == 0.0:
        return deep_penalty(d, k, delta)
    s = np.minimum(-d / delta, 1.0)
    deep = -d > delta
    e = k * delta**2 * np.where(deep, _deep(d, delta), s**4 / 4 - s**5 / 10)
    e1 = k * np.where(deep, d + 0.5 * delta, -delta * (s**3 - s**4 / 2))
    e2 = k * (3 * s**2 - 2 * s**3)
    e3 = -k * 6 * s * (1 - s) / delta
    return e, e1, e2, e3


def _deep(d, delta):
    return 0.5 * (d / delta) ** 2 + 0.5 * d / delta + 0.15


def deep_penalty(d, k, delta):
    """The penalty's quadratic beyond the smoothing depth, and its derivatives, continued to any
    d: what a linearized step holds a self-contact pair to (core.contact.self_contact)."""
    if delta == 0.0:
        return 0.5 * k * d * d, k * d, k * np.ones_like(d), np.zeros_like(d)
    return k * delta**2 * _deep(d, delta), k * (d + 0.5 * delta), k * np.ones_like(d), np.zeros_like(d)


def thickness_of(col, scene):
    return col.kept_distance(scene.contact_thickness)


def _dot(a, b):
    return np.einsum("ij,ij->i", a, b)


def _mv(m, v):
    return np.einsum("aij,aj->ai", m, v)


def combine(weights, stencil, v):
    """Σ wₘvₘ per stencil (K,3) of vectors v at the vertices; stencils (K,S), weights (S,)."""
    return np.einsum("m,amj->aj", weights, v[stencil])


def spread(out, weights, stencil, per):
    """out[stencil] += wₘ times per-stencil vectors per (K,3): combine's transpose."""
    scatter_add(out, stencil, weights[None, :, None] * per[:, None, :])


def _fields(sc, x, v, s):
    """The wind's and the force fields' force at a step's start (core.model.pressure), or None."""
    if sc.wind is None and not sc.effectors:
        return None
    wind = None if sc.wind is None else sc.wind_at(s)
    return FaceForces(x, v, sc.cloth.tris, wind, sc.effectors, s, sc.substeps, sc.wind_drag)


class StepLag:
    """What a step's terms take from its start state x, v (step s → s+1): the state itself
    (`state`: a force field's pressure), each collider's own step data (`planes`: a mesh's Planes,
    else None), the cloth's own (`cloth`: SelfPlanes, of the given pairs if any) and the lagged
    friction contacts."""

    def __init__(self, potential, x, v, s, pairs=None):
        sc = potential.scene
        self.state = x, v
        sub, h = sc.substeps, sc.h
        self.fields = _fields(sc, x, v, s)
        t0, t1 = s / sub, (s + 1) / sub
        self.planes = [col.begin_step(x, v, t0, t1, h, thickness_of(col, sc)) for col in sc.colliders]
        # the cloth's own planes (core.contact.self_contact): the pairs given (a step replayed), else those
        # near at the start or where free fall takes it (a step adds those its solve crosses)
        query = potential.self_query
        self.start = potential, v
        self.cloth = self.cloth_friction = None
        if query is not None:
            self.set_cloth(
                query.of_pairs(x, pairs) if pairs is not None else query.planes(x, x + h * v + h * h * sc.gravity)
            )
        self.friction = [None] * len(sc.colliders)
        # where a linearized step that refits friction linearizes the colliders' penalty instead of
        # at its prediction: the first solve's result (None: at the point evaluated)
        self.contact_at = None
        free = np.zeros(len(x), bool)
        free[potential.free] = True
        # where free fall takes the vertices, the step's control force and the fields' force acting
        # (one that holds the cloth up against gravity takes the weight off the surface, and
        # friction with it): the normal force depends on both alike (dlam_u)
        ahead = x + h * v + h * h * sc.gravity
        u = sc.force_at(s)
        for force in (u, None if self.fields is None else self.fields.force):
            if force is not None:
                ahead = ahead + h * h * force / potential.masses[:, None]
        for c, col in enumerate(sc.colliders):
            if col.friction == 0.0:
                continue
            planes, thickness = self.planes[c], thickness_of(col, sc)
            # the step's start (a mesh: its planes; else the collider then) and its free fall's end
            d, n, curvature = col.distance(x, t1 if planes is not None else t0, planes)
            gap = d - thickness
            ahead_d, ahead_n, _ = col.distance(ahead, t1, planes)
            # the normal force that holds the vertex where it is (in the zone; else on its edge)
            # against its momentum and gravity: a vertex landing, or laid on the surface, has no
            # penalty force yet, and would slide freely until it had sunk to its resting depth
            hold = potential.masses * (np.minimum(gap, 0.0) - (ahead_d - thickness)) / (h * h)
            on = np.flatnonzero(((gap < 0) | (hold > 0)) & free)
            if not len(on):
                continue
            _, e1, e2, _ = penalty(np.minimum(gap[on], 0.0), potential.contact_k[on], sc.contact_smoothing)
            held = hold[on] > -e1  # else the penalty's force at the start: λ = −E′(dₛ), ∂λ = −E″·n
            curv = np.zeros((len(on), 3, 3)) if curvature is None else curvature(on)
            reach = ahead_n[on]  # ∂(the free fall's distance)/∂xₛ
            if planes is not None:  # a mesh's normals vary with x only through its planes
                slots = [planes.slot[int(i)] for i in on]
                curv = planes.curv[slots]
                reach = reach + _mv(curv, ahead[on] - planes.q[slots])
            rate = (potential.masses[on] / (h * h))[:, None]
            dhold = rate * ((gap[on] < 0)[:, None] * n[on] - reach)
            motion, jacobian = col.motion(x, t0, t1, planes)
            previous = None
            if sc.solver == "linearized":  # its slip over the last step: see LaggedFriction
                rel = h * v[on] - motion[on]
                previous = np.linalg.norm(rel - _dot(rel, n[on])[:, None] * n[on], axis=1)
            self.friction[c] = LaggedFriction(
                on[:, None],
                np.ones(1),
                np.array(n[on]),
                np.where(held, hold[on], -e1),
                x[on] + motion[on],
                np.where(held[:, None], dhold, -e2[:, None] * n[on])[:, None],
                curv[:, None],
                (np.eye(3) + jacobian[on])[:, None],
                col.friction,
                FRICTION_EPS_V * h,
                previous,
                dlam_v=np.where(held[:, None], -h * rate * ahead_n[on], 0.0)[:, None],
                dlam_u=np.where(held[:, None], -ahead_n[on], 0.0)[:, None],
                stiff=(~held).astype(float),
                fields=self.fields,
            )

    def set_cloth(self, planes):
        """Take the cloth's own planes (SelfPlanes; a step adds pairs its solve crosses) and the
        friction between its layers, of those pairs in contact at the step's start: one
        function of the pairs, as a replayed step rebuilds it. A linearized step's friction
        keeps the slips it was refitted to."""
        potential, v = self.start
        sc = potential.scene
        old, self.cloth, self.cloth_friction = self.cloth_friction, planes, None
        if sc.self_friction > 0:
            self.cloth_friction = planes.friction(
                v, potential.contact_k, sc, FRICTION_EPS_V * sc.h, sc.solver == "linearized"
            )
        new = self.cloth_friction
        if old is not None and new is not None and new.previous is not None:
            at = np.minimum(np.searchsorted(old.keys, new.keys), len(old.keys) - 1)
            kept = old.keys[at] == new.keys
            new.previous[kept] = old.previous[at[kept]]

    def frictions(self):
        """Every LaggedFriction of the step: (its collider's index, or None for the cloth's own; it)."""
        out = [(c, f) for c, f in enumerate(self.friction) if f is not None]
        return out + ([(None, self.cloth_friction)] if self.cloth_friction is not None else [])

    @staticmethod
    def needed(scene):
        """Whether a scene's steps need one (meshes, friction, self-contact, wind and fields), else None serves."""
        return scene.wind is not None or bool(scene.effectors) or StepLag.contacts(scene)

    @staticmethod
    def contacts(scene):
        """Whether a scene's contacts lag (meshes, friction, self-contact)."""
        return scene.self_distance > 0 or any(
            col.friction > 0 or isinstance(col, MeshCollider) for col in scene.colliders
        )


def project_out(potential, lag, y, s):
    """After a linearized step s: free vertices that ended deeper into any collider's contact zone
    than its smoothing depth δ are moved back to it along the distance's gradient, y′ = y + (−δ − d)·n.
    One linear solve sees the contacts of its start only; a vertex that a stiff cloth drags into a
    surface within the step would otherwise end inside it (a 12×12 cotton patch dropped on a sphere
    mesh: 13 mm; the 64×64 cotton artist scene into the analytic sphere: 15 mm). Changes y in place
    and returns, per collider that moved some, (vertices, J = ∂y′/∂y = I − nnᵀ + (−δ − d)·∇n
    (k,3,3), their positions before), in the order applied: the adjoint and tangent passes
    differentiate through them (core.gradients.adjoint.Linearization)."""
    sc = potential.scene
    t = (s + 1) / sc.substeps
    free = np.zeros(len(y), bool)
    free[potential.free] = True
    moved = []
    for c, col in enumerate(sc.colliders):
        d, n, curvature = col.distance(y, t, None if lag is None else lag.planes[c])
        d = d - thickness_of(col, sc)
        deep = np.flatnonzero((d < -sc.contact_smoothing) & free)
        if not len(deep):
            continue
        push = -sc.contact_smoothing - d[deep]
        jac = np.eye(3) - n[deep, :, None] * n[deep, None, :]
        if curvature is not None:
            jac += push[:, None, None] * curvature(deep)
        moved.append((deep, jac, y[deep].copy()))
        y[deep] += push[:, None] * n[deep]
    return moved


class Contact:
    """Penalty contact E(d) per vertex and collider (see penalty), d the signed distance minus
    thickness and k the vertex's stiffness: the scene's contact stiffness per unit mass (1/s²)
    times the vertex's mass, so a vertex sinks g/κ under its own weight at any resolution.

    Per active contact: the vertex (`active`), the distance's gradient n (unit) and ∇n (`curv`,
    zero for planes and a mesh's step planes), E′, E″, E‴ in d. grad (A,3) = E′·n; hess (A,3,3) the
    exact E″·nnᵀ + E′·∇n; hess_psd E″·nnᵀ: inside a collider E′ < 0 and ∇n ≥ 0, so the curvature
    term is the negative one, which projections drop. A mesh's contacts depend on the step's start
    through their planes' normals: `lag_curv` (∇ₓₛn) and `anchor` (the planes' points).
    """

    def __init__(self, scene, x, t, stiffness, vertices=None, lag=None):
        n = len(x)
        self.y, self.energy = x, 0.0
        idx, normals, curvs, derivs, lag_curvs, anchors = [], [], [], [], [], []
        cand = np.zeros(n, bool)
        cand[np.arange(n) if vertices is None else vertices] = True
        kc = np.broadcast_to(np.asarray(stiffness, dtype=np.float64), (n,))
        for c, col in enumerate(scene.colliders):
            planes = None if lag is None else lag.planes[c]
            d, nrm, curvature = col.distance(x, t, planes)
            d = d - thickness_of(col, scene)
            on = np.flatnonzero((d < 0) & cand)
            if not len(on):
                continue
            e, e1, e2, e3 = penalty(d[on], kc[on], scene.contact_smoothing)
            self.energy += float(e.sum())
            idx.append(on)
            normals.append(np.array(nrm[on]))
            curvs.append(np.zeros((len(on), 3, 3)) if curvature is None else curvature(on))
            derivs.append(np.stack([e1, e2, e3], axis=1))
            if planes is not None:
                slots = [planes.slot[int(i)] for i in on]
                lag_curvs.append(planes.curv[slots])
                anchors.append(planes.q[slots])
            else:
                lag_curvs.append(np.zeros((len(on), 3, 3)))
                anchors.append(np.zeros((len(on), 3)))
        if idx:
            self.active = np.concatenate(idx)
            self.n = np.concatenate(normals)
            self.curv = np.concatenate(curvs)
            self.e1, self.e2, self.e3 = np.concatenate(derivs).T
            self.lag_curv, self.anchor = np.concatenate(lag_curvs), np.concatenate(anchors)
        else:
            self.active = np.zeros(0, np.int64)
            self.n, self.anchor = np.zeros((0, 3)), np.zeros((0, 3))
            self.curv = self.lag_curv = np.zeros((0, 3, 3))
            self.e1 = self.e2 = self.e3 = np.zeros(0)
        self.grad = self.e1[:, None] * self.n
        self.hess_psd = self.e2[:, None, None] * self.n[:, :, None] * self.n[:, None, :]
        self.hess = self.hess_psd + self.e1[:, None, None] * self.curv

    def recentred(self, y):
        """This contact's quadratic model with its projected Hessian (a linearized step's) at
        positions y instead: E + E′·n·Δ + ½Δ·E″nnᵀ·Δ, Δ = y − these positions, and its gradient."""
        step = (y - self.y)[self.active]
        self.energy += float(np.sum(self.grad * step) + 0.5 * np.sum(step * _mv(self.hess_psd, step)))
        self.grad = self.grad + _mv(self.hess_psd, step)
        self.y = y
        return self

    def third(self, a, b):
        """∇ₓ(aᵀ·H̃·b) per active contact (A,3), H̃ = E″·nnᵀ, for a, b at the active vertices."""
        an, bn = _dot(a, self.n), _dot(b, self.n)
        ka, kb = _mv(self.curv, a), _mv(self.curv, b)
        return (self.e3 * an * bn)[:, None] * self.n + self.e2[:, None] * (an[:, None] * kb + bn[:, None] * ka)

    def third_tangent(self, w, b):
        """(∂H̃[w])·b per active contact (A,3)."""
        wn, bn = _dot(w, self.n), _dot(b, self.n)
        kw = _mv(self.curv, w)
        return (self.e3 * wn * bn)[:, None] * self.n + self.e2[:, None] * (
            bn[:, None] * kw + _dot(kw, b)[:, None] * self.n
        )

    def lag_gradient(self, y, a):
        """∂(aᵀ·∇E)/∂xₛ per active contact (A,3), through a mesh's plane normals n(xₛ): with
        d = (y − q)·n, ∂d/∂xₛ = ∇n·(y − q) (q slides along the feature, normal to n)."""
        an = _dot(a, self.n)
        return (self.e2 * an)[:, None] * _mv(self.lag_curv, y[self.active] - self.anchor) + self.e1[:, None] * _mv(
            self.lag_curv, a
        )

    def lag_tangent(self, y, dxs):
        """(∂∇E/∂xₛ)·δxₛ per active contact (A,3), for δxₛ at the active vertices."""
        dd = _dot(_mv(self.lag_curv, y[self.active] - self.anchor), dxs)
        return (self.e2 * dd)[:, None] * self.n + self.e1[:, None] * _mv(self.lag_curv, dxs)


def _mollifier(s, eps):
    """f₀'s φ = f₁(s)/s and χ = φ′(s)·s for slips s (IPC's C² mollifier: f₀(s) = −s³/3ε² + s²/ε + ε/3
    below ε, s above), and f₀(s)."""
    small = s < eps
    phi = np.where(small, 2 / eps - s / eps**2, 1 / np.maximum(s, 1e-300))
    chi = np.where(small, -s / eps**2, -1 / np.maximum(s, 1e-300))
    f0 = np.where(small, -(s**3) / (3 * eps**2) + s**2 / eps + eps / 3, s)
    return phi, chi, f0


class LaggedFriction:
    """Lagged Coulomb friction of contacts (see the module's docstring), each a stencil of S
    vertices (F,S) whose weighted sum Σ wₘyₘ slips: a collider's contact its one vertex, a
    self-contact pair (core.contact.self_contact) its vertex less its triangle's centroid. Per
    contact the normal n (F,3), normal force λ (F,), anchor Σ wₘxₛₘ + m (F,3), and their
    derivatives by each member's start position: ∂λ (F,S,3), ∂n (F,S,3,3), ∂anchor (F,S,3,3);
    μ, and the mollifier's slip ε = ε_v·h. λ may depend on the start's velocities too, ∂λ/∂vₛ
    (`dlam_v`, (F,S,3); None: not), and on the step's control force ∂λ/∂uₛ (`dlam_u`), and so on
    the fields' force at the start (`fields`, a FaceForces: λ holds against both alike), and
    `stiff` (F,; None: all) is the share of λ that scales with the contact stiffness (the
    penalty's force; not a holding force, see StepLag).

    previous (linearized steps): a slip to fit to. One linear solve cannot follow the mollifier's
    bend from stick to slip, so there friction is the quadratic that gives μλ at that slip,
    ½·μλ·|w|²/max(previous, ε): a stiff spring where the cloth sticks, Coulomb's force where it
    slides. The step fits it to the slip of the step before, solves, refits it to the slip it
    found (`refit`) and solves again on the same factorization."""

    def __init__(
        self,
        stencil,
        weights,
        n,
        lam,
        anchor,
        dlam,
        dn,
        danchor,
        mu,
        eps,
        previous=None,
        dlam_v=None,
        dlam_u=None,
        stiff=None,
        fields=None,
    ):
        self.stencil, self.weights, self.n, self.lam, self.anchor = stencil, weights, n, lam, anchor
        self.dlam, self.dn, self.danchor, self.dlam_v, self.dlam_u = dlam, dn, danchor, dlam_v, dlam_u
        self.fields = fields if dlam_u is not None else None
        self.stiff = np.ones(len(lam)) if stiff is None else stiff
        self.mu, self.eps, self.previous = mu, eps, previous

    def combine(self, v):
        return combine(self.weights, self.stencil, v)

    def spread(self, out, per_contact):
        spread(out, self.weights, self.stencil, per_contact)

    def _tangential(self, rel):
        return rel - _dot(rel, self.n)[:, None] * self.n

    def refit(self, y, inertia):
        """Fit a linearized step's quadratic to the slip at y (a first solve's) instead; where the
        quadratic's force there exceeds Coulomb's μλ, to that slip plus what the excess moves the
        contact's own inertia (inertia (n,): m(1 + hc)/h² per vertex, inf where pinned) within
        the step. Refitting to the slip alone, a contact breaking away from sticking would grow
        its slip by the ratio of its pull to μλ per solve, and a cloth placed on a slope steeper
        than its friction would stay put for several frames (10×10 Cotton on a 30° slope, μ 0.2:
        2 mm in 0.25 s, against 10 cm converged)."""
        s = np.linalg.norm(self._tangential(self.combine(y) - self.anchor), axis=1)
        if self.previous is not None:
            excess = self.mu * self.lam * (s / np.maximum(self.previous, self.eps) - 1.0)
            mobility = np.sum(self.weights[None, :] ** 2 / inertia[self.stencil], axis=1)  # 1/m per slip
            s = s + np.maximum(excess, 0.0) * mobility
        self.previous = s

    def at(self, y):
        """The terms at positions y: energy, gradient by the slip (F,3) and Hessian (F,3,3,
        positive semidefinite), which `spread` and the stencil's weights carry to the vertices."""
        rel = self.combine(y) - self.anchor
        w = self._tangential(rel)
        s = np.linalg.norm(w, axis=1)
        if self.previous is None:
            phi, chi, f0 = _mollifier(s, self.eps)
        else:
            phi = 1.0 / np.maximum(self.previous, self.eps)
            chi, f0 = np.zeros_like(s), 0.5 * phi * s * s
        scale = self.mu * self.lam
        hat = w / np.maximum(s, 1e-300)[:, None]
        proj = np.eye(3) - self.n[:, :, None] * self.n[:, None, :]
        hess = scale[:, None, None] * (
            phi[:, None, None] * proj + chi[:, None, None] * hat[:, :, None] * hat[:, None, :]
        )
        return FrictionAt(
            self, rel, w, s, phi, chi, hat, proj, float(np.dot(scale, f0)), (scale * phi)[:, None] * w, hess
        )


class FrictionAt:
    """A LaggedFriction's terms at one set of positions, and their derivatives by the step's start."""

    def __init__(self, friction, rel, w, s, phi, chi, hat, proj, energy, grad, hess):
        self.f, self.rel, self.w, self.s, self.phi, self.chi, self.hat = friction, rel, w, s, phi, chi, hat
        self.proj = proj  # the tangent projectors P (F,3,3)
        self.energy, self.grad, self.hess = energy, grad, hess

    def add_gradient(self, out):
        self.f.spread(out, self.grad)

    def majorizer(self):
        """μλφ(s)·P (F,3,3): the curvature of the quadratic in w that touches the energy at w and
        lies above it everywhere (f₀′(s)/s falls as s grows), at least the exact Hessian's."""
        return (self.f.mu * self.f.lam * self.phi)[:, None, None] * self.proj

    def add_hess_vec(self, out, v):
        self.f.spread(out, _mv(self.hess, self.f.combine(v)))

    def _dg_dw(self, a):
        """∂(a·g)/∂w for g = μλφ(s)·w as a function of the vector w: μλ(φ·a + χ(a·ŵ)ŵ)."""
        return (self.f.mu * self.f.lam)[:, None] * (
            self.phi[:, None] * a + (self.chi * _dot(a, self.hat))[:, None] * self.hat
        )

    def _by_lam(self, a):
        """∂(v·∇D)/∂λ per contact (F,1,1), a = Σwₘvₘ: D's gradient is linear in λ."""
        return (self.f.mu * self.phi * _dot(a, self.w))[:, None, None]

    def _by_force(self, by_lam, n):
        """∂(v·∇D)/∂uₛ at the n vertices (n,3), through λ: what the fields' force passes on too."""
        out = np.zeros((n, 3))
        scatter_add(out, self.f.stencil, by_lam * self.f.dlam_u)
        return out

    def add_lag_gradient(self, out, out_v, out_u, v):
        """out += ∂(v·∇D)/∂xₛ: through λ, the anchor and n(xₛ); out_v, out_u += ∂(v·∇D)/∂vₛ,
        ∂(v·∇D)/∂uₛ, through λ (and through the fields' force at the start, by xₛ and vₛ)."""
        f = self.f
        a = f.combine(v)
        g = self._dg_dw(a)
        pg = g - _dot(g, f.n)[:, None] * f.n
        back = _dot(g, f.n)[:, None] * self.rel + _dot(f.n, self.rel)[:, None] * g
        by_lam = self._by_lam(a)
        per = by_lam * f.dlam
        per -= np.einsum("amji,aj->ami", f.danchor, pg) + np.einsum("amji,aj->ami", f.dn, back)
        scatter_add(out, f.stencil, per)
        if f.dlam_v is not None:
            scatter_add(out_v, f.stencil, by_lam * f.dlam_v)
        if f.dlam_u is not None:
            by_force = self._by_force(by_lam, len(out))
            out_u += by_force
            if f.fields is not None:
                f.fields.pullback(by_force, out, out_v)

    def add_wind_gradient(self, v, out_wind):
        """out_wind += ∂(v·∇D)/∂(the scene's wind per frame), through λ and the fields' force;
        returns ∂(v·∇D)/∂(its drag κ)."""
        return self.f.fields.wind_pullback(self._by_force(self._by_lam(self.f.combine(v)), len(v)), out_wind)

    def _by_lam_change(self, dlam):
        """∇D's change (F,3 per slip) for changes dlam (F,) of λ."""
        return (self.f.mu * self.phi * dlam)[:, None] * self.w

    def add_wind_tangent(self, dwind, ddrag, out):
        """out += ∂∇D/∂wind·δwind + ∂∇D/∂κ·δκ (through λ and the fields' force)."""
        f = self.f
        dlam = np.einsum("ami,ami->a", f.dlam_u, f.fields.wind_push(dwind, ddrag)[f.stencil])
        f.spread(out, self._by_lam_change(dlam))

    def add_lag_tangent(self, out, dxs, dvs, dus):
        """out += (∂∇D/∂xₛ)·δxₛ + (∂∇D/∂vₛ)·δvₛ + (∂∇D/∂uₛ)·δuₛ."""
        f = self.f
        dx = dxs[f.stencil]
        dlam = np.einsum("ami,ami->a", f.dlam, dx)
        for by, d in ((f.dlam_v, dvs), (f.dlam_u, dus)):
            if by is not None:
                dlam += np.einsum("ami,ami->a", by, d[f.stencil])
        if f.fields is not None:
            dlam += np.einsum("ami,ami->a", f.dlam_u, f.fields.push(dxs, dvs)[f.stencil])
        dn = np.einsum("amij,amj->ai", f.dn, dx)
        nr = _dot(f.n, self.rel)
        dw = -np.einsum("amij,amj->ai", f.danchor, dx)
        dw = dw - _dot(dw, f.n)[:, None] * f.n - dn * nr[:, None] - f.n * _dot(dn, self.rel)[:, None]
        scale = f.mu * f.lam
        hw = scale[:, None] * (self.phi[:, None] * dw + (self.chi * _dot(self.hat, dw))[:, None] * self.hat)
        f.spread(out, self._by_lam_change(dlam) + hw)
