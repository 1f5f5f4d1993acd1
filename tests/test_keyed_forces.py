"""Control forces on keys a fraction of a second apart: basis, regularizers, gradients, and a
hand-posed target (a simulated pose moved rigidly) reached within a centimetre."""

import numpy as np
import pytest

import diffcloth.core as dc


def artist_scene(side=6, frames=12, fps=24):
    verts, tris = dc.grid(side, side, size=0.5)
    top = np.flatnonzero(np.isclose(verts[:, 1], verts[:, 1].max()))
    cloth = dc.Cloth(verts, tris, mass=0.2, k_tension=20.0, damping=0.5, pinned=[top[0], top[-1]])
    return dc.Scene(cloth, steps=frames, dt=1.0 / fps)


def test_keys_span_the_run_and_interpolate_linearly():
    scene = artist_scene(frames=12, fps=24)  # 0.5 s
    param = dc.KeyedForces(every=0.2)
    times = param.key_times(scene)
    assert np.allclose(times, np.linspace(0.0, 0.5, 4))  # ceil(0.5 / 0.2) + 1 keys, evenly spread
    w = param.weights(scene)
    assert w.shape == (12, 4) and np.allclose(w.sum(axis=1), 1.0) and (w >= 0).all()
    mid = (np.arange(12) + 0.5) / 24
    assert np.allclose(w @ times, mid)  # linear interpolation reproduces time itself
    # one unit key = that acceleration: a uniform 1 m/s² upward everywhere is a force of m·1 m/s²
    theta = np.tile([0.0, 0.0, 1.0], param.size(scene) // 3)
    design = {"forces": np.zeros((12, scene.cloth.n, 3))}
    param.apply(theta, design, scene)
    assert np.allclose(design["forces"][..., 2], scene.cloth.masses[None, :])


def test_regularizers_integrate_over_time_and_add_up_over_vertices():
    scene = artist_scene(frames=12, fps=24)
    n = scene.cloth.n
    param = dc.KeyedForces(every=0.25, magnitude=2.0, smoothness=0.0)
    constant = np.tile([0.0, 3.0, 4.0], param.size(scene) // 3)  # ‖a‖ = 5 m/s² for 0.5 s
    assert param.regularizer(constant, scene)[0] == pytest.approx(2.0 * 25 * 0.5 * n)
    keys = param.size(scene) // (3 * n)
    ramp = (np.linspace(0.0, 1.0, keys)[:, None, None] * np.array([0.0, 0.0, 2.0])).repeat(n, axis=1)
    smooth = dc.KeyedForces(every=0.25, smoothness=3.0)
    assert smooth.regularizer(ramp.ravel(), scene)[0] == pytest.approx(3.0 * (2.0 / 0.5) ** 2 * 0.5 * n)
    theta = np.random.default_rng(1).normal(size=param.size(scene))
    both = dc.KeyedForces(every=0.25, magnitude=0.3, smoothness=0.7)
    _, grad = both.regularizer(theta, scene)
    for i in (0, 17, len(theta) - 1):
        e = np.zeros_like(theta)
        e[i] = 1e-6
        fd = (both.regularizer(theta + e, scene)[0] - both.regularizer(theta - e, scene)[0]) / 2e-6
        assert grad[i] == pytest.approx(fd, rel=1e-6)


@pytest.mark.parametrize("side", [6, 12])
def test_one_g_for_a_second_costs_the_stated_distance_at_any_resolution(side):
    """weight_for_distance(d): 1 g on every vertex for 1 s costs as much as every vertex d off a
    key, on any mesh, so the optimum's balance does not change with resolution."""
    scene = artist_scene(side=side, frames=24, fps=24)  # one second
    param = dc.KeyedForces(every=0.25, magnitude=dc.weight_for_distance(0.01))
    one_g = np.tile([0.0, 0.0, 9.81], param.size(scene) // 3)
    x = dc.simulate(scene).x
    off = dc.KeyframeLoss({24: x[24] + [0.01, 0.0, 0.0]})(dc.simulate(scene))
    assert param.regularizer(one_g, scene)[0] == pytest.approx(off)


def test_gradient_matches_finite_differences():
    scene = artist_scene(frames=10)
    target = dc.simulate(scene).x
    loss = dc.KeyframeLoss({10: target[10] + [0.03, 0.0, 0.01], 5: target[5] - 0.01})
    params = [dc.KeyedForces(every=0.1, magnitude=1e-3, smoothness=1e-3)]
    for c in dc.check_gradient(scene, loss, params, eps=1e-4, components=(0, 5, 40), directions=2):
        assert c["rel_error"] < 1e-6, c


def test_a_rigidly_moved_pose_is_reached_within_a_centimetre():
    scene = artist_scene(side=6, frames=12)
    sim = dc.simulate(scene).x
    target = sim[12] + [0.05, 0.03, 0.0]  # the simulated pose, moved 5.8 cm by hand
    loss = dc.KeyframeLoss({12: target})
    result = dc.optimize(scene, loss, [dc.KeyedForces(every=0.125, magnitude=3e-5, smoothness=3e-8)], max_iter=200)
    reached = dc.simulate(result.scene, guess=result.trajectory.step_x).x[12]
    free = np.setdiff1d(np.arange(scene.cloth.n), scene.cloth.pinned)  # pins cannot follow a rigid move
    before = np.linalg.norm(sim[12][free] - target[free], axis=1).mean()
    after = np.linalg.norm(reached[free] - target[free], axis=1).mean()
    assert before > 0.05 and after <= 0.01, (before, after, result.reason)
    assert result.scene.max_control_acceleration() < 2 * 9.81


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (dict(every=0.0), "key spacing must be positive"),
        (dict(every=-1.0), "key spacing must be positive"),
        (dict(every=0.01), "space them at least"),
        (dict(magnitude=-1.0), "non-negative"),
    ],
)
def test_bad_settings_name_the_setting(kwargs, message):
    with pytest.raises(ValueError, match=message):
        dc.KeyedForces(**kwargs).size(artist_scene())


def test_targets_at_the_start_only_leave_nothing_to_control():
    scene = artist_scene()
    loss = dc.KeyframeLoss({0: scene.x0 + 0.01})
    with pytest.raises(ValueError, match="all at frame 0, before any control force acts"):
        dc.optimize(scene, loss, [dc.KeyedForces()])


def moving_pin_scene(path):
    """The artist scene with a sphere in reach; its pins sit at x0 or follow a path of their own."""
    scene = artist_scene(frames=10)
    pins = scene.cloth.pinned
    pin_path = None
    if path:
        drift = np.linspace(0.0, 0.1, scene.steps + 1)[:, None, None] * [1.0, 0.0, 0.0]
        pin_path = scene.x0[pins][None] + drift
    return scene.replace(colliders=[dc.Sphere((0.0, -0.2, -0.3), 0.15)], pin_path=pin_path, tol=1e-12)


@pytest.mark.parametrize("path", [False, True])
@pytest.mark.parametrize("which", ["all", "one"])
def test_moving_pins_gradient_matches_finite_differences(path, which):
    scene = moving_pin_scene(path)
    target = dc.simulate(scene).x
    loss = dc.KeyframeLoss({10: target[10] + [0.03, 0.0, 0.01], 5: target[5] - 0.01})
    pins = scene.cloth.pinned
    param = dc.KeyedForces(every=0.1, magnitude=1e-3, smoothness=1e-3, move_pins=True if which == "all" else pins[:1])
    n = scene.cloth.n
    pin = 3 * pins[0]  # the first pin's entries at the first and second key
    for c in dc.check_gradient(
        scene, loss, [param], eps=1e-4, components=(0, 40, pin, pin + 2, 3 * n + pin + 1), directions=2
    ):
        assert c["rel_error"] < 1e-6, c


def test_moving_pins_tangent_is_the_derivative_of_the_design():
    scene = moving_pin_scene(path=True)
    param = dc.KeyedForces(every=0.1, move_pins=True)
    design = dc.design.params.Design(scene, [param])
    rng = np.random.default_rng(3)
    theta, dtheta = rng.normal(size=(2, len(design.theta0)))
    fields = design.fields(theta)
    tangent = design.jvp(theta, dtheta, fields)
    eps = 1e-6
    plus, minus = design.fields(theta + eps * dtheta), design.fields(theta - eps * dtheta)
    for key in ("forces", "pin_path"):
        assert np.allclose(tangent[key], (plus[key] - minus[key]) / (2 * eps), atol=1e-8), key


def test_pins_take_the_key_accelerations_from_rest_and_are_reported():
    scene = artist_scene(frames=12)
    param = dc.KeyedForces(every=0.125, move_pins=True)
    pins = scene.cloth.pinned
    theta = np.zeros(param.size(scene)).reshape(-1, scene.cloth.n, 3)
    theta[:, pins[0]] = [2.0, 0.0, 0.0]  # the first pin pulled at a steady 2 m/s² along x
    moved = dc.design.params.Design(scene, [param]).scene(theta.ravel())
    path = moved.pin_path[:, 0] - scene.x0[pins[0]]
    t = np.arange(scene.steps + 1) * scene.dt
    assert np.allclose(path[:, 0], 2.0 * t * (t + scene.dt) / 2)  # x_f = a·dt²·f(f+1)/2, from rest
    assert np.allclose(moved.pin_path[:, 1], scene.x0[pins[1]])  # the other pin stays
    assert np.allclose(np.diff(moved.pin_path[:, 0, 0], 2) / scene.dt**2, 2.0)
    assert moved.max_control_acceleration() == pytest.approx(2.0)
    traj = dc.simulate(moved)
    assert np.allclose(traj.x[:, pins[0]], moved.pin_path[:, 0])


def test_a_pose_moved_as_a_whole_is_reached_when_the_pins_may_follow():
    """A copy moved 5.8 cm as a whole, pins included: forces alone leave the cloth near the pins
    behind; moving the pins the target poses elsewhere reaches it everywhere, gently."""
    scene = artist_scene(side=6, frames=12)
    sim = dc.simulate(scene).x
    target = sim[12] + [0.05, 0.03, 0.0]
    loss = dc.KeyframeLoss({12: target})
    assert set(dc.posed_pins(scene, loss)) == set(scene.cloth.pinned)
    assert len(dc.posed_pins(scene, dc.KeyframeLoss({12: sim[12]}))) == 0
    weights = dict(every=0.125, magnitude=dc.weight_for_distance(5e-4), smoothness=dc.weight_for_distance(5e-3))
    result = dc.optimize(scene, loss, [dc.KeyedForces(**weights, move_pins=dc.posed_pins(scene, loss))], max_iter=30)
    mean, largest = loss.distances(dc.simulate(result.scene, guess=result.trajectory.step_x).x)[12]
    assert mean <= 0.005 and largest <= 0.01, (mean, largest, result.reason)
    assert result.scene.max_control_acceleration() < 2 * 9.81
    stuck = dc.optimize(scene, loss, [dc.KeyedForces(**weights)], max_iter=30)
    assert (
        loss.distances(dc.simulate(stuck.scene, guess=stuck.trajectory.step_x).x)[12][1] > 0.04
    )  # the pins' 5.8 cm stay


def test_moving_a_vertex_that_is_not_pinned_is_refused():
    scene = artist_scene()
    free = np.setdiff1d(np.arange(scene.cloth.n), scene.cloth.pinned)[:1]
    with pytest.raises(ValueError, match="move_pins names vertices that are not pinned"):
        dc.KeyedForces(move_pins=free).size(scene)
