"""Property Weights in core: Cloth.weighted scales each element by its ends' per-vertex factors, as
Blender's vertex groups with their Max values do; a stiffened band stretches less."""

import numpy as np
import pytest

import diffcloth.core as dc


@pytest.fixture
def strip():
    """A 6×12 Cotton strip hanging from its top row; rows counted from the top."""
    verts, tris = dc.grid(6, 12, size=0.3)
    row = np.round((verts[:, 1].max() - verts[:, 1]) / (0.3 / 11)).astype(int)
    return dc.FABRICS["cotton"].cloth(verts, tris, pinned=np.flatnonzero(row == 0)), row


def test_each_element_takes_the_mean_of_its_ends_factors(strip):
    cloth, row = strip
    f = 1.0 + 4.0 * (row >= 6)  # the lower half 5× (a weight of 1 toward a Max 5× the stretch)
    g = 1.0 + 9.0 * (row >= 6)
    out = cloth.weighted(tension=f, shear=f, bending=g)
    ends = lambda e: f[e].mean(axis=1)  # noqa: E731
    assert np.allclose(out.k_tension, cloth.k_tension * ends(cloth.tension_edges))
    assert np.allclose(out.k_shear, cloth.k_shear * ends(cloth.shear_edges))
    assert np.allclose(out.k_bending, cloth.k_bending * g[cloth.hinges[:, :2]].mean(axis=1))
    # compression follows the weighted tension unless given its own factors
    assert out.own_compression is None and np.array_equal(out.k_compression, out.k_tension)
    soft = out.weighted(compression=np.full(cloth.n, 0.5))
    assert np.allclose(soft.own_compression, 0.5 * out.k_tension) and np.array_equal(soft.k_tension, out.k_tension)
    assert out.fabric is cloth.fabric and np.array_equal(out.rest, cloth.rest)
    unchanged = cloth.weighted()
    assert np.array_equal(unchanged.k_tension, cloth.k_tension) and np.array_equal(unchanged.k_bending, cloth.k_bending)


def test_a_stiffened_band_stretches_less(strip):
    """The strip's lower half, stiffened 20×, lengthens a twentieth as much under its own weight
    (its stretch scales as 1/k), the upper half as before."""
    cloth, row = strip

    def stretch(c):
        x = dc.simulate(dc.Scene(c, steps=48, dt=1 / 24, solver="newton")).x[-1]
        column = np.flatnonzero(np.isclose(c.rest[:, 0], c.rest[0, 0]))
        column = column[np.argsort(row[column])]  # one column, top to bottom
        length = lambda p: np.linalg.norm(np.diff(p[column], axis=0), axis=1)  # noqa: E731
        return length(x) / length(c.rest) - 1.0

    plain, stiff = stretch(cloth), stretch(cloth.weighted(tension=1.0 + 19.0 * (row >= 6)))
    assert plain[6:].sum() > 2e-3 and 0 < stiff[6:].sum() < 0.1 * plain[6:].sum()
    assert stiff[:5].mean() == pytest.approx(plain[:5].mean(), rel=0.2)
