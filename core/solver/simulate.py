"""Forward simulation over frames and substeps."""

import numpy as np

from ..numerics.threads import one_blas_thread
from ..numerics.timing import Clock, timed
from .integrator import LinearizedStepper, StepModel, Stepper, step_error

# bytes of factorizations kept for the adjoint pass; steps beyond it are refactored backward.
# A 64×64 cloth's SuperLU factor holds 23 MB of entries (plus SuperLU's own overhead): keeping
# one per step of 100 drove a gradient benchmark past 24 GiB; a 128×128 Cotton cloth's factor
# holds 76 MB, so 4 GiB keeps the 48 of a two-second shot (1 GiB refactored 35 of them).
FACTOR_BUDGET = 4 << 30


class SolverStats:
    """Per integrator step: Newton iterations, final residual (m), whether it met the tolerance;
    and in all, the factorizations and the seconds self-collision took (its pair search and the
    solves it added)."""

    def __init__(self, n_steps):
        self.iterations = np.zeros(n_steps, np.int64)
        self.residual = np.zeros(n_steps)
        self.converged = np.zeros(n_steps, bool)
        self.factorizations = 0
        self.self_collision_seconds = 0.0

    @property
    def unconverged_steps(self):
        return np.flatnonzero(~self.converged) + 1


class Trajectory:
    """x, v: (frames+1, n, 3) at frames. States at every integrator step are kept for the adjoint."""

    def __init__(self, scene, xs, vs, stats, factors, projected, model):
        self.scene = scene
        self.model = model  # the scene's StepModel, for the passes over this trajectory
        self.step_x, self.step_v = xs, vs
        self.x = xs[:: scene.substeps]
        self.v = vs[:: scene.substeps]
        self.stats = stats
        self.factors = factors  # per step: the positive-definite factorization in use at its end
        self.projected = projected  # per step: the vertices a linearized step moved out of colliders


def _keep(factor, kept):
    """factor, or None once the distinct factors kept so far would exceed FACTOR_BUDGET."""
    if factor is None or id(factor) in kept:
        return factor
    if sum(f.nbytes for f in kept.values()) + factor.nbytes > FACTOR_BUDGET:
        return None
    kept[id(factor)] = factor
    return factor


@timed("forward")
@one_blas_thread
def simulate(scene, progress=None, guess=None, on_frame=None, keep_factors=True):
    """Run the scene; raises SimulationError naming the frame if a step diverges.
    progress(frames_done, frames) is called after every frame.

    guess: positions at every integrator step (n_steps+1, n, 3), e.g. another trajectory's
    step_x: each step's Newton starts from the guess's solution of that step moved with the
    step's start, guess[s+1] + x_s − guess[s], where the step's energy is lower there than at the
    inertial prediction. Where cloth buckles a step has several solutions, and this follows the
    guess's: simulate(result.scene, guess=result.trajectory.step_x) reproduces an optimization's
    motion. Every step is still solved to the scene's tolerance. on_frame(frame, x, v), with that
    frame's states, after every frame: an exception it raises ends the run (e.g. once a loss
    bound is passed). keep_factors: keep the steps' factorizations (within FACTOR_BUDGET) to
    precondition gradient passes over the trajectory; a run that needs only the motion passes
    False (keeping a 128×128 Cotton run's 48 costs its forward 30%: 10.5 s against 8.1 s)."""
    crossing = len(scene.crossing_kept_apart(scene.x0))
    if crossing:
        raise ValueError(
            f"the cloth passes through itself at the start ({crossing} pairs of triangles cross): "
            "self-collision keeps layers on the side they start on; untangle the start shape"
        )
    model = StepModel(scene)
    stepper = (LinearizedStepper if scene.solver == "linearized" else Stepper)(model)
    ns, h = scene.n_steps, scene.h
    xs = np.empty((ns + 1, scene.cloth.n, 3))
    vs = np.empty_like(xs)
    xs[0] = scene.x0
    xs[0, model.pinned] = scene.pins_at(0)
    vs[0] = scene.v0
    vs[0, model.pinned] = 0.0
    stats = SolverStats(ns)
    factors, kept, projected, self_pairs = [], {}, [], []
    if guess is not None and np.shape(guess) != xs.shape:
        raise ValueError(f"guess must have shape {xs.shape} (integrator steps + 1, vertices, 3), got {np.shape(guess)}")
    clock = Clock()  # what self-collision costs, apart from whatever clock times this run
    for s in range(ns):
        with clock:
            y, it, res, ok = stepper.step(xs[s], vs[s], s, None if guess is None else guess[s + 1] + (xs[s] - guess[s]))
        if not ok and res > 1e3 * model.tol:
            raise step_error(scene, s, f"did not converge in {it} iterations (residual {res:.2e} m)")
        xs[s + 1] = y
        vs[s + 1] = (y - xs[s]) / h
        stats.iterations[s], stats.residual[s], stats.converged[s] = it, res, ok
        factors.append(_keep(stepper.factor, kept) if keep_factors else None)
        projected.append(stepper.projected)
        cloth = None if stepper.lag is None else stepper.lag.cloth
        self_pairs.append(None if cloth is None else cloth.keys)
        if (s + 1) % scene.substeps == 0:
            if on_frame is not None:
                on_frame((s + 1) // scene.substeps, xs[s + 1], vs[s + 1])
            if progress is not None:
                progress((s + 1) // scene.substeps, scene.steps)
    stats.factorizations = stepper.factorizations
    stats.self_collision_seconds = clock.seconds.get("self-collision", 0.0)
    traj = Trajectory(scene, xs, vs, stats, factors, projected, model)
    traj.self_pairs = self_pairs  # per step: the self-contact pairs its planes held (core.contact.self_contact)
    return traj
