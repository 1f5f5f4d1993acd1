"""Gauss–Newton and what it is built from: parameterizations' forward derivatives, regularizer
and loss Hessian products, and the optimizer's behaviour (a hand-posed key reached in few
simulations, callback stops, failing trials, bad input)."""

import sys

import numpy as np
import pytest
from test_keyed_forces import artist_scene
from test_optimize import small_scene

import diffcloth.core as dc
from diffcloth.core.design.params import Design

PARAMS = [
    [dc.GlobalStiffness(True, True)],
    [dc.SpringStiffness("tension"), dc.SpringStiffness("bending", log=False)],
    [dc.InitialVelocity(), dc.InitialRotation((-0.2, 0.2, 0.0), (0.2, 0.2, 0.1), start=0.3)],
    [dc.InitialVelocity(per_vertex=True)],
    [dc.ControlForces(magnitude=1e-3, smoothness=1e-2), dc.Wind(magnitude=1e-3, smoothness=1e-2)],
    [dc.KeyedForces(every=0.1, magnitude=0.3, smoothness=0.7)],
]


@pytest.mark.parametrize("params", PARAMS, ids=lambda ps: "+".join(p.name for p in ps))
def test_parameterization_jvps_match_finite_differences(params):
    scene = small_scene(steps=8)
    design = Design(scene, params)
    rng = np.random.default_rng(0)
    theta = design.theta0 + 0.1 * rng.normal(size=design.theta0.shape)
    d = rng.normal(size=theta.shape)
    tangent = design.jvp(theta, d, design.fields(theta))
    eps = 1e-6
    plus, minus = design.fields(theta + eps * d), design.fields(theta - eps * d)
    for field, value in tangent.items():
        fd = (np.asarray(plus[field]) - np.asarray(minus[field])) / (2 * eps)
        assert np.allclose(value, fd, rtol=1e-6, atol=1e-8 * max(np.abs(fd).max(initial=0.0), 1.0)), field


@pytest.mark.parametrize(
    "param",
    [
        dc.ControlForces(magnitude=0.3, smoothness=0.7),
        dc.Wind(magnitude=0.2, smoothness=2.0),
        dc.KeyedForces(every=0.1, magnitude=0.3, smoothness=0.7),
    ],
    ids=lambda p: p.name,
)
def test_regularizer_hessian_products_match_finite_differences(param):
    scene = small_scene(steps=8)
    rng = np.random.default_rng(1)
    theta, d = rng.normal(size=(2, param.size(scene)))
    eps = 1e-5
    fd = (param.regularizer(theta + eps * d, scene)[1] - param.regularizer(theta - eps * d, scene)[1]) / (2 * eps)
    assert np.allclose(param.regularizer_hess_vec(theta, d, scene), fd, rtol=1e-7, atol=1e-10)


def test_keyframe_loss_hessian_products_match_finite_differences():
    rng = np.random.default_rng(2)
    x, v, dx, dv = rng.normal(size=(4, 7, 5, 3))
    loss = dc.KeyframeLoss(
        {6: rng.normal(size=(5, 3)), 3: rng.normal(size=(5, 3))},
        weights={3: 0.5},
        vertex_weights=rng.uniform(size=5),
        velocity_targets={4: rng.normal(size=(5, 3))},
        velocity_weight=0.3,
    )
    hx, hv = loss.hess_vec(dx, dv)
    eps = 1e-6
    _, px, pv = loss.evaluate(x + eps * dx, v + eps * dv)
    _, mx, mv = loss.evaluate(x - eps * dx, v - eps * dv)
    assert np.allclose(hx, (px - mx) / (2 * eps), atol=1e-8) and np.allclose(hv, (pv - mv) / (2 * eps), atol=1e-8)


@pytest.fixture(scope="module")
def moved_pose():
    """A 6×6 cloth's simulated last pose, moved 5.8 cm by hand (as in test_keyed_forces)."""
    scene = artist_scene(side=6, frames=12)
    target = dc.simulate(scene).x[12] + [0.05, 0.03, 0.0]
    return scene, dc.KeyframeLoss({12: target}), target


