"""A PNG contact sheet of target vs. result at the keyframes plus the loss curve (numpy + zlib only)."""

import struct
import zlib

import numpy as np

PANEL = 240
TARGET = np.array([220, 60, 50], np.uint8)
RESULT = np.array([40, 90, 220], np.uint8)
INK = np.array([40, 40, 40], np.uint8)


def _lines(img, a, b, color):
    """Draw segments a→b (pixel coordinates, (k,2) each) by sampling them densely."""
    steps = int(np.ceil(np.abs(b - a).max(initial=1))) + 1
    t = np.linspace(0.0, 1.0, steps)[:, None, None]
    pts = np.rint(a[None] + t * (b - a)[None]).reshape(-1, 2).astype(int)
    ok = (pts[:, 0] >= 0) & (pts[:, 0] < img.shape[1]) & (pts[:, 1] >= 0) & (pts[:, 1] < img.shape[0])
    img[pts[ok, 1], pts[ok, 0]] = color


def _project(points, lo, span, size):
    """Front view (x right, z up) into a size×size panel with a margin."""
    uv = (points[:, [0, 2]] - lo) / span
    return np.stack([12 + uv[:, 0] * (size - 24), size - 12 - uv[:, 1] * (size - 24)], axis=1)


def contact_sheet(path, keyframes, edges, losses):
    """keyframes: list of (label, target (n,3), result (n,3)); losses: loss per iteration (≥ 1 value)."""
    cols = max(len(keyframes), 1)
    img = np.full((2 * PANEL, cols * PANEL, 3), 255, np.uint8)
    everything = np.concatenate([np.concatenate([t, r]) for _, t, r in keyframes]) if keyframes else np.zeros((1, 3))
    lo = everything[:, [0, 2]].min(axis=0)
    span = max(float(np.ptp(everything[:, [0, 2]], axis=0).max()), 1e-9)
    for i, (_, target, result) in enumerate(keyframes):
        panel = img[:PANEL, i * PANEL:(i + 1) * PANEL]
        for positions, color in ((target, TARGET), (result, RESULT)):
            p = _project(positions, lo, span, PANEL)
            _lines(panel, p[edges[:, 0]], p[edges[:, 1]], color)
        panel[:, -1] = INK
    curve = img[PANEL:, :]
    values = np.log10(np.maximum(np.asarray(losses, float) / max(losses[0], 1e-300), 1e-16))
    width = curve.shape[1]
    x = 12 + np.arange(len(values)) * (width - 24) / max(len(values) - 1, 1)
    top, bottom = 0.0, min(values.min(), -1.0)
    y = 12 + (top - values) / (top - bottom) * (PANEL - 24)
    _lines(curve, np.array([[12, 12], [12, PANEL - 12]]), np.array([[12, PANEL - 12], [width - 12, PANEL - 12]]), INK)
    if len(values) > 1:
        pts = np.stack([x, y], axis=1)
        _lines(curve, pts[:-1], pts[1:], RESULT)
    _write_png(path, img)


def _write_png(path, img):
    raw = b"".join(b"\x00" + row.tobytes() for row in img)

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", img.shape[1], img.shape[0], 8, 2, 0, 0, 0)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 9))
                + chunk(b"IEND", b""))
