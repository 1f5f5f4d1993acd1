"""A render mesh carried by a proxy (core.design.embedding): exact under rigid motion and folds, its
Jacobian and transpose exact, and a render-mesh loss's gradient through a proxy's simulation."""

import numpy as np
import pytest

import diffcloth.core as dc
from diffcloth.core.design.embedding import EmbeddedLoss, Embedding
from diffcloth.core.design.params import Design


def proxy_and_render(offset=0.01):
    """A 6×6 proxy and a 15×15 render mesh lying `offset` above it."""
    pv, pt = dc.grid(6, 6, 0.5)
    rv, rt = dc.grid(15, 15, 0.48)
    return pv, pt, rv + [0.0, 0.0, offset], rt


def rotation(axis, angle):
    axis = np.asarray(axis, float) / np.linalg.norm(axis)
    k = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    return np.eye(3) + np.sin(angle) * k + (1 - np.cos(angle)) * k @ k


def test_rest_and_rigid_motion_are_reproduced_exactly():
    pv, pt, rv, _ = proxy_and_render()
    emb = Embedding(rv, pv, pt)
    assert np.allclose(emb.apply(pv), rv, atol=1e-12)
    r, t = rotation((1, 2, 3), 0.7), np.array([0.3, -0.2, 1.0])
    assert np.allclose(emb.apply(pv @ r.T + t), rv @ r.T + t, atol=1e-12)


def test_a_fold_carries_each_side_rigidly():
    """The proxy folded 90° about the line x = 0 (a row of its vertices): render vertices over each
    half turn with their half, offsets along the half's normal included."""
    pv, pt = dc.grid(7, 7, 0.6)  # vertices at x = 0 lie on the fold
    rv = dc.grid(20, 20, 0.58)[0] + [0.0, 0.0, 0.004]
    rv = rv[np.abs(rv[:, 0]) > 0.06]  # away from the fold line's triangles
    emb = Embedding(rv, pv, pt)
    fold = rotation((0, 1, 0), -np.pi / 2)
    folded = np.where(pv[:, :1] > 1e-9, pv @ fold.T, pv)
    expected = np.where(rv[:, :1] > 0, rv @ fold.T, rv)
    assert np.allclose(emb.apply(folded), expected, atol=1e-12)


def test_jacobian_and_transpose_are_exact():
    pv, pt, rv, _ = proxy_and_render()
    emb = Embedding(rv, pv, pt)
    rng = np.random.default_rng(0)
    x = pv + 0.03 * rng.normal(size=pv.shape)
    dx, g = rng.normal(size=pv.shape), rng.normal(size=rv.shape)
    eps = 1e-6
    fd = (emb.apply(x + eps * dx) - emb.apply(x - eps * dx)) / (2 * eps)
    assert np.allclose(emb.apply_tangent(x, dx), fd, rtol=1e-7, atol=1e-7)
    assert float(np.sum(emb.apply_transpose(x, g) * dx)) == pytest.approx(float(np.sum(g * fd)), rel=1e-7)


@pytest.mark.parametrize("contact", [False, True])
def test_a_render_mesh_loss_has_exact_gradients_through_the_proxy(contact):
    pv, pt, rv, _ = proxy_and_render(offset=0.005)
    emb = Embedding(rv, pv, pt)
    cloth = dc.FABRICS["cotton"].cloth(pv, pt, pinned=[30, 35])
    colliders = [dc.Sphere((0.0, -0.05, -0.2), 0.12)] if contact else []
    rng = np.random.default_rng(1)
    scene = dc.Scene(cloth, steps=8, dt=1 / 24, tol=1e-12, colliders=colliders, v0=rng.normal(size=(36, 3)) * 0.1)
    traj = dc.simulate(scene)
    render = emb.apply(traj.x)
    loss = EmbeddedLoss(dc.KeyframeLoss({8: render[8] + 0.01 * rng.normal(size=render[8].shape), 4: render[4]}), emb)
    _, grad = dc.value_and_grad(scene, loss)
    d = rng.normal(size=(36, 3))

    def at(eps):
        return loss(dc.simulate(scene.replace(v0=scene.v0 + eps * d)))

    numeric = (at(1e-6) - at(-1e-6)) / 2e-6
    assert float(np.sum(grad.v0 * d)) == pytest.approx(numeric, rel=1e-6 if not contact else 1e-4)


