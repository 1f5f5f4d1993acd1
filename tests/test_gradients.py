"""Adjoint gradients against central finite differences, component by component."""

import sys

import numpy as np
import pytest

import diffcloth.core as dc
from diffcloth.core.solver.integrator import StepModel

F = 8  # frames


def make_scene(kind):
    """Small scenes with hinge bending: smooth (no contact), sphere, plane, moving sphere, animated
    pin with substeps; springs_smooth, springs_sphere: the same with bending springs; stiff_smooth,
    stiff_sphere: hinges 10× stiffer, whose linearized step takes the exact hinge matrix
    (Scene.hinges_bounded); linearized_*: the same with one linearized solve a step
    (Scene(solver="linearized"))."""
    rng = np.random.default_rng(7)
    solver = "linearized" if kind.startswith("linearized_") else "newton"
    kind = kind.removeprefix("linearized_")
    verts, tris = dc.grid(5, 5, size=0.4)
    bending = "springs" if kind.startswith("springs_") else "hinge"
    stiff = 10.0 if kind.startswith("stiff_") else 1.0
    kind = kind.removeprefix("springs_").removeprefix("stiff_")
    n_t = dc.Cloth(verts, tris).n_tension
    cloth = dc.Cloth(
        verts,
        tris,
        mass=0.1,
        k_tension=rng.uniform(8, 14, n_t),
        damping=0.3,
        pinned=[20, 24],
        k_bending=0.2 if bending == "springs" else 2e-3 * stiff,
        bending=bending,
    )
    # converged far below the default tolerance: a central difference divides the forward's
    # convergence noise by its step (1e-10 noise gave 1e-4 relative FD error on a contact scene)
    kw = dict(
        steps=F,
        dt=0.05,
        v0=rng.normal(size=(25, 3)) * 0.1,
        forces=rng.normal(size=(F, 25, 3)) * 0.01,
        contact_stiffness=7.5e4,
        tol=1e-12,
        solver=solver,
    )
    if kind == "sphere":
        kw["colliders"] = [dc.Sphere((0.0, 0.05, -0.16), 0.1)]
    elif kind == "plane":
        kw["colliders"] = [dc.Plane((0.0, 0.0, -0.1), (0.0, 0.3, 1.0))]
    elif kind == "moving_sphere":
        kw["colliders"] = [dc.Sphere(np.array([[0.0, 0.05 + 0.01 * f, -0.16] for f in range(F + 1)]), 0.1)]
    elif kind == "pin_path":
        path = cloth.rest[[20, 24]][None] + np.linspace(0, 1, F + 1)[:, None, None] * np.array([0.05, 0.0, 0.1])
        kw.update(pin_path=path, substeps=2)
    return dc.Scene(cloth, **kw)


def loss_for(scene):
    traj = dc.simulate(scene)
    rng = np.random.default_rng(3)
    return dc.KeyframeLoss(
        {F: traj.x[F] + 0.02 * rng.normal(size=traj.x[F].shape), 3: traj.x[3] - 0.01},
        weights={3: 0.5},
        velocity_targets={5: np.zeros_like(traj.v[5])},
        velocity_weight=0.1,
    )


def perturbed(scene, field, index, eps):
    """The scene with one design entry (index None: all of a stiffness's entries) moved by eps."""
    if field in ("k_tension", "k_bending"):
        k = getattr(scene.cloth, field).copy()
        k[slice(None) if index is None else index] += eps
        return scene.replace(cloth=scene.cloth.replace(**{field: k}))
    if field == "damping":
        return scene.replace(cloth=scene.cloth.replace(damping=scene.cloth.damping + eps))
    if field == "contact_stiffness":
        return scene.replace(contact_stiffness=scene.contact_stiffness + eps)
    arr = getattr(scene, field).copy()
    arr[index] += eps
    return scene.replace(**{field: arr})


def along(scene, dirs, eps):
    """The scene with its design moved eps along dirs {k_tension, k_bending, x0, v0, forces}."""
    cloth = scene.cloth.replace(
        k_tension=scene.cloth.k_tension + eps * dirs["k_tension"],
        k_bending=scene.cloth.k_bending + eps * dirs["k_bending"],
    )
    return scene.replace(
        cloth=cloth,
        x0=scene.x0 + eps * dirs["x0"],
        v0=scene.v0 + eps * dirs["v0"],
        forces=scene.forces + eps * dirs["forces"],
    )


def central(scene, loss, field, index, eps):
    return (
        loss(dc.simulate(perturbed(scene, field, index, eps))) - loss(dc.simulate(perturbed(scene, field, index, -eps)))
    ) / (2 * eps)


# eps of a stiffness is relative to its mean value
COMPONENTS = [
    ("k_tension", 3, 1e-6),
    ("k_tension", 40, 1e-6),
    ("k_bending", 5, 5e-5),
    ("k_bending", 30, 5e-5),
    ("k_bending", None, 5e-6),
    ("damping", None, 1e-6),
    ("x0", (7, 2), 1e-6),
    ("x0", (20, 1), 1e-6),
    ("v0", (12, 0), 1e-6),
    ("forces", (2, 11, 2), 1e-6),
    ("forces", (F - 1, 3, 0), 1e-6),
]


SMOOTH = (
    "smooth",
    "pin_path",
    "springs_smooth",
    "linearized_smooth",
    "linearized_pin_path",
    "linearized_springs_smooth",
    "linearized_stiff_smooth",
)  # no contact: the tighter tolerance


