"""One implicit Euler step as the minimization of the incremental potential.

    E(y) = ½h⁻²‖y − x − h·v‖²_M + ½h⁻¹·c‖y − x‖²_M + Φ(y) − uᵀy,   x′ = argmin E,  v′ = (x′ − x)/h

with Φ = springs + gravity + contact. Unknowns are the free (unpinned) vertices. Newton's
direction comes from the exact Hessian when it is positive definite and from a projected one
(compressed springs and sphere curvature clamped) when not; a backtracking line search makes
every iteration decrease E. Factorizations dominate the cost, so a factorization is kept and
reused as the preconditioner of a conjugate-gradient solve of later Newton systems, within the
step and across steps, until CG needs too many iterations; then the current Hessian is factored.
"""

import numpy as np

from .colliders import Contact
from .linalg import BlockSystem

CG_MAX_ITER = 6
# Newton iterations of one step after which an indefinite Hessian is shifted (Levenberg: + mu·M,
# the smallest mu of a ×4 ladder that factors) instead of projected per spring. Projection is
# cheap and enough for nearly every step, but where buckled cloth makes it differ much from the
# exact Hessian its steps crawl (a 64×64 hanging cloth stalls near 1e-3 m at frame 3); the shifted
# exact Hessian converges there. Late, so steps that converge without it keep their solution.
SHIFT_AFTER = 100
SHIFT_MIN, SHIFT_MAX = 1e-6, 1e4


class SimulationError(RuntimeError):
    """A step that diverged or did not converge; names the frame and the integrator step."""

    def __init__(self, message, frame, step):
        super().__init__(message)
        self.frame, self.step = frame, step


def spring_terms(x, edges, rest, k, hessian=True):
    """Energy, per-spring force direction terms and 3×3 Hessian blocks (exact and projected)."""
    d = x[edges[:, 0]] - x[edges[:, 1]]
    length = np.sqrt(np.einsum("ij,ij->i", d, d))
    u = d / length[:, None]
    stretch = length - rest
    energy = 0.5 * float(np.dot(k * stretch, stretch))
    fdir = (k * stretch)[:, None] * u  # ∂E/∂x_i (and −∂E/∂x_j)
    if not hessian:
        return energy, fdir, stretch, u, None, None
    uu = u[:, :, None] * u[:, None, :]
    ratio = 1.0 - rest / length
    # K = k[uuᵀ + (1 − L0/L)(I − uuᵀ)]; compressed springs make the second term negative
    eye = np.eye(3)
    exact = k[:, None, None] * (uu + ratio[:, None, None] * (eye - uu))
    clamp = np.maximum(ratio, 0.0)
    proj = exact if (ratio >= 0).all() else k[:, None, None] * (uu + clamp[:, None, None] * (eye - uu))
    return energy, fdir, stretch, u, exact, proj


