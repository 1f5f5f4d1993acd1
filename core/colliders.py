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
    """Sphere collider; center (3,) or one center per frame (frames+1, 3)."""

    def __init__(self, center, radius):
        self.center = _pose(center, "sphere center")
        if np.ndim(radius) != 0 or not (np.isfinite(radius) and radius > 0):
            raise ValueError(f"sphere radius must be positive (one number), got {radius}")
        self.radius = float(radius)

    def n_poses(self):
        return 1 if self.center.ndim == 1 else len(self.center)

    def distance(self, x, t):
        """Signed distance, its gradient direction and the inverse distance to the center."""
        rel = x - _at(self.center, t)
        dist = np.linalg.norm(rel, axis=1)
        inv = 1.0 / np.maximum(dist, 1e-12)
        return dist - self.radius, rel * inv[:, None], inv


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

    def distance(self, x, t):
        nrm = _at(self.normal, t)
        nrm = nrm / np.linalg.norm(nrm)
        return (x - _at(self.point, t)) @ nrm, np.broadcast_to(nrm, x.shape), None
