"""One implicit Euler step as the minimization of the incremental potential.

    E(y) = ½h⁻²‖y − x − h·v‖²_M + ½h⁻¹·c‖y − x‖²_M + Φ(y) − uᵀy,   x′ = argmin E,  v′ = (x′ − x)/h

with Φ the cloth's potential (core.terms: springs, hinge bending, gravity, contact, friction). Unknowns
are the free (unpinned) vertices.

Newton's matrix is E's Hessian with one change: the transverse stiffness t/L of a spring uses a
tension t carried along by the iteration (updated to the linearized k(L − L₀ + Δ) after every
step, and started from the previous step's converged tensions) instead of t = k(L − L₀) at the
current iterate. This is Newton's method on the mixed form of the same equations (positions and
spring forces as unknowns, forces eliminated), so it converges to the same solution, quadratically
near it, but a step that swings a stiff spring sideways no longer overshoots its tension: on the
thesis cloth it takes a third fewer iterations. Compressed springs (t < 0) make the matrix
indefinite; then their negative term is scaled down by the largest β of a halving ladder that
factors (β = 0 is the usual clamped projection), which keeps much more of the curvature than
clamping everything. A backtracking line search on E makes every iteration decrease E.
Factorizations dominate the cost, so one is kept and reused as the preconditioner of a
conjugate-gradient solve of later Newton systems, within the step and across steps, until CG
needs too many iterations; then the current matrix is factored.
"""

import numpy as np

from ..contact.penalty import project_out
from ..numerics.linalg import BlockSystem, Coupled
from ..numerics.timing import timed
from ..terms.base import HessianMode
from ..terms.potential import Potential

CG_MAX_ITER = 6
# a CG solve whose residual lags this factor behind a steady pace to its tolerance is given up
CG_SLACK = 3.0
# scale factors tried for the negative (compressed-spring, sphere-curvature) terms when the
# full matrix is indefinite; 0 is the clamped projection, always positive definite
BLEND = (0.5, 0.25, 0.125, 0.0)
# Newton iterations without halving the residual after which an indefinite matrix is shifted
# (Levenberg: + mu·M, the smallest mu of a ×4 ladder that factors) instead of blended. Blending
# is cheap and enough for nearly every step, but where buckled cloth makes it differ much from
# the exact Hessian its steps crawl along soft modes; the shifted exact matrix converges there.
STALL = 8
# longest step, in Newton steps, that a blended iteration's line search expands to
EXPAND_MAX = 1024
SHIFT_MIN, SHIFT_MAX = 1e-6, 1e4
# Newton iterations that go straight to blending after the full matrix failed to factor or
# showed negative curvature: it mostly fails again, at nearly the cost of a success (64×64:
# 702 → 637 factorizations over the thesis run; 20×20 + sphere: 834 → 699)
SKIP_FULL = 3
# a Newton step within a few rounding units of the positions cannot change them: the residual is
# at its rounding floor, about ε·|x|·h²·stiffness/mass, which stiff bending on fine cells lifts
# above tol (a hinge's stiffness grows as 1/cell⁴). Such a step stops there, converged if that
# floor is within FLOOR_SLACK of tol (instead of iterating on rounding noise up to max_newton).
ROUNDING_STEP = 8 * np.finfo(np.float64).eps
FLOOR_SLACK = 1e3
# a Newton direction that moves a vertex more than this many times the step the line search last
# took within the integrator step is tried at that length first: the penalty's push into soft modes
# (a walking body striking a hem with friction: 0.3 m directions, 1/128 taken) would otherwise cost
# a halving, an evaluation of every term, each (the character's converged forward 9.7 → 7.3 s;
# the artist scene's unchanged)
REACH_GROWTH = 4.0


class SimulationError(RuntimeError):
    """A step that diverged or did not converge; names the frame and the integrator step."""

    def __init__(self, message, frame, step):
        super().__init__(message)
        self.frame, self.step = frame, step


