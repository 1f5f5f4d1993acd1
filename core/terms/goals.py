"""Soft pins: ½·Σᵢ kᵢ‖yᵢ − gᵢ(t)‖², each vertex pulled toward its goal at the step's end (Blender's
pin springs). Quadratic, with a constant diagonal Hessian: nothing to project, no third
derivatives, and no design fields."""

import numpy as np

from .base import Term


class GoalSprings(Term):
    def __init__(self, pot):
        self.scene, self.goals = pot.scene, pot.scene.goals
        self.k = self.goals.stiffness[:, None]
        self.block = self.goals.stiffness[:, None, None] * np.eye(3)

    @classmethod
    def build(cls, pot):
        return [] if pot.scene.goals is None else [cls(pot)]

    def at(self, p):
        """Each vertex's offset from its goal."""
        return p.y[self.goals.vertices] - self.goals.at(self.scene, p.s + 1)

    def energy(self, d):
        return 0.5 * float(np.sum(self.k * d * d))

    def add_gradient(self, d, out):
        out[self.goals.vertices] += self.k * d

    def hessian(self, d, acc, mode):
        acc.add_diagonal(self.goals.vertices, self.block)

    def add_hess_vec(self, d, v, out):
        out[self.goals.vertices] += self.k * v[self.goals.vertices]
