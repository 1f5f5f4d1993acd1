"""Gauss–Newton (Levenberg–Marquardt) for keyframe losses: few simulations per iteration.

A keyframe loss is a sum of squares of the states, so with J = dx/dθ (core.gradients.tangent) its
Gauss–Newton matrix is Jᵀ·H·J, H the loss's (constant) Hessian in the states, and the control
regularizers are quadratic. Each iteration linearizes at the current design θ (its trajectory and
one adjoint pass for the gradient g) and minimizes the model

    m(δ) = f + gᵀδ + ½·δᵀBδ,   B = JᵀHJ + ∇²R,   damped: (B + λI)·δ = −g

over a Lanczos basis of the Krylov space of B and g. Each basis vector costs one tangent and one
adjoint pass over the trajectory's Linearization (each step's matrix factored once, on the first
pass), no simulation. The space serves every λ (Krylov spaces are shift invariant), so a rejected
trial retries with a larger λ without new passes. λ, relative to the curvature along each
iteration's gradient, follows the ratio ρ of actual to predicted decrease (Nielsen's rule:
×max(⅓, 1 − (2ρ − 1)³) on success, ×2, 4, 8… on failure).

Where cloth buckles (piling on a floor, folding over a collider) an implicit Euler step has
several solutions, a few μJ apart, and which one Newton finds from the inertial prediction flips
with design changes of 10⁻⁶: simulated from scratch, the loss is a staircase of cliffs that stops
any local method (issue 15's scene, 20×20: a jump of 12% within 2·10⁻⁶ of a Gauss–Newton step).
So trials follow the current trajectory's branch: their Newton solves start at the trajectory
the model predicts, x + J·δ (J·δ from the basis vectors' tangent passes, no new pass), where the
step's energy is lower there. That is continuation along the optimization path: the loss along
it is as smooth as the physics allows, and the steps need a fifth of the Newton iterations (20×20:
2.1 instead of 9.7 per step). The motion found is one branch of the buckling, reproduced by
simulate(result.scene, guess=result.trajectory.step_x); simulating the design from scratch may
take the other branch where the cloth buckles.
"""

from functools import cached_property

import numpy as np

from ..gradients.adjoint import Linearization, backward
from ..gradients.tangent import tangent
from ..solver.integrator import SimulationError
from ..solver.simulate import simulate

# Lanczos vectors per iteration at most, and the damped system's residual (relative to ‖g‖) at
# which the basis is enough
INNER_MAX = 30
INNER_RTOL = 1e-2
# the first λ, relative to the curvature along the gradient
LAMBDA_START = 1e-3
# consecutive failed trials at one linearization after which the run stops
MAX_FAILURES = 10
# a trial step whose motion leaves the model's prediction x + J·δ (RMS over the vertices, at any
# frame) by more than this many times the largest change predicted is rejected there: the 32×32
# bar's first trials (docs/benchmarks.md) left it by 45× at the first key, by 4× at frames 6–7;
# accepted trials on the artist benchmarks left it by at most 2.3×
MODEL_SLACK = 4.0
# relative residual of the passes' step solves: far below what a step of the model needs, and
# 18% cheaper than the adjoint's default 1e-12 (20×20, issue 15's scene)
PASS_RTOL = 1e-8


class Linearized:
    """The objective (keyframe loss + regularizers) at θ, simulated (SimulationError if that
    fails; guess: step positions to start the steps from, as simulate's): its value and
    trajectory, and (on first use: a rejected trial needs neither) its gradient and products
    with B."""

    def __init__(self, design, loss, theta, guess=None, on_frame=None):
        self.design, self.loss, self.theta = design, loss, theta
        self.fields = design.fields(theta)
        self.scene = design.scene(theta, self.fields)
        self.traj = traj = simulate(self.scene, guess=guess, on_frame=on_frame)
        value, self._gx, self._gv = loss.evaluate(traj.x, traj.v)
        self.value = value + design.regularizer(theta)[0]

    @cached_property
    def lin(self):
        return Linearization(self.scene, self.traj, PASS_RTOL, own_factors=True)

    @cached_property
    def grad(self):
        return self._pullback(self._gx, self._gv) + self.design.regularizer(self.theta)[1]

    def _pullback(self, gx, gv):
        grad = backward(self.scene, self.traj, gx, gv, self.lin, self.design.physical)
        return self.design.pullback(self.theta, grad, self.fields)

    def product(self, p):
        """B·p (J·p by a tangent pass, Jᵀ·H·J·p by an adjoint pass) and J·p's step positions."""
        t = tangent(self.scene, self.traj, self.design.jvp(self.theta, p, self.fields), self.lin)
        bp = self._pullback(*self.loss.hess_vec(t.x, t.v, self.traj.x)) + self.design.regularizer_hess_vec(
            self.theta, p
        )
        return bp, t.step_x


