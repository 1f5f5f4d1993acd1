"""Exact gradients of a loss through a whole simulation by the adjoint method.

Backward over integrator steps s = N−1 … 0 with ĝx, ĝv the total derivatives at step s+1
(thesis, Algorithm 1):

    Aᵀα = h·ĝx_{s+1} + ĝv_{s+1}               A = M(1 + hc) + h²∇²Φ at the converged x_{s+1}
    ĝx_s = ∂g/∂x_s + ĝx_{s+1} − h·∇²Φ·α        ĝv_s = ∂g/∂v_s + M·α
    dg/dp += h·(∂f/∂p)ᵀα

A is symmetric and, at a converged minimum of the incremental potential, positive definite: the
forward's factorization from that step preconditions a CG solve, so the backward costs a few
triangular solves per step. A `Linearization` of the trajectory holds those per-step states,
matrices and solves; the tangent (forward-mode) pass of core.gradients.tangent shares it.

A linearized step (Scene(solver="linearized")), x′ = x̂ − Ã⁻¹·h²∇E(x̂) with x̂ = x + h·v and Ã
the projected matrix at x̂, has the same recursion with Ã in place of A, the states at x̂, and
the derivative of Ã itself: with Δ = x′ − x̂ and T(α) = ∇ₓ(αᵀ·H̃·Δ) (Potential.third),

    ĝx_s = ∂g/∂x_s + ĝx_{s+1} − h·(∇²Φ·α + T(α))
    ĝv_s = ∂g/∂v_s + M·α + h²·(H̃·α − ∇²Φ·α − T(α))
    dg/dp −= h·(∂(∇Φ·α)/∂p + ∂(αᵀ·H̃·Δ)/∂p)

(on a quadratic energy with nothing projected, H̃ = ∇²Φ and T = 0: one Newton step is exact and
both recursions agree).
"""

import dataclasses

import numpy as np

from ..contact.penalty import StepLag
from ..model import fields
from ..model.frames import frame_weights
from ..numerics.threads import one_blas_thread
from ..numerics.timing import timed
from ..solver.integrator import StepModel, pcg, precise_solve
from ..solver.simulate import FACTOR_BUDGET, simulate

ADJOINT_RTOL = 1e-12
# bytes of per-step states and matrices a Linearization keeps for later passes (a 64×64 cloth:
# about 5 MB per step); steps beyond it are rebuilt in every pass
LINEARIZATION_BUDGET = 1 << 28


Gradient = dataclasses.make_dataclass("Gradient", fields.NAMES)
Gradient.__module__ = __name__  # pickled by name (a worker process sends it back)
Gradient.__doc__ = """dg/d(design), one attribute per design field (core.model.fields: its shape; pin_path
is None when the scene has no pin path: the pins then sit at x0 and their gradient is in x0)."""


