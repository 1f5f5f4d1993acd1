"""The contact queries compiled (native/queries.c, loaded by ctypes; scripts/build_native.py builds
one library per platform, the extension ships all four): the closest points of a triangle mesh
and the cloth's vertex–triangle broad phase. At a few hundred vertices numpy's cost per call was
most of their time (a character's body: 1.6–1.9 ms a query against about 0.1 ms)."""

import ctypes
import functools
import platform
from pathlib import Path

import numpy as np

NATIVE = Path(__file__).resolve().parent / "native"
# Blender's platform names -> the library scripts/build_native.py writes for it
LIBRARY = {
    "linux-x64": "libqueries.so",
    "windows-x64": "queries.dll",
    "macos-arm64": "libqueries.dylib",
    "macos-x64": "libqueries.dylib",
}
_P, _I = ctypes.c_void_p, ctypes.c_int64


def this_platform():
    system = {"darwin": "macos"}.get(platform.system().lower(), platform.system().lower())
    machine = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64"}.get(
        platform.machine().lower(), platform.machine().lower()
    )
    return f"{system}-{machine}"


@functools.cache
def library():
    """The platform's library, loaded once; a RuntimeError that says what is missing otherwise."""
    name = this_platform()
    if name not in LIBRARY:
        raise RuntimeError(f"DiffCloth has no compiled contact queries for this platform ({name})")
    path = NATIVE / name / LIBRARY[name]
    if not path.exists():
        raise RuntimeError(f"DiffCloth's compiled contact queries are missing ({path}): run scripts/build_native.py")
    lib = ctypes.CDLL(str(path))
    lib.dc_closest_on_triangles.argtypes = [_I, _P, _P, _P, _P, _P, _P]
    lib.dc_closest_on_triangles.restype = None
    lib.dc_closest_points.argtypes = [_I, _P, _P, _P, _I, _P, _P, _P, _P]
    lib.dc_closest_points.restype = _I
    lib.dc_near_pairs.argtypes = [_P, _P, _I, _P, _I, _P, ctypes.c_double, _I, _P, _P]
    lib.dc_near_pairs.restype = _I
    return lib


def _doubles(a):
    return np.ascontiguousarray(a, dtype=np.float64)


def _indices(a):
    return np.ascontiguousarray(a, dtype=np.int64)


def _address(a):
    return None if a is None else a.ctypes.data


def _checked(status):
    if status < 0:
        raise MemoryError("the contact query ran out of memory")
    return status


def closest_on_triangles(p, a, b, c):
    """Closest points q on triangles (a, b, c) to points p, all (N,3), and barycentric weights
    (N,3) of q (Ericson, Real-Time Collision Detection §5.1.5): a face's interior has three
    positive weights, an edge's two, a vertex's one."""
    p, a, b, c = (_doubles(v).reshape(-1, 3) for v in (p, a, b, c))
    q, bary = np.empty_like(p), np.empty_like(p)
    library().dc_closest_on_triangles(len(p), *(_address(v) for v in (p, a, b, c, q, bary)))
    return q, bary


def closest_points(x, radius, verts, tris):
    """For points x (N,3), each within its radius (N,) or any distance (None) of triangles tris
    (T,3) of verts: the closest triangle (N,: −1 where none is within the radius; ties: the lower
    index), the closest point on it (N,3) and its barycentric weights (N,3)."""
    x, verts, tris = _doubles(x), _doubles(verts), _indices(tris)
    radius = None if radius is None else _doubles(np.broadcast_to(radius, (len(x),)))
    tri, q, bary = np.empty(len(x), np.int64), np.empty((len(x), 3)), np.empty((len(x), 3))
    _checked(
        library().dc_closest_points(
            len(x), *(_address(v) for v in (x, radius, verts)), len(tris), *(_address(v) for v in (tris, tri, q, bary))
        )
    )
    return tri, q, bary


def near_pairs(x, tris, triangles, vertices, radius):
    """(vertex, triangle) pairs (two (P,) arrays, in no order) of triangles (indices into tris)
    and vertices (indices into x) whose vertex lies within radius of the triangle's centroid beyond
    its reach (its largest centroid-to-corner distance)."""
    x, tris, triangles, vertices = _doubles(x), _indices(tris), _indices(triangles), _indices(vertices)
    cap = 4 * (len(triangles) + len(vertices))
    while True:
        vertex, triangle = np.empty(cap, np.int64), np.empty(cap, np.int64)
        n = _checked(
            library().dc_near_pairs(
                *(_address(v) for v in (x, tris)),
                len(triangles),
                _address(triangles),
                len(vertices),
                _address(vertices),
                float(radius),
                cap,
                *(_address(v) for v in (vertex, triangle)),
            )
        )
        if n <= cap:
            return vertex[:n], triangle[:n]
        cap = n