def keyed():
    return [dc.KeyedForces(every=0.125, magnitude=3e-5, smoothness=3e-8)]


def test_gauss_newton_reaches_a_moved_pose_in_a_tenth_of_the_simulations(moved_pose):
    scene, loss, target = moved_pose
    gn = dc.optimize(scene, loss, keyed(), max_iter=200, method="gauss-newton")
    lbfgs = dc.optimize(scene, loss, keyed(), max_iter=200, method="l-bfgs-b")
    free = np.setdiff1d(np.arange(scene.cloth.n), scene.cloth.pinned)  # pins cannot follow a rigid move
    reached = dc.simulate(gn.scene, guess=gn.trajectory.step_x).x[12]
    assert np.linalg.norm(reached[free] - target[free], axis=1).mean() <= 0.01
    assert gn.loss <= lbfgs.loss * (1 + 1e-3)  # both end at the regularized optimum
    assert 10 * gn.evaluations <= lbfgs.evaluations, (gn.evaluations, lbfgs.evaluations)  # measured 8 and 141
    assert gn.method == "gauss-newton" and gn.reason == "converged"
    assert loss(dc.simulate(gn.scene, guess=gn.trajectory.step_x)) + Design(scene, keyed()).regularizer(gn.theta)[
        0
    ] == pytest.approx(gn.loss)
    # every iteration tells where its time went; the start's simulation precedes the first
    steps = gn.history
    assert {"evaluations", "adjoints", "tangents", "forward_s", "adjoint_s", "tangent_s", "inner", "damping"} <= set(
        steps[0]
    )
    assert gn.passes["tangent"][0] == sum(h["inner"] for h in steps) and gn.passes["forward"][0] == gn.evaluations
    assert sum(h["evaluations"] for h in steps) < gn.evaluations
    assert all(h["inner"] >= 1 and h["tangent_s"] > 0 for h in steps)
    assert [h["loss"] for h in steps] == sorted((h["loss"] for h in steps), reverse=True)


def test_gauss_newton_recovers_a_rotation_and_velocity():
    # the start design (rotated 0.3 rad) is not the scene's own: the run must simulate θ0's
    scene = small_scene(steps=10)
    axis = ((-0.2, 0.2, 0.0), (0.2, 0.2, 0.1))
    truth = [dc.InitialVelocity(), dc.InitialRotation(*axis, start=-0.1)]
    theta_true = np.array([0.2, 0.0, 0.1, -0.1])
    target = dc.simulate(Design(scene, truth).scene(theta_true)).x
    loss = dc.KeyframeLoss({10: target[10], 5: target[5]})
    params = [dc.InitialVelocity(), dc.InitialRotation(*axis, start=0.3)]
    result = dc.optimize(scene, loss, params, method="gauss-newton")
    assert np.allclose(result.theta, theta_true, atol=1e-5), result.theta
    # a few simulations an iteration, one of them the taken trial's check (_reproduced)
    assert result.evaluations <= 12 + len(result.history), result.evaluations
    assert loss(dc.simulate(result.scene, guess=result.trajectory.step_x)) == pytest.approx(
        result.loss, rel=1e-9, abs=1e-20
    )


def test_auto_picks_gauss_newton_for_keyframe_losses_without_bounds(moved_pose):
    scene, loss, _ = moved_pose
    assert dc.optimize(scene, loss, keyed(), max_iter=1).method == "gauss-newton"
    bounded = [dc.KeyedForces(every=0.125, magnitude=1e-3, bounds=(-20.0, 20.0))]
    assert dc.optimize(scene, loss, bounded, max_iter=1).method == "l-bfgs-b"