class Krylov:
    """Lanczos basis Q (fully reorthogonalized) of the Krylov space of B and g, T = QᵀBQ, and
    J·q of each basis vector (step positions), to predict a step's trajectory."""

    def __init__(self, point):
        self.point = point
        self.gnorm = float(np.linalg.norm(point.grad))
        self.q = [point.grad / self.gnorm]
        self.alpha, self.beta, self.motion = [], [], []
        self.exhausted = False  # the space is invariant under B: the solves are exact

    def extend(self):
        q = self.q[len(self.alpha)]
        w, motion = self.point.product(q)
        self.motion.append(motion)
        self.alpha.append(float(q @ w))
        basis = np.array(self.q)
        for _ in range(2):  # twice is enough (Giraud et al. 2005)
            w = w - basis.T @ (basis @ w)
        b = float(np.linalg.norm(w))
        if b <= 1e-12 * max(abs(a) for a in self.alpha) or len(self.q) == len(w):
            self.exhausted = True
        else:
            self.beta.append(b)
            self.q.append(w / b)

    def solve(self, lam):
        """Coefficients y of the damped step in the basis, and the damped system's residual."""
        k = len(self.alpha)
        t = np.diag(self.alpha) + np.diag(self.beta[: k - 1], 1) + np.diag(self.beta[: k - 1], -1)
        y = np.linalg.solve(t + lam * np.eye(k), -self.gnorm * np.eye(k)[0])
        residual = 0.0 if self.exhausted else self.beta[k - 1] * abs(y[-1])
        return y, t, residual

    def step(self, lam, rtol=INNER_RTOL, most=INNER_MAX):
        """The damped step δ, its predicted decrease −(gᵀδ + ½δᵀBδ) and its predicted step
        positions x + J·δ, extending the basis until the damped system is solved to rtol."""
        if not self.alpha:
            self.extend()
        while True:
            y, t, residual = self.solve(lam)
            if self.exhausted or residual <= rtol * self.gnorm or len(self.alpha) >= most:
                break
            self.extend()
        k = len(y)
        predicted = -(self.gnorm * y[0] + 0.5 * y @ t @ y)
        motion = self.point.traj.step_x + np.tensordot(y, np.array(self.motion[:k]), axes=1)
        return np.array(self.q[:k]).T @ y, predicted, motion


SLOW_OVER = 3  # iterations over which `slow` is measured


def minimize(design, loss, point, run, max_iter, gtol, rtol, slow=None):
    """Levenberg–Marquardt from the Linearized `point`; run (optimize's bookkeeping) records
    iterations and keeps the best. Where it would stop, the design is simulated once from
    scratch: if that branch of the buckling steps lies lower (by rtol), it goes on from there
    (targets simulated from scratch lie on that branch). slow: also stop once SLOW_OVER
    iterations together lower this run's loss by less than this share of it (where another start
    follows). Returns the reason it stopped."""
    state = {"mu": LAMBDA_START, "nu": 2.0}
    values = [point.value]
    while len(run.history) < max_iter:
        stop, point = _iteration(design, loss, point, run, state, gtol, rtol)
        values.append(point.value)
        if stop is None:
            if slow is not None and len(values) > SLOW_OVER and values[-1] > (1 - slow) * values[-1 - SLOW_OVER]:
                return f"no further progress: {SLOW_OVER} iterations lowered the loss by less than {slow:.0%}"
            continue
        fresh = _below(design, loss, point.theta, (1 - rtol) * point.value)  # from scratch
        if fresh is None:
            return stop
        point = fresh
        run.improved(point.theta, point.value, point.traj)
        run.record(grad_norm=float(np.linalg.norm(point.grad)), inner=0, damping=state["mu"])
    return "max_iter"


