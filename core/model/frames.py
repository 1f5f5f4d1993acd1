"""Quantities given per frame, and the validation of the scene's arrays."""

import numpy as np


def checked_array(value, shapes, what):
    """value as float64 broadcast to the last of `shapes` (the full shape); NaN/inf rejected."""
    arr = np.array(value, dtype=np.float64)
    full = shapes[-1]
    if arr.shape not in shapes:
        allowed = " or ".join(str(s) for s in shapes)
        raise ValueError(f"{what} must have shape {allowed}, got {arr.shape}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{what} has a NaN or infinite value")
    return np.array(np.broadcast_to(arr, full))


def frame_weights(s, substeps):
    """The frames integrator step s lies between and their weights: ((f, 1),) on a frame, else
    ((f, 1 − w), (f + 1, w)) (what at_step blends, and a gradient by the frames spreads over)."""
    f, r = divmod(s, substeps)
    if r == 0:
        return ((f, 1.0),)
    w = r / substeps
    return (f, 1 - w), (f + 1, w)


def at_step(frames, s, substeps):
    """A per-frame quantity (frames+1, ...) after integrator step s, linear between frames."""
    return sum(weight * frames[f] for f, weight in frame_weights(s, substeps))


def field_frame(s, substeps):
    """The frame whose force fields (the wind, effectors) act during integrator step s → s+1: the
    frame it steps toward, held over its substeps. Blender evaluates a cloth's effectors once a
    frame, at the frame it simulates (its depsgraph's), for every substep from the frame before."""
    return s // substeps + 1


def per_frame(value, shape, frames, what):
    """value of `shape`, or one per frame (frames, *shape), as the (frames, *shape) array."""
    return checked_array(value, [shape, (frames, *shape)], what)
