"""The cloth: rest mesh, springs, masses, stiffness, damping and pins."""

import numpy as np

from .mesh import check_mesh, lumped_masses, springs, triangulate


def _positive_per_item(value, count, what):
    arr = np.asarray(value, dtype=np.float64)
    if arr.ndim == 0:
        arr = np.full(count, float(arr))
    elif arr.shape != (count,):
        raise ValueError(f"{what} must be a scalar or have shape ({count},), got {arr.shape}")
    if not np.isfinite(arr).all() or (arr <= 0).any():
        raise ValueError(f"{what} must be positive and finite")
    return arr


class Cloth:
    """A triangle mesh treated as a mass-spring cloth.

    mass is the total mass (kg), lumped to vertices by triangle area. k_tension / k_bending
    (N/m) are scalars or one value per spring (`tension_edges` / `bending_edges` order).
    damping is mass-proportional air damping c (1/s): f = -c·m·v. pinned lists vertex indices
    whose positions are prescribed.
    """

    def __init__(self, verts, faces, mass=0.5, k_tension=20.0, k_bending=0.1, damping=0.0, pinned=()):
        verts = np.array(verts, dtype=np.float64)
        tris = triangulate(faces)
        check_mesh(verts, tris)
        self.rest = verts
        self.tris = tris
        self.n = len(verts)
        self.tension_edges, self.bending_edges = springs(tris)
        lengths = self.rest_lengths
        if (lengths <= 1e-9 * np.ptp(verts, axis=0).max()).any():
            k = int(np.argmin(lengths))
            raise ValueError(f"spring {tuple(self.edges[k])} has zero rest length")
        if not (np.isfinite(mass) and mass > 0):
            raise ValueError(f"cloth mass must be positive, got {mass}")
        if not (np.isfinite(damping) and damping >= 0):
            raise ValueError(f"air damping must be non-negative, got {damping}")
        self.mass = float(mass)
        self.masses = lumped_masses(verts, tris, self.mass)
        self.k_tension = _positive_per_item(k_tension, len(self.tension_edges), "k_tension")
        self.k_bending = _positive_per_item(k_bending, len(self.bending_edges), "k_bending")
        self.damping = float(damping)
        pinned = np.unique(np.asarray(pinned, dtype=np.int64).ravel())
        if len(pinned) and (pinned.min() < 0 or pinned.max() >= self.n):
            bad = pinned[(pinned < 0) | (pinned >= self.n)][0]
            raise ValueError(f"pin index {bad} is out of range 0..{self.n - 1}")
        self.pinned = pinned

    @property
    def n_tension(self):
        return len(self.tension_edges)

    @property
    def n_bending(self):
        return len(self.bending_edges)

    @property
    def edges(self):
        """All springs, tension first, then bending."""
        return np.concatenate([self.tension_edges, self.bending_edges])

    @property
    def stiffness(self):
        return np.concatenate([self.k_tension, self.k_bending])

    @property
    def rest_lengths(self):
        e = self.edges
        return np.linalg.norm(self.rest[e[:, 0]] - self.rest[e[:, 1]], axis=1)

    def replace(self, **changes):
        """A copy with some of the constructor's arguments changed."""
        args = dict(verts=self.rest, faces=self.tris, mass=self.mass, k_tension=self.k_tension,
                    k_bending=self.k_bending, damping=self.damping, pinned=self.pinned)
        args.update(changes)
        return Cloth(**args)