def test_callback_stop_keeps_the_best(moved_pose):
    scene, loss, _ = moved_pose
    seen = []
    result = dc.optimize(
        scene, loss, keyed(), method="gauss-newton", callback=lambda info: seen.append(info) or len(seen) == 2
    )
    assert result.reason == "stopped" and len(result.history) == 2
    assert result.loss == seen[-1]["loss"] < seen[0]["loss"] < result.initial_loss
    assert np.array_equal(seen[-1]["params"]["control_acceleration_keys"], result.params["control_acceleration_keys"])


def test_a_diverging_trial_does_not_lose_the_best(moved_pose, monkeypatch):
    # every third trial "diverges": λ grows, the run goes on from the best design
    gn = sys.modules["diffcloth.core.design.gauss_newton"]
    real, calls = gn.simulate, []

    def fragile(scene, **kwargs):
        calls.append(1)
        if len(calls) % 3 == 0:  # the start's is the first
            raise dc.SimulationError("simulation diverged at frame 3", 3, 3)
        return real(scene, **kwargs)

    monkeypatch.setattr(gn, "simulate", fragile)
    scene, loss, _ = moved_pose
    result = dc.optimize(scene, loss, keyed(), max_iter=4, method="gauss-newton")
    assert len(calls) >= 4 and result.loss < 0.5 * result.initial_loss
    assert loss(real(result.scene)) + Design(scene, keyed()).regularizer(result.theta)[0] == pytest.approx(result.loss)


def test_a_run_where_every_trial_fails_returns_the_start(moved_pose, monkeypatch):
    gn = sys.modules["diffcloth.core.design.gauss_newton"]
    real, calls = gn.simulate, []

    def diverging(scene, **kwargs):  # all but the start's
        calls.append(1)
        if len(calls) > 1:
            raise dc.SimulationError("simulation diverged at frame 3", 3, 3)
        return real(scene, **kwargs)

    monkeypatch.setattr(gn, "simulate", diverging)
    scene, loss, _ = moved_pose
    result = dc.optimize(scene, loss, keyed(), method="gauss-newton")
    assert result.reason.startswith("no further progress") and result.loss == result.initial_loss
    assert not np.any(result.theta) and result.history == []


def test_a_trial_that_leaves_the_motion_the_model_predicts_stops_there(monkeypatch):
    """A trial step is rejected at the first frame where its motion leaves the motion the model
    predicts by more than MODEL_SLACK times the largest change predicted, whatever its loss; a
    trial the model predicts runs to the end."""
    gn = sys.modules["diffcloth.core.design.gauss_newton"]
    real, frames = gn.simulate, []

    def counted(scene, on_frame=None, **kwargs):
        if on_frame is None:  # the accepted trial simulated again from its motion (_reproduced)
            return real(scene, **kwargs)

        def count(frame, x, v):
            frames.append(frame)
            on_frame(frame, x, v)

        return real(scene, on_frame=count, **kwargs)

    monkeypatch.setattr(gn, "simulate", counted)
    scene = small_scene(steps=10)
    design = Design(scene, [dc.ControlForces()])
    current = real(scene).step_x
    theta = design.theta0 + 0.5  # 0.5 m/s² on every vertex and axis
    moved = real(design.scene(theta)).step_x
    loss = dc.KeyframeLoss({10: current[-1] + 1.0})  # a metre off: the loss alone stops nothing
    assert gn._below(design, loss, theta, np.inf, moved, current) is not None
    assert frames == list(range(1, 11))
    frames.clear()
    short = current + 0.01 * (moved - current)  # the model predicted a hundredth of the change
    assert gn._below(design, loss, theta, np.inf, short, current) is None
    assert 0 < len(frames) < 10, frames