class StepModel:
    """Per-scene constants: free dofs, masses, the potential's terms and the linear-system pattern."""

    def __init__(self, scene):
        cloth = scene.cloth
        self.scene = scene
        self.n = cloth.n
        self.h = scene.h
        self.m = cloth.masses
        self.c = np.broadcast_to(cloth.damping, (cloth.n,))  # air damping per vertex (1/s)
        self.pinned = cloth.pinned
        free = np.ones(self.n, bool)
        free[self.pinned] = False
        self.free = np.flatnonzero(free)
        self.fidx = np.full(self.n, -1, np.int64)
        self.fidx[self.free] = np.arange(len(self.free))
        # the pairs coupled by any term: triangle edges, sewing pairs, and the vertices opposite an interior
        # edge (bending springs, or the hinges' opposite corners, unless a linearized step's
        # matrix bounds the hinges without them: Scene.hinges_bounded)
        coupled = [cloth.tension_edges, cloth.shear_edges, cloth.sewing_edges]
        if not scene.hinges_bounded:
            coupled.append(cloth.bending_edges)
        ends = self.fidx[np.concatenate(coupled)]
        self.system = BlockSystem(len(self.free), ends[(ends >= 0).all(axis=1)])
        self.potential = Potential(scene, self.system, self.fidx, self.h**2)
        self.mf = self.m[self.free]
        self.cf = self.c[self.free, None]  # (nf, 1), beside mf[:, None]
        self.mass_diag = (self.mf * (1.0 + self.h * self.c[self.free]))[:, None, None] * np.eye(3)
        # what holds each vertex against a push within a step, m(1 + hc)/h² (pinned: inf)
        self.inertia = np.full(self.n, np.inf)
        self.inertia[self.free] = self.mass_diag[:, 0, 0] / self.h**2
        self.mass_data = np.zeros(self.system.size)
        self.system.add_diagonal(self.mass_data, np.arange(len(self.free)), self.mass_diag)
        self.scale = float(np.ptp(cloth.rest, axis=0).max())
        self.tol = scene.tol * self.scale
        # magnitude of E's terms, to tell a real decrease from rounding
        self.energy_scale = cloth.mass * max(float(np.linalg.norm(scene.gravity)), 1.0) * self.scale

    def point(self, y, x, xhat, u, s, lag=None):
        """The potential's State at y with E(y) for the step from state x with inertial
        prediction xhat = x + h·v, control force u and the step's lagged contact data."""
        pt = self.potential.at(y, s, lag)
        free, h, m = self.free, self.h, self.m[self.free, None]
        dy, dx = (y - xhat)[free], (y - x)[free]
        e = 0.5 / h**2 * float(np.sum(m * dy * dy)) + 0.5 / h * float(np.sum(self.cf * m * dx * dx))
        if u is not None:
            e -= float(np.sum(u[free] * y[free]))
        pt.energy = e + pt.phi
        return pt

    def gradient(self, pt, x, xhat, u):
        """∇E over the free vertices (nf,3) at the point pt."""
        h, m, y = self.h, self.m[:, None], pt.y
        grad = (m * (y - xhat)) / h**2 + (self.c[:, None] / h) * (m * (y - x)) + self.potential.gradient(pt)
        if u is not None:
            grad -= u
        return grad[self.free]

    def matrix(self, pt, carried=None, beta=1.0, shift=0.0, projected=False, majorized=False):
        """Storage data of M(1 + hc)(1 + shift) + h²∇²Φ at pt (see terms.base.HessianMode for
        carried, beta, projected and majorized: with all default it is h²∇²E)."""
        data = self.potential.hessian(pt, HessianMode(carried, beta, projected, majorized))
        if isinstance(data, Coupled):
            return data.plus_diagonal_data((1.0 + shift) * self.mass_data)
        return data + (1.0 + shift) * self.mass_data

    def prediction(self, x, v, s):
        """Where a linearized step starts: the inertial prediction x + h·v (a drape at rest is then
        a fixed point of the step), the pins where they are after step s."""
        y = x + self.h * v
        y[self.pinned] = self.scene.pins_at(s + 1)
        return y