def test_optimizing_through_the_proxy_reaches_render_mesh_keys():
    """By Gauss–Newton (a render-mesh loss is a sum of squares too: Jᵀ·H·J through the embedding),
    in four iterations (L-BFGS-B: 5·10⁻⁷ of the start after 15)."""
    pv, pt, rv, _ = proxy_and_render(offset=0.005)
    emb = Embedding(rv, pv, pt)
    cloth = dc.FABRICS["cotton"].cloth(pv, pt, pinned=[30, 35])
    truth = dc.Scene(cloth, steps=8, dt=1 / 24, v0=(0.3, 0.0, 0.2))
    loss = EmbeddedLoss(dc.KeyframeLoss({8: emb.apply(dc.simulate(truth).x[8])}), emb)
    result = dc.optimize(truth.replace(v0=0.0), loss, [dc.InitialVelocity()], max_iter=4)
    assert result.method == "gauss-newton"
    assert result.loss < 1e-6 * result.initial_loss
    assert np.allclose(result.params["v0"], (0.3, 0.0, 0.2), atol=5e-3)


def test_a_proxy_design_carries_to_the_render_mesh():
    """Refine's start: velocities and accelerations interpolated (a field linear in space exactly),
    pins moved with their nearest proxy pin, stiffness scaled as the proxy's; the render mesh
    simulated with it stays near the embedded proxy motion."""
    pv, pt, rv, rt = proxy_and_render(offset=0.0)
    emb = Embedding(rv, pv, pt)
    fabric = dc.FABRICS["cotton"]
    proxy_pins = [30, 35]
    render_pins = [int(np.argmin(np.linalg.norm(rv - pv[p], axis=1))) for p in proxy_pins]
    base = dc.Scene(fabric.cloth(pv, pt, pinned=proxy_pins), steps=8, dt=1 / 24)
    render = dc.Scene(fabric.cloth(rv, rt, pinned=render_pins), steps=8, dt=1 / 24)
    params = [dc.GlobalStiffness(), dc.InitialVelocity(), dc.KeyedForces(every=0.125, move_pins=True)]
    design = Design(base, params)
    rng = np.random.default_rng(2)
    theta = design.theta0 + np.concatenate(
        [[0.3, 0.0], [0.2, -0.1, 0.3], 0.5 * rng.normal(size=len(design.theta0) - 5)]
    )
    found = design.scene(theta)
    linear = np.array([[0.5, -1.0, 0.2], [0.3, 0.1, -0.4], [1.0, 0.0, 0.7]])
    found = found.replace(
        forces=found.cloth.masses[None, :, None] * np.repeat((pv @ linear.T + [0.1, 0.2, 0.3])[None], 8, axis=0)
    )
    carried = emb.carry(base, found, render)
    assert np.allclose(carried.v0, found.v0[0])
    assert np.allclose(
        carried.cloth.k_tension / render.cloth.k_tension, found.cloth.k_tension[0] / base.cloth.k_tension[0]
    )
    assert np.allclose(
        carried.cloth.k_bending / render.cloth.k_bending, found.cloth.k_bending[0] / base.cloth.k_bending[0]
    )
    accel = carried.forces / carried.cloth.masses[None, :, None]
    assert np.allclose(accel, (rv @ linear.T + [0.1, 0.2, 0.3])[None], atol=1e-12)
    moved = carried.pin_path - rv[render_pins]
    assert np.allclose(moved, found.pin_path - pv[proxy_pins]) and np.abs(moved).max() > 1e-3
    proxy_motion = emb.apply(dc.simulate(found).x)
    apart = np.linalg.norm(dc.simulate(carried).x - proxy_motion, axis=2)
    alone = np.linalg.norm(dc.simulate(render).x - proxy_motion, axis=2)  # without the design: 42 mm
    assert apart[-1].mean() < 0.3 * alone[-1].mean(), (apart[-1].mean(), alone[-1].mean())