def test_a_trial_whose_motion_does_not_come_out_again_is_refused(monkeypatch):
    """A trial that lowers the loss is taken only if its design, simulated again from its own
    motion as stored (float32) and perturbed, moves within REPRODUCED of it: else Simulate & Bake
    would show another motion than the one optimized."""
    gn = sys.modules["diffcloth.core.design.gauss_newton"]
    real, guesses = gn.simulate, []
    scene = small_scene(steps=10)
    design = Design(scene, [dc.ControlForces()])
    theta = design.theta0 + 0.5
    loss = dc.KeyframeLoss({10: real(scene).x[-1]})
    assert gn._below(design, loss, theta, np.inf) is not None  # a calm cloth comes out the same
    offset = [0.0]

    def elsewhere(scene, on_frame=None, guess=None, **kwargs):
        traj = real(scene, on_frame=on_frame, guess=guess, **kwargs)
        if on_frame is None:  # the second run: another solution of its steps, offset[0] away
            guesses.append(guess)
            traj.x[5:] += offset[0]
        return traj

    monkeypatch.setattr(gn, "simulate", elsewhere)
    for off, taken in ((0.9 * gn.REPRODUCED, True), (1.1 * gn.REPRODUCED, False)):
        offset[0] = off
        assert (gn._below(design, loss, theta, np.inf) is not None) == taken
    first = real(design.scene(theta)).step_x
    assert 0 < np.abs(guesses[0] - first).max() < 1e-6  # from its own motion, rounded and perturbed


def test_bad_input_names_the_problem(moved_pose):
    scene, loss, _ = moved_pose
    with pytest.raises(ValueError, match="unknown optimization method 'newton'.*gauss-newton"):
        dc.optimize(scene, loss, keyed(), method="newton")
    with pytest.raises(ValueError, match="'gauss-newton' does not honour bounds \\(keyed_forces has them\\)"):
        dc.optimize(scene, loss, [dc.KeyedForces(bounds=(-5.0, 5.0))], method="gauss-newton")

    class Custom:  # a loss without the Hessian Gauss–Newton needs
        targets, velocity_targets = loss.targets, {}
        check, evaluate = loss.check, loss.evaluate

    with pytest.raises(ValueError, match="'gauss-newton' needs a sum-of-squares loss"):
        dc.optimize(scene, Custom(), keyed(), method="gauss-newton")


def test_a_keyframe_loss_adds_up_over_its_frames_and_simulate_shows_each_frame():
    scene = artist_scene(frames=10)
    seen = []

    def watch(frame, x, v):
        seen.append((frame, x.copy(), v.copy()))
        if frame == 6:
            raise KeyboardInterrupt  # any exception ends the run

    with pytest.raises(KeyboardInterrupt):
        dc.simulate(scene, on_frame=watch)
    traj = dc.simulate(scene)
    assert [f for f, _, _ in seen] == [1, 2, 3, 4, 5, 6]
    assert all(np.array_equal(x, traj.x[f]) and np.array_equal(v, traj.v[f]) for f, x, v in seen)
    loss = dc.KeyframeLoss(
        {0: traj.x[0] + 0.01, 4: traj.x[4] + 0.02, 10: traj.x[10] - 0.03},
        weights={4: 2.0},
        velocity_targets={7: traj.v[7] + 0.1},
        velocity_weight=0.5,
    )
    parts = [loss.at_frame(f, traj.x[f], traj.v[f]) for f in range(11)]
    assert sum(parts) == pytest.approx(loss(traj)) and parts[7] > 0 and parts[5] == 0.0


def lift_a_corner():
    """A cloth resting on a floor and a key 12 frames on that lifts one corner 4 cm."""
    verts, tris = dc.grid(10, 10, 0.3)
    verts[:, 2] = 0.005
    scene = dc.Scene(
        dc.FABRICS["cotton"].cloth(verts, tris), steps=12, dt=1 / 24, colliders=[dc.Plane((0, 0, 0), (0, 0, 1))]
    )
    base = dc.simulate(scene)
    lift = 0.04 * np.clip((base.x[12][:, 0] + base.x[12][:, 1] - 0.06) / 0.15, 0, 1)
    return scene, base, dc.KeyframeLoss({12: base.x[12] + lift[:, None] * [0.0, 0.0, 1.0]})