def pcg(system, data, b, factor, eta, maxiter=CG_MAX_ITER, x0=None):
    """Solve A·x = b by CG preconditioned with a (lagged) factorization, from x0 (default 0).

    Returns (x, None) on success, (None, p) with pᵀAp ≤ 0 when A shows negative curvature
    along p, or (None, None) when CG does not reach ‖r‖ ≤ eta·‖b‖ within maxiter, or falls so
    far behind the pace that needs (CG_SLACK) that it would not.
    """
    if not b.any():  # nothing pushes (a weightless cloth at rest): the solution is 0, not CG's 0/0
        return np.zeros_like(b), None
    x = np.zeros_like(b) if x0 is None else x0.copy()
    r = b.copy() if x0 is None else b - system.matvec(data, x)
    z = factor.solve(r)
    p = z.copy()
    rz = r @ z
    norm_b = np.linalg.norm(b)
    stop = eta * norm_b
    pace = eta ** (1.0 / maxiter)
    for j in range(1, maxiter + 1):
        ap = system.matvec(data, p)
        pap = p @ ap
        if pap <= 0:
            return None, p
        a = rz / pap
        x += a * p
        r -= a * ap
        norm_r = np.linalg.norm(r)
        if norm_r <= stop:
            return x, None
        if j < maxiter and norm_r > CG_SLACK * norm_b * pace**j:
            break
        z = factor.solve(r)
        rz, rz_old = r @ z, rz
        p = z + (rz / rz_old) * p
    return None, None


def precise_solve(system, data, b, factor, eta, maxiter=CG_MAX_ITER, x0=None):
    """factor's solution of data·x = b to relative residual eta: PCG on data when the factor is
    inexact (single precision); None if that does not converge. A Coupled matrix (self-contact)
    is solved by PCG on factor, else on its own factorization; x0: PCG's start."""
    if not isinstance(data, Coupled):
        return factor.solve(b) if factor.exact else pcg(system, data, b, factor, eta, maxiter, x0)[0]
    # factor may be another Coupled matrix's (an earlier solve's): refine it on this one
    x = pcg(system, data, b, factor, eta, maxiter, x0)[0] if factor.solve is not None else None
    if x is None:
        own = data.factor(system)
        x = pcg(system, data, b, own, eta, maxiter, x0)[0] if own.solve is not None else None
    return x


# relative residual to which a linearized step's system is solved: its solution is the step
LINEAR_RTOL = 1e-15
# relative residual of a linearized step's solve with self-contact couplings
COUPLED_RTOL = 1e-8
# the most times a linearized step is solved again with the self-contact pairs it carried too deep
SELF_ROUNDS = 4


