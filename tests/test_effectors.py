"""Blender's force fields (core.Effector, core.terms.effectors): Force, Vortex, Drag and Wind with
falloff, as Blender's Cloth feels them at its vertices; their Jacobians, the gradients through
them (central differences) and the tangent paired with the adjoint, with either solver."""

import numpy as np
import pytest
from test_gradients import F, make_scene
from test_tangent import paired
from test_wind import check_start_gradients

import diffcloth.core as dc
from diffcloth.core.model.effectors import field_vectors

ROOT = np.sqrt(1000.0)


def fields():
    """One of each kind, placed off the 5×5 test cloth, with falloff that varies over it."""
    moving = np.linspace([0.3, 0.1, 0.2], [0.2, 0.0, 0.3], F + 1)
    return [
        dc.Effector(
            "FORCE", moving, (0, 0, 1), np.linspace(2.0, 3.0, F + 1), falloff=dc.Falloff(power=1.5, far=2.0)
        ),  # fmt: skip
        dc.Effector(
            "VORTEX",
            (0.1, -0.1, -0.3),
            (0.2, 0.1, 1.0),
            1.5,
            flow=0.5,
            falloff=dc.Falloff("TUBE", power=1.0, radial_power=2.0),
        ),  # fmt: skip
        dc.Effector("DRAG", (0.05, 0.02, 0.3), (0, 0, 1), 0.8, damping=0.4, falloff=dc.Falloff(power=0.5)),
        dc.Effector(
            "WIND",
            (0.0, -0.5, 0.0),
            (0.3, 1.0, 0.2),
            2.0,
            flow=1.0,
            falloff=dc.Falloff("CONE", power=1.0, radial_power=1.0),
        ),  # fmt: skip
        dc.Effector("FORCE", (0.0, 0.0, 0.5), (0, 0, 1), -1.0, shape="PLANE", wind_factor=0.3),
        dc.Effector("TURBULENCE", (0.1, 0.2, 0.0), (0, 0, 1), 3.0, size=0.3),
    ]


def test_blenders_fields_at_a_vertex():
    """The vectors Blender's do_physical_effector gives, in m/s (× √1000, strength / fps)."""
    x = np.array([[1.0, 0.0, 0.0], [0.0, 2.0, 0.5]])
    v = np.array([[0.0, 0.3, 0.0], [0.1, 0.0, 0.0]])
    q = ROOT / 24
    force = dc.Effector("FORCE", (0, 0, 0), (0, 0, 1), 5.0).checked(2)
    out = force.velocity(0, 1, x, v)
    assert np.allclose(out, q * 5.0 * x / np.linalg.norm(x, axis=1)[:, None])
    drag = dc.Effector("DRAG", (0, 0, 0), (0, 0, 1), 1.0, damping=0.5).checked(2)
    speed = np.linalg.norm(v, axis=1)[:, None]
    assert np.allclose(drag.velocity(0, 1, x, v), -(24 / ROOT * speed + 0.5) * v)
    # Blender's new vortex: (n×d)·S + (n×(n×d))·S² over fps, less the velocity
    vortex = dc.Effector("VORTEX", (0, 0, 0), (0, 0, 1), 2.0).checked(2)
    turn = np.cross([0, 0, 1.0], x)
    assert np.allclose(vortex.velocity(0, 1, x, v), q * (2 * turn + 4 * np.cross([0, 0, 1.0], turn)) - v)
    far = dc.Effector("FORCE", (0, 0, 0), (0, 0, 1), 5.0, falloff=dc.Falloff(power=2.0, far=1.5)).checked(2)
    out = far.velocity(0, 1, x, v)
    assert np.allclose(out[0], q * 5.0 / 2.0**2 * x[0])  # (1 + r)^-2 at r = 1
    assert np.all(out[1] == 0)  # beyond Max Distance


