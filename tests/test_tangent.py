"""Forward-mode derivatives of a simulation (core.gradients.tangent): against central finite differences of
simulate for every design field, and against the adjoint by ⟨J·a, b⟩ = ⟨a, Jᵀ·b⟩."""

import numpy as np
import pytest

import diffcloth.core as dc
from diffcloth.core.gradients.adjoint import backward
from diffcloth.core.gradients.tangent import tangent

FIELDS = ("k_tension", "k_bending", "x0", "v0", "forces", "damping", "contact_stiffness", "pin_path")


def contact_scene(pin_path=False, bending="hinge", solver="newton"):
    """5×5 cloth falling onto a sphere (contact from the third step), damped, 2 substeps per
    frame; optionally its pins dragged sideways. tol 1e-12 so differences resolve 1e-8."""
    verts, tris = dc.grid(5, 5, size=0.4)
    cloth = dc.Cloth(
        verts,
        tris,
        mass=0.1,
        k_tension=10.0,
        k_bending=1e-3 if bending == "hinge" else 0.05,
        damping=0.3,
        pinned=[20, 24],
        bending=bending,
    )
    path = None
    if pin_path:
        path = verts[[20, 24]][None] + np.linspace(0, 1, 9)[:, None, None] * np.array([0.05, 0.0, 0.03])
    return dc.Scene(
        cloth,
        steps=8,
        dt=0.05,
        substeps=2,
        colliders=[dc.Sphere((0, 0.0, -0.15), 0.12)],
        contact_stiffness=300.0,
        pin_path=path,
        tol=1e-12,
        v0=(0.1, 0.0, -0.2),
        solver=solver,
    )


def random_direction(scene, rng):
    n, cloth = scene.cloth.n, scene.cloth
    d = dict(
        k_tension=rng.normal(size=cloth.n_tension),
        k_bending=rng.normal(size=cloth.n_bending) * cloth.k_bending,
        x0=0.1 * rng.normal(size=(n, 3)),
        v0=rng.normal(size=(n, 3)),
        forces=0.01 * rng.normal(size=(scene.steps, n, 3)),
        damping=1.0,
        contact_stiffness=100.0,
    )
    if scene.pin_path is not None:
        d["pin_path"] = 0.1 * rng.normal(size=scene.pin_path.shape)
    return d


def moved(scene, d, eps):
    """The scene with its design moved by eps·d."""
    cloth = scene.cloth.replace(
        k_tension=scene.cloth.k_tension + eps * d.get("k_tension", 0),
        k_bending=scene.cloth.k_bending + eps * d.get("k_bending", 0),
        damping=scene.cloth.damping + eps * d.get("damping", 0),
    )
    changes = dict(
        cloth=cloth,
        x0=scene.x0 + eps * d.get("x0", 0),
        v0=scene.v0 + eps * d.get("v0", 0),
        contact_stiffness=scene.contact_stiffness + eps * d.get("contact_stiffness", 0),
        forces=np.zeros((scene.steps, scene.cloth.n, 3)) + eps * d.get("forces", 0),
    )
    if scene.pin_path is not None:
        changes["pin_path"] = scene.pin_path + eps * d.get("pin_path", 0)
    return scene.replace(**changes)


@pytest.mark.parametrize(
    "field,pin_path,bending,solver",
    [
        (f, p, b, solver)
        for p, b, solver in (
            (False, "hinge", "newton"),
            (True, "hinge", "newton"),
            (True, "springs", "newton"),
            (True, "hinge", "linearized"),
            (True, "springs", "linearized"),
        )
        for f in FIELDS
        if p or f != "pin_path"
    ],
)  # without a pin path the pins sit at x0: their direction is x0's
def test_tangent_matches_finite_differences(field, pin_path, bending, solver):
    scene = contact_scene(pin_path, bending, solver)
    traj = dc.simulate(scene)
    assert traj.stats.converged.all()
    d = {field: random_direction(scene, np.random.default_rng(FIELDS.index(field)))[field]}
    t = tangent(scene, traj, d)
    # contact stiffness is ~300: a step of 1e-3 is as small relative to it as 1e-6 elsewhere
    eps = 1e-3 if field == "contact_stiffness" else 1e-6
    plus, minus = dc.simulate(moved(scene, d, eps)), dc.simulate(moved(scene, d, -eps))
    for got, a, b in ((t.step_x, plus.step_x, minus.step_x), (t.step_v, plus.step_v, minus.step_v)):
        fd = (a - b) / (2 * eps)
        assert np.abs(fd).max() > 0
        assert np.abs(got - fd).max() <= 1e-6 * np.abs(fd).max(), (field, np.abs(got - fd).max() / np.abs(fd).max())
    assert np.array_equal(t.x, t.step_x[:: scene.substeps])


