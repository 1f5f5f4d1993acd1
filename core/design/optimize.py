"""Optimizers over parameterized designs, keeping the best design seen: Gauss–Newton
(core.design.gauss_newton) for keyframe losses, scipy's L-BFGS-B for the rest and where bounds apply."""

import dataclasses
import time

import numpy as np
from scipy.optimize import minimize

from ..gradients.adjoint import value_and_grad
from ..numerics.threads import one_blas_thread
from ..numerics.timing import Clock
from ..solver.integrator import SimulationError
from ..solver.simulate import simulate
from . import gauss_newton
from .params import Acceleration, Design
from .reach import friction_under

METHODS = ("auto", "gauss-newton", "l-bfgs-b")


@dataclasses.dataclass
class OptimizeResult:
    """scene: the best scene found; theta, loss (keyframe loss + regularizers) of that scene;
    initial_loss; history: one dict per iteration (iteration, loss, normalized_loss, grad_norm,
    elapsed, distances (the best design's {frame: (mean, largest)} distance to the keys in m, for
    a loss with distances such as KeyframeLoss), and that iteration's evaluations (simulations), adjoints, tangents (passes) and
    forward_s, adjoint_s, tangent_s (seconds in them); Gauss–Newton adds inner (Lanczos vectors,
    each one tangent and one adjoint pass) and damping (λ relative to the curvature along the gradient)); reason: why it stopped
    ("converged", "max_iter", "stopped", "within": every key's mean distance within `within`, or
    the method's message); method: the one that ran;
    params: the optimized quantities by name (see Param.describe); evaluations: simulations run;
    passes: {"forward" | "adjoint" | "tangent": (count, seconds)} over the whole run;
    initial_distances: the start's distances to the keys (as in history), for a loss that
    measures them; trajectory: the best design's motion as the optimizer simulated it. Gauss–Newton follows one
    branch of the solutions of buckling steps (core.design.gauss_newton), so it is reproduced by
    simulate(scene, guess=trajectory.step_x); from scratch, simulate(scene) may fold the other
    way where the cloth buckles. A run Refine continued (core.design.refine) has refined True and
    carried_distances: the keys' distances of the cloth itself with the proxy's design. keyframes:
    per key, the distances before and after, and reach: per key, what it asks of the fabric's
    stretch (core.design.reach.KeyReach), where a caller measures them (the add-on)."""

    scene: object
    theta: np.ndarray
    loss: float
    initial_loss: float
    history: list
    reason: str
    method: str
    params: dict
    evaluations: int
    passes: dict
    elapsed: float
    trajectory: object
    initial_distances: dict
    refined: bool = False
    carried_distances: dict = None
    keyframes: dict = None
    reach: dict = None

    @property
    def normalized_loss(self):
        return self.loss / self.initial_loss if self.initial_loss > 0 else 0.0


class _Stop(Exception):
    """Ends a run from _Record.record; args[0] is the reason."""


class Objective:
    """f(θ) → (value, gradient) of keyframe loss + regularizers, for any θ of `design`; f.traj
    holds the trajectory of the last θ evaluated."""

    def __init__(self, design, loss):
        self.design, self.loss, self.traj = design, loss, None

    def __call__(self, theta, guess=None):
        fields = self.design.fields(theta)
        scene = self.design.scene(theta, fields)
        self.traj = traj = simulate(scene, guess=guess)
        value, grad = value_and_grad(scene, self.loss, traj)
        reg, reg_grad = self.design.regularizer(theta)
        return value + reg, self.design.pullback(theta, grad, fields) + reg_grad


