"""Several cloths in one run (core.join): one Cloth of their parts, each keeping its masses,
stiffness, pins and sewing; self-collision acts between them; gradients stay exact."""

import numpy as np
import pytest
from test_wind import check_start_gradients

import diffcloth.core as dc
from diffcloth.core.design.params import Design


def square(side, size, z, fabric, pinned=()):
    verts, tris = dc.grid(side, side, size=size)
    verts[:, 2] += z
    return dc.FABRICS[fabric].cloth(verts, tris, pinned=pinned)


def test_joined_cloths_keep_their_own_parts():
    a = square(4, 0.3, 0.0, "cotton", pinned=[0, 3])
    b = square(5, 0.4, 0.1, "denim")
    both = dc.join([a, b])
    assert both.n == a.n + b.n and len(both.tris) == len(a.tris) + len(b.tris)
    assert np.array_equal(both.masses, np.r_[a.masses, b.masses]) and both.mass == pytest.approx(a.mass + b.mass)
    assert np.array_equal(both.pinned, [0, 3])
    assert np.array_equal(both.tension_edges, np.r_[a.tension_edges, b.tension_edges + a.n])
    assert np.array_equal(both.hinges, np.r_[a.hinges, b.hinges + a.n])
    assert np.array_equal(both.k_tension, np.r_[a.k_tension, b.k_tension])
    assert np.array_equal(both.k_bending, np.r_[a.k_bending, b.k_bending])
    assert np.array_equal(both.k_shear, np.r_[a.k_shear, b.k_shear])
    assert a.damping != b.damping and np.array_equal(both.damping, np.r_[[a.damping] * a.n, [b.damping] * b.n])
    assert dc.join([a, a.replace(verts=a.rest + 1.0)]).damping == a.damping  # one value where they share it
    with pytest.raises(dc.JoinError, match="bending"):
        dc.join([a, b.replace(bending="springs")])


def test_a_cloth_falls_onto_another_and_stays_on_it():
    """A small square dropped on a larger one held at its corners: the self-collision between the
    two keeps them apart; apart from each other they fall alike; each keeps its own motion where
    they do not touch (no cross-coupling but contact)."""
    lower = square(9, 0.5, 0.0, "cotton", pinned=[0, 8, 72, 80])
    upper = square(5, 0.2, 0.05, "cotton")
    both = dc.join([lower, upper])
    scene = dc.Scene(both, steps=24, dt=1 / 24, self_distance=0.01, solver="linearized")
    x = dc.simulate(scene).x
    z_low = x[:, : lower.n, 2].min(axis=1)
    z_up = x[:, lower.n :, 2]
    assert z_up.min(axis=1)[-1] > z_low[-1]  # resting on the lower cloth, not through it
    alone = dc.simulate(dc.Scene(upper, steps=24, dt=1 / 24, solver="linearized")).x[-1]
    assert alone[:, 2].mean() < z_up[-1].mean() - 0.1  # without the lower cloth it falls on
    alone_low = dc.simulate(dc.Scene(lower, steps=3, dt=1 / 24, solver="linearized")).x[-1]
    assert np.allclose(x[3, : lower.n], alone_low, atol=1e-9)  # before they meet: each its own motion


@pytest.mark.parametrize("solver", ["newton", "linearized"])
def test_gradients_through_joined_cloths_match_central_differences(solver):
    from test_gradients import make_scene

    scene = make_scene(("linearized_" if solver == "linearized" else "") + "smooth")
    other = scene.cloth.replace(mass=0.3, k_tension=15.0, damping=0.8)  # 25 vertices beside it, damped more
    moved = other.replace(verts=other.rest + [0.5, 0.0, 0.0], pinned=[])
    both = dc.join([scene.cloth, moved])
    joined = dc.Scene(
        both,
        steps=scene.steps,
        dt=scene.dt,
        v0=np.r_[scene.v0, scene.v0],
        tol=scene.tol,
        solver=solver,
    )
    check_start_gradients(joined)


def test_tangent_pairs_with_the_adjoint_under_per_vertex_damping():
    from test_tangent import contact_scene, paired, random_direction

    scene = contact_scene(solver="linearized")
    damped = scene.cloth.replace(damping=np.linspace(0.1, 2.0, scene.cloth.n))
    scene = scene.replace(cloth=damped)
    rng = np.random.default_rng(8)
    forward, reverse = paired(scene, dc.simulate(scene), random_direction(scene, rng), rng)
    assert forward == pytest.approx(reverse, rel=1e-8)


def two_scenes(solver="linearized", lower_self=0.0, steps=24):
    """A small square above a larger one held at its corners, each its own scene."""
    lower = square(9, 0.5, 0.0, "cotton", pinned=[0, 8, 72, 80])
    upper = square(5, 0.2, 0.05, "denim")
    common = dict(steps=steps, dt=1 / 24, solver=solver)
    return dc.Scene(lower, self_distance=lower_self, **common), dc.Scene(upper, v0=[0.0, 0.0, -0.2], **common)


