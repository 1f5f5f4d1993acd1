"""L-BFGS-B over parameterized designs, keeping the best design seen."""

import time

import numpy as np
from scipy.optimize import minimize

from .adjoint import value_and_grad
from .integrator import SimulationError
from .params import Acceleration, Design
from .threads import one_blas_thread


class OptimizeResult:
    """scene: the best scene found; theta, loss (keyframe loss + regularizers) of that scene;
    initial_loss; history: one dict per iteration (iteration, loss, normalized_loss, grad_norm,
    elapsed); reason: why it stopped ("converged", "max_iter", "stopped", or scipy's message);
    params: the optimized quantities by name (see Param.describe); evaluations: simulations run."""

    def __init__(self, **fields):
        self.__dict__.update(fields)

    @property
    def normalized_loss(self):
        return self.loss / self.initial_loss if self.initial_loss > 0 else 0.0


class _Stop(Exception):
    pass


def objective(design, loss):
    """f(θ) → (value, gradient) of keyframe loss + regularizers, for any θ of `design`."""

    def f(theta):
        fields = design.fields(theta)
        scene = design.scene(theta, fields)
        value, grad = value_and_grad(scene, loss)
        reg, reg_grad = design.regularizer(theta)
        return value + reg, design.pullback(theta, grad, fields) + reg_grad

    return f


@one_blas_thread
def optimize(scene, loss, params, max_iter=100, callback=None, gtol=1e-10, ftol=1e-14):
    """Minimize loss over `params` (parameterizations or names, see params.PARAM_NAMES).

    callback(info) receives a dict per iteration (as in history, plus "params"); returning True
    stops the run. A trial whose simulation diverges counts as a very large loss, so the line
    search backs off; the best design seen is always what is returned.
    """
    loss.check(scene.cloth.n, scene.steps)
    design = Design(scene, params)
    if set(loss.targets) | set(loss.velocity_targets) <= {0} and any(isinstance(p, Acceleration) for p in design.params):
        raise ValueError("the targets are all at frame 0, before any control force acts: nothing to control")
    f = objective(design, loss)
    start = time.perf_counter()
    best = {"loss": np.inf, "theta": design.theta0.copy()}
    last = {}
    history = []
    evaluations = [1]

    def fun(theta):
        if theta.tobytes() in cache:  # L-BFGS-B starts by evaluating θ0 again
            return cache.pop(theta.tobytes())
        evaluations[0] += 1
        try:
            value, grad = f(theta)
        except SimulationError:
            value, grad = np.nan, None
        if not np.isfinite(value) or grad is None or not np.isfinite(grad).all():
            # a diverged trial: a loss far above the best, sloping back toward it
            back = theta - best["theta"]
            return 1e3 * best["loss"] + 1.0, back / max(np.linalg.norm(back), 1e-300)
        if value < best["loss"]:
            best.update(loss=value, theta=theta.copy(), grad=grad)
        last.update(theta=theta.copy(), loss=value, grad_norm=float(np.linalg.norm(grad)))
        return value, grad

    initial_loss, grad0 = f(design.theta0)  # a start that does not simulate raises SimulationError here
    if not np.isfinite(initial_loss):
        raise SimulationError("the starting design gives a non-finite loss", 0, 0)
    best.update(loss=initial_loss, grad=grad0)
    cache = {}
    last.update(grad_norm=float(np.linalg.norm(grad0)))

    def record(theta):
        info = {"iteration": len(history) + 1, "loss": best["loss"],
                "normalized_loss": best["loss"] / initial_loss if initial_loss > 0 else 0.0,
                "grad_norm": last.get("grad_norm", np.nan), "elapsed": time.perf_counter() - start}
        history.append(info)
        if callback is not None and callback(dict(info, params=design.describe(best["theta"]))):
            raise _Stop

    reason = "converged"
    if initial_loss > 0 and max_iter > 0:
        try:
            # a failed line search (contact makes the loss rough) restarts L-BFGS from the best
            # design with a fresh curvature model, as long as the last run still made progress
            while True:
                before = best["loss"]
                cache[best["theta"].tobytes()] = (best["loss"], best["grad"])
                res = minimize(fun, best["theta"], jac=True, method="L-BFGS-B", bounds=design.bounds,
                               callback=record, options=dict(maxiter=max_iter - len(history), gtol=gtol,
                                                             ftol=ftol, maxls=30))
                if len(history) >= max_iter:
                    reason = "max_iter"
                    break
                if res.success or best["loss"] >= before * (1 - 1e-6):
                    reason = "converged" if res.success else str(res.message)
                    break
        except _Stop:
            reason = "stopped"
    theta = best["theta"]
    return OptimizeResult(scene=design.scene(theta), theta=theta, loss=best["loss"], initial_loss=initial_loss,
                          history=history, reason=reason, params=design.describe(theta),
                          evaluations=evaluations[0], elapsed=time.perf_counter() - start)