class Model:
    """Per-scene constants: free dofs, springs, masses and the linear-system pattern."""

    def __init__(self, scene):
        cloth = scene.cloth
        self.scene = scene
        self.n = cloth.n
        self.h = scene.h
        self.edges = cloth.edges
        self.rest = cloth.rest_lengths
        self.k = cloth.stiffness
        self.m = cloth.masses
        self.c = cloth.damping
        self.pinned = cloth.pinned
        free = np.ones(self.n, bool)
        free[self.pinned] = False
        self.free = np.flatnonzero(free)
        self.fidx = np.full(self.n, -1, np.int64)
        self.fidx[self.free] = np.arange(len(self.free))
        fi, fj = self.fidx[self.edges[:, 0]], self.fidx[self.edges[:, 1]]
        ends = np.stack([fi, fj], 1)
        self.system = BlockSystem(len(self.free), ends[(fi >= 0) & (fj >= 0)])
        self.assemble = self.system.assembler(ends)
        self.mf = self.m[self.free]
        self.mass_diag = (self.mf * (1.0 + self.h * self.c))[:, None, None] * np.eye(3)
        self.scale = float(np.ptp(cloth.rest, axis=0).max())
        self.gravity_force = self.m[:, None] * scene.gravity[None, :]
        self.tol = scene.tol * self.scale
        # magnitude of E's terms, to tell a real decrease from rounding
        self.energy_scale = cloth.mass * max(float(np.linalg.norm(scene.gravity)), 1.0) * self.scale

    def contact(self, y, s):
        sc = self.scene
        return Contact(sc.colliders, y, (s + 1) / sc.substeps, sc.contact_stiffness, sc.contact_thickness,
                       self.free)

    def _external(self, u):
        return self.gravity_force if u is None else self.gravity_force + u

    def energy(self, y, x, xhat, u, s):
        """E(y) for the step s → s+1 from state x with inertial prediction xhat = x + h·v."""
        free, h, m = self.free, self.h, self.m[self.free, None]
        dy, dx = (y - xhat)[free], (y - x)[free]
        e = 0.5 / h ** 2 * float(np.sum(m * dy * dy)) + 0.5 * self.c / h * float(np.sum(m * dx * dx))
        e -= float(np.sum(self._external(u)[free] * y[free]))
        d = y[self.edges[:, 0]] - y[self.edges[:, 1]]
        stretch = np.sqrt(np.einsum("ij,ij->i", d, d)) - self.rest
        return e + 0.5 * float(np.dot(self.k * stretch, stretch)) + self.contact(y, s).energy

    def gradient(self, y, x, xhat, u, s):
        """∇E over the free vertices (nf,3), the spring terms and the contact set at y."""
        h, m = self.h, self.m[:, None]
        springs = spring_terms(y, self.edges, self.rest, self.k)
        contact = self.contact(y, s)
        grad = (m * (y - xhat)) / h ** 2 + (self.c / h) * (m * (y - x)) - self._external(u)
        grad += scatter_pairs(self.edges, springs[1], self.n)
        if len(contact.active):
            np.add.at(grad, contact.active, contact.grad)
        return grad[self.free], springs, contact

    def matrix(self, kblocks, contact, projected=False, shift=0.0):
        """Storage data of h²∇²E + shift·M: mass (with damping) + h²(springs + contact)."""
        h2 = self.h ** 2
        diag = (1.0 + shift) * self.mass_diag
        if len(contact.active):
            np.add.at(diag, self.fidx[contact.active], h2 * (contact.hess_psd if projected else contact.hess))
        return self.assemble @ np.concatenate([(h2 * kblocks).ravel(), diag.ravel()])


def scatter_pairs(edges, fdir, n):
    """Per-vertex sum of +fdir at edge starts and −fdir at edge ends."""
    out = np.empty((n, 3))
    for a in range(3):
        out[:, a] = np.bincount(edges[:, 0], fdir[:, a], n) - np.bincount(edges[:, 1], fdir[:, a], n)
    return out


def pcg(system, data, b, factor, eta, maxiter=CG_MAX_ITER):
    """Solve A·x = b by CG preconditioned with a (lagged) factorization.

    Returns (x, None) on success, (None, p) with pᵀAp ≤ 0 when A shows negative curvature
    along p, or (None, None) when CG does not reach ‖r‖ ≤ eta·‖b‖ within maxiter.
    """
    x = np.zeros_like(b)
    r = b.copy()
    z = factor.solve(r)
    p = z.copy()
    rz = r @ z
    stop = eta * np.linalg.norm(b)
    for _ in range(maxiter):
        ap = system.matvec(data, p)
        pap = p @ ap
        if pap <= 0:
            return None, p
        a = rz / pap
        x += a * p
        r -= a * ap
        if np.linalg.norm(r) <= stop:
            return x, None
        z = factor.solve(r)
        rz, rz_old = r @ z, rz
        p = z + (rz / rz_old) * p
    return None, None