class Linearization:
    """The converged trajectory's step matrices A = M(1 + hc) + h²∇²Φ and solves with them: the
    state at step s's end (`point`), A's storage data (`matrix`) and A·x = b (`solve`, PCG on
    the forward's factorization, else a fresh one) to relative residual rtol. States, matrices
    and the LU factors of indefinite ones are kept (within LINEARIZATION_BUDGET) for the next
    pass: an optimizer runs many over one trajectory.

    own_factors: factor each step's A itself on first use (within FACTOR_BUDGET) and solve with
    that. The forward's factorization of a step is a lagged one, a preconditioner that PCG needs
    about six solves and products with; A's own needs two, so from a few passes over the
    trajectory on it pays (Gauss–Newton's 15 or so per iteration: passes 1.9× faster at 32×32
    and 64×64, the factorizations included)."""

    def __init__(self, scene, traj, rtol=ADJOINT_RTOL, own_factors=False):
        if scene.solver == "linearized" and StepLag.contacts(scene):
            raise ValueError(
                "gradients of linearized steps over mesh colliders, with friction or self-collision are not built: "
                "simulate with solver='newton' (what optimization uses)"
            )
        self.scene, self.traj, self.rtol = scene, traj, rtol
        # the forward's StepModel when it ran this scene (a 128×128 cloth's takes 0.8–1.5 s to build)
        self.model = traj.model if traj.scene is scene else StepModel(scene)
        self.fallback = None
        self._kept, self._lu, self._bytes = {}, {}, 0
        self._own = {} if own_factors else None
        self._own_bytes = 0

    def _remember(self, store, s, value, nbytes):
        if self._bytes + nbytes <= LINEARIZATION_BUDGET:
            store[s] = value
            self._bytes += nbytes

    def point(self, s):
        return self._step(s)[0]

    def matrix(self, s):
        return self._step(s)[1]

    @property
    def linearized(self):
        return self.scene.solver == "linearized"

    def solution(self, s):
        """Step s's solution x′ before contact.project_out moved any of it (n,3)."""
        x = self.traj.step_x[s + 1]
        if self.traj.projected[s]:
            x = x.copy()
            for vertices, _, before in reversed(self.traj.projected[s]):
                x[vertices] = before
        return x

    def velocity(self, s):
        """The velocity (x′ − x_s)/h of step s's solution (before any projection)."""
        return (self.solution(s) - self.traj.step_x[s]) / self.model.h

    def delta(self, s):
        """A linearized step's Newton step Δ = x′ − x̂ (n,3), zero on the pins."""
        return self.solution(s) - self.model.prediction(self.traj.step_x[s], self.traj.step_v[s], s)

    def _step(self, s):
        if s in self._kept:
            return self._kept[s]
        potential, x, v = self.model.potential, self.traj.step_x[s], self.traj.step_v[s]
        lag = potential.lag(x, v, s, self.traj.self_pairs[s])
        if self.linearized:
            pt = potential.at(self.model.prediction(x, v, s), s, lag)
            data = self.model.matrix(pt, projected=True)
        else:
            pt = potential.at(self.traj.step_x[s + 1], s, lag)
            data = self.model.matrix(pt)
        self._remember(
            self._kept,
            s,
            (pt, data),
            data.nbytes + sum(a.nbytes for a in vars(pt).values() if isinstance(a, np.ndarray)),
        )
        return pt, data

    def _own_factor(self, s):
        """Step s's own factorization of A, or None (not asked for, over budget, indefinite)."""
        if self._own is None:
            return None
        if s not in self._own:
            factor = self.model.system.factor(self.matrix(s), double=True)
            ok = factor.positive_definite and self._own_bytes + factor.nbytes <= FACTOR_BUDGET
            self._own[s] = factor if ok else None
            self._own_bytes += factor.nbytes if ok else 0
        return self._own[s]

    def solve(self, s, b):
        if s in self._lu:
            return self._lu[s](b)
        system, data = self.model.system, self.matrix(s)
        for pre in (self._own_factor(s), self.traj.factors[s], self.fallback):
            if pre is not None:
                x, _ = pcg(system, data, b, pre, self.rtol, maxiter=60)
                if x is not None:
                    return x
        fresh = system.factor(data)
        if fresh.positive_definite:
            self.fallback = fresh
            x = precise_solve(system, data, b, fresh, self.rtol, maxiter=60)
            if x is not None:
                return x
        lu = system.factor_general(data)  # an indefinite A (a step that converged to a saddle): LU is exact
        self._remember(self._lu, s, lu, _lu_bytes(lu, data.nbytes))
        return lu(b)


def _lu_bytes(solve, guess):
    """Memory of SuperLU's factors behind their solve (a value and an index per entry), else guess."""
    lu = getattr(solve, "__self__", None)
    return 12 * (lu.L.nnz + lu.U.nnz) if hasattr(lu, "L") else guess


@one_blas_thread
def value_and_grad(scene, loss, traj=None):
    """Loss value and its Gradient with respect to the scene's whole design."""
    loss.check(scene.cloth.n, scene.steps)
    if traj is None:
        traj = simulate(scene)
    value, gx_frames, gv_frames = loss.evaluate(traj.x, traj.v)
    return value, backward(scene, traj, gx_frames, gv_frames)


