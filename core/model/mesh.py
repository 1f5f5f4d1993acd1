"""Triangle meshes to edges, hinges, bending springs and lumped masses."""

import numpy as np
from scipy.spatial import cKDTree


def grid(n, m, size=1.0):
    """An n×m-vertex square of side `size` in the XY plane, centred at the origin, z = 0.

    Vertex (i, j) with i along x and j along y has index j*n + i; every quad is split along
    the same diagonal, as in the thesis.
    """
    n, m = int(n), int(m)
    if n < 2 or m < 2:
        raise ValueError(f"grid needs at least 2×2 vertices, got {n}×{m}")
    if not size > 0:
        raise ValueError(f"grid size must be positive, got {size}")
    xs = np.linspace(-size / 2, size / 2, n)
    ys = np.linspace(-size / 2, size / 2, m)
    gx, gy = np.meshgrid(xs, ys)
    verts = np.stack([gx.ravel(), gy.ravel(), np.zeros(n * m)], axis=1)
    i, j = np.meshgrid(np.arange(n - 1), np.arange(m - 1))
    a = (j * n + i).ravel()
    b, c, d = a + 1, a + n + 1, a + n
    tris = np.concatenate([np.stack([a, b, c], 1), np.stack([a, c, d], 1)])
    return verts, tris.astype(np.int64)


def triangulate(faces):
    """(T,3) triangles from a (T,3) array or a list of polygons (fan triangulation)."""
    if isinstance(faces, np.ndarray) and faces.ndim == 2:
        if faces.shape[1] < 3:
            raise ValueError(f"faces need at least 3 vertices each, got shape {faces.shape}")
        if not len(faces):
            raise ValueError("the mesh has no triangles")
        # each row's fan at once (row by row in Python was most of a cloth's construction)
        fans = [faces[:, [0, t, t + 1]] for t in range(1, faces.shape[1] - 1)]
        return np.stack(fans, axis=1).reshape(-1, 3).astype(np.int64)
    polys = list(faces)
    tris = []
    for k, poly in enumerate(polys):
        poly = [int(i) for i in poly]
        if len(poly) < 3:
            raise ValueError(f"face {k} has {len(poly)} vertices; a face needs at least 3")
        tris.extend((poly[0], poly[t], poly[t + 1]) for t in range(1, len(poly) - 1))
    if not tris:
        raise ValueError("the mesh has no triangles")
    return np.asarray(tris, dtype=np.int64)


def polygon_of_triangles(faces):
    """The polygon each of triangulate(faces)'s triangles comes from (T,)."""
    if isinstance(faces, np.ndarray) and faces.ndim == 2:
        return np.repeat(np.arange(len(faces)), faces.shape[1] - 2)
    return np.repeat(np.arange(len(faces)), [len(poly) - 2 for poly in faces])


def shear_mask(edges, tris, polygons):
    """Per edge of `edges` (edges(tris)'s), whether it lies inside one polygon: both its
    triangles come from the same polygon (polygons: per triangle), as the diagonal triangulating
    a quad adds. None inside a mesh of triangles."""
    e = np.sort(np.concatenate([tris[:, [0, 1]], tris[:, [1, 2]], tris[:, [2, 0]]]), axis=1)
    poly = np.tile(np.asarray(polygons, np.int64), 3)
    n = int(e.max()) + 1
    key = e[:, 0] * n + e[:, 1]
    order = np.argsort(key, kind="stable")
    key, poly = key[order], poly[order]
    pair = np.flatnonzero((key[1:] == key[:-1]) & (poly[1:] == poly[:-1]))
    return np.isin(edges[:, 0] * n + edges[:, 1], key[pair])