class Stepper:
    """Newton's method for successive steps, carrying the reusable factorization along."""

    def __init__(self, model):
        self.model = model
        self.factor = None
        self.factorizations = 0
        self.shift = SHIFT_MIN

    def _refactor(self, data):
        self.factor = self.model.system.factor(data)
        self.factorizations += 1
        return self.factor.positive_definite

    def _direction(self, b, springs, contact, eta, it):
        """Newton direction (exact Hessian if PD, else projected or, from iteration SHIFT_AFTER on,
        shifted), whether it used a fresh factorization, and a direction of negative curvature of
        the exact Hessian if one showed."""
        md = self.model
        exact = md.matrix(springs[4], contact)
        neg = None
        if self.factor is not None:
            d, neg = pcg(md.system, exact, b, self.factor, eta)
            if d is not None:
                return d, False, None
            if neg is not None:
                d, _ = pcg(md.system, md.matrix(springs[5], contact, True), b, self.factor, eta)
                if d is not None:
                    return d, False, neg
        if not self._refactor(exact):
            if it < SHIFT_AFTER or not self._refactor_shifted(springs, contact):
                self._refactor(md.matrix(springs[5], contact, True))
            if neg is None:  # let CG on the exact Hessian find where it curves down
                _, neg = pcg(md.system, exact, b, self.factor, 0.0, maxiter=5)
        return self.factor.solve(b), True, neg

    def _refactor_shifted(self, springs, contact):
        mu = self.shift
        while mu <= SHIFT_MAX:
            if self._refactor(self.model.matrix(springs[4], contact, shift=mu)):
                self.shift = max(mu / 4, SHIFT_MIN)  # start lower next time
                return True
            mu *= 4
        return False

    def step(self, x, v, s):
        """Positions after integrator step s → s+1 and (iterations, residual, converged)."""
        md, sc = self.model, self.model.scene
        h, free = md.h, md.free
        u = sc.force_at(s)
        xhat = x + h * v
        y = xhat.copy()
        y[md.pinned] = sc.pins_at(s + 1)
        to_pos = h * h / md.mf[:, None]
        res = prev = np.inf
        for it in range(sc.max_newton + 1):
            g, springs, contact = md.gradient(y, x, xhat, u, s)
            res = float(np.abs(g * to_pos).max()) if len(g) else 0.0
            if not np.isfinite(res):
                raise self._error(s, "produced non-finite values")
            if res <= md.tol or it == sc.max_newton:
                break
            b = -(h * h) * g.ravel()
            eta = max(1e-3, 0.1 * md.tol / res)
            d, fresh, neg = self._direction(b, springs, contact, eta, it)
            if neg is not None and res > 0.25 * prev and res < 1e-2 * md.scale:
                # projected Newton crawls toward a saddle (symmetric scenes): go down the negative curvature
                escaped = self._curvature_step(y, neg.reshape(-1, 3), g, d.reshape(-1, 3), x, xhat, u, s)
                if escaped is not None:
                    y, prev = escaped, res
                    continue
            y = self._line_search(y, d.reshape(-1, 3), g, x, xhat, u, s, res, fresh)
            prev = res
        return y, it, res, res <= md.tol

    def _curvature_step(self, y, p, g, d, x, xhat, u, s):
        md = self.model
        if float(np.sum(g * p)) > 0:
            p = -p
        p = p * (np.linalg.norm(d) / max(np.linalg.norm(p), 1e-300))
        e0 = md.energy(y, x, xhat, u, s)
        trial = y.copy()
        for t in (1.0, 0.5, 0.25, 0.125):
            trial[md.free] = y[md.free] + t * p
            if md.energy(trial, x, xhat, u, s) < e0:
                return trial
        return None

    def _line_search(self, y, d, g, x, xhat, u, s, res, fresh):
        md = self.model
        trial = y.copy()
        trial[md.free] += d
        e0 = md.energy(y, x, xhat, u, s)
        slope = float(np.sum(g * d))
        if -slope <= 1e-11 * (abs(e0) + md.energy_scale):
            return trial  # E cannot resolve so small a decrease: Newton is in its quadratic range
        alpha = 1.0
        while alpha > 1e-10:
            if md.energy(trial, x, xhat, u, s) <= e0 + 1e-4 * alpha * slope:
                if alpha < 1.0 and not fresh:  # the lagged factorization no longer models E well
                    self.factor = None
                return trial
            alpha *= 0.5
            trial[md.free] = y[md.free] + alpha * d
        if not fresh:  # a stale preconditioner gave a poor direction: retry with a fresh factorization
            self.factor = None
            return y
        raise self._error(s, "line search failed to decrease the energy")

    def _error(self, s, what):
        sc = self.model.scene
        frame = s // sc.substeps + 1
        return SimulationError(
            f"simulation diverged at frame {frame} (step {s + 1}): the Newton solve {what}; "
            "try more substeps, lower stiffness or lower contact stiffness", frame, s + 1)
