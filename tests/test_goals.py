"""Soft pins (core Goals, the GoalSprings term): vertices pulled toward goals that move, held
closer the stiffer their springs; gradients through them match central differences with either
solver, with and without contact."""

import numpy as np
import pytest
from test_gradients import F, make_scene
from test_tangent import paired
from test_terms import moved

import diffcloth.core as dc


def with_goals(scene, stiffness=50.0, moving=True):
    """The scene with the cloth's bottom row soft-pinned, its goals sliding 5 cm along x."""
    rest = scene.cloth.rest
    bottom = np.flatnonzero(np.isclose(rest[:, 1], rest[:, 1].min()))
    path = np.repeat(rest[None, bottom], scene.steps + 1, axis=0)
    if moving:
        path += np.linspace(0.0, 0.05, scene.steps + 1)[:, None, None] * [1.0, 0.0, 0.0]
    return scene.replace(goals=dc.Goals(bottom, stiffness * scene.cloth.masses[bottom], path)), bottom


def test_soft_pins_hold_their_vertices_nearer_their_goals_the_stiffer_they_are():
    scene = make_scene("smooth")
    offsets = []
    for k in (20.0, 2000.0):
        sc, bottom = with_goals(scene, k)
        x = dc.simulate(sc).x
        offsets.append(np.linalg.norm(x[-1, bottom] - sc.goals.path[-1], axis=1).mean())
    free = dc.simulate(scene).x[-1, bottom]
    assert offsets[1] < 0.05 * offsets[0] and offsets[0] < np.linalg.norm(free - sc.goals.path[-1], axis=1).mean()
    # the goals moved 5 cm in x; the stiff ones took their vertices along
    assert dc.simulate(with_goals(scene, 2000.0)[0]).x[-1, bottom, 0].mean() - scene.x0[bottom, 0].mean() > 0.04


def test_goals_are_checked():
    scene = make_scene("smooth")
    with pytest.raises(ValueError, match="pinned already"):
        scene.replace(goals=dc.Goals(scene.cloth.pinned[:1], 1.0))
    with pytest.raises(ValueError, match="positive"):
        dc.Goals([3], 0.0)
    with pytest.raises(ValueError, match="goals path"):
        scene.replace(goals=dc.Goals([3], 1.0, np.zeros((2, 1, 3))))


@pytest.mark.parametrize("kind", ["smooth", "sphere", "linearized_smooth", "linearized_sphere"])
def test_gradients_through_soft_pins_match_central_differences(kind):
    scene, _ = with_goals(make_scene(kind))
    rng = np.random.default_rng(4)
    traj = dc.simulate(scene)
    loss = dc.KeyframeLoss({F: traj.x[F] + 0.02 * rng.normal(size=traj.x[F].shape)})
    _, grad = dc.value_and_grad(scene, loss)
    for field, index in (("k_tension", 5), ("k_bending", 9)):
        eps = 1e-6 * getattr(scene.cloth, field).mean()
        fd = (
            loss(dc.simulate(moved(scene, field, index, eps))) - loss(dc.simulate(moved(scene, field, index, -eps)))
        ) / (2 * eps)
        assert abs(getattr(grad, field)[index] - fd) <= 1e-4 * abs(fd) + 1e-9, (field, getattr(grad, field)[index], fd)
    v = grad.v0[scene.goals.vertices[0]]
    dv = np.zeros_like(scene.x0)
    dv[scene.goals.vertices[0]] = 1e-6
    fd = (
        loss(dc.simulate(scene.replace(v0=scene.v0 + dv))) - loss(dc.simulate(scene.replace(v0=scene.v0 - dv)))
    ) / 2e-6
    assert abs(v.sum() - fd) <= 1e-4 * abs(fd) + 1e-9


@pytest.mark.parametrize("solver", ["newton", "linearized"])
def test_tangent_and_adjoint_agree_with_soft_pins(solver):
    scene, _ = with_goals(make_scene(("linearized_" if solver == "linearized" else "") + "sphere"))
    rng = np.random.default_rng(8)
    direction = {"k_tension": rng.normal(size=scene.cloth.n_tension), "v0": rng.normal(size=scene.x0.shape)}
    forward, reverse = paired(scene, dc.simulate(scene), direction, rng)
    assert forward == pytest.approx(reverse, rel=1e-8)
