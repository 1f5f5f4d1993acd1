"""Wind (core.terms.effectors): Blender's pressure on each triangle, along its normal, relative to the
cloth's velocity; explicit from the step's start, with gradients that match central differences
and a tangent that pairs with the adjoint, with either solver, over a collider too."""

import numpy as np
import pytest
from test_gradients import F, make_scene
from test_tangent import paired

import diffcloth.core as dc
from diffcloth.core.design.params import Design

WIND = (0.0, 3.0, 1.0)


def hanging(wind=WIND, steps=24):
    """A 0.4 m Cotton square hanging from its top corners, in the XZ plane (facing y)."""
    verts, tris = dc.grid(7, 7, size=0.4)
    verts = verts[:, [0, 2, 1]]  # x, 0, y: its normal along y
    top = np.flatnonzero(np.isclose(verts[:, 2], 0.2))
    cloth = dc.FABRICS["cotton"].cloth(verts, tris, pinned=[top[0], top[-1]])
    return dc.Scene(cloth, steps=steps, dt=1 / 24, wind=wind)


def test_wind_blows_a_cloth_facing_it_and_not_one_edge_on():
    still = dc.simulate(hanging(None)).x[-1]
    blown = dc.simulate(hanging()).x[-1]
    assert (blown - still)[:, 1].mean() > 0.02  # pushed along the wind
    edge_on = dc.simulate(hanging((3.0, 0.0, 0.0), steps=1)).x[-1]
    assert np.abs(edge_on - dc.simulate(hanging(None, steps=1)).x[-1]).max() < 1e-12


def test_the_force_is_blenders_pressure():
    """One triangle facing the wind, its corners at rest: each takes a third of 0.02·√1000·A·(w·n̂)·n̂
    (Blender's 0.02 in seconds); a moving corner presses as Blender shares it, (Σp + pᵢ)/4."""
    from diffcloth.core.model.pressure import FaceForces as _Pressure

    x = np.array([[0.0, 0, 0], [1.0, 0, 0], [0.0, 0, 1.0]])
    normal = np.cross(x[1] - x[0], x[2] - x[0])
    normal /= np.linalg.norm(normal)
    p = _Pressure(x, np.zeros((3, 3)), np.array([[0, 1, 2]]), np.array(WIND))
    per_corner = 0.02 * np.sqrt(1000) * 0.5 / 3 * np.dot(WIND, normal) * normal
    assert np.allclose(p.force, np.tile(per_corner, (3, 1)))
    v = np.zeros((3, 3))
    v[0] = WIND  # the first corner moves with the wind: it presses nothing of its own
    moving = _Pressure(x, v, np.array([[0, 1, 2]]), np.array(WIND))
    share = np.array([2, 3, 3]) / 4 / 3 * 0.02 * np.sqrt(1000) * 0.5 * np.dot(WIND, normal)
    assert np.allclose(moving.force, share[:, None] * normal)
    # at half the drag (two Wind fields at Field Weight ¼, say) it takes away half its velocity
    half = _Pressure(x, v, np.array([[0, 1, 2]]), 0.5 * np.array(WIND), drag=0.5)
    assert np.allclose(half.force, 0.5 * moving.force)


def test_the_uniform_wind_is_blenders_wind_fields_at_any_weight():
    """Two Wind fields of Flow 1 at Field Weight 0.3, simulated as Blender's effectors, push as the
    uniform wind of both at that weight, with the drag of both: κ = 0.6."""
    axis = np.array([0.2, 1.0, 0.3])
    field = dc.Effector("WIND", (0.0, 0.0, 0.0), axis, 2.0, flow=1.0, weight=0.3, fps=24)
    as_fields = dc.simulate(hanging(None).replace(effectors=[field, field])).x
    speed = 2 * 0.3 * 2.0 * np.sqrt(1000) / 24
    uniform = dc.simulate(hanging(speed * axis / np.linalg.norm(axis)).replace(wind_drag=0.6)).x
    assert np.abs(as_fields - uniform).max() < 1e-9
    undragged = dc.simulate(hanging(speed * axis / np.linalg.norm(axis))).x
    assert np.abs(as_fields - undragged).max() > 1e-3  # what the wind's drag of one field gave