class _Record:
    """What both methods share: the best design seen (and, for a loss that measures them, its
    distances to the keys), the history with each iteration's share of the passes (from the
    Clock), and the callback that may stop the run (raising _Stop)."""

    PASSES = (
        ("forward", "evaluations", "forward_s"),
        ("adjoint", "adjoints", "adjoint_s"),
        ("tangent", "tangents", "tangent_s"),
    )

    def __init__(self, design, loss, callback, clock, initial_loss, initial_traj, within=None):
        self.design, self.callback, self.clock, self.within = design, callback, clock, within
        self.start = time.perf_counter()
        self.initial_loss = self.loss = initial_loss
        self.theta = design.theta0.copy()
        self.traj = initial_traj
        self.measure = getattr(loss, "distances", None)
        self.distances = self.initial_distances = self.measure(initial_traj.x) if self.measure else None
        self.history = []
        self._seen = clock.snapshot()

    def improved(self, theta, value, traj):
        """Keep θ (simulated as traj) if it is the best so far."""
        if value < self.loss:
            self.loss, self.theta, self.traj = value, theta.copy(), traj
            if self.measure:
                self.distances = self.measure(traj.x)

    def record(self, grad_norm, **extra):
        counts, seconds = self.clock.snapshot()
        info = {
            "iteration": len(self.history) + 1,
            "loss": self.loss,
            "normalized_loss": self.loss / self.initial_loss if self.initial_loss > 0 else 0.0,
            "grad_norm": grad_norm,
            "elapsed": time.perf_counter() - self.start,
        }
        for kind, count_key, seconds_key in self.PASSES:
            info[count_key] = counts.get(kind, 0) - self._seen[0].get(kind, 0)
            info[seconds_key] = seconds.get(kind, 0.0) - self._seen[1].get(kind, 0.0)
        if self.distances is not None:
            info["distances"] = dict(self.distances)
        info.update(extra)
        self._seen = counts, seconds
        self.history.append(info)
        if self.callback is not None and self.callback(dict(info, params=self.design.describe(self.theta))):
            raise _Stop("stopped")
        if self.close_enough():
            raise _Stop("within")

    def close_enough(self):
        """Whether every key's mean distance is within `within` (an artist's "good enough")."""
        return self.within is not None and max(mean for mean, _ in self.distances.values()) <= self.within

    def result(self, reason, method):
        counts, seconds = self.clock.snapshot()
        passes = {kind: (counts.get(kind, 0), seconds.get(kind, 0.0)) for kind, _, _ in self.PASSES}
        return OptimizeResult(
            scene=self.design.scene(self.theta),
            theta=self.theta,
            loss=self.loss,
            initial_loss=self.initial_loss,
            history=self.history,
            reason=reason,
            method=method,
            params=self.design.describe(self.theta),
            evaluations=passes["forward"][0],
            passes=passes,
            elapsed=time.perf_counter() - self.start,
            trajectory=self.traj,
            initial_distances=self.initial_distances,
        )


def choose_method(method, loss, design):
    """The method `optimize` runs: "auto" is Gauss–Newton for a sum-of-squares loss of the states
    (one with hess_vec: a KeyframeLoss, or one on an embedded render mesh) without bounds on θ,
    else L-BFGS-B."""
    if method not in METHODS:
        raise ValueError(f"unknown optimization method {method!r}; choose from {', '.join(METHODS)}")
    bounded = [
        p.name for p, sl in zip(design.params, design.slices) if any(b != (None, None) for b in design.bounds[sl])
    ]
    if method == "gauss-newton":
        if not hasattr(loss, "hess_vec"):
            raise ValueError(
                "method 'gauss-newton' needs a sum-of-squares loss of the states (one with "
                "hess_vec, e.g. KeyframeLoss); use 'l-bfgs-b'"
            )
        if bounded:
            raise ValueError(
                f"method 'gauss-newton' does not honour bounds ({', '.join(bounded)} has them); "
                "use 'l-bfgs-b' or 'auto'"
            )
    if method == "auto":
        return "gauss-newton" if hasattr(loss, "hess_vec") and not bounded else "l-bfgs-b"
    return method


@one_blas_thread
def _checked(scene, loss, params, within):
    """The Design of params, after checking the loss and `within` fit the scene."""
    loss.check(scene.cloth.n, scene.steps)
    if within is not None:
        if not (isinstance(within, (int, float)) and np.isfinite(within) and within > 0):
            raise ValueError(f"within (the keys' distance to stop at) must be a positive length in m, got {within!r}")
        if not getattr(loss, "targets", None):
            raise ValueError("within needs a loss with position targets (a KeyframeLoss) to measure distances to")
    design = Design(scene, params)
    if set(loss.targets) | set(loss.velocity_targets) <= {0} and any(
        isinstance(p, Acceleration) for p in design.params
    ):
        raise ValueError("the targets are all at frame 0, before any control force acts: nothing to control")
    return design


