"""Sphere and plane colliders, static or with one pose per frame (their penalty contact is in energies)."""

import numpy as np


def _pose(value, what):
    arr = np.array(value, dtype=np.float64)
    if arr.shape[-1:] != (3,) or arr.ndim > 2:
        raise ValueError(f"{what} must have shape (3,) or (frames+1, 3), got {arr.shape}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{what} has a NaN or infinite value")
    return arr


def _at(arr, t):
    """Pose at fractional frame t (linear between frame poses; static poses are 1-D)."""
    if arr.ndim == 1:
        return arr
    if not 0 <= t <= len(arr) - 1:
        raise ValueError(f"collider has {len(arr)} poses, none for frame {t:g}")
    f = min(int(t), len(arr) - 2)
    w = t - f
    return arr[f] if w == 0 else (1 - w) * arr[f] + w * arr[f + 1]


class Sphere:
    """Sphere collider; center (3,) or one center per frame (frames+1, 3); radius one number or one
    per frame (frames+1,) (a sphere whose scale is animated)."""

    def __init__(self, center, radius):
        self.center = _pose(center, "sphere center")
        radius = np.array(radius, dtype=np.float64)
        if radius.ndim > 1 or not (np.isfinite(radius).all() and (radius > 0).all()):
            raise ValueError(f"sphere radius must be positive (one number, or one per frame), got {radius}")
        self.radius = float(radius) if radius.ndim == 0 else radius
        # per-frame radii as (frames+1, 1) poses, so that _at interpolates them like the centers
        self._radius = np.reshape(radius, (-1, 1)) if radius.ndim else radius.reshape(1)

    def n_poses(self):
        return max(1 if a.ndim == 1 else len(a) for a in (self.center, self._radius))

    def at(self, t):
        """Center and radius at fractional frame t."""
        return _at(self.center, t), float(_at(self._radius, t)[0])

    def distance(self, x, t):
        """Signed distance d, its gradient n (unit) and a function giving ∇n = ∇²d, (len(x),3,3),
        for a selection of the points."""
        center, radius = self.at(t)
        rel = x - center
        dist = np.linalg.norm(rel, axis=1)
        inv = 1.0 / np.maximum(dist, 1e-12)
        n = rel * inv[:, None]
        return dist - radius, n, lambda sel: (np.eye(3) - n[sel, :, None] * n[sel, None, :]) * inv[sel, None, None]


class Plane:
    """Infinite plane through `point` with `normal` (the free side); (3,) or per frame (frames+1, 3)."""

    def __init__(self, point, normal):
        self.point = _pose(point, "plane point")
        normal = _pose(normal, "plane normal")
        length = np.linalg.norm(normal, axis=-1)
        if (length < 1e-12).any():
            raise ValueError("plane normal must be non-zero")
        self.normal = normal / length[..., None]

    def n_poses(self):
        return max(1 if a.ndim == 1 else len(a) for a in (self.point, self.normal))

    def at(self, t):
        """Point and unit normal at fractional frame t."""
        nrm = _at(self.normal, t)
        return _at(self.point, t), nrm / np.linalg.norm(nrm)

    def distance(self, x, t):
        """As Sphere.distance; a plane's normal is constant (∇n = 0: None)."""
        point, nrm = self.at(t)
        return (x - point) @ nrm, np.broadcast_to(nrm, x.shape), None


def inside_at_start(colliders, x0, tol):
    """Per collider, how many of the positions x0 start deeper than tol inside it (behind a plane)."""
    return [int((col.distance(x0, 0.0)[0] < -tol).sum()) for col in colliders]