def check_start_gradients(scene):
    """The gradient by a few components of x0 and v0 against central differences (loss: distance
    to the simulation's last frame moved at random)."""
    rng = np.random.default_rng(2)
    traj = dc.simulate(scene)
    loss = dc.KeyframeLoss({F: traj.x[F] + 0.02 * rng.normal(size=traj.x[F].shape)})
    _, grad = dc.value_and_grad(scene, loss)
    for name, index in (("x0", (7, 2)), ("x0", (12, 0)), ("v0", (9, 1)), ("v0", (20, 2))):
        base = getattr(scene, name)
        d = np.zeros_like(base)
        d[index] = 1e-6
        fd = (
            loss(dc.simulate(scene.replace(**{name: base + d}))) - loss(dc.simulate(scene.replace(**{name: base - d})))
        ) / 2e-6
        exact = getattr(grad, name)[index]
        assert abs(exact - fd) <= 1e-4 * abs(fd) + 1e-9, (name, index, exact, fd)


@pytest.mark.parametrize("kind", ["smooth", "sphere", "linearized_smooth", "linearized_sphere"])
def test_gradients_through_wind_match_central_differences(kind):
    scene = make_scene(kind)
    check_start_gradients(scene.replace(wind=np.linspace([0.5, 1.0, 2.0], [1.0, -1.0, 3.0], scene.steps + 1)))


@pytest.mark.parametrize("kind", ["sphere", "linearized_smooth"])
def test_gradients_by_the_winds_drag_match_central_differences(kind):
    scene = make_scene(kind).replace(wind=np.linspace([0.5, 1.0, 2.0], [1.0, -1.0, 3.0], F + 1), wind_drag=0.6)
    rng = np.random.default_rng(3)
    loss = dc.KeyframeLoss({F: dc.simulate(scene).x[F] + 0.02 * rng.normal(size=scene.x0.shape)})
    _, grad = dc.value_and_grad(scene, loss)
    fd = (
        loss(dc.simulate(scene.replace(wind_drag=0.6 + 1e-6))) - loss(dc.simulate(scene.replace(wind_drag=0.6 - 1e-6)))
    ) / 2e-6
    assert abs(fd) > 1e-6 and float(grad.wind_drag) == pytest.approx(fd, rel=1e-5)
    forward, reverse = paired(scene, dc.simulate(scene), {"wind_drag": np.array(1.3)}, rng)
    assert forward == pytest.approx(reverse, rel=1e-8)


@pytest.mark.parametrize("solver", ["newton", "linearized"])
def test_tangent_and_adjoint_agree_with_wind(solver):
    scene = make_scene(("linearized_" if solver == "linearized" else "") + "sphere").replace(wind=WIND)
    rng = np.random.default_rng(6)
    direction = {"x0": rng.normal(size=scene.x0.shape), "v0": rng.normal(size=scene.x0.shape)}
    forward, reverse = paired(scene, dc.simulate(scene), direction, rng)
    assert forward == pytest.approx(reverse, rel=1e-8)


@pytest.mark.parametrize("kind", ["sphere", "linearized_sphere"])
def test_the_wind_as_a_design_has_exact_gradients(kind):
    """WindStrength scales the scene's wind and its drag, as Blender's Field Weights › Wind: dL/dθ
    by central differences; the wind field's own gradient pairs the tangent with the adjoint."""
    scene = make_scene(kind).replace(wind=np.linspace([0.5, 1.0, 2.0], [1.0, -1.0, 3.0], F + 1), wind_drag=0.5)
    design = Design(scene, [dc.WindStrength()])
    doubled = design.scene(np.array([np.log(2.0)]))
    assert np.allclose(doubled.wind, 2 * scene.wind) and doubled.wind_drag == pytest.approx(1.0)
    rng = np.random.default_rng(9)
    loss = dc.KeyframeLoss({F: dc.simulate(scene).x[F] + 0.02 * rng.normal(size=scene.x0.shape)})
    check = dc.check_gradient(scene, loss, [dc.WindStrength()], eps=1e-6, components=[0])
    assert abs(check[0]["numeric"]) > 1e-6 and check[0]["rel_error"] < 1e-5, check
    forward, reverse = paired(scene, dc.simulate(scene), {"wind": rng.normal(size=(F + 1, 3))}, rng)
    assert forward == pytest.approx(reverse, rel=1e-8)
    with pytest.raises(ValueError, match="no wind"):
        dc.check_gradient(make_scene(kind), loss, [dc.WindStrength()])


