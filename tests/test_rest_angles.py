"""Hinge bending about the rest mesh's own angles (core.terms.rest_angles): a cloth modelled curved
keeps its shape, a hinge stores the flat model's energy about its rest angle, and the derivatives
(gradient, Hessian, the linearized step's third derivatives, by the stiffness) are exact, through
simulations with either solver."""

import numpy as np
import pytest
from test_tangent import moved, paired

import diffcloth.core as dc
from diffcloth.core.terms.base import Point
from diffcloth.core.terms.hinges import HingeBending
from diffcloth.core.terms.rest_angles import RestAngles


def cylinder(n=6, m=5, radius=0.25, arc=1.4):
    """A grid rolled onto a cylinder about y: curved along x, straight along y."""
    verts, tris = dc.grid(n, m, size=0.4)
    angle = (verts[:, 0] - verts[:, 0].min()) / np.ptp(verts[:, 0]) * arc - arc / 2
    return np.stack([radius * np.sin(angle), verts[:, 1], radius * np.cos(angle)], axis=1), tris


def terms(cloth):
    return HingeBending(cloth.rest, cloth.hinges, cloth.k_bending, cloth.n, curved=cloth.curved_hinges), RestAngles(
        cloth
    )


def energy(parts, y):
    hinge, rest = parts
    return hinge.energy(hinge.bend(y)) + rest.energy(rest.at(Point(y, 0, None)))


def gradient(parts, y):
    hinge, rest = parts
    out = hinge.gradient(hinge.bend(y))
    rest.add_gradient(rest.at(Point(y, 0, None)), out)
    return out


@pytest.mark.parametrize("rest_angle", [0.4, -1.1, 2.0])
def test_a_hinge_bends_about_its_rest_angle(rest_angle):
    """Folded by θ, a hinge folded θ̄ at rest stores 2·(k/A)·|e|²·sin²((θ − θ̄)/2), the flat model's
    energy of a fold by θ − θ̄, and no force at rest."""
    verts = np.array([[0.0, 0.0, 0.0], [1.2, 0.0, 0.0], [0.3, 0.8, 0.0], [0.9, -0.5, 0.0]])

    def folded(theta):
        out = verts.copy()
        out[3] = [0.9, -0.5 * np.cos(theta), 0.5 * np.sin(theta)]
        return out

    cloth = dc.Cloth(folded(rest_angle), [[0, 1, 2], [1, 0, 3]], k_bending=2.0, rest_angles=True)
    parts = terms(cloth)
    area = 0.5 * 1.2 * (0.8 + 0.5)
    assert np.abs(gradient(parts, cloth.rest)).max() < 1e-12
    for theta in (0.0, 0.7, rest_angle + 0.3, -0.9):
        expected = 2 * 2.0 / area * 1.2**2 * np.sin((theta - rest_angle) / 2) ** 2
        assert energy(parts, folded(theta)) == pytest.approx(expected, rel=1e-10, abs=1e-14)
    turned = folded(0.8) @ np.linalg.qr(np.random.default_rng(0).normal(size=(3, 3)))[0].T
    assert energy(parts, turned) == pytest.approx(energy(parts, folded(0.8)), rel=1e-10)  # any orientation


def test_a_cloth_modelled_round_keeps_its_shape():
    verts, tris = cylinder()
    cloth = dc.FABRICS["cotton"].cloth(verts, tris).replace(rest_angles=True)
    scene = dc.Scene(cloth, steps=12, dt=1 / 24, gravity=(0, 0, 0))
    kept = dc.simulate(scene).x[-1]
    assert np.abs(kept - verts).max() < 1e-9
    flat = dc.simulate(scene.replace(cloth=cloth.replace(rest_angles=False))).x[-1]
    assert np.abs(flat - verts).max() > 1e-3  # about flat, it unrolls


