"""Keyframe losses on a trajectory: value and partial derivatives with respect to its states."""

import numpy as np


class KeyframeLoss:
    """Σ_k w_k Σ_i c_i ‖x_{f_k,i} − x*_{k,i}‖²  (+ velocity_weight·Σ_k w_k Σ_i c_i ‖v_{f_k,i} − v*_{k,i}‖²).

    targets: {frame: (n,3) positions}; weights: {frame: w} (default 1); vertex_weights: (n,)
    for all frames or {frame: (n,)}; velocity_targets: {frame: (n,3)} (frames of their own).
    keyed: {frame: vertex indices} the distances of a frame are measured over (default: all).
    """

    def __init__(
        self, targets, weights=None, vertex_weights=None, velocity_targets=None, velocity_weight=1.0, keyed=None
    ):
        self.targets = self._frames(targets, "targets")
        self.velocity_targets = self._frames(velocity_targets or {}, "velocity_targets", allow_empty=True)
        if not self.targets and not self.velocity_targets:
            raise ValueError("the loss has no targets")
        weights = dict(weights or {})
        unknown = set(weights) - set(self.targets) - set(self.velocity_targets)
        if unknown:
            raise ValueError(f"weights given for frames without targets: {sorted(unknown)}")
        self.weights = {int(f): float(w) for f, w in weights.items()}
        if any(not np.isfinite(w) or w < 0 for w in self.weights.values()):
            raise ValueError("frame weights must be non-negative and finite")
        self.vertex_weights = vertex_weights
        self.velocity_weight = float(velocity_weight)
        self.keyed = {int(f): np.asarray(v, dtype=np.int64) for f, v in (keyed or {}).items()}

    @staticmethod
    def _frames(targets, what, allow_empty=False):
        out = {}
        for frame, pos in dict(targets).items():
            if int(frame) != frame:
                raise ValueError(f"{what}: frame {frame!r} is not an integer")
            pos = np.array(pos, dtype=np.float64)
            if pos.ndim != 2 or pos.shape[1] != 3:
                raise ValueError(f"{what}: frame {frame} has shape {pos.shape}, expected (n, 3)")
            if not np.isfinite(pos).all():
                raise ValueError(f"{what}: frame {frame} has a NaN or infinite value")
            out[int(frame)] = pos
        if not out and not allow_empty:
            raise ValueError(f"{what} is empty: give at least one target frame")
        return out

    def _vweights(self, frame, n):
        vw = self.vertex_weights
        if isinstance(vw, dict):
            vw = vw.get(frame)
        if vw is None:
            return np.ones(n)
        vw = np.asarray(vw, dtype=np.float64)
        if vw.shape != (n,):
            raise ValueError(f"vertex weights for frame {frame} have shape {vw.shape}, expected ({n},)")
        return vw

    def check(self, n, frames):
        """Raise ValueError if the targets do not fit a cloth of n vertices simulated for `frames` frames."""
        for what, table in (("target", self.targets), ("velocity target", self.velocity_targets)):
            for frame, pos in table.items():
                if pos.shape[0] != n:
                    raise ValueError(f"{what} at frame {frame} has {pos.shape[0]} vertices, the cloth has {n}")
                if not 0 <= frame <= frames:
                    raise ValueError(f"{what} frame {frame} is outside the simulated frames 0..{frames}")

    def _weighted(self, n):
        """(0 for positions or 1 for velocities, frame, target, weights (n,1)) per target."""
        for which, table, scale in ((0, self.targets, 1.0), (1, self.velocity_targets, self.velocity_weight)):
            for frame, target in table.items():
                yield which, frame, target, scale * self.weights.get(frame, 1.0) * self._vweights(frame, n)[:, None]

    def at_frame(self, frame, x, v):
        """The loss's terms at one frame, from that frame's states x, v (n,3): they add up to the
        loss over the frames, so a partial sum bounds it from below while a run is simulated."""
        n = x.shape[0]
        value = 0.0
        for which, f, target, w in self._weighted(n):
            if f == frame:
                diff = (x, v)[which] - target
                value += float(np.sum(w * diff * diff))
        return value

    def evaluate(self, x, v):
        """Loss and its partials with respect to the frame states x, v: (frames+1, n, 3)."""
        n, frames = x.shape[1], x.shape[0] - 1
        self.check(n, frames)
        value = 0.0
        grads = (np.zeros_like(x), np.zeros_like(v))
        for which, frame, target, w in self._weighted(n):
            diff = (x, v)[which][frame] - target
            value += float(np.sum(w * diff * diff))
            grads[which][frame] += 2.0 * w * diff
        return (value,) + grads

    def hess_vec(self, dx, dv, x=None):
        """The loss's Hessian in the frame states times a change (dx, dv) of them, as partials
        like evaluate's: a sum of squares of the states, so Gauss–Newton's Jᵀ·H·J needs only this
        (the states x, which an embedded loss's Jacobian depends on, are not needed here)."""
        out = (np.zeros_like(dx), np.zeros_like(dv))
        for which, frame, _, w in self._weighted(dx.shape[1]):
            out[which][frame] += 2.0 * w * (dx, dv)[which][frame]
        return out

    def distances(self, x):
        """Per position-target frame: the mean and the largest distance (m) of the frame states x
        (frames+1, n, 3) from the target, over its keyed vertices (all by default)."""
        out = {}
        for frame, target in sorted(self.targets.items()):
            d = np.linalg.norm(x[frame] - target, axis=1)
            d = d[self.keyed[frame]] if frame in self.keyed else d
            out[frame] = (float(d.mean()), float(d.max()))
        return out

    def __call__(self, traj):
        return self.evaluate(traj.x, traj.v)[0]


def joined_loss(losses, sizes):
    """One KeyframeLoss of several cloths' position keys (None: a cloth without keys) over their
    vertices in turn (core.Joined): at a frame keyed on some of the cloths the others weigh
    nothing, and its distances are measured over the cloths keyed there."""
    if any(loss is not None and loss.velocity_targets for loss in losses):
        raise ValueError("joined_loss: velocity targets are not joined")
    starts = np.cumsum([0] + list(sizes))
    frames = sorted({f for loss in losses if loss is not None for f in loss.targets})
    targets, weights, keyed = {}, {}, {}
    for f in frames:
        pos, w, idx = [], [], []
        for loss, n, o in zip(losses, sizes, starts):
            if loss is not None and f in loss.targets:
                pos.append(loss.targets[f]), w.append(loss.weights.get(f, 1.0) * loss._vweights(f, n))
                idx.append(np.arange(o, o + n))
            else:
                pos.append(np.zeros((n, 3))), w.append(np.zeros(n))
        targets[f], weights[f], keyed[f] = np.concatenate(pos), np.concatenate(w), np.concatenate(idx)
    return KeyframeLoss(targets, vertex_weights=weights, keyed=keyed)
