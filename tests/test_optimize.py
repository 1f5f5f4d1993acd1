"""Parameterizations and the L-BFGS-B driver on small scenes."""

import sys

import numpy as np
import pytest

import diffcloth.core as dc


def small_scene(k_tension=10.0, steps=12, bending="hinge", **kw):
    verts, tris = dc.grid(5, 5, size=0.4)
    cloth = dc.Cloth(
        verts,
        tris,
        mass=0.1,
        k_tension=k_tension,
        k_bending=0.05 if bending == "springs" else 1e-3,
        pinned=[20, 24],
        bending=bending,
    )
    return dc.Scene(cloth, steps=steps, dt=0.05, **kw)


@pytest.fixture(scope="module")
def stiffness_problem():
    truth = small_scene(k_tension=10.0)
    target = dc.simulate(truth).x[-1]
    return small_scene(k_tension=4.0), dc.KeyframeLoss({truth.steps: target})


def test_recovers_global_stiffness(stiffness_problem):
    scene, loss = stiffness_problem
    result = dc.optimize(scene, loss, ["k_tension"], max_iter=30)
    assert abs(result.params["k_tension"] - 10.0) / 10.0 < 1e-5
    assert result.loss < 1e-8 * result.initial_loss
    assert result.history and result.history[-1]["normalized_loss"] == pytest.approx(result.loss / result.initial_loss)
    # the returned scene reproduces the returned loss
    assert loss(dc.simulate(result.scene, guess=result.trajectory.step_x)) == pytest.approx(
        result.loss, rel=1e-9, abs=1e-20
    )


def test_callback_stop_keeps_best(stiffness_problem):
    scene, loss = stiffness_problem
    seen = []

    def stop_after_two(info):
        seen.append(info)
        return len(seen) >= 2

    result = dc.optimize(scene, loss, ["k_tension"], max_iter=30, callback=stop_after_two)
    assert result.reason == "stopped"
    assert len(result.history) == 2
    assert result.loss == min(h["loss"] for h in result.history)
    assert result.loss < result.initial_loss
    assert {"iteration", "loss", "normalized_loss", "grad_norm", "elapsed", "params", "distances"} <= set(seen[-1])
    # the best design's distances to the keys, as the artist reads them in the progress line
    best = dc.simulate(result.scene, guess=result.trajectory.step_x).x
    assert seen[-1]["distances"] == loss.distances(best)


@pytest.mark.parametrize("method", ["gauss-newton", "l-bfgs-b"])
def test_stops_once_every_key_is_within_the_tolerance(stiffness_problem, method):
    scene, loss = stiffness_problem
    full = dc.optimize(scene, loss, ["k_tension"], max_iter=30, method=method)
    means = [max(m for m, _ in h["distances"].values()) for h in full.history]
    within = means[1] * 1.01  # reached at the second iteration, not at the first
    assert means[0] > within
    result = dc.optimize(scene, loss, ["k_tension"], max_iter=30, method=method, within=within)
    assert result.reason == "within" and len(result.history) == 2
    assert max(m for m, _ in loss.distances(result.trajectory.x).values()) <= within
    assert len(result.history) < len(full.history)
    # already there: no iteration at all
    start = max(m for m, _ in result.initial_distances.values())
    already = dc.optimize(scene, loss, ["k_tension"], method=method, within=start * 1.01)
    assert already.reason == "within" and already.history == []


@pytest.mark.parametrize("within", [0.0, -0.01, float("nan"), float("inf"), "1 cm"])
def test_bad_tolerance_is_named(stiffness_problem, within):
    scene, loss = stiffness_problem
    with pytest.raises(ValueError, match="within"):
        dc.optimize(scene, loss, ["k_tension"], within=within)


@pytest.mark.parametrize("method", ["gauss-newton", "l-bfgs-b"])
def test_progress_reports_the_best_designs_distances(stiffness_problem, method):
    scene, loss = stiffness_problem
    seen = []
    result = dc.optimize(scene, loss, ["k_tension"], max_iter=4, method=method, callback=seen.append)
    assert [info["distances"] for info in seen][-1] == loss.distances(
        dc.simulate(result.scene, guess=result.trajectory.step_x).x
    )
    means = [info["distances"][max(loss.targets)][0] for info in seen]
    assert means[-1] < loss.distances(dc.simulate(scene).x)[max(loss.targets)][0]


STIFFNESS_PARAMS = [
    [dc.GlobalStiffness(True, True)],
    [dc.GlobalStiffness(False, True)],
    [dc.SpringStiffness("tension"), dc.SpringStiffness("bending")],
    [dc.SpringStiffness("tension", log=False), dc.SpringStiffness("bending", log=False)],
]


@pytest.mark.parametrize(
    "params,bending",
    [(p, "hinge") for p in STIFFNESS_PARAMS]
    + [(p, "springs") for p in STIFFNESS_PARAMS]
    + [
        ([dc.InitialVelocity(), dc.InitialRotation((-0.2, 0.2, 0.0), (0.2, 0.2, 0.0), start=0.3)], "hinge"),
        ([dc.InitialVelocity(per_vertex=True)], "hinge"),
        ([dc.ControlForces(magnitude=1e-3, smoothness=1e-2), dc.Wind(magnitude=1e-3, smoothness=1e-2)], "hinge"),
    ],
)
def test_parameterization_gradients_match_finite_differences(params, bending):
    scene = small_scene(steps=8, bending=bending)
    target = dc.simulate(scene).x
    loss = dc.KeyframeLoss({8: target[8] + 0.02, 4: target[4] - 0.01}, weights={4: 0.5})
    # ε = 1e-4: central differences of this smooth (contact-free) loss are then limited by
    # truncation (~1e-7), not by rounding of the loss (~1e-16·L/ε), even for tiny components
    size = sum(p.size(scene) for p in params)
    checks = dc.check_gradient(scene, loss, params, eps=1e-4, components=range(min(2, size)), directions=2)
    for c in checks:
        assert c["rel_error"] < 1e-5, c