def check_mesh(verts, tris):
    """Raise ValueError naming the first problem that would break the simulation."""
    if verts.ndim != 2 or verts.shape[1] != 3 or len(verts) == 0:
        raise ValueError(f"vertices must have shape (n, 3), got {verts.shape}")
    bad = ~np.isfinite(verts).all(axis=1)
    if bad.any():
        raise ValueError(f"vertex {int(np.argmax(bad))} has a NaN or infinite coordinate")
    if len(tris) == 0:
        raise ValueError("the mesh has no triangles")
    if tris.min() < 0 or tris.max() >= len(verts):
        raise ValueError(f"a triangle index is out of range 0..{len(verts) - 1}")
    if (tris[:, 0] == tris[:, 1]).any() or (tris[:, 1] == tris[:, 2]).any() or (tris[:, 0] == tris[:, 2]).any():
        raise ValueError("a triangle repeats a vertex")
    scale = np.ptp(verts, axis=0).max()
    area = triangle_areas(verts, tris)
    tiny = area <= 1e-12 * max(scale, 1e-300) ** 2
    if tiny.any():
        raise ValueError(f"triangle {int(np.argmax(tiny))} has zero area (degenerate face)")
    used = np.zeros(len(verts), bool)
    used[tris.ravel()] = True
    if not used.all():
        raise ValueError(f"vertex {int(np.argmin(used))} belongs to no triangle (loose vertex)")


def triangle_areas(verts, tris):
    e1 = verts[tris[:, 1]] - verts[tris[:, 0]]
    e2 = verts[tris[:, 2]] - verts[tris[:, 0]]
    return 0.5 * np.linalg.norm(np.cross(e1, e2), axis=1)


def face_normals(x, tris):
    """Unit normals (T,3) of triangles at positions x, by their winding (0 for a degenerate one),
    and their cross products' lengths (twice their areas)."""
    a = x[tris[:, 0]]
    cross = np.cross(x[tris[:, 1]] - a, x[tris[:, 2]] - a)
    length = np.linalg.norm(cross, axis=1)
    return np.divide(cross, length[:, None], out=np.zeros_like(cross), where=length[:, None] > 0), length


def edges(tris):
    """Unique edges and the hinges of interior edges.

    Returns (edges (E,2), hinges (H,4)), both deterministic: edges sorted, and per interior edge
    (in edge order) its ends followed by the two vertices opposite it, one in each triangle.
    """
    # each triangle contributes three (edge, opposite vertex) pairs
    e = np.concatenate([tris[:, [0, 1]], tris[:, [1, 2]], tris[:, [2, 0]]])
    opp = np.concatenate([tris[:, 2], tris[:, 0], tris[:, 1]])
    e = np.sort(e, axis=1)
    order = np.lexsort((e[:, 1], e[:, 0]))
    e, opp = e[order], opp[order]
    new = np.ones(len(e), bool)
    new[1:] = (e[1:] != e[:-1]).any(axis=1)
    unique = e[new]
    group = np.cumsum(new) - 1
    counts = np.bincount(group)
    if (counts > 2).any():
        k = int(np.argmax(counts > 2))
        raise ValueError(
            f"edge {tuple(int(i) for i in unique[k])} is shared by {counts[k]} triangles (non-manifold mesh)"
        )
    # interior edges: consecutive rows of the same group hold the two opposite vertices; a
    # triangle given twice (same opposite vertex) makes no hinge
    twin = np.flatnonzero(~new)
    hinges = np.column_stack([e[twin], opp[twin - 1], opp[twin]])
    return unique, hinges[hinges[:, 2] != hinges[:, 3]]


def bending_springs(hinges):
    """The thesis's bending springs: one per pair of vertices opposite an interior edge, sorted."""
    return np.unique(np.sort(hinges[:, 2:], axis=1), axis=0).reshape(-1, 2)


def lumped_masses(verts, tris, total_mass):
    """Total mass spread over vertices by a third of each adjacent triangle's area."""
    area = triangle_areas(verts, tris)
    m = np.bincount(tris.ravel(), weights=np.repeat(area / 3.0, 3), minlength=len(verts))
    return m * (total_mass / area.sum())


def centroids(x, tris):
    """Each triangle's centroid at positions x (T,3) (a sum of its corners: a mean over an axis
    of (T,3,3) was 4.7× slower)."""
    return (x[tris[:, 0]] + x[tris[:, 1]] + x[tris[:, 2]]) / 3


