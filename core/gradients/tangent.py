"""Forward-mode derivatives (tangents) of a whole simulation along one design direction.

Each step solves G(y) = M(y − x − h·v)/h² + (c/h)·M(y − x) + ∇Φ(y; p) − u = 0 over the free
vertices, the pinned ones prescribed. Differentiating it at the converged y (times h²):

    A·δy = M(1 + hc)·δx + h·M·δv − h²·(∇²Φ·δy_pinned + ∂ₚ∇Φ·δp − δu + δc·M·v′)
    δv′ = (δy − δx)/h

with A = M(1 + hc) + h²∇²Φ the adjoint's matrix (core.gradients.adjoint): the same Linearization, the
forward's factorizations as preconditioners, so a tangent costs what a backward pass costs, and
⟨J·a, b⟩ = ⟨a, Jᵀ·b⟩ holds to the solves' tolerance. Gauss–Newton (core.design.gauss_newton) multiplies
by J with it. A linearized step (core.gradients.adjoint) adds to the right-hand side what its own matrix's
change moves: h²·((H̃ − ∇²Φ)·δx̂ − (∂H̃[δx̂] + ∂ₚH̃·δp)·Δ) over the free vertices, δx̂ the
prediction's change (δx + h·δv, the pins' own).
"""

import numpy as np

from ..model import fields
from ..model.frames import at_step
from ..numerics.threads import one_blas_thread
from ..numerics.timing import timed
from .adjoint import Linearization


class Tangent:
    """δx, δv at every integrator step (step_x, step_v: (n_steps+1, n, 3)) and at frames (x, v)."""

    def __init__(self, scene, dxs, dvs):
        self.step_x, self.step_v = dxs, dvs
        self.x = dxs[:: scene.substeps]
        self.v = dvs[:: scene.substeps]


def _direction(scene, direction):
    """The direction's fields as float arrays of their full shapes, absent ones zero."""
    unknown = set(direction) - set(fields.NAMES)
    if unknown:
        raise ValueError(
            f"unknown design field(s) {', '.join(sorted(unknown))}; expected some of {', '.join(fields.NAMES)}"
        )
    if direction.get("pin_path") is not None and scene.pin_path is None:
        raise ValueError("a pin_path direction needs a scene with a pin path (its pins sit at x0: use x0)")
    out = {}
    for field, shape in fields.shapes(scene).items():
        value = direction.get(field)
        out[field] = np.zeros(shape) if value is None else np.array(np.broadcast_to(np.asarray(value, float), shape))
    return out


@timed("tangent")
@one_blas_thread
def tangent(scene, traj, direction, lin=None):
    """The Tangent of `traj` (simulate(scene)'s) along `direction`: a dict of design fields
    (core.model.fields), absent ones zero. lin: the trajectory's Linearization, to share it between passes."""
    lin = Linearization(scene, traj) if lin is None else lin
    d = _direction(scene, direction)
    model = lin.model
    potential = model.potential
    h, sub, ns, n = model.h, scene.substeps, scene.n_steps, scene.cloth.n
    free, pinned = model.free, model.pinned
    mf = model.mf[:, None]

    def pins_at(s):  # as Scene.pins_at: the pins sit at x0 unless the scene has a pin path
        return d["x0"][pinned] if scene.pin_path is None else at_step(d["pin_path"], s, sub)

    moving_pins = bool(np.any(d["x0"][pinned] if scene.pin_path is None else d["pin_path"]))
    stiffness = any(np.any(d[name]) for name in fields.PHYSICAL)
    dxs, dvs = np.zeros((ns + 1, n, 3)), np.zeros((ns + 1, n, 3))
    dxs[0] = d["x0"]
    dxs[0, pinned] = pins_at(0)
    dvs[0] = d["v0"]
    dvs[0, pinned] = 0.0
    pinned_step = np.zeros((n, 3))
    for s in range(ns):
        pt = lin.point(s)
        push = np.zeros((n, 3))  # h⁻²·(what moves the step's equation besides δx, δv)
        if moving_pins:
            pinned_step[pinned] = pins_at(s + 1)
            push += potential.hess_vec(pt, pinned_step)
        if stiffness:
            push += potential.design_tangent(pt, d)
        push += potential.lag_tangent(pt, dxs[s], dvs[s], d["forces"][s // sub])
        push -= d["forces"][s // sub]
        if d["damping"]:
            push += d["damping"] * model.m[:, None] * lin.velocity(s)
        rhs = (1 + h * model.cf) * mf * dxs[s][free] + h * mf * dvs[s][free] - h * h * push[free]
        if lin.linearized:
            dxhat = dxs[s] + h * dvs[s]
            rhs += (
                h
                * h
                * _own_matrix_change(lin, s, pt, dxhat, pinned_step if moving_pins else None, d if stiffness else None)[
                    free
                ]
            )
        dxs[s + 1][free] = lin.solve(s, rhs.ravel()).reshape(-1, 3)
        dxs[s + 1][pinned] = pins_at(s + 1)
        for vertices, jac, _ in traj.projected[s]:  # moved out of colliders (contact.project_out)
            dxs[s + 1][vertices] = np.einsum("kij,kj->ki", jac, dxs[s + 1][vertices])
        dvs[s + 1] = (dxs[s + 1] - dxs[s]) / h
    return Tangent(scene, dxs, dvs)


def _own_matrix_change(lin, s, pt, dxhat, pinned_step, d):
    """(H̃ − ∇²Φ)·δx̂_free − (∂H̃[δx̂] + ∂ₚH̃·δp)·Δ (n,3) at a linearized step: δx̂ the
    prediction's change, its free rows from dxhat and its pinned ones from pinned_step (None:
    zero; ∇²Φ times those is the step's push already), d the design direction (None: no
    stiffness change)."""
    model, potential, free = lin.model, lin.model.potential, lin.model.free
    free_part = np.zeros_like(dxhat)
    free_part[free] = dxhat[free]
    whole = free_part if pinned_step is None else free_part + pinned_step
    delta = lin.delta(s)
    out = -potential.hess_vec(pt, free_part) - potential.third_tangent(pt, whole, delta)
    out[free] += (
        model.system.matvec(lin.matrix(s), free_part[free].ravel()).reshape(-1, 3)
        - (1 + model.h * model.cf) * model.mf[:, None] * free_part[free]
    ) / model.h**2
    if d is not None:
        out -= potential.design_hess_tangent(pt, d, delta)
    return out
