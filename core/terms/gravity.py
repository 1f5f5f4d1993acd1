"""Gravity: −Σᵢ mᵢ·g·yᵢ, the scene's gravity vector on the lumped masses."""

import numpy as np

from .base import Term


class Gravity(Term):
    def __init__(self, pot):
        self.force = pot.scene.cloth.masses[:, None] * pot.scene.gravity[None, :]

    def at(self, p):
        return p.y

    def energy(self, y):
        return -float(np.sum(self.force * y))

    def add_gradient(self, y, out):
        out -= self.force
