"""Fabric in physical units (core.model.material) and the linearized step on real-fabric stiffness."""

import numpy as np
import pytest
from test_gradients import along

import diffcloth.core as dc
from diffcloth.core.model.material import spring_factors


def equilateral_patch(rows=8, cols=8, edge=0.05):
    """A patch of equilateral triangles."""
    verts = np.array(
        [[(i + 0.5 * (j % 2)) * edge, j * edge * np.sqrt(3) / 2, 0.0] for j in range(rows) for i in range(cols)]
    )
    tris = []
    for j in range(rows - 1):
        for i in range(cols - 1):
            a, b, c, d = j * cols + i, j * cols + i + 1, (j + 1) * cols + i, (j + 1) * cols + i + 1
            tris += [(a, b, d), (a, d, c)] if j % 2 else [(a, b, c), (b, d, c)]
    return verts, np.array(tris)


def test_stretch_stiffness_is_the_sheets_modulus_on_equilateral_triangles():
    """Under a small biaxial strain ε a sheet of 2D modulus Y and Poisson's ratio ⅓ (a triangular
    spring lattice's) stores Y·ε²/(1 − ν) = 1.5·Y·ε² per unit area: the springs of a Fabric do."""
    verts, tris = equilateral_patch()
    cloth = dc.Fabric(0.2, 150.0, 1e-5).cloth(verts, tris)
    eps = 1e-3
    e = cloth.tension_edges
    stretch = eps * np.linalg.norm(verts[e[:, 0]] - verts[e[:, 1]], axis=1)
    energy = 0.5 * float(np.sum(cloth.k_tension * stretch**2))
    area = float(dc.model.mesh.triangle_areas(verts, tris).sum())
    assert energy / area == pytest.approx(1.5 * 150.0 * eps**2, rel=1e-9)


def test_springs_follow_the_mesh_not_its_resolution():
    """Interior grid edges along rows carry Y, diagonals Y/2, boundary edges half: at any cell size."""
    for side in (5, 9):
        verts, tris = dc.grid(side, side, 0.7)
        cloth = dc.Cloth(verts, tris)
        f = spring_factors(verts, tris, cloth.tension_edges)
        d = verts[cloth.tension_edges[:, 1]] - verts[cloth.tension_edges[:, 0]]
        diagonal = (np.abs(d[:, 0]) > 1e-9) & (np.abs(d[:, 1]) > 1e-9)
        on_edge = np.all(np.isclose(np.abs(verts[cloth.tension_edges][:, :, :2]), 0.35), axis=1).any(axis=1)
        assert np.allclose(f[diagonal], 0.5)
        assert np.allclose(f[~diagonal & ~on_edge], 1.0) and np.allclose(f[~diagonal & on_edge], 0.5)


def test_a_fabric_gives_mass_by_area():
    verts, tris = dc.grid(6, 6, 2.0)
    cloth = dc.FABRICS["denim"].cloth(verts, tris, pinned=[0])
    assert cloth.mass == pytest.approx(0.4 * 4.0) and cloth.damping == 0.32
    assert np.all(cloth.k_bending == 1e-3) and list(cloth.pinned) == [0]


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(density=0.0), "density must be positive"),
        (dict(stretch=-1.0), "stretch stiffness must be positive"),
        (dict(bending=np.nan), "bending rigidity must be positive"),
        (dict(damping=-0.1), "damping must be non-negative"),
    ],
)
def test_bad_fabrics(kwargs, match):
    args = {**dict(density=0.15, stretch=90.0, bending=5e-6, damping=1.0), **kwargs}
    with pytest.raises(ValueError, match=match):
        dc.Fabric(**args)


def hanging(side, fabric, frames=24):
    """A 1 m cloth of the fabric hanging from its two +Y corners at 24 fps, one linearized step a frame."""
    verts, tris = dc.grid(side, side, 1.0)
    top = np.flatnonzero(np.isclose(verts[:, 1], 0.5))
    cloth = dc.FABRICS[fabric].cloth(verts, tris, pinned=[top[0], top[-1]])
    return dc.Scene(cloth, steps=frames, dt=1 / 24, solver="linearized")


def test_cotton_drapes_alike_at_every_resolution():
    lowest = [dc.simulate(hanging(side, "cotton")).x[-1][:, 2].min() for side in (12, 18, 27)]
    assert max(lowest) - min(lowest) <= 0.05 * abs(np.mean(lowest)), lowest


@pytest.mark.parametrize("fabric", sorted(dc.FABRICS))
def test_a_vertical_cloth_let_go_above_a_floor_collapses_into_a_heap(fabric):
    """A cloth standing 1 cm above the floor (with a millimetre of out-of-plane noise: a perfectly
    flat one is an equilibrium) falls into a heap, every step solved once, nothing diverging."""
    verts, tris = dc.grid(20, 20, 0.8)
    noise = 1e-3 * np.random.default_rng(0).normal(size=len(verts))
    verts = np.stack([verts[:, 0], noise, verts[:, 1] + 0.41], axis=1)
    scene = dc.Scene(
        dc.FABRICS[fabric].cloth(verts, tris),
        steps=48,
        dt=1 / 24,
        solver="linearized",
        colliders=[dc.Plane((0, 0, 0), (0, 0, 1))],
    )
    traj = dc.simulate(scene)
    assert np.isfinite(traj.x).all() and (traj.stats.iterations == 1).all()
    assert traj.x[-1][:, 2].max() < 0.3 and traj.x[-1][:, 2].min() > -0.03