def test_linear_spring_stiffness_stays_positive():
    scene = small_scene()
    param = dc.SpringStiffness("bending", log=False, bounds=(0.0, 5.0))
    bounds = param.bounds(scene)
    assert len(bounds) == scene.cloth.n_bending
    assert all(lo == dc.SpringStiffness.K_MIN and hi == 5.0 for lo, hi in bounds)
    assert np.array_equal(param.initial(scene), scene.cloth.k_bending)


def test_per_vertex_velocity_is_mean_plus_deviation():
    rng = np.random.default_rng(3)
    scene = small_scene(v0=rng.normal(size=(25, 3)))
    param = dc.InitialVelocity(per_vertex=True, bounds=(-5.0, 5.0))
    theta0 = param.initial(scene)
    assert np.allclose(theta0[:3], scene.v0.mean(axis=0))
    assert np.allclose(param.describe(theta0)["v0"], scene.v0)
    bounds = param.bounds(scene)
    assert bounds[:3] == [(-5.0, 5.0)] * 3 and bounds[3:] == [(None, None)] * 75
    with pytest.raises(ValueError, match="outside the bounds"):
        dc.InitialVelocity(per_vertex=True, bounds=(1.0, 5.0)).bounds(scene)


def test_regularizer_value_and_gradient():
    scene = small_scene(steps=6)
    param = dc.ControlForces(magnitude=0.3, smoothness=0.7)
    theta = np.random.default_rng(0).normal(size=param.size(scene))
    value, grad = param.regularizer(theta, scene)
    a = theta.reshape(6, scene.cloth.n, 3)
    expected = 0.3 * np.sum(a * a) + 0.7 * np.sum(np.diff(a, axis=0) ** 2)
    assert value == pytest.approx(expected)
    e = np.zeros_like(theta)
    e[17] = 1.0
    fd = (param.regularizer(theta + 1e-6 * e, scene)[0] - param.regularizer(theta - 1e-6 * e, scene)[0]) / 2e-6
    assert grad[17] == pytest.approx(fd, rel=1e-6)


def test_control_forces_reach_a_pose_stiffness_cannot():
    scene = small_scene(steps=10)
    gust = np.zeros((10, scene.cloth.n, 3))
    gust[:, :, 0] = 4.0 * np.sin(np.linspace(0, np.pi, 10))[:, None]  # a sideways gust
    target = dc.simulate(scene.replace(forces=gust * scene.cloth.masses[None, :, None])).x[10]
    loss = dc.KeyframeLoss({10: target})
    by_stiffness = dc.optimize(scene, loss, ["stiffness"], max_iter=20)
    result = dc.optimize(scene, loss, [dc.ControlForces(magnitude=1e-8, smoothness=1e-8)], max_iter=60)
    moved = dc.simulate(result.scene, guess=result.trajectory.step_x).x[10]
    assert np.linalg.norm(moved - target, axis=1).mean() < 1e-3
    assert result.loss < 1e-3 * by_stiffness.loss


def test_diverging_trials_do_not_lose_the_best(stiffness_problem, monkeypatch):
    # trials stiffer than 9 N/m "diverge"; L-BFGS-B's line search must back off and keep the best
    # design (test_gauss_newton checks Gauss–Newton's trials)
    opt = sys.modules["diffcloth.core.design.optimize"]  # the module; core.optimize is the function
    real = opt.simulate
    tried = []

    def fragile(scene, **kwargs):
        tried.append(scene.cloth.k_tension[0])
        if scene.cloth.k_tension[0] > 9.0:
            raise dc.SimulationError("simulation diverged at frame 3", 3, 3)
        return real(scene, **kwargs)

    monkeypatch.setattr(opt, "simulate", fragile)
    scene, loss = stiffness_problem
    result = dc.optimize(scene, loss, ["k_tension"], max_iter=15, method="l-bfgs-b")
    assert max(tried) > 9.0  # a trial did diverge
    assert result.loss < result.initial_loss
    assert 4.0 < result.params["k_tension"] <= 9.0
    assert loss(dc.simulate(result.scene, guess=result.trajectory.step_x)) == pytest.approx(result.loss)


def test_bad_optimizer_input():
    scene = small_scene()
    loss = dc.KeyframeLoss({scene.steps: scene.x0})
    with pytest.raises(ValueError, match="unknown parameter 'stifness'"):
        dc.optimize(scene, loss, ["stifness"])
    with pytest.raises(ValueError, match="outside the bounds"):
        dc.optimize(scene, loss, [dc.GlobalStiffness(bounds=(20.0, 50.0))])
    with pytest.raises(ValueError, match="k_tension is set by more than one parameter"):
        dc.optimize(scene, loss, ["k_tension", "spring_stiffness"])
    with pytest.raises(ValueError, match="v0 is set by more than one parameter"):
        dc.optimize(scene, loss, ["v0", "v0_per_vertex"])
    with pytest.raises(ValueError, match="nothing to optimize"):
        dc.optimize(scene, loss, [])
    with pytest.raises(ValueError, match="outside the simulated frames"):
        dc.optimize(scene, dc.KeyframeLoss({scene.steps + 5: scene.x0}), ["k_tension"])
    with pytest.raises(ValueError, match="has 3 vertices, the cloth has 25"):
        dc.optimize(scene, dc.KeyframeLoss({3: np.zeros((3, 3))}), ["k_tension"])