def test_auto_starts_again_from_the_keys_where_gauss_newton_cannot_lift_resting_cloth():
    """The linearization answers an upward force on resting cloth with the floor's contact
    stiffness, so Gauss–Newton finds no step; "auto" starts it again from the keys (the corner in
    free flight to its key), and where no start from the keys exists (a uniform wind) goes on
    with L-BFGS-B."""
    scene, base, loss = lift_a_corner()
    controls = [dc.KeyedForces(every=0.25, magnitude=dc.weight_for_distance(1.5e-4), move_pins=False)]
    alone = dc.optimize(scene, loss, controls, max_iter=12, method="gauss-newton", guess=base.step_x)
    auto = dc.optimize(scene, loss, controls, max_iter=12, guess=base.step_x)
    start = loss.distances(base.x)[12][0]
    assert alone.reason.startswith("no further progress") and alone.loss > 0.5 * alone.initial_loss
    assert auto.method == "gauss-newton, again from the keys"
    assert loss.distances(auto.trajectory.x)[12][0] < 0.3 * start, (start, loss.distances(auto.trajectory.x))
    wind = dc.optimize(scene, loss, [dc.Wind(1e-3)], max_iter=12, guess=base.step_x)
    assert wind.method == "gauss-newton, then l-bfgs-b" and wind.loss <= wind.initial_loss


@pytest.mark.parametrize("param", [dc.KeyedForces(every=0.25, move_pins=False), dc.ControlForces()])
def test_the_start_from_the_keys_flies_the_vertices_the_keys_take_off_to_them(param):
    scene, base, loss = lift_a_corner()
    design = Design(scene, [param])
    theta = design.from_keys(loss, base.x)
    accel = design.fields(theta)["forces"] / scene.cloth.masses[:, None]
    key = loss.targets[12]
    far = np.linalg.norm(key - base.x[12], axis=1) > 0.005
    assert 0 < far.sum() < scene.cloth.n
    assert (accel[:, ~far] == 0).all()
    assert scene.cloth.damping > 0  # Cotton's air: the flight is damped
    assert np.abs(flight(scene, accel + scene.gravity)[far] - key[far]).max() < 1e-6
    # held up against gravity at the start, not flung up and fallen back
    assert np.abs(accel[0, far] + scene.gravity).max() < 0.2 * 9.81
    assert Design(scene, [param]).from_keys(dc.KeyframeLoss({12: base.x[12]}), base.x) is None
    unweighed = dc.KeyframeLoss(loss.targets, vertex_weights=(~far).astype(float))  # the far ones weigh nothing
    assert Design(scene, [param]).from_keys(unweighed, base.x) is None
    assert Design(scene, [dc.Wind()]).from_keys(loss, base.x) is None
    # a design whose motion falls 2 cm short of the keys there is corrected by the flight between
    short = base.x.copy()
    short[12, far] = key[far] - [0.0, 0.0, 0.02]
    again = design.fields(design.from_keys(loss, short, theta))["forces"] / scene.cloth.masses[:, None]
    assert (again[:, ~far] == 0).all()
    lifted = flight(scene, again - accel, start=0.0)
    assert np.abs(lifted[far] - [0.0, 0.0, 0.02]).max() < 1e-6