def test_a_linearized_step_keeps_stiff_cloth_out_of_analytic_colliders():
    """Cotton hanging over an analytic sphere onto a floor: one linear solve sees only the contacts
    at its start, so cloth dragged into a collider within a step is moved back out (before: 15 mm
    deep into the sphere at 64×64). Every frame within the smoothing depth of both surfaces."""
    scene = hanging(24, "cotton", frames=36).replace(
        colliders=[dc.Sphere((0.0, 0.1, -0.45), 0.25), dc.Plane((0, 0, -0.75), (0, 0, 1))]
    )
    traj = dc.simulate(scene)
    assert sum(len(v) for step in traj.projected for v, _, _ in step) > 0  # the case it is about
    depth = scene.contact_smoothing + 1e-9
    assert np.linalg.norm(traj.x - [0.0, 0.1, -0.45], axis=2).min() >= 0.25 - depth
    assert traj.x[..., 2].min() >= -0.75 - depth


@pytest.mark.parametrize("solver", ["linearized", "newton"])
@pytest.mark.parametrize("fabric", sorted(dc.FABRICS))
def test_gradients_of_every_preset_match_finite_differences(fabric, solver):
    """A small cloth of each preset falling onto a sphere: the adjoint gradient along a random
    direction in the whole design space against a central difference."""
    verts, tris = dc.grid(5, 5, size=0.4)
    cloth = dc.FABRICS[fabric].cloth(verts, tris, pinned=[20, 24])
    rng = np.random.default_rng(5)
    scene = dc.Scene(
        cloth,
        steps=6,
        dt=1 / 24,
        solver=solver,
        tol=1e-12,
        v0=rng.normal(size=(25, 3)) * 0.1,
        forces=np.zeros((6, 25, 3)),
        colliders=[dc.Sphere((0.0, 0.05, -0.13), 0.1)],
    )
    traj = dc.simulate(scene)
    loss = dc.KeyframeLoss({6: traj.x[6] + 0.01 * rng.normal(size=(25, 3)), 3: traj.x[3]})
    _, grad = dc.value_and_grad(scene, loss)
    d = dict(
        k_tension=rng.normal(size=cloth.n_tension) * cloth.k_tension,
        k_bending=rng.normal(size=cloth.n_bending) * cloth.k_bending,
        x0=rng.normal(size=(25, 3)) * 0.01,
        v0=rng.normal(size=(25, 3)),
        forces=rng.normal(size=(6, 25, 3)) * cloth.masses[None, :, None],
    )
    d["x0"][cloth.pinned] = 0.0

    eps = 1e-6
    numeric = (loss(dc.simulate(along(scene, d, eps))) - loss(dc.simulate(along(scene, d, -eps)))) / (2 * eps)
    analytic = sum(float(np.sum(getattr(grad, f) * v)) for f, v in d.items())
    contact = dc.simulate(scene).x[1:].min(axis=(0, 1))[2] < -0.02  # the cloth reaches the sphere
    assert contact
    assert abs(analytic - numeric) <= 1e-4 * abs(numeric), (analytic, numeric)


def tube(rows=12, cols=16, radius=0.2, height=0.4, seed=3):
    """A skirt: an irregularly triangulated tube, its top ring pinned."""
    rng = np.random.default_rng(seed)
    verts = []
    for i in range(rows):
        jitter = 0.0 if i in (0, rows - 1) else 0.3
        for j in range(cols):
            a = 2 * np.pi * (j + rng.uniform(-jitter, jitter)) / cols
            r = radius * (1 + 0.8 * i / (rows - 1))
            verts.append((r * np.cos(a), r * np.sin(a), -height * i / (rows - 1)))
    faces = []
    for i in range(rows - 1):
        for j in range(cols):
            a, b, c, e = i * cols + j, i * cols + (j + 1) % cols, (i + 1) * cols + j, (i + 1) * cols + (j + 1) % cols
            faces += [(a, b, e), (a, e, c)] if (i + j) % 2 else [(a, b, c), (b, e, c)]
    return np.array(verts), np.array(faces), np.arange(cols)


@pytest.mark.parametrize("fabric", sorted(dc.FABRICS))
def test_a_skirt_hangs_from_its_waist_in_every_fabric(fabric):
    verts, faces, waist = tube()
    scene = dc.Scene(dc.FABRICS[fabric].cloth(verts, faces, pinned=waist), steps=24, dt=1 / 24, solver="linearized")
    traj = dc.simulate(scene)
    assert np.isfinite(traj.x).all()
    assert np.allclose(traj.x[-1][waist], verts[waist])
    length0 = np.linalg.norm(verts[scene.cloth.tension_edges[:, 0]] - verts[scene.cloth.tension_edges[:, 1]], axis=1)
    x = traj.x[-1]
    strain = (
        np.linalg.norm(x[scene.cloth.tension_edges[:, 0]] - x[scene.cloth.tension_edges[:, 1]], axis=1) / length0 - 1
    )
    assert np.percentile(strain, 95) < 0.5  # it hangs, it does not tear apart
