"""Sewing springs (core.terms.springs.Sewing): zero-length springs between sewing pairs close a
seam, their force capped where the cloth says; gradients through them match central differences
with either solver, pulling freely and capped, and the tangent pairs with the adjoint."""

import numpy as np
import pytest
from test_tangent import paired
from test_terms import moved

import diffcloth.core as dc


def two_panels(cap=0.0, solver="newton", steps=10):
    """Two 5×5 panels 6 cm apart, side by side, their facing edges sewn pair by pair; no gravity."""
    verts, tris = dc.grid(5, 5, size=0.2)
    right = verts + [0.26, 0.0, 0.0]
    seam = np.flatnonzero(np.isclose(verts[:, 0], 0.1))
    facing = np.flatnonzero(np.isclose(verts[:, 0], -0.1)) + 25
    cloth = dc.Cloth(
        np.r_[verts, right],
        np.r_[tris, tris + 25],
        mass=0.05,
        k_tension=20.0,
        sewing=np.c_[seam, facing],
        sewing_force=cap,
    )
    return dc.Scene(cloth, steps=steps, dt=0.05, gravity=(0, 0, 0), solver=solver), seam, facing


def gap(scene, seam, facing, x):
    return np.linalg.norm(x[seam] - x[facing], axis=1).mean()


def test_sewing_closes_the_seam_and_a_cap_slows_it():
    scene, seam, facing = two_panels(steps=40)
    x = dc.simulate(scene).x
    assert gap(scene, seam, facing, x[0]) == pytest.approx(0.06) and gap(scene, seam, facing, x[-1]) < 0.005
    capped, *_ = two_panels(cap=1e-4, steps=40)  # a tenth of a gram-force: it still closes, slowly
    closing = dc.simulate(capped).x
    assert gap(scene, seam, facing, closing[5]) > gap(scene, seam, facing, x[5]) + 0.01
    assert gap(scene, seam, facing, closing[-1]) < gap(scene, seam, facing, closing[5])


@pytest.mark.parametrize("cap", [0.0, 0.05])
@pytest.mark.parametrize("solver", ["newton", "linearized"])
def test_gradients_through_sewing_match_central_differences(solver, cap):
    scene, *_ = two_panels(cap, solver)
    rng = np.random.default_rng(1)
    traj = dc.simulate(scene)
    loss = dc.KeyframeLoss({10: traj.x[10] + 0.01 * rng.normal(size=traj.x[10].shape)})
    _, grad = dc.value_and_grad(scene, loss)
    for index in (3, 40):
        eps = 1e-6 * scene.cloth.k_tension.mean()
        fd = (
            loss(dc.simulate(moved(scene, "k_tension", index, eps)))
            - loss(dc.simulate(moved(scene, "k_tension", index, -eps)))
        ) / (2 * eps)
        assert abs(grad.k_tension[index] - fd) <= 1e-4 * abs(fd) + 1e-9, (index, grad.k_tension[index], fd)


@pytest.mark.parametrize("solver", ["newton", "linearized"])
def test_tangent_and_adjoint_agree_with_sewing(solver):
    scene, *_ = two_panels(0.05, solver)
    rng = np.random.default_rng(2)
    direction = {"x0": rng.normal(size=scene.x0.shape), "k_tension": rng.normal(size=scene.cloth.n_tension)}
    forward, reverse = paired(scene, dc.simulate(scene), direction, rng)
    assert forward == pytest.approx(reverse, rel=1e-8)


def test_sewing_in_the_addon_closes_a_seam_of_loose_edges(blank):
    """Two panels of one mesh, their facing edges joined by loose edges: refused until Sewing is
    ticked, then sewn closed (Max Sewing Force 0: no limit), as Blender's Sewing does."""
    bpy = pytest.importorskip("bpy")
    from test_addon import evaluated, ops_report

    scene = blank.scene
    scene.frame_start, scene.frame_end = 1, 25
    verts, tris = dc.grid(5, 5, size=0.2)
    right = verts + [0.26, 0.0, 0.0]
    seam = np.flatnonzero(np.isclose(verts[:, 0], 0.1))
    facing = np.flatnonzero(np.isclose(verts[:, 0], -0.1)) + 25
    mesh = bpy.data.meshes.new("Panels")
    mesh.from_pydata(np.r_[verts, right].tolist(), np.c_[seam, facing].tolist(), np.r_[tris, tris + 25].tolist())
    cloth = bpy.data.objects.new("Panels", mesh)
    blank.collection.objects.link(cloth)
    blank.view_layer.objects.active = cloth
    cloth.diffcloth.role = "CLOTH"
    scene.use_gravity = False
    assert "tick Sewing (Shape) to sew the vertices they join" in str(ops_report(bpy.ops.diffcloth.simulate))
    cloth.diffcloth.use_sewing_springs = True
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    scene.frame_set(25)
    x = evaluated(cloth)
    assert np.linalg.norm(x[seam] - x[facing], axis=1).max() < 0.005  # 6 cm apart at the start


@pytest.mark.parametrize("cap", [0.0, 1e-4])
def test_a_sewn_cloth_joined_with_another_keeps_its_seams_and_cap(cap):
    """Cloths run together (core.join): the sewn one's pairs, stiffness and force cap carry over,
    beside a cloth with no seams: the seam closes as it does on the cloth alone."""
    scene, seam, facing = two_panels(cap=cap, steps=20)
    plain = dc.FABRICS["cotton"].cloth(*dc.grid(3, 3, size=0.1))
    plain = plain.replace(verts=plain.rest + [0.0, 0.0, 1.0])
    both = dc.join([plain, scene.cloth])
    assert both.sewing_force == cap and np.array_equal(both.sewing_edges, scene.cloth.sewing_edges + plain.n)
    joined = dc.simulate(dc.Scene(both, steps=20, dt=0.05, gravity=(0, 0, 0))).x[:, plain.n :]
    alone = dc.simulate(scene).x
    assert np.abs(joined - alone).max() < 1e-6