def test_joined_scenes_collide_and_keep_their_own_settings():
    """Joined: the cloths' scenes as one, colliding between them though neither collides with
    itself (its pieces apart); each part as its scene simulates it until they touch."""
    low, up = two_scenes()
    joined = dc.Joined([low, up], self_distance=0.01)
    scene = joined.scene
    assert scene.self_distance == 0.01 and np.array_equal(scene.self_within, [False, False])
    assert np.array_equal(scene.v0[low.cloth.n :], np.broadcast_to(up.v0, up.x0.shape))
    x = dc.simulate(scene).x
    x_low, x_up = joined.parts(x)
    assert x_up[:, :, 2].min(axis=1)[-1] > x_low[-1, :, 2].min()  # on the lower cloth, not through it
    alone = dc.simulate(up.replace(steps=2)).x
    assert np.allclose(x_up[:3], alone, atol=1e-9)
    # a cloth colliding with itself keeps its own pairs; the other meets only it
    both = dc.Joined(two_scenes(lower_self=0.008), self_distance=0.01).scene
    assert np.array_equal(both.self_within, [True, False])
    with pytest.raises(ValueError, match="substeps"):
        dc.Joined([low, up.replace(substeps=2)])


def test_a_joined_design_splits_back_per_cloth():
    low, up = two_scenes()
    joined = dc.Joined([low, up.replace(forces=np.ones((low.steps, up.cloth.n, 3)))])
    c = joined.scene.cloth
    design = joined.scene.replace(
        cloth=c.replace(k_tension=c.k_tension * 2, k_bending=c.k_bending * 3), v0=np.arange(c.n * 3.0).reshape(-1, 3)
    )
    a, b = joined.split(design)
    assert np.allclose(a.cloth.k_tension, 2 * low.cloth.k_tension) and np.allclose(
        b.cloth.k_bending, 3 * up.cloth.k_bending
    )
    assert np.array_equal(b.v0, design.v0[low.cloth.n :]) and not np.any(a.forces) and np.all(b.forces == 1)
    assert np.array_equal(a.pin_frames, low.pin_frames)


def test_a_joined_loss_weighs_only_the_keyed_cloth():
    low, up = two_scenes("newton", steps=6)
    joined = dc.Joined([low, up], self_distance=0.01)
    x = dc.simulate(joined.scene).x
    key = dc.KeyframeLoss({4: x[4, low.cloth.n :] + [0.0, 0.0, 0.03]}, weights={4: 2.0})
    loss = dc.joined_loss([None, key], [low.cloth.n, up.cloth.n])
    value, gx, _ = loss.evaluate(x, np.zeros_like(x))
    assert value == pytest.approx(2.0 * up.cloth.n * 0.03**2)
    assert not gx[:, : low.cloth.n].any() and loss.distances(x)[4] == pytest.approx((0.03, 0.03))
    check_start_gradients_of(joined.scene, loss)


def check_start_gradients_of(scene, loss):
    _, grad = dc.value_and_grad(scene, loss)
    for index in ((90, 2), (95, 0)):
        d = np.zeros_like(scene.v0)
        d[index] = 1e-6
        fd = (
            loss(dc.simulate(scene.replace(v0=scene.v0 + d))) - loss(dc.simulate(scene.replace(v0=scene.v0 - d)))
        ) / 2e-6
        assert grad.v0[index] == pytest.approx(fd, rel=1e-4, abs=1e-9)


def test_joined_cloths_that_start_close_still_collide():
    """Pairs near at rest are left out within a cloth (its own neighbours), never between cloths:
    a sheet laid 8 mm over another, closer than the 10 mm they keep, stays on it."""
    lower = square(9, 0.5, 0.0, "cotton", pinned=[0, 8, 72, 80])
    upper = square(5, 0.2, 0.008, "cotton")
    common = dict(steps=12, dt=1 / 24, solver="linearized")
    joined = dc.Joined([dc.Scene(lower, **common), dc.Scene(upper, **common)], self_distance=0.01)
    x_low, x_up = joined.parts(dc.simulate(joined.scene).x)
    assert x_up[-1, :, 2].min() > x_low[-1, :, 2].min()