def _rescue(design, loss, run, motion, reason, max_iter, tolerances):
    """Where Gauss–Newton stalled (reason None: where it was not run from the start): the method
    the run ends with and its stopping reason."""
    gtol, ftol, rtol = tolerances
    method = "gauss-newton"
    if _stalled(run, reason, max_iter):
        # its model of the loss is wrong here: cloth resting on a collider answers an upward
        # force, in the linearization, with the contact's stiffness, ~1/(1 + h²κ) of what lifting
        # it really does. Gauss–Newton again from a start taken from the keys, where the cloth is
        # off the collider; the best design is kept. Where the loss did halve but a key is still
        # over SCAN_MISSED off, the random restarts below start from the best design instead (a
        # cape's hem swung along the body: the start from the keys, lifted or corrected from the
        # best design, ended at objectives 0.131 and 0.127 in 30 iterations, the restarts at
        # 0.098–0.125)
        start = design.from_keys(loss, motion)
        if start is not None:
            method = "gauss-newton, again from the keys"
            reason = _again(design, loss, start, run, max_iter, gtol, rtol)
            for _ in range(FROM_KEYS_ROUNDS):  # corrected from the best design's motion
                before = run.loss
                start = design.from_keys(loss, run.traj.x, run.theta)
                if start is None or len(run.history) >= max_iter:
                    break
                reason = _again(design, loss, start, run, max_iter, gtol, rtol)
                if run.loss > before * (1 - rtol):
                    break
    if _scannable(design) and _short(run, reason, max_iter):
        # a few factors (friction, stiffness, wind) on a loss too rough for gradients: searched
        method += ", then a scan"
        reason = _scan(design, loss, run, max_iter)
    elif _stalled(run, reason, max_iter):
        # still (a corner of a cloth on a floor lifted 5 cm: Gauss–Newton no step; L-BFGS-B
        # 8.8 → 3.6 mm in 20 iterations)
        method += ", then l-bfgs-b"
        f = Objective(design, loss)
        value, grad = f(run.theta, run.traj.step_x)
        reason = _lbfgsb(design, f, run, grad, max_iter, gtol, ftol)
    if _far(run, max_iter) and reason != "max_iter":
        # each method above stops at the nearest minimum of a loss that contact makes rough (a
        # cape's hem to swing along the body: 29.7 / 27.9 mm; from shoved starts, 20.4 / 12.8)
        pushed = _restarts(design, loss, run, max_iter, gtol, rtol)
        if pushed is not None:
            method += ", then random restarts"
            reason = pushed
    return method, reason


# designs of at most this many entries, each with a span (a factor held as its log), are scanned
# where the gradient methods stall
SCAN_SIZE = 3
SCAN_POINTS = 8  # grid points either side of the start
GOLDEN = 8  # golden sections of the bracket around the grid's best


def _scannable(design):
    return len(design.theta0) <= SCAN_SIZE and all(span is not None for span in design.spans)