def lifted_on_a_slope(mu, solver, lift, frames=48):
    """A 10 cm Cotton patch laid on a 30° incline (friction μ) under a wind along the incline's
    normal that bears `lift` of its weight's normal part."""
    import math

    from diffcloth.core.model.pressure import PRESSURE

    turn = np.array([[1, 0, 0], [0, math.cos(math.pi / 6), -0.5], [0, 0.5, math.cos(math.pi / 6)]])
    quad = np.array([[-20, -20, 0], [20, -20, 0], [20, 20, 0], [-20, 20, 0.0]]) @ turn.T
    verts, tris = dc.grid(6, 6, 0.1)
    cloth = dc.Fabric(0.15, 90.0, 5e-6, 0.0).cloth((verts + [0, 0, 0.0015]) @ turn.T, tris)
    speed = lift * 9.81 * math.cos(math.pi / 6) * cloth.mass / (PRESSURE * 0.1 * 0.1)
    collider = dc.MeshCollider(quad, [[0, 1, 2], [0, 2, 3]], friction=mu)
    return dc.Scene(cloth, steps=frames, dt=1 / 24, solver=solver, wind=speed * turn[:, 2], colliders=[collider])


@pytest.mark.parametrize("solver", ["newton", "linearized"])
def test_wind_lifting_resting_cloth_takes_friction_with_it(solver):
    """μ = 0.7 holds the patch on the 30° incline; a wind that bears 60% of the weight's normal part
    leaves friction 0.7·0.4·cos 30° of g, and the patch slides at g·(sin 30° − 0.28·cos 30°)."""
    import math

    downhill = np.array([0.0, -math.cos(math.pi / 6), -0.5])
    held = dc.simulate(lifted_on_a_slope(0.7, solver, 0.0)).x.mean(axis=1) @ downhill
    assert abs(held[-1] - held[12]) < 0.01
    sliding = dc.simulate(lifted_on_a_slope(0.7, solver, 0.6)).x.mean(axis=1) @ downhill
    t = np.arange(len(sliding)) / 24
    acceleration = np.polyfit(t[12:], np.gradient(sliding, t)[12:], 1)[0]
    assert acceleration == pytest.approx(9.81 * (0.5 - 0.7 * 0.4 * math.cos(math.pi / 6)), rel=0.05)


def rubbing(kind):
    """make_scene's cloth over its sphere with friction, in a wind that presses it on: friction's
    normal force holds against the wind's force at the start (StepLag)."""
    scene = make_scene(kind)
    assert scene.colliders and scene.colliders[0].friction == 0.0
    sphere = scene.colliders[0]
    return scene.replace(
        colliders=[dc.Sphere(sphere.center, sphere.radius, friction=0.6)],
        wind=np.linspace([0.5, 1.0, -2.0], [1.0, -1.0, -3.0], scene.steps + 1),
        wind_drag=0.7,
    )


def test_gradients_through_friction_held_against_the_wind():
    """(Converged steps: linearized gradients with friction are not built.)"""
    scene = rubbing("sphere")
    check_start_gradients(scene)
    rng = np.random.default_rng(4)
    loss = dc.KeyframeLoss({F: dc.simulate(scene).x[F] + 0.02 * rng.normal(size=scene.x0.shape)})
    check = dc.check_gradient(scene, loss, [dc.WindStrength()], eps=1e-6, components=[0])
    assert abs(check[0]["numeric"]) > 1e-6 and check[0]["rel_error"] < 1e-5, check
    direction = {
        "x0": rng.normal(size=scene.x0.shape),
        "v0": rng.normal(size=scene.x0.shape),
        "wind": rng.normal(size=(scene.steps + 1, 3)),
        "wind_drag": np.array(0.8),
    }
    forward, reverse = paired(scene, dc.simulate(scene), direction, rng)
    assert forward == pytest.approx(reverse, rel=1e-8)
