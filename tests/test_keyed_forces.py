"""Control forces on keys a fraction of a second apart: basis, regularizers, gradients, and a
hand-posed target (a simulated pose moved rigidly) reached within a centimetre."""

import numpy as np
import pytest

import core as dc


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
    reached = dc.simulate(result.scene).x[12]
    free = np.setdiff1d(np.arange(scene.cloth.n), scene.cloth.pinned)  # pins cannot follow a rigid move
    before = np.linalg.norm(sim[12][free] - target[free], axis=1).mean()
    after = np.linalg.norm(reached[free] - target[free], axis=1).mean()
    assert before > 0.05 and after <= 0.01, (before, after, result.reason)
    assert result.scene.max_control_acceleration() < 2 * 9.81


@pytest.mark.parametrize("kwargs,message", [
    (dict(every=0.0), "key spacing must be positive"),
    (dict(every=-1.0), "key spacing must be positive"),
    (dict(every=0.01), "space them at least"),
    (dict(magnitude=-1.0), "non-negative"),
])
def test_bad_settings_name_the_setting(kwargs, message):
    with pytest.raises(ValueError, match=message):
        dc.KeyedForces(**kwargs).size(artist_scene())


def test_targets_at_the_start_only_leave_nothing_to_control():
    scene = artist_scene()
    loss = dc.KeyframeLoss({0: scene.x0 + 0.01})
    with pytest.raises(ValueError, match="all at frame 0, before any control force acts"):
        dc.optimize(scene, loss, [dc.KeyedForces()])