def test_each_joined_cloth_has_its_own_stiffness():
    """GlobalStiffness over joined cloths: one θ per kind and cloth (or only the cloths named), each
    scaling that cloth's springs alone; gradients match central differences."""
    low, up = two_scenes("newton", steps=8)
    joined = dc.Joined([low, up], self_distance=0.01)
    scene, n = joined.scene, low.cloth.n
    x = dc.simulate(scene).x
    loss = dc.joined_loss([None, dc.KeyframeLoss({8: x[8, n:] + [0.0, 0.0, 0.02]})], [n, up.cloth.n])
    both = dc.GlobalStiffness(True, True)
    design = Design(scene, [both])
    assert len(design.theta0) == 4
    assert np.exp(design.theta0) == pytest.approx(
        [low.cloth.k_tension.mean(), up.cloth.k_tension.mean(), low.cloth.k_bending.mean(), up.cloth.k_bending.mean()]
    )
    theta = design.theta0 + np.log([2.0, 1.0, 1.0, 3.0])
    a, b = joined.split(design.scene(theta))
    assert np.allclose(a.cloth.k_tension, 2 * low.cloth.k_tension) and np.allclose(
        a.cloth.k_shear, 2 * low.cloth.k_shear
    )
    assert np.allclose(b.cloth.k_tension, up.cloth.k_tension) and np.allclose(b.cloth.k_bending, 3 * up.cloth.k_bending)
    assert both.describe(theta)["k_tension"] == pytest.approx(
        [2 * low.cloth.k_tension.mean(), up.cloth.k_tension.mean()]
    )
    check = dc.check_gradient(scene, loss, [both], eps=1e-6, components=[0, 1, 2, 3])
    assert all(c["rel_error"] < 1e-5 or abs(c["analytic"] - c["numeric"]) < 1e-9 for c in check), check
    assert abs(check[1]["numeric"]) > 1e-6  # the keyed cloth's own stiffness moves it
    only = Design(scene, [dc.GlobalStiffness(cloths=[1])])
    assert len(only.theta0) == 1
    a, b = joined.split(only.scene(only.theta0 + np.log(2.0)))
    assert np.allclose(a.cloth.k_tension, low.cloth.k_tension) and np.allclose(
        b.cloth.k_tension, 2 * up.cloth.k_tension
    )
    with pytest.raises(ValueError, match="2 cloth"):
        Design(scene, [dc.GlobalStiffness(cloths=[2])])


@pytest.mark.parametrize("per_vertex", [False, True])
def test_each_joined_cloth_has_its_own_start_velocity(per_vertex):
    low, up = two_scenes("newton", steps=6)
    joined = dc.Joined([low, up], self_distance=0.01)
    scene, n = joined.scene, low.cloth.n
    x = dc.simulate(scene).x
    loss = dc.joined_loss([None, dc.KeyframeLoss({6: x[6, n:] + [0.02, 0.0, 0.0]})], [n, up.cloth.n])
    velocity = dc.InitialVelocity(per_vertex, cloths=[1])
    design = Design(scene, [velocity])
    assert len(design.theta0) == 3 + (3 * up.cloth.n if per_vertex else 0)
    theta = design.theta0.copy()
    theta[:3] = [0.1, 0.0, 0.0]
    a, b = joined.split(design.scene(theta))
    assert np.allclose(a.v0, low.v0) and np.allclose(b.v0, [0.1, 0.0, 0.0])
    assert np.allclose(velocity.describe(theta)["v0"], [0.1, 0.0, 0.0])
    check = dc.check_gradient(scene, loss, [velocity], eps=1e-6, components=[0], directions=1)
    assert all(c["rel_error"] < 1e-5 for c in check) and abs(check[0]["numeric"]) > 1e-6, check
    assert len(Design(scene, [dc.InitialVelocity()]).theta0) == 6  # every cloth its own


@pytest.mark.parametrize("kind", ["keyed", "per_frame"])
def test_control_forces_push_only_the_cloths_named(kind):
    """KeyedForces and ControlForces with cloths=: the other cloths' vertices feel no force whatever θ
    holds; gradients match central differences."""
    low, up = two_scenes("newton", steps=6)
    joined = dc.Joined([low, up], self_distance=0.01)
    scene, n = joined.scene, low.cloth.n
    x = dc.simulate(scene).x
    loss = dc.joined_loss([None, dc.KeyframeLoss({6: x[6, n:] + [0.02, 0.0, 0.0]})], [n, up.cloth.n])
    param = dc.KeyedForces(every=0.125, magnitude=1e-6, cloths=[1]) if kind == "keyed" else dc.ControlForces(cloths=[1])
    design = Design(scene, [param])
    pushed = design.scene(np.ones_like(design.theta0))
    assert not pushed.forces[:, :n].any() and pushed.forces[:, n:].all()
    check = dc.check_gradient(scene, loss, [param], eps=1e-6, directions=2)
    assert all(c["rel_error"] < 1e-5 for c in check), check


def test_a_cloth_that_does_not_collide_with_itself_may_start_through_itself():
    """Joined with another cloth, a cloth without Self Collisions whose start passes through itself
    (two crossing flaps of one garment) runs: only the pairs the run keeps apart are refused."""
    flat, tris = dc.grid(3, 3, size=0.2)
    upright = flat[:, [0, 2, 1]] + [0.0, 0.0, -0.1]  # the same square stood up through it
    crossed = dc.FABRICS["cotton"].cloth(np.r_[flat, upright] + [0.0, 0.0, 0.3], np.r_[tris, tris + len(flat)])
    assert len(dc.crossing_pairs(crossed.rest, crossed.tris))
    low = two_scenes(steps=3)[0]
    common = dict(steps=3, dt=1 / 24, solver="linearized")
    joined = dc.Joined([low, dc.Scene(crossed, **common)], self_distance=0.01).scene
    assert len(dc.simulate(joined).x) == 4
    with pytest.raises(ValueError, match="passes through itself"):  # as it would colliding with itself
        dc.simulate(dc.Scene(crossed, self_distance=0.01, **common))
