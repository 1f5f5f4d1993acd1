"""Hinge bending: the energy, its derivatives, its invariances, its units and its resolution independence."""

import numpy as np
import pytest

import diffcloth.core as dc
from diffcloth.core.model.cloth import BENDING_DEFAULTS
from diffcloth.core.model.mesh import hinge_weights
from diffcloth.core.solver.integrator import StepModel
from diffcloth.core.terms.hinges import HingeBending


def rotation(seed):
    q, _ = np.linalg.qr(np.random.default_rng(seed).normal(size=(3, 3)))
    return q * np.sign(np.linalg.det(q))


def irregular_flat(n=6, seed=0):
    """A grid with jittered vertices (uneven triangles), flat, turned and moved off the origin."""
    verts, tris = dc.grid(n, n, size=0.5)
    verts[:, :2] += np.random.default_rng(seed).uniform(-0.03, 0.03, size=(len(verts), 2))
    return verts @ rotation(seed).T + [3.0, -2.0, 5.0], tris


def hinge_term(verts, tris, k=None):
    """The cloth and its hinge term, with rigidity k or random ones per hinge."""
    cloth = dc.Cloth(verts, tris)
    k = np.random.default_rng(1).uniform(0.5, 2.0, cloth.n_bending) if k is None else k
    cloth = cloth.replace(k_bending=k)
    return cloth, HingeBending(cloth.rest, cloth.hinges, cloth.k_bending, cloth.n)


def test_bending_model_and_its_stiffness():
    verts, tris = dc.grid(4, 4)
    hinge = dc.Cloth(verts, tris)
    assert hinge.bending == "hinge" and np.all(hinge.k_bending == BENDING_DEFAULTS["hinge"])
    assert hinge.k_bending.shape == (len(hinge.hinges),) and np.array_equal(hinge.edges, hinge.tension_edges)
    springs = dc.Cloth(verts, tris, k_bending=np.linspace(0.1, 0.2, 21), bending="springs")
    assert springs.replace(mass=1.0).bending == "springs"
    assert np.array_equal(springs.replace(mass=1.0).k_bending, springs.k_bending)
    # another model starts from its own default stiffness (another unit)
    assert np.all(springs.replace(bending="hinge").k_bending == BENDING_DEFAULTS["hinge"])


def test_weights_vanish_on_affine_functions_of_the_rest():
    verts, tris = irregular_flat()
    cloth = dc.Cloth(verts, tris)
    w, area = hinge_weights(verts, cloth.hinges)
    scale = np.abs(w).max()
    assert np.abs(w.sum(axis=1)).max() < 1e-15 * scale
    assert np.abs(np.einsum("hi,hij->hj", w, verts[cloth.hinges])).max() < 1e-13 * scale
    assert (area > 0).all()


def test_flat_and_rigidly_moved_mesh_has_no_energy_or_force():
    verts, tris = irregular_flat()
    cloth, hb = hinge_term(verts, tris)
    moved = (verts - verts.mean(axis=0)) @ rotation(5).T + [-40.0, 7.0, 12.0]
    for y in (verts, moved):
        bend = hb.bend(y)
        assert hb.energy(bend) < 1e-24
        assert np.abs(hb.gradient(bend)).max() < 1e-10


@pytest.mark.parametrize("theta", [0.3, 1.2, 2.5])
def test_folding_one_hinge(theta):
    # an uneven hinge; folding triangle (0, 1, 3) by θ about the edge 0-1
    verts = np.array([[0.0, 0.0, 0.0], [1.2, 0.0, 0.0], [0.3, 0.8, 0.0], [0.9, -0.5, 0.0]])
    cloth, hb = hinge_term(verts, [[0, 1, 2], [1, 0, 3]], k=np.array([2.0]))
    assert cloth.hinges.tolist() == [[0, 1, 2, 3]]
    folded = verts.copy()
    folded[3] = [0.9, -0.5 * np.cos(theta), 0.5 * np.sin(theta)]
    bend = hb.bend(folded)
    # ‖Σwx‖ = 2|e|sin(θ/2); E = ½(k/A)‖Σwx‖² with A the two triangles' area
    assert np.linalg.norm(bend) == pytest.approx(2 * 1.2 * np.sin(theta / 2), rel=1e-12)
    area = 0.5 * 1.2 * (0.8 + 0.5)
    assert hb.energy(bend) == pytest.approx(0.5 * 2.0 / area * (2 * 1.2 * np.sin(theta / 2)) ** 2, rel=1e-12)
    # the weights are intrinsic: a mesh folded at rest gets the same ones, so its rest shape is
    # not free of energy in this term alone (core.terms.rest_angles bends it about its rest angle)
    rest_folded = HingeBending(folded, cloth.hinges, 2.0, 4)
    assert np.allclose(rest_folded.w, hb.w, rtol=1e-12)
    assert rest_folded.energy(rest_folded.bend(folded)) == pytest.approx(hb.energy(bend), rel=1e-12)