class LinearizedStepper:
    """One Newton step of the incremental potential per integrator step, from the inertial
    prediction x̂ = x + h·v (StepModel.prediction), with the smooth projected Hessian
    (Scene(solver="linearized")):

        x′ = x̂ − Ã⁻¹·h²∇E(x̂),   Ã = M(1 + hc) + h²·H̃(x̂)

    Ã is positive definite by construction, so every step costs one factorization and never
    fails; where ∇E is linear (gravity, hinges, plane contact) the step is exact implicit Euler.
    Friction, whose stick and slip one linear solve cannot tell apart, is a quadratic fitted to the
    previous step's slip (contact.penalty.LaggedFriction), and vertices dragged deep into a collider within the step
    are moved back out (contact.project_out, `projected`: what the last step moved).
    After each step, what simulate keeps of it: `factor`, Ã's own factorization (the adjoint and
    tangent passes solve with it), `projected`, `lag` (the step's StepLag) and `factorizations`
    (a running count)."""

    def __init__(self, model):
        self.model = model
        self.factor = None
        self.factorizations = 0
        self.projected = []
        self.lag = None

    def _factor(self, data, s):
        self.factor = self.model.system.factor(data)
        self.factorizations += 1
        if not self.factor.positive_definite:  # only rounding in extreme stiffness ratios can do this
            raise step_error(self.model.scene, s, "found its matrix singular")

    def _solve(self, data, b, s, guess=None):
        """data·d = b to rounding by PCG on the step's factorization (single precision, or of a
        matrix that differs in contact blocks) from guess (an earlier solve's of a matrix that
        differs a little), refactoring data should that stall."""
        md = self.model
        # to rounding; should that stall, nearly. A Coupled matrix (self-contact, whose gradients
        # are not built for linearized steps) needs no more than Newton's tolerance.
        etas = (COUPLED_RTOL,) if isinstance(data, Coupled) else (LINEAR_RTOL, 1e-12)
        for attempt in range(2):
            for eta in etas:
                d = precise_solve(md.system, data, b, self.factor, eta, maxiter=30, x0=guess)
                if d is not None and np.isfinite(d).all():
                    return d
            if attempt == 0:
                self._factor(data, s)
        raise step_error(md.scene, s, "produced non-finite values")

    def step(self, x, v, s, guess=None):
        """As Stepper.step (guess is of no use: the step has one solution); the residual is the
        linear solve's, relative."""
        md = self.model
        u = md.scene.force_at(s)
        xhat = x + md.h * v
        y = md.prediction(x, v, s)
        self.lag = lag = md.potential.lag(x, v, s)
        pt = md.potential.at(y, s, lag)
        b = -(md.h**2) * md.gradient(pt, x, xhat, u).ravel()
        data = md.matrix(pt, projected=True)
        self._factor(data, s)
        d = self._solve(data, b, s)
        friction = [] if lag is None else [f for _, f in lag.frictions()]
        if friction:  # refit friction to the slip this solve found, and solve the step again
            moved = y.copy()
            moved[md.free] += d.reshape(-1, 3)
            for f in friction:
                f.refit(moved, md.inertia)
            lag.contact_at = moved  # and the colliders' penalty linearized there
            pt = md.potential.at(y, s, lag, like=pt)
            b = -(md.h**2) * md.gradient(pt, x, xhat, u).ravel()
            data = md.matrix(pt, projected=True)
            # on its own factor: PCG on the first's stalled in 13 of the character's 17 refits, each
            # after about 10 products, and refactored then (solves 23 → 15 ms, factors 26 → 30)
            self._factor(data, s)
            d = self._solve(data, b, s, guess=d)
        res = float(np.linalg.norm(md.system.matvec(data, d) - b) / max(np.linalg.norm(b), 1e-300))
        y = y.copy()  # pt stays at the prediction
        y[md.free] += d.reshape(-1, 3)
        if lag is not None and lag.cloth is not None:
            y = self._self_contacts(y, x, xhat, u, s, pt)
        self.projected = project_out(md.potential, lag, y, s)
        return y, 1, res, True

    @timed("self-collision")
    def _self_contacts(self, y, x, xhat, u, s, pt):
        """The step solved again while its result crosses or comes near pairs its planes lack, or
        leaves pairs deeper than the contact smoothing that were apart at the prediction. One
        linear solve sees only the pairs in contact where it starts, and a layer the step
        carries onto another would pass through it: such pairs are added and held in contact
        (SelfPlanes.forced: the penalty's quadratic, which one solve minimizes exactly), those
        that end apart let go, for SELF_ROUNDS at most (a stack of two 10×10 sheets pressed by
        a sphere: 96 crossing triangle pairs with one solve, 0 with this; Newton from the
        solve's result still left 140). pt: the step's State at its prediction."""
        md, start, lag = self.model, pt.y, self.lag
        for _ in range(SELF_ROUNDS):
            grown = md.potential.grow_self_pairs(lag, x, y)
            planes = lag.cloth
            depth = planes.depth(y) - md.scene.self_distance
            forced = (planes.forced | (depth < -md.scene.contact_smoothing)) & (depth < 0)
            if not grown and (forced == planes.forced).all():
                break
            planes.forced = forced
            pt = md.potential.at(start, s, lag, like=pt)
            b = -(md.h**2) * md.gradient(pt, x, xhat, u).ravel()
            data = md.matrix(pt, projected=True)
            guess = (y - start)[md.free].ravel()  # the last round's, whose matrix differs by a few pairs
            y = start.copy()
            y[md.free] += self._solve(data, b, s, guess).reshape(-1, 3)
        return y