@pytest.mark.parametrize("bounded", [False, True])
def test_derivatives_match_finite_differences(bounded):
    verts, tris = cylinder()
    cloth = dc.Cloth(verts, tris, rest_angles=True)
    cloth = cloth.replace(k_bending=np.random.default_rng(1).uniform(0.5, 2.0, cloth.n_bending))
    rest = RestAngles(cloth, bounded=bounded)
    rng = np.random.default_rng(3)
    y = verts + rng.normal(scale=0.03, size=verts.shape)
    q = rest.at(Point(y, 0, None))
    v, a, b = (rng.normal(size=y.shape) for _ in range(3))
    eps = 1e-6

    def at(z):
        return rest.at(Point(z, 0, None))

    def grad(z):
        out = np.zeros_like(z)
        rest.add_gradient(at(z), out)
        return out

    out = np.zeros_like(y)
    rest.add_gradient(q, out)
    fd = (rest.energy(at(y + eps * v)) - rest.energy(at(y - eps * v))) / (2 * eps)
    assert np.sum(out * v) == pytest.approx(fd, rel=1e-7)
    hv = np.zeros_like(y)
    rest.add_hess_vec(q, v, hv)
    assert np.allclose(hv, (grad(y + eps * v) - grad(y - eps * v)) / (2 * eps), atol=1e-7 * np.abs(hv).max())

    def projected(z, u):  # H̃(z)·u
        out = np.zeros_like(z)
        H = rest.projected(at(z))
        rest._scatter(rest.c[:, None] * np.einsum("hij,hj->hi", H, rest._gather(u)), out)
        return out

    third = np.zeros_like(y)
    rest.add_third(q, a, b, third)
    fd = (np.sum(a * projected(y + eps * v, b)) - np.sum(a * projected(y - eps * v, b))) / (2 * eps)
    assert np.sum(third * v) == pytest.approx(fd, rel=1e-6)
    tangent = np.zeros_like(y)
    rest.add_third_tangent(q, v, b, tangent)
    assert np.allclose(tangent, (projected(y + eps * v, b) - projected(y - eps * v, b)) / (2 * eps), atol=1e-7)
    if bounded:  # the bound lies above the Gauss–Newton share and couples no opposite corners
        H, P = rest.projected(q), rest.gauss_newton(q)
        assert np.all(H[:, 6:9, 9:12] == 0) and np.linalg.eigvalsh(H - P).min() > -1e-12


def curved_scene(solver):
    verts, tris = cylinder(5, 5)
    cloth = dc.Cloth(
        verts, tris, mass=0.1, k_tension=10.0, k_bending=3e-3, damping=0.3, pinned=[20, 24], rest_angles=True
    )
    return dc.Scene(cloth, steps=6, dt=0.05, tol=1e-12, solver=solver, v0=np.tile([0.0, 0.2, -0.3], (25, 1)))


@pytest.mark.parametrize("solver", ["newton", "linearized"])
def test_gradients_through_a_curved_rest_match_central_differences(solver):
    scene = curved_scene(solver)
    assert scene.hinges_bounded == (solver == "linearized")  # the rest-angle hinges bounded too
    rng = np.random.default_rng(5)
    traj = dc.simulate(scene)
    loss = dc.KeyframeLoss({6: traj.x[6] + 0.01 * rng.normal(size=traj.x[6].shape)})
    _, grad = dc.value_and_grad(scene, loss)
    direction = {
        "k_bending": rng.normal(size=scene.cloth.n_bending) * scene.cloth.k_bending,
        "x0": 0.01 * rng.normal(size=scene.x0.shape),
    }
    eps = 1e-6
    fd = (loss(dc.simulate(moved(scene, direction, eps))) - loss(dc.simulate(moved(scene, direction, -eps)))) / (
        2 * eps
    )
    exact = float(np.sum(grad.k_bending * direction["k_bending"]) + np.sum(grad.x0 * direction["x0"]))
    assert exact == pytest.approx(fd, rel=1e-5)
    forward, reverse = paired(scene, traj, direction, rng)
    assert forward == pytest.approx(reverse, rel=1e-8)