def _scan(design, loss, run, max_iter):
    """Each entry of θ in turn: a grid over its span either side of its start, and the best design,
    then golden sections of the bracket around the grid's best (no gradients: one simulation a
    point). Where stick and slip make the loss a staircase, its local slopes point either way: a 20×20 sheet
    sliding off a table keyed at Friction 20 and started at 10, Gauss–Newton stopped at a factor
    of 1.33 and L-BFGS-B after it did not move it; the scan found 2.00. An iteration per design
    better than the best; the reason it stopped."""
    golden = (np.sqrt(5.0) - 1) / 2

    def value(theta):
        try:
            point = gauss_newton.Linearized(design, loss, theta)  # simulated; no gradient asked
        except SimulationError:
            return np.inf
        if point.value < run.loss:  # an iteration: progress shown, Stop Within and Max Iterations heeded
            if len(run.history) >= max_iter:
                raise _Stop("max_iter")
            run.improved(theta, point.value, point.traj)
            run.record(grad_norm=float("nan"))
        return point.value

    for i, span in enumerate(design.spans):
        lo, hi = design.bounds[i]
        lo, hi = -np.inf if lo is None else lo, np.inf if hi is None else hi

        def at(t, i=i):
            theta = run.theta.copy()
            theta[i] = t
            return theta

        # about the artist's start (Gauss–Newton may have gone the wrong way), and the best so far
        best, base = run.theta[i], run.loss
        grid = np.clip(design.theta0[i] + span * np.linspace(-1.0, 1.0, 2 * SCAN_POINTS + 1), lo, hi)
        grid = np.unique(np.r_[grid, best])
        values = [base if t == best else value(at(t)) for t in grid]
        k = int(np.argmin(values))
        a, b = grid[max(k - 1, 0)], grid[min(k + 1, len(grid) - 1)]
        c, d = b - golden * (b - a), a + golden * (b - a)
        fc, fd = value(at(c)), value(at(d))
        for _ in range(GOLDEN):  # the bracket [a, b] narrows around the lower of its inner points
            if fc <= fd:
                b, d, fd = d, c, fc
                c = b - golden * (b - a)
                fc = value(at(c))
            else:
                a, c, fc = c, d, fd
                d = a + golden * (b - a)
                fd = value(at(d))
    return "scanned: the gradient methods stalled, and each factor was searched without them"


def optimize(
    scene,
    loss,
    params,
    max_iter=100,
    callback=None,
    gtol=1e-10,
    ftol=1e-14,
    method="auto",
    rtol=1e-3,
    guess=None,
    within=None,
):
    """Minimize loss over `params` (parameterizations or names, see params.PARAM_NAMES).

    method: "gauss-newton" (core.design.gauss_newton: Levenberg–Marquardt on a sum-of-squares loss such
    as KeyframeLoss, a few simulations per iteration; it does not honour bounds, and refuses
    parameters that have them), "l-bfgs-b" (scipy's, honouring every Param's bounds), or "auto":
    Gauss–Newton for a sum-of-squares loss (KeyframeLoss, EmbeddedLoss) when no parameter has
    bounds — should it stall before halving the loss, or stop early with a key more than 1 cm
    off, again from a start taken from the keys
    (Param.from_keys: control forces that fly the vertices the keys take off to them), then with
    L-BFGS-B from the best design should it stall again (a design of a few factors is scanned
    instead), and, where a key is still more than 1 cm off, again from the best design shoved at
    random (Param.pushed); else L-BFGS-B.
    callback(info) receives a dict per iteration (as in history, plus "params"); returning True
    stops the run. A trial whose simulation diverges counts as a failed step (L-BFGS-B: a very
    large loss, so the line search backs off); the best design seen is always what is returned.
    Stopping: L-BFGS-B on gtol (largest gradient entry) and ftol (scipy's relative decrease);
    Gauss–Newton on gtol and on an iteration that lowers the loss by less than rtol of it.
    guess: step positions to start the first simulation's steps from, as simulate's (e.g. a
    previous result's trajectory.step_x, to continue on its branch where the cloth buckles).
    within: stop (reason "within") once every position key's mean distance is at most this (m),
    as an artist's tolerance; None runs to the stopping rules above.
    """
    design = _checked(scene, loss, params, within)
    automatic = method == "auto"
    method = choose_method(method, loss, design)
    with Clock() as clock:
        if method == "gauss-newton":
            # a start that does not simulate raises SimulationError here
            point = gauss_newton.Linearized(design, loss, design.theta0, guess)
            run = _Record(design, loss, callback, clock, point.value, point.traj, within)
            motion = point.traj.x
        else:
            f = Objective(design, loss)
            initial_loss, grad0 = f(design.theta0, guess)
            run = _Record(design, loss, callback, clock, initial_loss, f.traj, within)
        if not np.isfinite(run.initial_loss):
            raise SimulationError("the starting design gives a non-finite loss", 0, 0)
        if run.close_enough():
            reason = "within"
        elif run.initial_loss > 0 and max_iter > 0:
            try:
                if method != "gauss-newton":
                    reason = _lbfgsb(design, f, run, grad0, max_iter, gtol, ftol)
                elif automatic and held_by_friction(design.base, loss, motion) > HELD_SHARE:
                    # from the start its model sees sticking friction as a stiff spring, and its
                    # steps fling the cloth: straight to the start from the keys
                    method, reason = _rescue(design, loss, run, motion, None, max_iter, (gtol, ftol, rtol))
                else:
                    reason = gauss_newton.minimize(design, loss, point, run, max_iter, gtol, rtol)
                    if automatic:
                        method, reason = _rescue(design, loss, run, motion, reason, max_iter, (gtol, ftol, rtol))
            except _Stop as stop:
                reason = stop.args[0]
        else:
            reason = "converged"
        return run.result(reason, method)