def _iteration(design, loss, point, run, state, gtol, rtol):
    """One Levenberg–Marquardt iteration from point (state: μ, λ relative to the curvature along
    the gradient, and its growth factor ν): (None, the new point) to go on, or (why it stops, the
    point it stops at)."""
    if point.value == 0.0 or np.abs(point.grad).max() <= gtol:
        return "converged", point
    krylov = Krylov(point)
    krylov.extend()
    # λ = μ·α₀, α₀ the curvature along this iteration's gradient: it falls 20-40× over a run, and
    # an absolute λ, which Nielsen's rule leaves where ρ ≈ ½, damped the late steps that much too
    # hard (the cape's hem swung along the body: objective 0.188 after 30 iterations, 0.131 so)
    curvature = max(krylov.alpha[0], np.finfo(float).tiny)
    lam = state["mu"] * curvature
    try:
        for failures in range(MAX_FAILURES):
            delta, predicted, motion = krylov.step(lam)
            if not np.linalg.norm(delta) > 1e-14 * (1.0 + np.linalg.norm(point.theta)) or not predicted > 0:
                return "converged", point  # no step left that the model can resolve
            if predicted <= rtol * point.value:  # even the model's decrease is under rtol: spare the trial
                return (
                    "converged"
                    if failures == 0
                    else f"no further progress: {failures} trial steps failed to lower the loss, and the "
                    "shorter ones left would lower it by less than rtol"
                ), point
            trial = _below(design, loss, point.theta + delta, point.value, motion, point.traj.step_x)  # ρ > 0 or None
            rho = -np.inf if trial is None else (point.value - trial.value) / predicted
            if rho > 0:
                lam *= max(1 / 3, 1 - (2 * rho - 1) ** 3)
                state["nu"] = 2.0
                break
            lam *= state["nu"]
            state["nu"] *= 2
        else:
            return f"no further progress: {MAX_FAILURES} trial steps failed to lower the loss", point
    finally:
        state["mu"] = lam / curvature
    decrease = point.value - trial.value
    run.improved(trial.theta, trial.value, trial.traj)
    run.record(grad_norm=float(np.linalg.norm(trial.grad)), inner=len(krylov.alpha), damping=state["mu"])
    return ("converged" if decrease <= rtol * trial.value + rtol * decrease else None), trial


class _Higher(Exception):
    pass


def _below(design, loss, theta, below, guess=None, current=None):
    """The Linearized objective at θ if it comes out below `below` and its motion comes out again
    from itself as stored (_reproduced), else None (also when its simulation fails): the
    simulation stops as soon as the keys passed so far, with θ's regularizer, cost more, so a step
    that fails costs only the frames up to where it does.
    Given the motion the model predicts (guess) and the `current` one (step positions both), it
    also stops once the motion leaves the predicted one by more than MODEL_SLACK times the
    largest change predicted: the step is then beyond where the linearization holds."""
    budget = below - design.regularizer(theta)[0]
    spent = [0.0]
    reach = None
    if guess is not None and current is not None:
        reach = MODEL_SLACK * float(np.sqrt(np.sum((guess - current) ** 2, axis=2).mean(axis=1)).max())

    def watch(frame, x, v):
        spent[0] += loss.at_frame(frame, x, v)
        if spent[0] >= budget:
            raise _Higher
        if reach is not None:
            off = x - guess[frame * design.base.substeps]
            if np.sqrt(np.sum(off * off, axis=1).mean()) > reach:
                raise _Higher

    try:
        point = Linearized(design, loss, theta, guess, on_frame=watch)
    except (SimulationError, _Higher):
        return None
    return point if point.value < below and _reproduced(point) else None


# a motion is kept between runs in float32 (Blender's caches and shape keys; the add-on's stored
# motion), and the next run follows it as its guess: a design is taken only if its motion comes out
# the same (within REPRODUCED, m, at every vertex and frame) from its own motion so rounded and
# moved by a seeded PERTURBATION (m; rounding differs with the path a motion is stored by)
STORED = np.float32
PERTURBATION = 1e-9
REPRODUCED = 1e-3


def _reproduced(point):
    """Whether point's design, simulated from its own motion as stored and perturbed, moves as it
    does. Where its steps have several solutions close together, Newton's choice flips with a
    perturbation of its start of 10⁻¹³ (a cape flung onto a skirt by its initial velocity: 6–16
    mm from the second frame): Simulate & Bake would then show another motion than Optimize's."""
    rng = np.random.default_rng(0)
    guess = point.traj.step_x.astype(STORED) + PERTURBATION * rng.standard_normal(point.traj.step_x.shape)
    try:
        again = simulate(point.scene, guess=guess, keep_factors=False)  # its motion is all it needs
    except SimulationError:
        return False
    return float(np.abs(again.x - point.traj.x).max()) <= REPRODUCED