def paired(scene, traj, a, rng):
    """⟨J·a, b⟩ by the tangent and ⟨a, Jᵀ·b⟩ by the adjoint for random loss partials b (from rng)."""
    bx, bv = rng.normal(size=traj.x.shape), rng.normal(size=traj.v.shape)
    t = tangent(scene, traj, a)
    grad = backward(scene, traj, bx, bv)
    forward = float(np.sum(t.x * bx) + np.sum(t.v * bv))
    reverse = sum(float(np.sum(np.asarray(getattr(grad, f)) * v)) for f, v in a.items())
    return forward, reverse


@pytest.mark.parametrize("pin_path,solver", [(False, "newton"), (True, "newton"), (True, "linearized")])
def test_tangent_is_the_adjoint_transposed(pin_path, solver):
    scene = contact_scene(pin_path, solver=solver)
    traj = dc.simulate(scene)
    rng = np.random.default_rng(7)
    a = random_direction(scene, rng)
    forward, reverse = paired(scene, traj, a, rng)
    assert forward == pytest.approx(reverse, rel=1e-8)


def test_tangent_is_the_adjoint_transposed_with_the_exact_hinge_matrix():
    """Linearized steps of stiff hinges take their exact matrix (Scene.hinges_bounded False)."""
    from test_gradients import make_scene

    scene = make_scene("linearized_stiff_sphere")
    assert not scene.hinges_bounded
    traj = dc.simulate(scene)
    rng = np.random.default_rng(5)
    forward, reverse = paired(scene, traj, random_direction(scene, rng), rng)
    assert forward == pytest.approx(reverse, rel=1e-8)


def test_bad_directions_name_the_field():
    scene = contact_scene()
    traj = dc.simulate(scene)
    with pytest.raises(ValueError, match="unknown design field.*stiffnes"):
        tangent(scene, traj, {"stiffnes": 1.0})
    with pytest.raises(ValueError, match="pin_path direction needs a scene with a pin path"):
        tangent(scene, traj, {"pin_path": np.zeros((9, 2, 3))})


@pytest.mark.parametrize("solver", ["newton", "linearized"])
def test_passes_on_the_steps_own_factorizations_agree(solver):
    """A Linearization that factors each step's matrix itself (what Gauss–Newton's many passes
    use) gives the tangent and the gradient that the forward's factorizations give."""
    from diffcloth.core.gradients.adjoint import Linearization

    scene = contact_scene(True, solver=solver)
    traj = dc.simulate(scene)
    rng = np.random.default_rng(11)
    a = random_direction(scene, rng)
    bx, bv = rng.normal(size=traj.x.shape), rng.normal(size=traj.v.shape)
    own = Linearization(scene, traj, own_factors=True)
    t_own, t_fwd = tangent(scene, traj, a, own), tangent(scene, traj, a)
    assert own._own and all(f is not None for f in own._own.values())  # every step factored itself
    assert np.abs(t_own.step_x - t_fwd.step_x).max() <= 1e-9 * np.abs(t_fwd.step_x).max()
    g_own, g_fwd = backward(scene, traj, bx, bv, own), backward(scene, traj, bx, bv)
    for field in ("x0", "v0", "forces", "k_tension", "k_bending", "pin_path"):
        ref = np.asarray(getattr(g_fwd, field))
        assert np.abs(np.asarray(getattr(g_own, field)) - ref).max() <= 1e-9 * np.abs(ref).max(), field
