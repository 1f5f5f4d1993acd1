"""Blender's Tension, Compression and Shear as terms of their own (core.terms.springs): the split
is exact where the stiffnesses are equal, each changes what it should, and their gradients match
central differences with either solver, with and without contact."""

import numpy as np
import pytest
from test_gradients import F, make_scene
from test_tangent import paired

import diffcloth.core as dc


def quads(n, size=0.4):
    """An n×n-vertex square of quads (lists of 4 vertex indices), as Blender's meshes are."""
    verts, _ = dc.grid(n, n, size)
    faces = [
        [j * n + i, j * n + i + 1, (j + 1) * n + i + 1, (j + 1) * n + i] for j in range(n - 1) for i in range(n - 1)
    ]
    return verts, faces


def test_a_quad_mesh_has_a_shear_diagonal_per_quad_and_a_triangle_mesh_none():
    verts, faces = quads(5)
    cloth = dc.Cloth(verts, faces)
    assert cloth.n_shear == 16 and cloth.n_tension == 40
    lengths = np.linalg.norm(np.subtract(*cloth.rest[cloth.shear_edges.T]), axis=1)
    assert np.allclose(lengths, 0.1 * np.sqrt(2))
    triangles = dc.Cloth(*dc.grid(5, 5, 0.4))
    assert triangles.n_shear == 0 and triangles.n_tension == 56
    # triangles with the polygon each comes from (Blender's loop triangles) know their quads
    tessellated = dc.Cloth(verts, dc.triangulate(faces), polygons=np.repeat(np.arange(16), 2))
    assert np.array_equal(tessellated.shear_edges, cloth.shear_edges)
    assert np.array_equal(tessellated.replace(k_tension=3.0).shear_edges, cloth.shear_edges)


def test_quads_of_a_fabric_move_as_its_triangles_when_compression_and_shear_equal_stretch():
    """Blender's presets set Tension = Compression = Shear: the terms then sum to the springs a
    triangle mesh of the same diagonals has (up to rounding)."""
    verts, faces = quads(6)
    tris = dc.triangulate(faces)
    fabric = dc.FABRICS["cotton"]
    runs = []
    for f, mesh in (
        (fabric, faces),
        (dc.Fabric(0.15, 90.0, 5e-6, 1.0, compression=90.0, shear=90.0), faces),
        (fabric, tris),
    ):
        scene = dc.Scene(f.cloth(verts, mesh, pinned=[0, 5]), steps=12, colliders=[dc.Sphere((0, 0, -0.15), 0.1)])
        runs.append(dc.simulate(scene).x)
    assert np.abs(runs[0] - runs[2]).max() < 1e-9
    assert np.abs(runs[1] - runs[2]).max() < 1e-9


def squeezed(k_compression=None, solver="newton"):
    """A strip whose pins close in by a fifth of its length (no gravity), bending weak."""
    verts, tris = dc.grid(9, 3, size=0.4)
    pins = np.flatnonzero(np.isclose(np.abs(verts[:, 0]), 0.2))
    cloth = dc.Cloth(verts, tris, mass=0.05, k_tension=50.0, k_compression=k_compression, k_bending=1e-5, pinned=pins)
    inward = -np.sign(verts[pins, 0])[None, :, None] * [1.0, 0.0, 0.0]
    path = verts[pins][None] + np.linspace(0.0, 0.08, 11)[:, None, None] * inward
    kick = np.zeros_like(verts)
    kick[:, 2] = 0.002 * np.cos(np.pi * verts[:, 0] / 0.4)
    return dc.Scene(cloth, steps=10, dt=0.05, gravity=(0, 0, 0), pin_path=path, v0=kick, solver=solver)


@pytest.mark.parametrize("solver", ["newton", "linearized"])
def test_soft_compression_lets_the_strip_shorten_where_stiff_compression_buckles_it(solver):
    """Stiff compression: the strip keeps its springs' lengths and bows out of plane; soft: its
    springs shorten (in plane, as the pins close in)."""
    strains = []
    for k in (None, 0.5):
        scene = squeezed(k, solver)
        x = dc.simulate(scene).x[-1]
        e = scene.cloth.tension_edges
        along = np.isclose(scene.x0[e[:, 0], 1], scene.x0[e[:, 1], 1])  # the springs along the strip
        rest = np.linalg.norm(np.subtract(*scene.x0[e[along]].transpose(1, 0, 2)), axis=1)
        strains.append(np.linalg.norm(np.subtract(*x[e[along]].transpose(1, 0, 2)), axis=1) / rest - 1)
    stiff, soft = strains
    assert np.abs(stiff).max() < 0.01 and soft.mean() < -0.03


