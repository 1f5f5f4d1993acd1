"""Mesh → springs, hinges, masses and rest lengths."""

import numpy as np
import pytest

import diffcloth.core as dc
from diffcloth.core.model.mesh import crossing_pairs


def expected_counts(n, m):
    tension = (m - 1) * (n - 1) + n * (m - 1) + m * (n - 1)
    bending = (m - 1) * (n - 1) + (n - 2) * (m - 1) + (m - 2) * (n - 1)
    return tension, bending


@pytest.mark.parametrize("bending", ["hinge", "springs"])
def test_thesis_grid_spring_counts(bending):
    verts, tris = dc.grid(20, 20)
    cloth = dc.Cloth(verts, tris, bending=bending)
    assert (cloth.n_tension, cloth.n_bending) == (1121, 1045)
    assert cloth.k_bending.shape == (1045,)


@pytest.mark.parametrize("bending", ["hinge", "springs"])
@pytest.mark.parametrize("n,m", [(2, 2), (3, 7), (6, 4), (11, 5)])
def test_grid_spring_counts_follow_formula(n, m, bending):
    # on a grid every interior edge has its own bending spring: as many hinges as bending springs
    cloth = dc.Cloth(*dc.grid(n, m), bending=bending)
    assert (cloth.n_tension, cloth.n_bending) == expected_counts(n, m)


def test_grid_geometry():
    verts, tris = dc.grid(4, 3, size=2.0)
    assert verts.shape == (12, 3) and tris.shape == (12, 3)
    assert np.allclose(verts.mean(axis=0), 0.0) and np.all(verts[:, 2] == 0)
    assert np.allclose(verts[1] - verts[0], [2.0 / 3, 0, 0])  # index j*n + i, i along x
    assert np.allclose(verts[4] - verts[0], [0, 1.0, 0])


def test_quads_and_ngons_are_triangulated():
    verts = np.array([[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0], [2, 0, 0], [2.5, 0.5, 0], [2, 1, 0]], float)
    faces = [[0, 1, 2, 3], [1, 4, 5, 6, 2]]  # a quad and a pentagon sharing edge 1-2
    cloth = dc.Cloth(verts, faces)
    assert len(cloth.tris) == 2 + 3
    # every polygon edge is a spring, plus the fan diagonals
    edges = {tuple(e) for e in cloth.tension_edges}
    for poly in faces:
        for a, b in zip(poly, poly[1:] + poly[:1]):
            assert tuple(sorted((a, b))) in edges


def test_bending_springs_join_opposite_vertices():
    verts = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0]], float)
    cloth = dc.Cloth(verts, [[0, 1, 2], [1, 3, 2]], bending="springs")
    assert cloth.bending_edges.tolist() == [[0, 3]]
    assert np.allclose(cloth.rest_lengths[-1], np.sqrt(2))
    assert len(cloth.edges) == 6 and len(cloth.k_bending) == 1


def test_hinges_are_interior_edges_with_opposite_vertices():
    verts = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0]], float)
    cloth = dc.Cloth(verts, [[0, 1, 2], [1, 3, 2]])
    assert cloth.bending == "hinge"
    assert cloth.hinges.tolist() == [[1, 2, 0, 3]]
    assert len(cloth.edges) == 5 and len(cloth.k_bending) == 1  # hinge mode: the springs are the edges
    # a triangle given twice (both orientations) makes no hinge
    twice = dc.Cloth(verts[:3], [[0, 1, 2], [0, 2, 1]])
    assert twice.hinges.shape == (0, 4) and twice.bending_edges.shape == (0, 2)


def test_lumped_masses_sum_to_total_and_follow_area():
    verts, tris = dc.grid(5, 5)
    cloth = dc.Cloth(verts, tris, mass=0.7)
    assert cloth.masses.sum() == pytest.approx(0.7)
    corner, interior = cloth.masses[0], cloth.masses[12]
    assert interior > corner > 0


def test_rest_lengths_from_rest_mesh():
    verts, tris = dc.grid(3, 3, size=1.0)
    cloth = dc.Cloth(verts, tris)
    e = cloth.edges
    assert np.allclose(cloth.rest_lengths, np.linalg.norm(verts[e[:, 0]] - verts[e[:, 1]], axis=1))
    assert set(np.round(cloth.rest_lengths[: cloth.n_tension], 6)) == {0.5, round(np.sqrt(0.5), 6)}


def _crossings_by_brute_force(x, tris):
    """Every (triangle, edge of another triangle) pair, the segment–plane crossing point tested
    for lying in the triangle by its barycentric coordinates: a different test from the one under
    test, and quadratic."""
    found = set()
    for t, tri in enumerate(tris):
        p0, p1, p2 = x[tri]
        n = np.cross(p1 - p0, p2 - p0)
        for u, other in enumerate(tris):
            for i, j in ((0, 1), (1, 2), (2, 0)):
                a, b = other[i], other[j]
                if a in tri or b in tri:
                    continue
                da, db = (x[a] - p0) @ n, (x[b] - p0) @ n
                if da * db > 0 or da == db:
                    continue
                p = x[a] + (x[b] - x[a]) * (da / (da - db))
                m = np.column_stack([p1 - p0, p2 - p0])
                w = np.linalg.lstsq(m, p - p0, rcond=None)[0]
                if w.min() >= 0 and w.sum() <= 1:
                    found.add(tuple(sorted((t, u))))
    return np.array(sorted(found), dtype=np.int64).reshape(-1, 2)


def test_crossing_pairs_finds_triangles_passing_through_each_other():
    v, f = dc.grid(6, 6, 1.0)
    tris = dc.triangulate(f)
    assert len(crossing_pairs(v, tris)) == 0  # flat
    folded = v.copy()
    right = folded[:, 0] > 0.05
    folded[right, 2] = 0.05  # a step up, layers apart
    folded[right, 0] = 0.1 - folded[right, 0]  # folded back over the left half, 5 cm above it
    assert len(crossing_pairs(folded, tris)) == 0
    folded[right, 2] = 0.05 - 0.2 * (folded[right, 0] + 0.5)  # its far edge pushed through the left half
    assert len(crossing_pairs(folded, tris)) > 0
    rng = np.random.default_rng(3)
    for _ in range(3):  # crumpled: many crossings
        x = v + rng.normal(scale=0.15, size=v.shape)
        expected = _crossings_by_brute_force(x, tris)
        assert len(expected) > 5
        assert np.array_equal(crossing_pairs(x, tris), expected)


def test_cloths_of_one_mesh_share_its_topology_read_only():
    """A run builds several cloths of one mesh (reading, weights, rest angles, joining): they share
    its edges, hinges and bending springs, which no one may change in place."""
    verts, tris = dc.grid(6, 5)
    cloth = dc.Cloth(verts, tris)
    again = cloth.replace(k_tension=2 * cloth.k_tension, verts=verts + 0.01)
    assert again.hinges is cloth.hinges and again.tension_edges is cloth.tension_edges
    with pytest.raises(ValueError):
        cloth.hinges[0, 0] = 1
    other = dc.Cloth(*dc.grid(5, 6))
    assert len(other.hinges) == len(cloth.hinges) and not np.array_equal(other.tension_edges, cloth.tension_edges)
