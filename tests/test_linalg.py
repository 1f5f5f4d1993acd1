"""Banded factorizations: buffers reused once released, never while a solve can still read them."""

import gc

import numpy as np
import pytest

import diffcloth.core as dc
from diffcloth.core.numerics import linalg
from diffcloth.core.numerics.linalg import Coupled
from diffcloth.core.numerics.scatter import scatter_add
from diffcloth.core.solver.integrator import StepModel


def system_and_matrices(n=8):
    verts, tris = dc.grid(n, n, size=0.4)
    cloth = dc.Cloth(verts, tris, mass=0.1, pinned=[0])
    model = StepModel(dc.Scene(cloth, steps=1, dt=0.05))
    # stretched, so every spring is in tension and every matrix positive definite
    mats = [model.matrix(model.potential.at(cloth.rest * stretch, 0)) for stretch in (1.0, 1.02, 1.05)]
    return model.system, mats


def exact(system, data, b):
    return np.linalg.solve(system.matrix(data).toarray(), b)


def test_a_kept_factor_solves_its_own_matrix_while_others_are_factored():
    system, (a, b_mat, c) = system_and_matrices()
    assert system.backend == "banded"
    rhs = np.random.default_rng(1).normal(size=system.ndof)
    first = system.factor(a)
    second = system.factor(b_mat)
    del second
    gc.collect()
    assert len(system._pool) == 1  # the released buffer waits for the next factorization
    third = system.factor(c)
    assert first.positive_definite and third.positive_definite
    assert len(system._pool) == 0
    for factor, data in ((first, a), (third, c)):
        want = exact(system, data, rhs)
        assert np.allclose(factor.solve(rhs), want, rtol=1e-3, atol=1e-6 * np.abs(want).max())


def test_a_matrix_that_fails_to_factor_gives_its_buffer_back():
    system, (a, _, _) = system_and_matrices()
    assert not system.factor(-a).positive_definite and not system._pool  # its diagonal says so: no LAPACK
    indefinite = a.copy()
    indefinite[system.diag] *= 0.8  # a positive diagonal, yet not positive definite: LAPACK's verdict
    failed = system.factor(indefinite)
    assert not failed.positive_definite
    assert len(system._pool) == 1
    kept = system.factor(a)
    rhs = np.ones(system.ndof)
    assert np.allclose(kept.solve(rhs), exact(system, a, rhs), rtol=1e-3)


@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_matrices_beyond_single_precisions_range_factor_without_overflow():
    """The band is factored in single precision (at most 3.4e38), scaled to a unit diagonal: a
    vertex held 1e40 times stiffer still factors and solves, and an indefinite matrix with entries
    that large is refused, none of it cast out of range."""
    system, (a, _, _) = system_and_matrices()
    stiff = a.copy()
    system.add_diagonal(stiff, np.array([5]), 1e40 * np.eye(3)[None])
    factor = system.factor(stiff)
    assert factor.positive_definite
    rhs = np.random.default_rng(3).normal(size=system.ndof)
    want = exact(system, stiff, rhs)
    assert np.allclose(factor.solve(rhs), want, rtol=1e-3, atol=1e-6 * np.abs(want).max())
    assert not system.factor(-1e40 * a).positive_definite
    pulled = a.copy()  # neighbours 1 and 2 pulled together far beyond what their diagonals hold
    pulled[system.slots(np.array([1, 2]), np.array([2, 1]))] = 1e40
    assert not system.factor(pulled).positive_definite