def flight(scene, accel, start=None):
    """Where implicit Euler takes free vertices from rest at `start` (default x0) in scene.steps frames
    under accelerations accel (frames, n, 3) and the cloth's air damping: v ← (v + h·a)/(1 + h·c), x ← x + h·v."""
    h, c = scene.h, scene.cloth.damping
    x = np.array(scene.x0 if start is None else np.broadcast_to(start, scene.x0.shape), float)
    v = np.zeros_like(x)
    for s in range(scene.n_steps):
        v = (v + h * accel[s // scene.substeps]) / (1 + h * c)
        x = x + h * v
    return x


@pytest.mark.parametrize("halved", [False, True])
def test_auto_starts_from_the_keys_where_gauss_newton_stalled_and_from_pushed_best_designs_where_it_halved(
    monkeypatch, halved
):
    """Where Gauss–Newton stopped early without halving the loss, "auto" starts again from the
    keys lifted from the start (its model did not see the way up); where it halved the loss but
    a key is still over a centimetre off, it goes straight to the random restarts from its best
    design (the start from the keys ended a cape's hem swung along the body at 0.127, the
    restarts at 0.096–0.134)."""
    from diffcloth.core.design import optimize as opt
    from diffcloth.core.numerics.timing import Clock

    scene, base, _ = lift_a_corner()
    loss = dc.KeyframeLoss({12: base.x[12] + [0.0, 0.0, 0.05]})  # every vertex 5 cm off
    design = Design(scene, [dc.KeyedForces(every=0.25, move_pins=False)])
    best = design.theta0 + 0.01
    starts = []

    def again(design, loss, start, run, max_iter, gtol, rtol, what="the start from the keys", slow=None):
        starts.append((start, what, slow))
        return "no further progress: stopped by the test"

    monkeypatch.setattr(opt, "_again", again)
    with Clock() as clock:
        run = opt._Record(design, loss, None, clock, 1.0, base)
        run.improved(best, 0.4 if halved else 0.8, base)  # Gauss–Newton's best: the same motion, kept
        opt._rescue(design, loss, run, base.x, "no further progress: test", 30, (1e-10, 1e-14, 1e-3))
    start, what, slow = starts[0]
    if halved:
        pushed = design.pushed(best, np.random.default_rng(opt.RESTART_SEED), opt.RESTART_PUSH)
        assert what == "the pushed start" and slow == opt.RESTART_SLOW and np.array_equal(start, pushed)
        assert len(starts) == opt.RESTART_MISSES  # none found anything lower: they end
    else:
        assert what == "the start from the keys" and slow is None
        assert np.array_equal(start, design.from_keys(loss, base.x))


def test_gauss_newton_given_slow_stops_once_three_iterations_gain_less_than_that():
    """minimize(slow=s) ends a run whose last SLOW_OVER iterations lowered its loss by less than
    s of it (a random restart that crawls gives way to the next); without it the run goes on."""
    from diffcloth.core.design import gauss_newton
    from diffcloth.core.design import optimize as opt
    from diffcloth.core.numerics.timing import Clock

    scene, base, loss = lift_a_corner()
    design = Design(scene, [dc.KeyedForces(every=0.25, magnitude=dc.weight_for_distance(1.5e-4), move_pins=False)])
    start = design.from_keys(loss, base.x)

    def run(slow):
        with Clock() as clock:
            point = gauss_newton.Linearized(design, loss, start)
            values = [point.value]
            record = opt._Record(design, loss, lambda info: values.append(info["loss"]), clock, point.value, point.traj)
            reason = gauss_newton.minimize(design, loss, point, record, 12, 1e-10, 1e-3, slow)
        return reason, values

    reason, values = run(0.999)
    assert reason.startswith("no further progress: 3 iterations lowered the loss by less than")
    assert len(values) == gauss_newton.SLOW_OVER + 1 and values[-1] > 0.001 * values[0]
    reason, values = run(None)
    assert len(values) > gauss_newton.SLOW_OVER + 1, reason


def test_auto_starts_from_the_keys_where_friction_holds_the_cloth_the_keys_move():
    """A sheet resting on a floor with friction, keyed where it rests 5 cm to the side: every
    keyed vertex lies still on the floor, so "auto" skips Gauss–Newton from the start (its model
    sees sticking friction as a stiff spring) and starts from the keys; without friction, or
    with a key the sheet is not resting for, it does not."""
    from diffcloth.core.design.optimize import held_by_friction

    verts, tris = dc.grid(10, 10, 0.3)
    verts[:, 2] = 0.005
    floor = dc.Plane((0, 0, 0), (0, 0, 1), friction=0.5)
    scene = dc.Scene(dc.FABRICS["cotton"].cloth(verts, tris), steps=12, dt=1 / 24, colliders=[floor])
    base = dc.simulate(scene)
    loss = dc.KeyframeLoss({12: base.x[12] + [0.05, 0.0, 0.0]})
    assert held_by_friction(scene, loss, base.x) > 0.99
    assert held_by_friction(scene.replace(colliders=[floor.replace(friction=0.0)]), loss, base.x) == 0.0
    lifted = dc.KeyframeLoss({12: base.x[12] + [0.0, 0.0, 0.05]})
    assert held_by_friction(scene, lifted, base.x) > 0.99  # lifting it off asks the resting vertices too
    controls = [dc.KeyedForces(every=0.25, magnitude=dc.weight_for_distance(1.5e-4), move_pins=False)]
    auto = dc.optimize(scene, loss, controls, max_iter=8, guess=base.step_x)
    start = loss.distances(base.x)[12][0]
    assert auto.method == "gauss-newton, again from the keys"
    assert loss.distances(auto.trajectory.x)[12][0] < 0.2 * start, (start, loss.distances(auto.trajectory.x))


def test_a_pushed_start_shoves_every_vertex_alike_at_each_key():
    scene, _, _ = lift_a_corner()
    param = dc.KeyedForces(every=0.25, magnitude=1e-3, move_pins=False)
    design = Design(scene, [param])
    theta = np.arange(design.theta0.size, dtype=float)
    pushed = design.pushed(theta, np.random.default_rng(5), 2.0)
    push = (pushed - theta).reshape(-1, scene.cloth.n, 3)
    assert len(push) == len(param.key_times(scene))
    assert np.allclose(push, push[:, :1]) and np.abs(push[:, 0]).max() > 0.1  # one shove per key
    again = design.pushed(theta, np.random.default_rng(5), 2.0)
    assert np.array_equal(pushed, again)  # seeded: the same shoves
    assert param.regularizer(pushed, scene)[0] > param.regularizer(theta, scene)[0] > 0
    assert Design(scene, [dc.Wind()]).pushed(theta[:36], np.random.default_rng(5), 2.0) is None


def test_auto_restarts_from_pushed_designs_where_a_key_stays_out_of_reach(monkeypatch):
    """A key that asks the resting cloth to spread by half (far beyond its stretch) stays more
    than 1 cm off whatever the forces: "auto" then starts Gauss–Newton again from the best design
    shoved at random (seeded), keeps the best and repeats itself exactly."""
    from diffcloth.core.design import optimize as optimize_module

    verts, tris = dc.grid(8, 8, 0.3)
    verts[:, 2] = 0.005
    floor = dc.Plane((0, 0, 0), (0, 0, 1), friction=0.5)
    scene = dc.Scene(dc.FABRICS["cotton"].cloth(verts, tris), steps=12, dt=1 / 24, colliders=[floor])
    base = dc.simulate(scene)
    middle = base.x[12].mean(axis=0)
    loss = dc.KeyframeLoss({12: middle + (base.x[12] - middle) * [1.5, 1.5, 1.0]})

    def run():
        controls = [dc.KeyedForces(every=0.25, magnitude=dc.weight_for_distance(1.5e-4), move_pins=False)]
        return dc.optimize(scene, loss, controls, max_iter=40, guess=base.step_x)

    restarted, again = run(), run()
    assert restarted.method.endswith(", then random restarts")
    assert np.array_equal(restarted.theta, again.theta)
    assert loss.distances(restarted.trajectory.x)[12][0] > 0.01
    monkeypatch.setattr(optimize_module, "RESTARTS", 0)
    alone = run()
    assert not alone.method.endswith("random restarts")
    assert restarted.loss <= alone.loss
    assert len(restarted.history) > len(alone.history)