def test_energy_gradient_and_hessian_match_finite_differences():
    verts, tris = irregular_flat(5, seed=2)
    cloth, hb = hinge_term(verts, tris)
    rng = np.random.default_rng(3)
    y = verts + rng.normal(scale=0.05, size=verts.shape)
    grad, eps = hb.gradient(hb.bend(y)), 1e-6
    for k in rng.choice(y.size, 10, replace=False):
        e = np.zeros(y.size)
        e[k] = eps
        e = e.reshape(y.shape)
        fd = (hb.energy(hb.bend(y + e)) - hb.energy(hb.bend(y - e))) / (2 * eps)
        assert grad.ravel()[k] == pytest.approx(fd, rel=1e-7, abs=1e-9 * np.abs(grad).max())
    v = rng.normal(size=y.shape)
    fd = (hb.gradient(hb.bend(y + eps * v)) - hb.gradient(hb.bend(y - eps * v))) / (2 * eps)
    assert np.allclose(hb.hess_vec(v), fd, rtol=0, atol=1e-7 * np.abs(fd).max())
    # the constant matrix assembled once for Newton (pinned rows and columns removed)
    scene = dc.Scene(cloth.replace(pinned=[0, 7]), steps=1, dt=0.05)
    model = StepModel(scene)
    v[[0, 7]] = 0.0
    hv = (
        model.system.matvec(
            next(t for t in model.potential.terms if isinstance(t, HingeBending)).constant, v[model.free].ravel()
        )
        / model.h**2
    )
    assert np.allclose(hv, hb.hess_vec(v)[model.free].ravel(), rtol=0, atol=1e-12 * np.abs(hv).max())


def equilateral(n):
    """n×n vertices on a triangular lattice of unit side, rows offset by half a spacing."""
    d = 1.0 / (n - 1)
    j, i = np.divmod(np.arange(n * n), n)
    verts = np.stack([(i + 0.5 * (j % 2)) * d, j * d * np.sqrt(3) / 2, np.zeros(n * n)], axis=1)
    tris = []
    for jj in range(n - 1):
        for ii in range(n - 1):
            a, b, c, e = jj * n + ii, jj * n + ii + 1, (jj + 1) * n + ii, (jj + 1) * n + ii + 1
            tris += [(a, b, c), (b, e, c)] if jj % 2 == 0 else [(a, e, c), (a, b, e)]
    return verts, np.array(tris)


def rolled(verts, radius, angle):
    """The flat mesh rolled isometrically onto a cylinder whose axis lies in-plane at `angle`."""
    axis, across = np.array([np.cos(angle), np.sin(angle), 0.0]), np.array([-np.sin(angle), np.cos(angle), 0.0])
    s, a = verts @ across, verts @ axis
    return (
        a[:, None] * axis
        + (radius * np.sin(s / radius))[:, None] * across
        + (radius * (1 - np.cos(s / radius)))[:, None] * [0, 0, 1.0]
    )


@pytest.mark.parametrize("mesh", ["equilateral", "grid"])
def test_rigidity_is_in_newton_metres_at_any_resolution(mesh):
    # rolling a flat sheet of area A to curvature κ stores ½·k·κ²·A, less a boundary layer about
    # a cell wide: on a triangular lattice in every direction, on the grid about either axis
    k, radius, area = 2e-3, 0.4, 1.0
    for n in (16, 32):
        verts, tris = equilateral(n) if mesh == "equilateral" else dc.grid(n, n, size=1.0)
        if mesh == "equilateral":
            area = np.sqrt(3) / 2
        _, hb = hinge_term(verts, tris, k=k)
        angles = np.linspace(0, np.pi, 6, endpoint=False) if mesh == "equilateral" else [0.0, np.pi / 2]
        for angle in angles:
            ratio = hb.energy(hb.bend(rolled(verts, radius, angle))) / (0.5 * k / radius**2 * area)
            assert 1 - 1.25 / n < ratio <= 1.0, (n, angle, ratio)


def strip_droop(cells, rigidity, length=0.3, width=0.075, density=1.0):
    """Tip droop (m) of a strip clamped over its first eighth (pins on a single line would be a
    free hinge) and hanging under gravity until it is at rest; `cells` along its length."""
    verts, tris = dc.grid(cells + 1, cells // 4 + 1, size=1.0)
    verts = (verts + 0.5) * [length, width, 0.0]
    pinned = np.flatnonzero(verts[:, 0] <= length / 8 + 1e-9)
    cloth = dc.Cloth(
        verts, tris, mass=density * length * width, k_tension=1e3, k_bending=rigidity, damping=2.0, pinned=pinned
    )
    traj = dc.simulate(dc.Scene(cloth, steps=30, dt=0.1))
    # at 64 cells the stiff bending lifts the residual's rounding floor above tol: those steps
    # stop there instead of iterating on rounding noise
    assert traj.stats.converged.all() and traj.stats.iterations.max() < 20
    assert np.abs(traj.v[-1]).max() < 1e-6  # at rest
    return -traj.x[-1][np.isclose(verts[:, 0], length), 2].mean()


def test_cantilevered_strip_droops_alike_at_three_resolutions():
    rigidity, density, free = 0.1, 1.0, 0.3 * 7 / 8
    droop = np.array([strip_droop(cells, rigidity, density=density) for cells in (16, 32, 64)])
    # the first-order discretization error halves with the cell size
    assert np.ptp(droop) < 0.1 * droop[-1] and np.ptp(droop) < 7e-3
    assert abs(droop[1] - droop[2]) < 0.6 * abs(droop[0] - droop[1])
    # Euler–Bernoulli's ρgL⁴/8D with k_bending as D: on this grid a clamped sheet also twists a
    # little as it bends, which the rolled sheet above cannot, so it droops somewhat more
    beam = density * 9.81 * free**4 / (8 * rigidity)
    assert 1.0 < droop[-1] / beam < 1.3