@pytest.fixture(
    scope="module",
    params=[
        "smooth",
        "sphere",
        "plane",
        "moving_sphere",
        "pin_path",
        "springs_smooth",
        "springs_sphere",
        "linearized_smooth",
        "linearized_sphere",
        "linearized_plane",
        "linearized_moving_sphere",
        "linearized_pin_path",
        "linearized_springs_smooth",
        "linearized_springs_sphere",
        "linearized_stiff_smooth",
        "linearized_stiff_sphere",
    ],
)
def case(request):
    scene = make_scene(request.param)
    loss = loss_for(scene)
    value, grad = dc.value_and_grad(scene, loss)
    return request.param, scene, loss, grad


def grad_entry(grad, field, index):
    """dg/d(entry), or for a stiffness without index dg/d(all its entries moved together)."""
    g = getattr(grad, field)
    return float(np.sum(g) if index is None else g[index])


@pytest.mark.parametrize("field,index,eps", COMPONENTS, ids=[f"{f}{i}" for f, i, _ in COMPONENTS])
def test_component_matches_finite_difference(case, field, index, eps):
    kind, scene, loss, grad = case
    if kind == "pin_path" and field == "x0" and index[0] in scene.cloth.pinned:
        pytest.skip("with a pin path the pins do not sit at x0; their gradient is grad.pin_path")
    tol = 1e-6 if kind in SMOOTH else 1e-4
    if field.startswith("k_"):
        # a linearized step's forward rounds its solves at 1e-15: a wider difference keeps that noise
        # (×1/eps) below the tolerance, its smooth map keeps the truncation error far below it
        eps *= getattr(scene.cloth, field).mean() * (4 if kind.startswith("linearized") else 1)
    numeric = central(scene, loss, field, index, eps)
    analytic = grad_entry(grad, field, index)
    assert abs(analytic - numeric) <= tol * max(abs(numeric), 1e-8), (analytic, numeric)


def test_contact_stiffness_gradient(case):
    kind, scene, loss, grad = case
    if kind in SMOOTH:
        assert grad.contact_stiffness == 0.0
        return
    numeric = central(scene, loss, "contact_stiffness", None, 0.25)
    assert grad.contact_stiffness == pytest.approx(numeric, rel=1e-4)


def test_pin_path_gradient():
    scene = make_scene("pin_path")
    loss = loss_for(scene)
    _, grad = dc.value_and_grad(scene, loss)
    assert grad.pin_path.shape == (F + 1, 2, 3)
    for index in [(0, 0, 2), (4, 1, 0), (F, 0, 1)]:
        numeric = central(scene, loss, "pin_path", index, 1e-6)
        assert grad.pin_path[index] == pytest.approx(numeric, rel=1e-6, abs=1e-10)


def test_directional_derivatives_in_full_design_space(case):
    kind, scene, loss, grad = case
    rng = np.random.default_rng(11)
    fields = ["k_tension", "k_bending", "x0", "v0", "forces"]
    for _ in range(2):
        dirs = {f: rng.normal(size=np.shape(getattr(grad, f))) for f in fields}
        if kind == "pin_path":
            dirs["x0"][scene.cloth.pinned] = 0.0
        analytic = sum(float(np.sum(getattr(grad, f) * dirs[f])) for f in fields)

        numeric = (loss(dc.simulate(along(scene, dirs, 1e-7))) - loss(dc.simulate(along(scene, dirs, -1e-7)))) / 2e-7
        tol = 1e-6 if kind in SMOOTH else 1e-4
        assert abs(analytic - numeric) <= tol * abs(numeric), (analytic, numeric)


def test_gradient_without_kept_factorizations(monkeypatch):
    # past the memory budget the forward keeps no factorization; the backward refactors and
    # must give the same gradient
    scene = make_scene("sphere")
    loss = loss_for(scene)
    value, grad = dc.value_and_grad(scene, loss)
    monkeypatch.setattr(sys.modules["diffcloth.core.solver.simulate"], "FACTOR_BUDGET", 0)
    traj = dc.simulate(scene)
    assert all(f is None for f in traj.factors)
    value2, grad2 = dc.value_and_grad(scene, loss, traj=traj)
    assert value2 == value
    for field in ("k_tension", "k_bending", "x0", "v0", "forces"):
        np.testing.assert_allclose(
            getattr(grad2, field), getattr(grad, field), rtol=1e-8, atol=1e-10 * np.abs(getattr(grad, field)).max()
        )


def test_sparse_backend_agrees_with_banded(monkeypatch):
    # meshes past BANDED_WORK_LIMIT factor with SuperLU (exact, double precision) instead of the
    # single-precision banded Cholesky: same converged steps, same gradient
    scene = make_scene("sphere")
    loss = loss_for(scene)
    banded = dc.simulate(scene)
    value, grad = dc.value_and_grad(scene, loss, traj=banded)
    monkeypatch.setattr(sys.modules["diffcloth.core.numerics.linalg"], "BANDED_WORK_LIMIT", 0)
    assert StepModel(scene).system.backend == "sparse"
    sparse = dc.simulate(scene)
    assert sparse.stats.converged.all()
    np.testing.assert_allclose(sparse.x, banded.x, rtol=0, atol=1e-9)
    value2, grad2 = dc.value_and_grad(scene, loss, traj=sparse)
    assert value2 == pytest.approx(value, rel=1e-9)
    for field in ("k_tension", "k_bending", "x0", "v0", "forces"):
        np.testing.assert_allclose(
            getattr(grad2, field), getattr(grad, field), rtol=1e-6, atol=1e-8 * np.abs(getattr(grad, field)).max()
        )
