"""Wind and force fields on the cloth's triangles as Blender's Cloth applies them: the fields'
force at the step's start (core.model.pressure.FaceForces, StepLag.fields) enters the step's
energy as −fᵀy. As Blender's, it is explicit: the gradient passes carry its derivatives by that
start (add_lag_gradient, add_lag_tangent) and by the scene's wind and its drag (the "wind" and
"wind_drag" designs).
"""

import numpy as np

from .base import Term


class FieldForces(Term):
    fields = ("wind", "wind_drag")

    def __init__(self, pot):
        self.scene = pot.scene

    @classmethod
    def build(cls, pot):
        return [] if pot.scene.wind is None and not pot.scene.effectors else [cls(pot)]

    def at(self, p):
        return p.y, p.lag.fields

    def energy(self, q):
        y, w = q
        return -float(np.sum(w.force * y))

    def add_gradient(self, q, out):
        out -= q[1].force

    def design_gradient(self, q, lam, out):
        """∂(∇Φ·λ)/∂wind = −∂(f·λ)/∂wind, and so by its drag."""
        if self.scene.wind is not None:
            out["wind_drag"] += q[1].wind_pullback(-lam, out["wind"])

    def design_tangent(self, q, dp, out):
        if self.scene.wind is not None:
            out -= q[1].wind_push(dp["wind"], dp["wind_drag"])

    def add_lag_gradient(self, q, lam, out, out_v, out_u):
        """−∂(f·λ)/∂xₛ and −∂(f·λ)/∂vₛ."""
        q[1].pullback(-lam, out, out_v)

    def add_lag_tangent(self, q, dxs, dvs, dus, out):
        """−(∂f/∂xₛ)·δxₛ − (∂f/∂vₛ)·δvₛ."""
        out -= q[1].push(dxs, dvs)