# "auto" starts Gauss–Newton from the keys at once where more than this share of the distance the
# keys ask is asked of vertices resting still on a collider with friction (a 20×20 sheet to slide
# across a table: Gauss–Newton from the start flung it in five trials of 2.6–4.3 s, then the start
# from the keys reached both keys in three iterations). 0.5 → 0.2 takes in a sheet hanging over a
# table's edge (0.22–0.28 asked of resting vertices) and over a round bar (0.28–0.29): Gauss–Newton
# from the start there stalled after 4 iterations and 15 s, and nothing after it used what it found
# (the table's consistent keys 35 → 21 s, its whole pose 28.6 / 34.1 → 12.7 / 11.4 mm; see
# docs/benchmarks.md, resting cloth)
HELD_SHARE = 0.2
STILL = 1e-3  # m a frame: a vertex that moves less rests


def held_by_friction(scene, loss, motion):
    """The share of the distance between the motion (frames+1, n, 3) and the loss's position keys,
    summed over them, that falls on vertices lying still on a collider with friction."""
    held = asked = 0.0
    for f, target in (getattr(loss, "targets", None) or {}).items():
        if not 0 < f < len(motion) or target.shape != motion[f].shape:
            continue
        far = np.linalg.norm(motion[f] - target, axis=1)
        still = np.linalg.norm(motion[f] - motion[f - 1], axis=1) < STILL
        held += float(far[still & (friction_under(scene, motion[f], float(f)) > 0)].sum())
        asked += float(far.sum())
    return held / asked if asked > 0 else 0.0


def _stopped_early(run, reason, max_iter):
    """Whether Gauss–Newton stopped on its own (converged, or no further progress; reason None: it
    was not run from the start) with iterations left."""
    own = reason is None or reason == "converged" or reason.startswith("no further progress")
    return own and len(run.history) < max_iter


def _stalled(run, reason, max_iter):
    """Whether Gauss–Newton stopped early having lowered the loss by less than half: then "auto"
    starts it again from the keys, or goes on with L-BFGS-B from the best design."""
    return _stopped_early(run, reason, max_iter) and run.loss > 0.5 * run.initial_loss


# a key still this far off (mean, m) where Gauss–Newton stopped early: a design of a few factors is
# scanned though the loss fell by half (a 32×32 sheet sliding off a table, keyed at Friction 20 and
# started at 10: Gauss–Newton went the other way, to a factor of 0.51, and stopped 36 / 69 mm off)
SCAN_MISSED = 0.01


def _short(run, reason, max_iter):
    """Whether Gauss–Newton stopped early short of the keys: the loss above half its start, or a
    key more than SCAN_MISSED off."""
    return _stalled(run, reason, max_iter) or (_stopped_early(run, reason, max_iter) and _far(run, max_iter))


def _far(run, max_iter):
    """Whether a key is still more than SCAN_MISSED off (mean) with iterations left."""
    far = run.distances is not None and max(mean for mean, _ in run.distances.values()) > SCAN_MISSED
    return far and len(run.history) < max_iter


