"""Self-collision (core.contact.self_contact): layers kept apart, Coulomb friction between them, exact
gradients through the cloth's own planes and friction, and the inputs it refuses."""

import math

import numpy as np
import pytest
from test_colliders import DOWNHILL, INCLINE, TURN
from test_tangent import paired

import diffcloth.core as dc
from diffcloth.core.model.mesh import crossing_pairs
from diffcloth.core.terms.self_contact import SelfContact


def two_layers(n=6, size=0.1, gap=0.012, rng_seed=0, k=60.0):
    """A sheet pinned at its rim and a loose sheet of the same grid `gap` above it."""
    verts, tris = dc.grid(n, n, size)
    top = verts + [0.0, 0.0, gap]
    rim = np.flatnonzero(np.isclose(np.abs(verts[:, :2]), size / 2).any(axis=1))
    rng = np.random.default_rng(rng_seed)
    both = np.vstack([verts, top]) + 2e-4 * rng.normal(size=(2 * len(verts), 3)) * [1, 1, 0]
    return dc.Cloth(both, np.vstack([tris, tris + len(verts)]), mass=0.01, k_tension=k, damping=0.2, pinned=rim)


def pressed(solver, self_distance=0.003, frames=14):
    """The two layers pressed together by a sphere coming down onto the loose one."""
    cloth = two_layers(n=10, size=0.3, gap=0.02, k=200.0)
    centers = [[0.0, 0.0, max(0.2 - 0.02 * f, 0.1)] for f in range(frames + 1)]
    return dc.Scene(
        cloth,
        steps=frames,
        dt=1 / 24,
        colliders=[dc.Sphere(centers, 0.08)],
        self_distance=self_distance,
        solver=solver,
    )


@pytest.mark.parametrize("solver", ["newton", "linearized"])
def test_two_layers_pressed_by_a_sphere_never_cross(solver):
    scene = pressed(solver)
    traj = dc.simulate(scene)
    tris, half = scene.cloth.tris, scene.cloth.n // 2
    assert max(len(crossing_pairs(x, tris)) for x in traj.x) == 0
    gap = traj.x[:, half:, 2] - traj.x[:, :half, 2]
    assert gap[-1].min() > 0.002  # the loose layer rests on the pinned one, the self distance apart
    assert traj.x[-1, half:, 2].min() < traj.x[0, half:, 2].min() - 0.015  # the sphere did press it down
    # without self-collision the loose layer falls through
    off = dc.simulate(scene.replace(self_distance=0.0))
    assert (off.x[-1, half:, 2] - off.x[-1, :half, 2]).min() < -0.05


def layered_slope(mu, solver, frames=14, delta=0.004):
    """A 10 cm patch 1.5 self distances over a pinned 20 × 60 cm sheet on a 30° incline (2 cm
    triangles both), the patch's sides along the slope, no air damping."""
    base, base_tris = dc.grid(11, 31, 1.0)
    patch, patch_tris = dc.grid(6, 6, 0.1)
    verts = np.vstack([base * [0.2, 0.6, 1.0], patch + [0.0, 0.2, 1.5 * delta]]) @ TURN.T
    cloth = dc.Fabric(0.15, 90.0, 5e-6, 0.0).cloth(verts, np.vstack([base_tris, patch_tris + len(base)]))
    cloth = cloth.replace(pinned=np.arange(len(base)))
    return dc.Scene(cloth, steps=frames, dt=1 / 24, solver=solver, self_distance=delta, self_friction=mu)


@pytest.mark.parametrize("solver", ["newton", "linearized"])
def test_coulomb_friction_between_layers_on_a_slope(solver):
    """μ = 0.7 holds the patch on the sheet (tan 30° = 0.58): once landed it moves less than
    2 mm; with μ = 0.3 it slides, with Newton's steps at g·(sin 30° − μ·cos 30°) = 2.36 m/s²
    (a linearized step's friction starts from sticking: it slides, late). Without friction
    the patch slides at g·sin 30°."""
    held = dc.simulate(layered_slope(0.7, solver)).x[:, 341:].mean(axis=1) @ DOWNHILL
    assert abs(held[-1] - held[6]) < 0.002
    scene = layered_slope(0.3, solver)
    sliding = dc.simulate(scene).x[:, 341:].mean(axis=1) @ DOWNHILL
    free = dc.simulate(scene.replace(self_friction=0.0)).x[:, 341:].mean(axis=1) @ DOWNHILL
    assert sliding[-1] - sliding[0] > 0.1
    assert free[-1] - free[0] > 1.4 * (sliding[-1] - sliding[0])
    if solver == "newton":
        t = np.arange(len(sliding)) / 24
        acceleration = np.polyfit(t[4:13], np.gradient(sliding, t)[4:13], 1)[0]
        expected = 9.81 * (math.sin(INCLINE) - 0.3 * math.cos(INCLINE))
        assert acceleration == pytest.approx(expected, rel=0.05)