@timed("adjoint")
@one_blas_thread
def backward(scene, traj, gx_frames, gv_frames, lin=None, wanted=fields.PHYSICAL):
    """Gradient from the loss partials at frames (frames+1, n, 3); lin: the trajectory's
    Linearization, when passes before this one built it; wanted: the physical design fields whose
    gradients are needed (the others are left zero: a forces-only design spares their terms)."""
    lin = Linearization(scene, traj) if lin is None else lin
    model = lin.model
    h, sub, ns = model.h, scene.substeps, scene.n_steps
    free, pinned = model.free, model.pinned
    mf = model.mf[:, None]

    def partial(frames_arr, s):
        return frames_arr[s // sub] if s % sub == 0 else None

    gdesign = fields.zeros(scene, fields.PHYSICAL)
    gforces = np.zeros((scene.steps, scene.cloth.n, 3))
    gdamp = 0.0
    gpin = np.zeros((ns + 1, len(pinned), 3))  # dg/d(pinned positions) at every step
    gx = np.zeros((scene.cloth.n, 3)) if partial(gx_frames, ns) is None else partial(gx_frames, ns).copy()
    gv = np.zeros_like(gx) if partial(gv_frames, ns) is None else partial(gv_frames, ns).copy()
    gpin[ns] += gx[pinned] + gv[pinned] / h
    alpha_full = np.zeros_like(gx)
    for s in range(ns - 1, -1, -1):
        # vertices moved out of colliders after the step: x_{s+1} = P(x′), v_{s+1} = (x_{s+1} − x_s)/h,
        # so x′ takes Jᵀ(ĝx + ĝv/h) and x_s keeps −ĝv/h, what the recursion below reads as ĝx − ...
        for vertices, jac, _ in reversed(traj.projected[s]):
            gx[vertices] = np.einsum("kji,kj->ki", jac, gx[vertices] + gv[vertices] / h) - gv[vertices] / h
        pt = lin.point(s)
        rhs = (h * gx[free] + gv[free]).ravel()
        alpha = lin.solve(s, rhs).reshape(-1, 3)
        alpha_full[free] = alpha
        # ∇²Φ·α over all vertices (α is zero on pins, whose rows give the pins' gradient)
        hess_alpha = model.potential.hess_vec(pt, alpha_full)
        for field, g in model.potential.design_gradient(pt, alpha_full, wanted).items():
            gdesign[field] -= h * g
        if lin.linearized:  # the derivative of the step's own matrix Ã (see the module's docstring)
            delta = lin.delta(s)
            hess_alpha += model.potential.third(pt, alpha_full, delta)
            projected = (
                model.system.matvec(lin.matrix(s), alpha.ravel()).reshape(-1, 3) - (1 + h * model.cf) * mf * alpha
            ) / (h * h)
            extra_gv = h * h * (projected - hess_alpha[free])
            for field, g in model.potential.design_hess(pt, alpha_full, delta, wanted).items():
                gdesign[field] -= h * g
        gforces[s // sub][free] += h * alpha
        gdamp -= h * float(np.sum(mf * alpha * lin.velocity(s)[free]))
        gpin[s + 1] -= h * hess_alpha[pinned]
        # step s's own partials, then the recursion
        px, pv = partial(gx_frames, s), partial(gv_frames, s)
        # self-contact's reaches pinned corners; friction's normal force holds against the start's velocities
        lag_alpha, lag_v, lag_u = model.potential.lag_gradient(pt, alpha_full)
        gforces[s // sub] -= h * lag_u
        new_gx = gx - h * hess_alpha - h * lag_alpha
        new_gv = -h * lag_v
        new_gv[free] += mf * alpha
        if lin.linearized:
            new_gv[free] += extra_gv
        if px is not None:
            new_gx += px
        if pv is not None:
            new_gv += pv
        # pinned rows: positions are inputs; their velocity (x_s+1 − x_s)/h ties neighbouring steps
        new_gx[pinned] = 0.0 if px is None else px[pinned]
        gpin[s] += new_gx[pinned] - gv[pinned] / h - h * lag_alpha[pinned]
        if s > 0:  # a pin's velocity (x_s − x_{s−1})/h: what reads it (the loss, a lagged term such as wind)
            gpin[s] += new_gv[pinned] / h
        gx, gv = new_gx, new_gv
    gx0 = gx.copy()
    gv0 = gv.copy()
    gv0[pinned] = 0.0
    gpin_frames = None
    if scene.pin_path is None:
        gx0[pinned] = gpin.sum(axis=0)
    else:
        gx0[pinned] = 0.0
        gpin_frames = _steps_to_frames(gpin, sub)
    return Gradient(**gdesign, x0=gx0, v0=gv0, forces=gforces, damping=gdamp, pin_path=gpin_frames)


def _steps_to_frames(g_steps, sub):
    """Pull per-step gradients back through the linear interpolation of frame poses."""
    frames = (len(g_steps) - 1) // sub
    out = np.zeros((frames + 1,) + g_steps.shape[1:])
    for s, g in enumerate(g_steps):
        for f, weight in frame_weights(s, sub):
            out[f] += weight * g
    return out