# where every method above leaves a key more than SCAN_MISSED off, Gauss–Newton starts again up to
# this many times from the best design shoved as a whole at each control key by an acceleration
# drawn from N(0, RESTART_PUSH²) m/s² per axis (Param.pushed; seeded, so a run repeats), the best
# kept, until RESTART_MISSES in a row find nothing lower (a 20×20 sheet over a table's edge posed
# by hand: three restarts took 38 → 235 s and found nothing). Each restart gives way to the next
# once it crawls (RESTART_SLOW): on a cape's hem swung along the body, restarts run to their own
# stop left 9–12 of 30 iterations unused or crawled 1% an iteration; so, and with 0.5 g pushes
# instead of 0.3, objectives 0.097–0.134 (median 0.106) against 0.096–0.132 (0.116)
RESTARTS = 8
RESTART_PUSH = 0.5 * 9.81
RESTART_SEED = 0
RESTART_MISSES = 2
RESTART_SLOW = 0.03


def _restarts(design, loss, run, max_iter, gtol, rtol):
    """Random restarts from the best design (basin hopping): why the last one stopped, or None
    where the design has nothing to push (Param.pushed)."""
    rng = np.random.default_rng(RESTART_SEED)
    reason, missed = None, 0
    for _ in range(RESTARTS):
        start = design.pushed(run.theta, rng, RESTART_PUSH)
        if start is None or len(run.history) >= max_iter:
            break
        before = run.loss
        reason = _again(design, loss, start, run, max_iter, gtol, rtol, "the pushed start", RESTART_SLOW)
        missed = missed + 1 if run.loss > before * (1 - rtol) else 0
        if missed >= RESTART_MISSES:
            break
    return reason


# where Gauss–Newton from the keys stops, the most times it starts again from the best design
# corrected by what is left between its motion and the keys (a folding 24×24 cloth: 11.4 → 6.9 mm
# at the second key in one such round)
FROM_KEYS_ROUNDS = 3


def _again(design, loss, start, run, max_iter, gtol, rtol, what="the start from the keys", slow=None):
    """Gauss–Newton from θ = start (simulated from scratch), keeping run's best; why it stopped
    ("no further progress" if start, `what`, does not simulate). slow: as gauss_newton.minimize's."""
    try:
        point = gauss_newton.Linearized(design, loss, start)
    except SimulationError:
        return f"no further progress: {what} does not simulate"
    run.improved(point.theta, point.value, point.traj)
    return gauss_newton.minimize(design, loss, point, run, max_iter, gtol, rtol, slow)


def _lbfgsb(design, f, run, grad0, max_iter, gtol, ftol):
    """scipy's L-BFGS-B from the design's start, restarted from the best design after a failed
    line search (contact makes the loss rough) as long as the last run still made progress.
    Returns the reason it stopped."""
    best_grad = [grad0]
    last = {"grad_norm": float(np.linalg.norm(grad0))}
    cache = {}

    def fun(theta):
        if theta.tobytes() in cache:  # L-BFGS-B starts by evaluating θ0 again
            return cache.pop(theta.tobytes())
        try:
            value, grad = f(theta)
        except SimulationError:
            value, grad = np.nan, None
        if not np.isfinite(value) or grad is None or not np.isfinite(grad).all():
            # a diverged trial: a loss far above the best, sloping back toward it
            back = theta - run.theta
            return 1e3 * run.loss + 1.0, back / max(np.linalg.norm(back), 1e-300)
        if value < run.loss:
            best_grad[0] = grad
        run.improved(theta, value, f.traj)
        last["grad_norm"] = float(np.linalg.norm(grad))
        return value, grad

    while True:
        before = run.loss
        cache[run.theta.tobytes()] = (run.loss, best_grad[0])
        res = minimize(
            fun,
            run.theta,
            jac=True,
            method="L-BFGS-B",
            bounds=design.bounds,
            callback=lambda theta: run.record(last["grad_norm"]),
            options=dict(maxiter=max_iter - len(run.history), gtol=gtol, ftol=ftol, maxls=30),
        )
        if len(run.history) >= max_iter:
            return "max_iter"
        if res.success or run.loss >= before * (1 - 1e-6):
            return "converged" if res.success else str(res.message)