def coupled(system, data, far=5.0):
    """data with springs of stiffness `far` between vertices far apart in the mesh (as
    self-contact pairs couple them), beside the pattern."""
    rows = np.arange(system.nv // 4)
    cols = system.nv - 1 - rows
    more = np.zeros_like(data)
    system.add_diagonal(more, np.r_[rows, cols], np.tile(far * np.eye(3), (2 * len(rows), 1, 1)))
    return Coupled(data + more, system.coupling(rows, cols, np.tile(-far * np.eye(3), (len(rows), 1, 1))))


def test_a_small_coupled_matrix_is_factored_banded_in_its_own_order_and_solves_exactly():
    system, (a, _, _) = system_and_matrices()
    data = coupled(system, a)
    rhs = np.random.default_rng(2).normal(size=system.ndof)
    factor = data.factor(system)
    assert factor.positive_definite and factor.exact
    assert not hasattr(factor.solve, "__self__")  # LAPACK's band, not a SuperLU object's method
    want = np.linalg.solve(system.matrix(data).toarray(), rhs)
    assert np.allclose(factor.solve(rhs), want, rtol=1e-10, atol=1e-12 * np.abs(want).max())
    # where it is not positive definite: SuperLU's LU, which still solves it
    negative = Coupled(-data.data, -data.extra).factor(system)
    assert not negative.positive_definite
    assert np.allclose(negative.solve(rhs), -want, rtol=1e-8, atol=1e-10 * np.abs(want).max())
    # a band too wide for its size: SuperLU's
    wide, limit = system.coupled_factor, linalg.COUPLED_BANDED_LIMIT
    try:
        linalg.COUPLED_BANDED_LIMIT = 0
        sparse = wide(system.matrix(data))
    finally:
        linalg.COUPLED_BANDED_LIMIT = limit
    assert hasattr(sparse.solve, "__self__") and np.allclose(sparse.solve(rhs), want, rtol=1e-10, atol=1e-12)


def test_scatter_add_sums_repeated_indices_as_add_at():
    """scatter_add against np.add.at: rows of a (n,3) array, a 1-D array, and a strided view."""
    rng = np.random.default_rng(3)
    tris = rng.integers(0, 7, (40, 3))  # every index repeated
    values = rng.standard_normal((40, 3, 3))
    for shape, index, vals in (((7, 3), tris, values), ((7,), tris, values[..., 0])):
        start = rng.standard_normal(shape)
        want, got = start.copy(), start.copy()
        np.add.at(want, index, vals)
        scatter_add(got, index, vals)
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)
    want, got = np.zeros(7), np.zeros(7)
    np.add.at(want, tris, 2.5)  # one value for every index
    scatter_add(got, tris, 2.5)
    np.testing.assert_allclose(got, want)
    base = rng.standard_normal((7, 6))
    want, got = base.copy(), base.copy()
    np.add.at(want[:, ::2], tris, values)
    scatter_add(got[:, ::2], tris, values)
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("solver", ["linearized", "newton"])
def test_isotropic_pair_blocks_sum_as_the_assembler_map_to_the_bit(solver):
    """The hinges' constant matrix, pair blocks κ·I₃ (bounded for linearized steps), summed by
    BlockSystem.isotropic equals the assembler map's product in every entry, its zeros' signs too:
    the matrices every step factors are the same, so is every motion."""
    rng = np.random.default_rng(3)
    verts, tris = dc.grid(12, 12)
    cloth = dc.FABRICS["cotton"].cloth(verts + rng.normal(scale=1e-3, size=verts.shape), tris, pinned=[0, 11, 60])
    model = StepModel(dc.Scene(cloth, steps=2, solver=solver))
    pot = model.potential
    (hinge,) = [t for t in pot.terms if type(t).__name__ == "HingeBending"]
    ends, kappa, _, _ = hinge.pair_couplings(hinge.bound)
    kappa = pot.hess_scale * kappa
    mapped = pot.system.assembler(pot.fidx[ends]) @ (kappa[:, None, None] * np.eye(3)).ravel()
    summed = pot.system.isotropic(pot.fidx[ends], kappa)
    assert (pot.fidx[ends] < 0).any() and np.abs(mapped).max() > 0
    assert np.array_equal(summed, mapped) and np.array_equal(np.signbit(summed), np.signbit(mapped))


def test_the_stiffness_test_sums_each_row_along_its_axis_as_the_translations_product():
    """BlockSystem.stiffness's row sums over the dofs along a row's own axis are its matrix's
    products with the rigid translations, to the bit (the same entries in the same order)."""
    system, mats = system_and_matrices()
    translations = np.tile(np.eye(3), (system.nv, 1))
    for data in mats:
        product = (system.matrix(data) @ translations).reshape(-1, 3, 3).diagonal(axis1=1, axis2=2).ravel()
        along = np.bincount(system.along_rows, weights=data[system.along], minlength=system.ndof)
        assert np.array_equal(along, product) and (along > 0).all()
        assert system.stiffness(data, data[system.diag]) == pytest.approx(np.max(data[system.diag] / product))
