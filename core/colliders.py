"""Sphere and plane colliders, static or with one pose per frame, and their penalty contact."""

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


class Contact:
    """Penalty contact E = ½·k·min(d, 0)² with d the signed distance minus thickness, per vertex.

    `active` indexes the vertices in contact; grad is (len(active), 3), hess and hess_psd
    (len(active), 3, 3): the sphere's curvature term k·d·(I − uuᵀ)/r is negative inside,
    so the projected Hessian drops it.
    """

    def __init__(self, colliders, x, t, stiffness, thickness, vertices=None):
        n = len(x)
        self.energy = 0.0
        idx, grads, hess, hpsd = [], [], [], []
        cand = np.arange(n) if vertices is None else vertices
        xc = x[cand]
        for col in colliders:
            d, u, inv = col.distance(xc, t)
            d = d - thickness
            on = d < 0
            if not on.any():
                continue
            d, u = d[on], u[on]
            self.energy += 0.5 * stiffness * float(d @ d)
            idx.append(cand[on])
            grads.append(stiffness * d[:, None] * u)
            uu = stiffness * u[:, :, None] * u[:, None, :]
            hpsd.append(uu)
            if inv is None:
                hess.append(uu)
            else:
                curv = stiffness * d * inv[on]
                hess.append(uu + curv[:, None, None] * (np.eye(3) - u[:, :, None] * u[:, None, :]))
        if idx:
            self.active = np.concatenate(idx)
            self.grad = np.concatenate(grads)
            self.hess = np.concatenate(hess)
            self.hess_psd = np.concatenate(hpsd)
        else:
            self.active = np.zeros(0, np.int64)
            self.grad = np.zeros((0, 3))
            self.hess = self.hess_psd = np.zeros((0, 3, 3))
