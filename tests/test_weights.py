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


def test_a_shrunk_cloth_draws_in_and_its_gradients_stay_exact():
    """Shrink factors scale the springs' rest lengths by √(sᵢsⱼ) (Blender's Shrinking): a free
    square shrunk by 10% settles 10% smaller; gradients through it match central differences."""
    verts, tris = dc.grid(6, 6, size=0.3)
    cloth = dc.FABRICS["cotton"].cloth(verts, tris).replace(shrink=np.full(36, 0.9))
    assert np.allclose(cloth.rest_lengths, 0.9 * dc.Cloth(verts, tris).rest_lengths)
    scene = dc.Scene(cloth, steps=60, dt=1 / 24, gravity=(0, 0, 0), solver="newton")
    x = dc.simulate(scene).x[-1]
    span = lambda p: np.ptp(p[:, :2], axis=0)  # noqa: E731
    assert np.allclose(span(x), 0.9 * span(verts), rtol=0.01)
    top = np.flatnonzero(np.isclose(verts[:, 1], 0.15))
    hanging = scene.replace(cloth=cloth.replace(pinned=top), gravity=(0, 0, -9.81), steps=12)
    loss = dc.KeyframeLoss({12: dc.simulate(hanging).x[12] - [0.0, 0.0, 0.02]})  # lower: against the springs
    check = dc.check_gradient(hanging, loss, [dc.GlobalStiffness()], eps=1e-6, components=[0])
    assert abs(check[0]["numeric"]) > 1e-5 and check[0]["rel_error"] < 1e-5, check
    with pytest.raises(ValueError, match="shrink factor must be positive"):
        cloth.replace(shrink=np.zeros(36))
