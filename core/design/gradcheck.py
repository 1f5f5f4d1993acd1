"""Central finite differences against the adjoint gradient, for tests and scripts."""

import numpy as np

from .optimize import Objective
from .params import Design


def check_gradient(scene, loss, params, eps=1e-6, components=(), directions=1, seed=0):
    """Compare dL/dθ with (L(θ + εe) − L(θ − εe)) / 2ε.

    components: indices of θ to check one by one; directions: how many random unit directions
    in the whole θ space to check. Returns a list of dicts with what, analytic, numeric and
    rel_error = |analytic − numeric| / max(|numeric|, tiny).
    """
    design = Design(scene, params)
    f = Objective(design, loss)
    theta = design.theta0
    _, grad = f(theta)
    rng = np.random.default_rng(seed)
    checks = []
    for i in components:
        e = np.zeros_like(theta)
        e[i] = 1.0
        checks.append((f"theta[{i}]", e))
    for k in range(directions):
        d = rng.normal(size=theta.shape)
        checks.append((f"direction {k}", d / np.linalg.norm(d)))
    out = []
    for what, e in checks:
        numeric = (f(theta + eps * e)[0] - f(theta - eps * e)[0]) / (2 * eps)
        analytic = float(grad @ e)
        out.append(
            dict(
                what=what,
                analytic=analytic,
                numeric=numeric,
                rel_error=abs(analytic - numeric) / max(abs(numeric), 1e-300),
            )
        )
    return out