def contact_scene(self_friction=0.0):
    """A small loose sheet landing on a pinned one, self-contact active in most steps; with
    friction, the loose sheet slides over the other as it lands."""
    cloth = two_layers()
    rng = np.random.default_rng(1)
    steps = 8
    v0 = np.vstack([np.zeros((36, 3)), rng.normal(size=(36, 3)) * 0.02 - [0, 0, 0.05]])
    if self_friction:
        v0[36:] += [0.15, 0.05, 0.0]
    return dc.Scene(
        cloth,
        steps=steps,
        dt=1 / 24,
        tol=1e-12,
        contact_stiffness=1e4,
        self_distance=0.004,
        self_friction=self_friction,
        v0=v0,
        forces=np.zeros((steps, 72, 3)),
    )


@pytest.mark.parametrize("mu", [0.0, 0.4])
def test_gradients_through_self_contact_match_finite_differences(mu):
    scene = contact_scene(mu)
    traj = dc.simulate(scene)
    assert traj.stats.converged.all()
    model = traj.model
    pushing = 0
    for s in range(scene.n_steps):
        lag = model.potential.lag(traj.step_x[s], traj.step_v[s], s, traj.self_pairs[s])
        sc = model.potential.at(traj.step_x[s + 1], s, lag).of(SelfContact)
        pushing += sc is not None and len(sc) > 0
    assert pushing >= 5  # the pairs push in most steps
    rng = np.random.default_rng(3)
    loss = dc.KeyframeLoss({8: traj.x[8] + 0.003 * rng.normal(size=traj.x[8].shape), 4: traj.x[4]})
    _, grad = dc.value_and_grad(scene, loss)
    cloth = scene.cloth
    directions = dict(
        k_tension=rng.normal(size=cloth.n_tension) * cloth.k_tension,
        x0=rng.normal(size=(72, 3)) * 0.001,
        v0=rng.normal(size=(72, 3)) * 0.1,
        forces=rng.normal(size=(8, 72, 3)) * 0.001,
    )

    def moved(eps, field):
        if field == "k_tension":
            return scene.replace(cloth=cloth.replace(k_tension=cloth.k_tension + eps * directions[field]))
        if field == "contact_stiffness":
            return scene.replace(contact_stiffness=scene.contact_stiffness * (1 + eps))
        if field == "self_friction":
            return scene.replace(self_friction=scene.self_friction * (1 + eps))
        return scene.replace(**{field: getattr(scene, field) + eps * directions[field]})

    analytic = {f: float(np.sum(getattr(grad, f) * d)) for f, d in directions.items()}
    analytic["contact_stiffness"] = grad.contact_stiffness * scene.contact_stiffness
    if mu:
        analytic["self_friction"] = grad.self_friction * mu
    for field, value in analytic.items():
        numeric = (loss(dc.simulate(moved(1e-6, field))) - loss(dc.simulate(moved(-1e-6, field)))) / 2e-6
        assert abs(value - numeric) <= 1e-4 * abs(numeric), (field, value, numeric)


def test_self_contact_tangents_match_the_adjoint():
    scene = contact_scene(0.4)
    traj = dc.simulate(scene)
    rng = np.random.default_rng(4)
    a = dict(
        x0=rng.normal(size=(72, 3)) * 0.01, v0=rng.normal(size=(72, 3)), contact_stiffness=100.0, self_friction=0.1
    )
    forward, reverse = paired(scene, traj, a, rng)
    assert forward == pytest.approx(reverse, rel=1e-8)