def sheared(k_shear):
    """A quad square pinned along its bottom edge, its top pulled sideways by a force."""
    verts, faces = quads(5)
    bottom = np.flatnonzero(np.isclose(verts[:, 1], -0.2))
    top = np.flatnonzero(np.isclose(verts[:, 1], 0.2))
    cloth = dc.Cloth(verts, faces, mass=0.05, k_tension=50.0, k_shear=k_shear, pinned=bottom)
    forces = np.zeros((20, len(verts), 3))
    forces[:, top, 0] = 0.2
    return dc.Scene(cloth, steps=20, dt=0.05, gravity=(0, 0, 0), forces=forces)


def test_shear_stiffness_holds_a_square_against_a_sideways_pull():
    weak, strong = (dc.simulate(sheared(k)).x[-1] for k in (5.0, 500.0))
    top = np.isclose(sheared(5.0).x0[:, 1], 0.2)
    assert weak[top, 0].mean() - sheared(5.0).x0[top, 0].mean() > 3 * (
        strong[top, 0].mean() - sheared(5.0).x0[top, 0].mean()
    )


def scene_for(solver, contact):
    """test_gradients' scene (free, or over a sphere) as quads with tension, compression and shear apart."""
    rng = np.random.default_rng(11)
    scene = make_scene(("linearized_" if solver == "linearized" else "") + ("sphere" if contact else "smooth"))
    verts, faces = quads(5)
    n_t = dc.Cloth(verts, faces).n_tension
    stiffness = dict(
        k_tension=rng.uniform(8, 14, n_t), k_compression=rng.uniform(2, 6, n_t), k_shear=rng.uniform(3, 9, 16)
    )
    c = scene.cloth
    return scene.replace(
        cloth=dc.Cloth(
            verts, faces, mass=c.mass, k_bending=c.k_bending, damping=c.damping, pinned=c.pinned, **stiffness
        )
    )


def loss_for(scene):
    traj = dc.simulate(scene)
    rng = np.random.default_rng(3)
    return dc.KeyframeLoss({F: traj.x[F] + 0.02 * rng.normal(size=traj.x[F].shape), 3: traj.x[3] - 0.01})


def moved(scene, field, index, eps):
    k = getattr(scene.cloth, field).copy()
    k[index] += eps
    return scene.replace(cloth=scene.cloth.replace(**{field: k}))


@pytest.mark.parametrize("contact", [False, True], ids=["free", "sphere"])
@pytest.mark.parametrize("solver", ["newton", "linearized"])
def test_gradients_of_tension_compression_and_shear_match_central_differences(solver, contact):
    scene = scene_for(solver, contact)
    loss = loss_for(scene)
    value, grad = dc.value_and_grad(scene, loss)
    assert grad.k_compression.shape == (scene.cloth.n_tension,) and grad.k_shear.shape == (16,)
    for field, index in (
        ("k_tension", 3),
        ("k_tension", 30),
        ("k_compression", 7),
        ("k_compression", 22),
        ("k_shear", 5),
    ):
        eps = 1e-6 * getattr(scene.cloth, field).mean()
        fd = (
            loss(dc.simulate(moved(scene, field, index, eps))) - loss(dc.simulate(moved(scene, field, index, -eps)))
        ) / (2 * eps)
        analytic = getattr(grad, field)[index]
        assert abs(analytic - fd) <= 1e-4 * abs(fd) + 1e-9, (field, index, analytic, fd)


@pytest.mark.parametrize("solver", ["newton", "linearized"])
def test_tangent_and_adjoint_agree_on_compression_and_shear(solver):
    scene = scene_for(solver, contact=True)
    rng = np.random.default_rng(5)
    direction = {"k_compression": rng.normal(size=scene.cloth.n_tension), "k_shear": rng.normal(size=16)}
    forward, reverse = paired(scene, dc.simulate(scene), direction, rng)
    assert forward == pytest.approx(reverse, rel=1e-8)


def test_global_stiffness_scales_tension_compression_and_shear_together():
    scene = scene_for("newton", contact=False)
    design = dc.optimize(scene, loss_for(scene), [dc.GlobalStiffness()], max_iter=0)
    fields = design.scene.cloth
    assert np.allclose(
        fields.k_compression / fields.k_tension.mean(), scene.cloth.k_compression / scene.cloth.k_tension.mean()
    )
    assert np.allclose(fields.k_shear, scene.cloth.k_shear)


def test_a_cloth_without_compression_of_its_own_reports_it_in_k_tension():
    verts, faces = quads(5)
    cloth = dc.Cloth(verts, faces, k_tension=10.0, pinned=[20, 24])
    assert cloth.own_compression is None and np.array_equal(cloth.k_compression, cloth.k_tension)
    scene = dc.Scene(cloth, steps=3)
    _, grad = dc.value_and_grad(scene, dc.KeyframeLoss({3: scene.x0}))
    assert not grad.k_compression.any() and grad.k_tension.any()
    with pytest.raises(ValueError, match="k_shear must be given"):
        dc.Cloth(verts, faces, k_tension=np.full(40, 10.0))