def centroids_and_reach(x, tris):
    """Each triangle's centroid (T,3) and its largest centroid-to-corner distance (T,): a triangle
    lies within its reach of its centroid (what the broad phases search by)."""
    middle = centroids(x, tris)
    return middle, np.linalg.norm(x[tris] - middle[:, None], axis=2).max(axis=1)


def search_tree(points):
    """A cKDTree of points (N,3), built for one search: without the balanced median splits it
    builds 2–2.6× faster and searches 0.8–1.1× as fast (400 to 16k points on a sheet)."""
    return cKDTree(points, balanced_tree=False, compact_nodes=False)


def crossing_pairs(x, tris):
    """The pairs of triangles (K,2), each sorted, that pass through each other at positions x: an
    edge of one crosses the other, whose vertices it does not share. What self-collision keeps at
    zero. Broad phase: every triangle's edge midpoints against triangle centroids within their
    reaches (one cKDTree traversal); narrow phase: a segment–triangle test (Möller–Trumbore),
    vectorized."""
    x = np.asarray(x, dtype=np.float64)
    tris = np.asarray(tris, dtype=np.int64).reshape(-1, 3)
    # the mesh's edges, each once, and the one or two triangles that own it (-1: none); the broad
    # phase searched each interior edge twice when it took every triangle's three
    sides = np.sort(np.concatenate([tris[:, [0, 1]], tris[:, [1, 2]], tris[:, [2, 0]]]), axis=1)
    key = sides[:, 0] * len(x) + sides[:, 1]
    order = np.argsort(key, kind="stable")
    first = np.r_[True, key[order][1:] != key[order][:-1]]
    ends = sides[order][first]
    owner = np.full((len(ends), 2), -1)
    owner[:, 0] = (order % len(tris))[first]
    twin = np.flatnonzero(~first)  # an edge's second triangle follows its first in the order
    owner[np.cumsum(first)[twin] - 1, 1] = (order % len(tris))[twin]
    centroids, reach = centroids_and_reach(x, tris)
    a, b = x[ends[:, 0]], x[ends[:, 1]]
    half = np.linalg.norm(b - a, axis=1) / 2
    pairs = search_tree(centroids).sparse_distance_matrix(
        search_tree((a + b) / 2), float(reach.max() + half.max()), output_type="ndarray"
    )
    t, k = pairs["i"].astype(np.int64), pairs["j"].astype(np.int64)
    near = pairs["v"] <= reach[t] + half[k]
    t, k = t[near], k[near]
    # not those sharing a vertex, column by column (an any() over (K,3) was 30× slower)
    corner, end = tris[t], ends[k]
    apart = np.ones(len(t), bool)
    for c in range(3):
        apart &= (corner[:, c] != end[:, 0]) & (corner[:, c] != end[:, 1])
    t, k = t[apart], k[apart]
    corners = x[tris[t]]
    p0, e1, e2 = corners[:, 0], corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0]
    d, s = b[k] - a[k], a[k] - p0
    h = np.cross(d, e2)
    det = np.einsum("ij,ij->i", e1, h)
    scale = np.linalg.norm(d, axis=1) * np.linalg.norm(e1, axis=1) * np.linalg.norm(e2, axis=1)
    ok = np.abs(det) > 1e-12 * scale  # an edge in the triangle's plane: no crossing
    inv = np.where(ok, 1.0 / np.where(ok, det, 1.0), 0.0)
    q = np.cross(s, e1)
    u = inv * np.einsum("ij,ij->i", s, h)
    v = inv * np.einsum("ij,ij->i", d, q)
    along = inv * np.einsum("ij,ij->i", e2, q)
    hit = ok & (u >= 0) & (v >= 0) & (u + v <= 1) & (along >= 0) & (along <= 1)
    t, owners = np.repeat(t[hit], 2), owner[k[hit]].ravel()
    found = np.sort(np.column_stack([t, owners])[owners >= 0], axis=1)
    return np.unique(found, axis=0)