class Stepper:
    """Newton's method for successive steps, carrying the reusable factorization and the springs'
    forces along. After each step, what simulate keeps of it, as LinearizedStepper's: `factor` (the
    last factorization), `projected` (empty), `lag` and `factorizations`."""

    def __init__(self, model):
        self.model = model
        self.factor = None
        self.factorizations = 0
        self.lag = None
        self.shift = SHIFT_MIN
        self.tension = None
        self.blend = 0
        self.skip_full = 0
        self.reach = None  # the largest vertex move of the step's last accepted line search
        self.majorized = False  # Newton's matrix takes friction's majorizer (after a step that backtracked)
        self.overshot = False  # the last integrator step's first Newton step backtracked
        self.projected = []  # a converged step keeps its contacts itself

    def _matrix(self, pt, tension, beta=1.0, shift=0.0):
        """Newton's matrix at pt: the carried tension, friction majorized where the last step overshot."""
        return self.model.matrix(pt, tension, beta, shift=shift, majorized=self.majorized)

    def _refactor(self, data):
        self.factor = self.model.system.factor(data)
        self.factorizations += 1
        return self.factor.positive_definite

    def _direction(self, pt, tension, b, eta, shift, s):
        """Newton direction, whether it used a fresh factorization, whether that factored a
        blended or shifted matrix, and a direction of negative curvature of the Newton matrix if
        one showed."""
        md = self.model
        full = self._matrix(pt, tension)
        neg = None
        if self.factor is not None:
            d, neg = pcg(md.system, full, b, self.factor, eta)
            if d is not None:
                return d, False, False, None
        tried = neg is None and self.skip_full == 0
        if tried and self._refactor(full):
            d = precise_solve(md.system, full, b, self.factor, eta)
            return (self.factor.solve(b) if d is None else d), True, False, None
        # indefinite: blend, starting from the β that last factored in this step
        if not (shift and self._refactor_shifted(pt, tension)):
            for i in range(self.blend, len(BLEND)):
                if self._refactor(self._matrix(pt, tension, BLEND[i])):
                    self.blend = i
                    break
            else:  # clamped yet not positive definite: rounding in extreme stiffness ratios
                if not self._refactor_shifted(pt, tension, beta=0.0):
                    raise self._error(s, "found no positive-definite Newton matrix")
        if neg is None:  # let CG on the full matrix find where it curves down
            _, neg = pcg(md.system, full, b, self.factor, 0.0, maxiter=5)
        if neg is not None:  # skip the full matrix for the next SKIP_FULL iterations
            self.skip_full = SKIP_FULL
        else:  # it failed to factor in this iteration, or this one was skipped: count it
            self.skip_full = (SKIP_FULL if tried else self.skip_full) - 1
        return self.factor.solve(b), True, True, neg

    def _refactor_shifted(self, pt, tension, beta=1.0):
        mu = self.shift
        while mu <= SHIFT_MAX:
            if self._refactor(self._matrix(pt, tension, beta, shift=mu)):
                self.shift = max(mu / 4, SHIFT_MIN)  # start lower next time
                return True
            mu *= 4
        return False

    def step(self, x, v, s, guess=None):
        """Positions after integrator step s → s+1 and (iterations, residual, converged).
        guess: positions to start Newton from instead of the inertial prediction x + h·v, where
        E is lower there: near a solution of a neighbouring design, Newton (then without its
        long steps) converges to the same branch where the step has several (cloth buckling one
        way or the other). A solution that crosses or nears self-contact pairs the step's planes
        lack gets them, and Newton goes on from it (SELF_ROUNDS at most)."""
        self.lag = self.model.potential.lag(x, v, s)
        out = self._converge(x, v, s, guess)
        if self.lag is not None and self.lag.cloth is not None:
            out = self._self_contacts(x, v, s, out)
        return out

    @timed("self-collision")
    def _self_contacts(self, x, v, s, out):
        """Newton gone on from a solution out while it nears or crosses pairs the planes lack."""
        for _ in range(SELF_ROUNDS):
            if not self.model.potential.grow_self_pairs(self.lag, x, out[0]):
                break
            iterations = out[1]
            out = self._converge(x, v, s, out[0])
            out = (out[0], out[1] + iterations) + out[2:]
        return out

    def _converge(self, x, v, s, guess):
        md, sc = self.model, self.model.scene
        h = md.h
        u = sc.force_at(s)
        xhat = x + h * v
        y = xhat.copy()
        y[md.pinned] = sc.pins_at(s + 1)
        pt = md.point(y, x, xhat, u, s, self.lag)
        if guess is not None:
            y = guess.copy()
            y[md.pinned] = sc.pins_at(s + 1)
            other = md.point(y, x, xhat, u, s, self.lag)
            if other.energy < pt.energy:
                pt = other
        # from a guess, Newton stays near it: the expanding line search and the steps along
        # negative curvature, there to leave saddles and crawls, would jump to another branch
        local = guess is not None and pt is other
        tension = md.potential.newton_forces(pt) if self.tension is None else self.tension
        to_pos = h * h / md.mf[:, None]
        # where the last step's first Newton step overshot, this one's likely does too: start majorized
        self.blend, self.skip_full, self.reach, self.majorized = 0, 0, None, self.overshot
        res = prev = best = np.inf
        stalled = 0
        floor = False
        for it in range(sc.max_newton + 1):
            g = md.gradient(pt, x, xhat, u)
            res = float(np.abs(g * to_pos).max()) if len(g) else 0.0
            if not np.isfinite(res):
                raise self._error(s, "produced non-finite values")
            if res <= md.tol or it == sc.max_newton:
                break
            b = -(h * h) * g.ravel()
            # CG iterations are a tenth of a factorization: solving each Newton system to 1e-5
            # (not 1e-3) saves a Newton iteration in most steps
            eta = max(1e-5, 0.1 * md.tol / res)
            if res < 0.5 * best:
                best, stalled = res, 0
            else:
                stalled += 1
            shift = stalled >= STALL
            d, fresh, blended, neg = self._direction(pt, tension, b, eta, shift, s)
            d = d.reshape(-1, 3)
            if np.abs(d).max() <= ROUNDING_STEP * np.abs(pt.y).max():
                floor = True
                break
            if neg is not None and not shift and not local and res > 0.25 * prev and res < 1e-2 * md.scale:
                # Newton crawls toward a saddle (symmetric scenes): go down the negative curvature
                escaped = self._curvature_step(pt, neg.reshape(-1, 3), g, d, x, xhat, u, s)
                if escaped is not None:
                    pt, prev = escaped, res
                    tension = md.potential.newton_forces(pt)
                    continue
            old = pt
            pt, alpha = self._line_search(pt, d, g, x, xhat, u, s, fresh, blended and not local)
            if it == 0:
                self.overshot = self.majorized
            if alpha > 0:
                # the mixed form's force update: the tension the linearization predicts
                full = np.zeros_like(y)
                full[md.free] = alpha * d
                tension = md.potential.newton_update(tension, old, full, alpha)
            prev = res
        self.tension = md.potential.newton_forces(pt)
        return pt.y, it, res, res <= (FLOOR_SLACK if floor else 1.0) * md.tol

    def _curvature_step(self, pt, p, g, d, x, xhat, u, s):
        md = self.model
        if float(np.sum(g * p)) > 0:
            p = -p
        p = p * (np.linalg.norm(d) / max(np.linalg.norm(p), 1e-300))
        trial = pt.y.copy()
        for t in (1.0, 0.5, 0.25, 0.125):
            trial[md.free] = pt.y[md.free] + t * p
            new = md.point(trial.copy(), x, xhat, u, s, self.lag)
            if new.energy < pt.energy:
                return new
        return None

    def _line_search(self, pt, d, g, x, xhat, u, s, fresh, expand):
        """The accepted point and its step length along d (0: keep pt, retry with a fresh
        factorization), searched from at most REACH_GROWTH times the last accepted move; expand:
        try longer steps when the first is accepted."""
        big = float(np.abs(d).max())
        scale = 1.0
        if self.reach is not None and big > REACH_GROWTH * self.reach:
            scale = REACH_GROWTH * self.reach / big
        new, alpha = self._search(pt, scale * d, g, x, xhat, u, s, fresh, expand)
        # a step that backtracked overshot: friction's curvature is its majorizer's until a full
        # step is taken (terms.friction; the character sample's steps took a quarter of the
        # iterations)
        self.majorized = alpha < 1.0
        if alpha > 0:
            self.reach = alpha * scale * big
        return new, alpha * scale

    def _search(self, pt, d, g, x, xhat, u, s, fresh, expand):
        """The accepted point along d by backtracking from its full length, and that length."""
        md = self.model
        trial = pt.y.copy()
        trial[md.free] += d
        e0 = pt.energy
        slope = float(np.sum(g * d))
        if -slope <= 1e-11 * (abs(e0) + md.energy_scale):
            # E cannot resolve so small a decrease: Newton is in its quadratic range
            return md.point(trial, x, xhat, u, s, self.lag), 1.0
        alpha = 1.0
        while alpha > 1e-10:
            new = md.point(trial, x, xhat, u, s, self.lag)
            if new.energy <= e0 + 1e-4 * alpha * slope:
                if alpha < 1.0 and not fresh:  # the lagged factorization no longer models E well
                    self.factor = None
                if alpha == 1.0 and expand:
                    return self._expand(pt, d, new, x, xhat, u, s)
                return new, alpha
            alpha *= 0.5
            trial = pt.y.copy()
            trial[md.free] += alpha * d
        if not fresh:  # a stale preconditioner gave a poor direction: retry with a fresh factorization
            self.factor = None
            return pt, 0.0
        raise self._error(s, "line search failed to decrease the energy")

    def _expand(self, pt, d, best, x, xhat, u, s):
        """Longer steps along d while E keeps falling. A blended matrix overrates the curvature
        along soft (buckling) modes, where its full steps crawl at a few per cent per iteration."""
        md, alpha = self.model, 1.0
        while alpha < EXPAND_MAX:
            trial = pt.y.copy()
            trial[md.free] += 2 * alpha * d
            new = md.point(trial, x, xhat, u, s, self.lag)
            if not new.energy < best.energy:
                break
            best, alpha = new, 2 * alpha
        return best, alpha

    def _error(self, s, what):
        return step_error(self.model.scene, s, what)


def step_error(scene, s, what):
    """The SimulationError of integrator step s → s+1, naming its frame."""
    frame = s // scene.substeps + 1
    return SimulationError(
        f"simulation diverged at frame {frame} (step {s + 1}): the Newton solve {what}; "
        "try more substeps, lower stiffness or lower contact stiffness",
        frame,
        s + 1,
    )