def test_self_collision_inputs_are_refused_by_name():
    cloth = two_layers()
    with pytest.raises(ValueError, match="self distance must be non-negative"):
        dc.Scene(cloth, self_distance=-0.001)
    with pytest.raises(ValueError, match="self friction must be non-negative"):
        dc.Scene(cloth, self_distance=0.003, self_friction=-0.1)
    with pytest.raises(ValueError, match="self_friction: the scene has no self-collision"):
        dc.optimize(dc.Scene(cloth, steps=2), dc.KeyframeLoss({2: cloth.rest}), ["self_friction"])
    shortest = np.linalg.norm(np.subtract(*cloth.rest[cloth.tension_edges.T]), axis=1).min()
    with pytest.raises(ValueError, match=f"allows \\({2 * shortest:.4g} m, twice its shortest edge\\)"):
        dc.Scene(cloth, self_distance=0.05)
    verts, tris = dc.grid(4, 4, 0.1)
    crossed = verts.copy()
    crossed[5, 2] = 0.05  # one vertex pulled up through a second sheet lying 1 cm above
    sheet = np.vstack([crossed, verts + [0.0, 0.0, 0.01]])
    both = dc.Cloth(sheet, np.vstack([tris, tris + 16]))
    with pytest.raises(ValueError, match=r"passes through itself at the start \(\d+ pairs of triangles cross\)"):
        dc.simulate(dc.Scene(both, steps=1, self_distance=0.003))
    with pytest.raises(ValueError, match="self-collision are not built"):
        dc.value_and_grad(contact_scene().replace(solver="linearized"), dc.KeyframeLoss({1: cloth.rest}))


def test_self_friction_is_an_optimizable_design_parameter():
    """The loose sheet's slide under μ = 0.3, matched from μ = 0.8."""
    target = dc.simulate(contact_scene(0.3))
    loss = dc.KeyframeLoss({4: target.x[4], 8: target.x[8]})
    result = dc.optimize(contact_scene(0.8), loss, ["self_friction"], max_iter=20)
    assert result.params["self_friction"] == pytest.approx(0.3, abs=0.01)


def test_pairs_are_found_where_the_step_is_predicted_to_take_the_cloth():
    """Two layers 2 cm apart, beyond the search radius (2 × 4 mm): no planes from where they
    are; from where free fall is predicted to take the loose one (3 mm over the other), a plane
    for every loose vertex over the other layer's triangles."""
    from diffcloth.core.contact.self_contact import SelfQuery

    cloth = two_layers(gap=0.02)
    query = SelfQuery(cloth, 0.004)
    x = cloth.rest
    assert len(query.planes(x, x).keys) == 0
    end = x.copy()
    end[36:, 2] -= 0.017
    planes = query.planes(x, end)
    assert set(planes.p) >= set(range(36, 72)) - {36, 41, 66, 71}  # every loose vertex but the corners
    assert (planes.n[planes.p >= 36, 2] > 0.99).all()  # held on the side they start on, above


def test_the_broad_phase_finds_every_pair_within_reach():
    """The compiled broad phase (core.contact.compiled.near_pairs) against every pair: vertices
    within the radius of a triangle's centroid beyond its reach, for subsets of triangles and
    vertices, near and far apart (pieces drifting off), none when they are apart, and a NaN
    vertex (a diverging trial) in none."""
    from diffcloth.core.contact.compiled import near_pairs
    from diffcloth.core.model.mesh import centroids_and_reach

    cloth = two_layers(n=8, size=0.2, gap=0.006)
    rng = np.random.default_rng(3)
    tris = cloth.tris
    for lift in (0.0, 0.003, 0.02, 0.1):
        x = cloth.rest + 0.002 * rng.normal(size=cloth.rest.shape)
        x[cloth.n // 2 :, 2] += lift
        x[5] = np.nan
        triangles = np.flatnonzero(rng.uniform(size=len(tris)) < 0.7)
        vertices = np.flatnonzero(rng.uniform(size=cloth.n) < 0.7)
        middle, reach = centroids_and_reach(x, tris)
        dist = np.linalg.norm(x[vertices][None, :] - middle[triangles][:, None], axis=2)
        want = set(zip(*np.nonzero(dist <= 0.008 + reach[triangles][:, None])))
        want = {(int(vertices[j]), int(triangles[i])) for i, j in want}
        got = set(zip(*(a.tolist() for a in near_pairs(x, tris, triangles, vertices, 0.008))))
        assert got == want
        assert all(p != 5 and 5 not in tris[t] for p, t in got)
        across = [(p, t) for p, t in got if (p < cloth.n // 2) != (tris[t, 0] < cloth.n // 2)]
        assert bool(across) == (lift < 0.05)  # 10 cm apart, no pair joins the layers
        # the indices as Blender's meshes hand them over (int32), a positions array not contiguous
        narrow = near_pairs(np.asfortranarray(x), tris.astype(np.int32), triangles.astype(np.int32), vertices, 0.008)
        assert set(zip(*(a.tolist() for a in narrow))) == want