def test_turbulence_is_smooth_noise_in_range():
    """Improved Perlin noise: zero at lattice points, within [−1, 1], C¹ (its complex-step
    derivative matches central differences, across cells too); Blender's turbulence in [0, 1]."""
    from diffcloth.core.model.effectors import perlin, turbulence

    rng = np.random.default_rng(4)
    x, y, z = rng.uniform(-5, 5, (3, 2000))
    noise = perlin(x, y, z)
    assert np.abs(noise).max() <= 1.0 and noise.std() > 0.1
    assert np.allclose(perlin(*np.round(rng.uniform(-5, 5, (3, 50)))), 0.0)
    exact = perlin(x + 1e-30j, y, z).imag / 1e-30
    assert np.allclose(exact, (perlin(x + 1e-6, y, z) - perlin(x - 1e-6, y, z)) / 2e-6, atol=1e-6)
    t = turbulence(0.5, x, y, z)
    assert 0.0 <= t.min() and t.max() <= 1.0


def test_the_fields_jacobians_are_exact():
    rng = np.random.default_rng(3)
    x, v = rng.normal(size=(9, 3)) * 0.3, rng.normal(size=(9, 3))
    effs = [e.checked(F + 1) for e in fields()]
    base = field_vectors(effs, 2, 1, x, v)
    for k, (which, arg) in enumerate([(0, 0), (0, 1), (1, 0), (1, 1)]):
        for b in range(3):
            d = np.zeros_like(x)
            d[:, b] = 1e-6
            plus = field_vectors(effs, 2, 1, *((x + d, v) if arg == 0 else (x, v + d)))[which]
            minus = field_vectors(effs, 2, 1, *((x - d, v) if arg == 0 else (x, v - d)))[which]
            assert np.allclose(base[2 + k][:, :, b], (plus - minus) / 2e-6, atol=1e-6), (k, b)


def test_a_force_field_pushes_away_and_a_drag_slows_the_fall():
    verts, tris = dc.grid(6, 6, size=0.4)
    cloth = dc.FABRICS["cotton"].cloth(verts, tris)
    still = dc.simulate(dc.Scene(cloth, steps=12, dt=1 / 24)).x[-1]
    pushed = dc.simulate(dc.Scene(cloth, steps=12, dt=1 / 24, effectors=[
        dc.Effector("FORCE", (0.0, 0.0, -0.3), (0, 0, 1), 5.0)])).x[-1]  # fmt: skip
    assert (pushed - still)[:, 2].mean() > 0.01  # pushed up, away from the field below
    dragged = dc.simulate(dc.Scene(cloth, steps=12, dt=1 / 24, effectors=[
        dc.Effector("DRAG", (0, 0, 0), (0, 0, 1), 0.0, damping=2.0)])).x[-1]  # fmt: skip
    assert 0 > dragged[:, 2].mean() > still[:, 2].mean()  # falls, slower


@pytest.mark.parametrize("kind", ["smooth", "sphere", "linearized_smooth", "linearized_sphere"])
def test_gradients_through_fields_match_central_differences(kind):
    check_start_gradients(make_scene(kind).replace(effectors=fields()))


@pytest.mark.parametrize("solver", ["newton", "linearized"])
def test_tangent_and_adjoint_agree_with_fields(solver):
    scene = make_scene(("linearized_" if solver == "linearized" else "") + "sphere")
    scene = scene.replace(effectors=fields(), wind=(0.0, 1.0, 0.5))
    rng = np.random.default_rng(6)
    direction = {"x0": rng.normal(size=scene.x0.shape), "v0": rng.normal(size=scene.x0.shape)}
    forward, reverse = paired(scene, dc.simulate(scene), direction, rng)
    assert forward == pytest.approx(reverse, rel=1e-8)


def test_bad_fields_are_refused():
    verts, tris = dc.grid(3, 3)
    cloth = dc.Cloth(verts, tris)
    with pytest.raises(ValueError, match="kind"):
        dc.Effector("MAGNET", (0, 0, 0), (0, 0, 1), 1.0)
    with pytest.raises(ValueError, match="axis"):
        dc.Scene(cloth, steps=2, effectors=[dc.Effector("FORCE", (0, 0, 0), (0, 0), 1.0)])
    with pytest.raises(ValueError, match="strength"):
        dc.Scene(cloth, steps=2, effectors=[dc.Effector("FORCE", (0, 0, 0), (0, 0, 1), [1.0, 2.0])])