def hinge_weights(rest, hinges):
    """Per hinge (x0, x1 the edge, x2, x3 opposite): cotangent weights w (H,4) and the area of
    its two triangles (H,).

    w is the one combination (up to scale) with Σwᵢ = 0 and Σwᵢx̄ᵢ = 0 over the hinge unfolded
    flat: with αⱼ, βⱼ the angles at xⱼ in triangles (x0,x1,x2), (x0,x1,x3),
    w = (−cot α₁ − cot β₁, −cot α₀ − cot β₀, cot α₀ + cot α₁, cot β₀ + cot β₁)
    (Bergou et al. 2006, up to sign). Folding the hinge by θ about its edge makes
    ‖Σwᵢxᵢ‖ = 2·|e|·sin(θ/2) ≈ |e|·θ. Angles are intrinsic, so a curved rest mesh gets the weights
    of its flat development and has Σwᵢx̄ᵢ ≠ 0: its rest shape carries bending energy.
    """
    x0, x1, x2, x3 = (rest[hinges[:, i]] for i in range(4))
    e = x1 - x0

    def cotangents(p):  # at x0 and x1 of triangle (x0, x1, p), and twice its area
        twice_area = np.linalg.norm(np.cross(e, p - x0), axis=1)
        return (
            np.einsum("ij,ij->i", e, p - x0) / twice_area,
            np.einsum("ij,ij->i", -e, p - x1) / twice_area,
            twice_area,
        )

    a0, a1, twice_a = cotangents(x2)
    b0, b1, twice_b = cotangents(x3)
    w = np.stack([np.zeros_like(a0), -(a0 + b0), a0 + a1, b0 + b1], axis=1)
    w[:, 0] = -w[:, 1:].sum(axis=1)  # Σwᵢ = 0 exactly: rigid translations cost nothing
    return w, 0.5 * (twice_a + twice_b)


# a hinge within this of flat at rest (|β̄| over its edge's length: about the rest angle in
# radians over 2, so 10⁻⁵ rad) bends about flat. Blender stores coordinates in single precision,
# which bends a flat region's hinges by 10⁻⁷–10⁻⁶ rad (the character sample: 514 of its 706 bent
# hinges, every one below 5·10⁻⁷), while a curvature of 10⁻⁵ rad a hinge is a radius of 10⁵ edges
FLAT_REST = 5e-6


def hinge_rest_angles(rest, hinges):
    """What bending each hinge about its rest angle needs, for the hinges not flat at rest:
    their indices (C,), β̄ with Σwᵢx̄ᵢ = β̄·m̄ (w: hinge_weights; m̄ = n̄₁ + n̄₂ the sum of the two
    triangles' rest unit normals, to which Σwx̄ is parallel, its flat development being folded),
    cos²(θ̄/2) = |m̄|²/4, and 1/(2Ā) of the triangles (x0,x1,x2) and (x1,x0,x3), (C,2), which
    scale their normals' cross products to m."""
    w, _ = hinge_weights(rest, hinges)
    x0, x1, x2, x3 = (rest[hinges[:, i]] for i in range(4))
    n1, n2 = np.cross(x1 - x0, x2 - x0), np.cross(x0 - x1, x3 - x1)
    scale = 1.0 / np.stack([np.linalg.norm(n1, axis=1), np.linalg.norm(n2, axis=1)], axis=1)
    m = n1 * scale[:, :1] + n2 * scale[:, 1:]
    mm = np.einsum("ij,ij->i", m, m)
    bend = np.einsum("hi,hij->hj", w[:, 1:], np.stack([x1 - x0, x2 - x0, x3 - x0], axis=1))
    beta = np.einsum("ij,ij->i", bend, m) / np.maximum(mm, 1e-300)
    curved = np.flatnonzero(np.abs(beta) > FLAT_REST * np.linalg.norm(x1 - x0, axis=1))
    return curved, beta[curved], mm[curved] / 4.0, scale[curved]
