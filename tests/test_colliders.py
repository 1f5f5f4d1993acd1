"""Mesh colliders and friction (core.contact.colliders, core.contact.penalty): closest points, sides, no tunnelling,
Coulomb friction on a slope, exact gradients with a moving mesh and with friction."""

import math

import numpy as np
import pytest
from test_tangent import paired

import diffcloth.core as dc
from diffcloth.core.contact.colliders import _edge_slots
from diffcloth.core.contact.compiled import closest_on_triangles

INCLINE = math.radians(30)
TURN = np.array([[1, 0, 0], [0, math.cos(INCLINE), -math.sin(INCLINE)], [0, math.sin(INCLINE), math.cos(INCLINE)]])
DOWNHILL = TURN @ np.array([0.0, -1.0, 0.0])


def uv_sphere(radius, segments=32, rings=16):
    """A closed UV sphere mesh, outward winding (Blender's primitive's layout)."""
    verts = [(0, 0, radius)]
    for i in range(1, rings):
        th = math.pi * i / rings
        verts += [
            (
                radius * math.sin(th) * math.cos(2 * math.pi * j / segments),
                radius * math.sin(th) * math.sin(2 * math.pi * j / segments),
                radius * math.cos(th),
            )
            for j in range(segments)
        ]
    verts.append((0, 0, -radius))
    tris = [(0, 1 + j, 1 + (j + 1) % segments) for j in range(segments)]
    for i in range(rings - 2):
        for j in range(segments):
            a, b = 1 + i * segments + j, 1 + i * segments + (j + 1) % segments
            tris += [(a, a + segments, b + segments), (a, b + segments, b)]
    last, ring = len(verts) - 1, 1 + (rings - 2) * segments
    tris += [(last, ring + (j + 1) % segments, ring + j) for j in range(segments)]
    return np.array(verts, dtype=float), np.array(tris)


def box(size, center=(0.0, 0.0, 0.0)):
    """A closed box mesh (size (3,)), outward winding."""
    s = np.asarray(size) / 2
    verts = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], float) * s + center
    quads = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
    return verts, np.array([t for a, b, c, d in quads for t in ((a, b, c), (a, c, d))])


def test_closest_points_are_no_farther_than_any_point_of_the_triangle():
    rng = np.random.default_rng(0)
    a, b, c, p = (rng.normal(size=(500, 3)) for _ in range(4))
    q, bary = closest_on_triangles(p, a, b, c)
    assert np.allclose(bary.sum(axis=1), 1) and (bary >= -1e-12).all()
    assert np.allclose(bary[:, :1] * a + bary[:, 1:2] * b + bary[:, 2:] * c, q)
    uv = rng.uniform(size=(3000, 2))
    uv = np.where(uv.sum(axis=1, keepdims=True) > 1, 1 - uv, uv)
    samples = (1 - uv.sum(axis=1))[:, None, None] * a + uv[:, :1, None] * b + uv[:, 1:, None] * c
    sampled = np.linalg.norm(samples - p, axis=2).min(axis=0)
    assert (np.linalg.norm(p - q, axis=1) <= sampled + 1e-12).all()


def thin_bar(radius=0.03, length=1.0, segments=32):
    """A capped cylinder along x: its sides are triangles as long as the bar and a few mm wide."""
    a = np.linspace(0.0, 2 * math.pi, segments, endpoint=False)
    ring = np.column_stack([np.zeros(segments), radius * np.cos(a), radius * np.sin(a)])
    verts = np.concatenate([ring - [length / 2, 0, 0], ring + [length / 2, 0, 0]])
    i = np.arange(segments)
    j = (i + 1) % segments
    fan = np.arange(1, segments - 1)
    tris = np.concatenate(
        [
            np.column_stack([i, j, segments + j]),
            np.column_stack([i, segments + j, segments + i]),
            np.column_stack([np.zeros_like(fan), fan + 1, fan]),
            np.column_stack([np.full_like(fan, segments), segments + fan, segments + fan + 1]),
        ]
    )
    return verts, tris


@pytest.mark.parametrize("shape", ["squashed sphere", "thin bar", "far away", "with a floor"])
def test_broad_phase_finds_what_every_triangle_would(shape):
    """MeshCollider.closest (the compiled grid search, rings of cells outward from each point)
    against all triangles, per-point radii and none: triangles of many sizes, long thin ones,
    points far outside the grid, and a floor 200 times the sphere's triangles in the same mesh
    (tried for every point, outside the grid)."""
    rng = np.random.default_rng(2)
    dirs = rng.normal(size=(600, 3))
    if shape == "squashed sphere":
        verts, tris = uv_sphere(0.25)
        verts = verts * [1.0, 1.6, 0.7]  # triangles of many sizes
        pts = dirs / np.linalg.norm(dirs, axis=1)[:, None] * rng.uniform(0.15, 0.35, (600, 1)) * [1.0, 1.6, 0.7]
    elif shape == "thin bar":
        verts, tris = thin_bar()
        pts = rng.uniform([-0.6, -0.1, -0.1], [0.6, 0.1, 0.1], (600, 3))
    elif shape == "far away":
        verts, tris = uv_sphere(0.25)
        pts = dirs * [3.0, 0.2, 0.2] + [5.0, 0.0, 0.0]  # metres beyond the grid, one side
    else:
        verts, tris = uv_sphere(0.25)
        floor = np.array([[-5.0, -5.0, -0.3], [5.0, -5.0, -0.3], [5.0, 5.0, -0.3], [-5.0, 5.0, -0.3]])
        tris = np.concatenate([tris, len(verts) + np.array([[0, 1, 2], [0, 2, 3]])])
        verts = np.concatenate([verts, floor])
        pts = dirs / np.linalg.norm(dirs, axis=1)[:, None] * rng.uniform(0.15, 0.35, (600, 1))
    mesh = dc.MeshCollider(verts, tris)
    q_all, _ = closest_on_triangles(
        np.repeat(pts, len(tris), axis=0), *(np.tile(verts[tris[:, k]], (len(pts), 1)) for k in range(3))
    )
    exact = np.linalg.norm(np.repeat(pts, len(tris), axis=0) - q_all, axis=1).reshape(len(pts), -1).min(axis=1)
    radius = rng.uniform(0.0, 0.2, len(pts)) * (1 if shape != "far away" else 40)
    for r in (radius, None):
        mask, q, tri, bary = mesh.closest(pts, verts, r)
        assert (mask == (exact <= radius)).all() if r is not None else mask.all()
        assert mask.any()
        assert np.allclose(np.linalg.norm(pts[mask] - q, axis=1), exact[mask], atol=1e-12)
        corners = verts[tris[tri]]
        assert np.allclose(np.einsum("pk,pkj->pj", bary, corners), q, atol=1e-12)  # q on its own triangle


def test_points_off_the_grid_or_not_finite_find_what_they_should():
    """A point exactly on a shared corner gets the lowest of its triangles; a NaN point (a
    diverging trial) none; a radius of 0 only the surface's own points."""
    verts, tris = box((1, 1, 1))
    mesh = dc.MeshCollider(verts, tris)
    pts = np.array([verts[7], [np.nan, 0.0, 0.0], [0.0, 0.0, 0.5], [0.0, 0.0, 0.6]])
    mask, q, tri, _ = mesh.closest(pts, verts, np.array([0.1, 0.1, 0.0, 0.0]))
    assert mask.tolist() == [True, False, True, False]
    touching = np.flatnonzero((tris == 7).any(axis=1))
    assert tri[0] == touching.min() and np.allclose(q[0], verts[7])


def test_signed_distance_to_a_sphere_mesh_is_the_sphere_within_its_facets():
    verts, tris = uv_sphere(0.25)
    mesh = dc.MeshCollider(verts, tris, one_sided=True)
    pts = np.random.default_rng(1).normal(size=(2000, 3)) * 0.2
    exact = np.linalg.norm(pts, axis=1) - 0.25
    signed = mesh.signed(pts, 0.0)
    depth = 0.25 * (1 - math.cos(math.pi / 16))  # the deepest a facet lies under the sphere
    assert np.abs(signed - exact).max() <= depth
    clear = np.abs(exact) > depth
    assert (np.sign(signed[clear]) == np.sign(exact[clear])).all()


def test_bad_mesh_colliders_are_named():
    verts, tris = box((1, 1, 1))
    with pytest.raises(ValueError, match="no triangles"):
        dc.MeshCollider(verts, [])
    with pytest.raises(ValueError, match="NaN or infinite"):
        dc.MeshCollider(np.where(verts == verts[0], np.nan, verts), tris)
    with pytest.raises(ValueError, match="triangle 1 has zero area"):
        dc.MeshCollider(verts, [[0, 1, 2], [0, 0, 1]])
    with pytest.raises(ValueError, match="out of range"):
        dc.MeshCollider(verts, [[0, 1, 9]])
    with pytest.raises(ValueError, match="friction must be non-negative"):
        dc.MeshCollider(verts, tris, friction=-0.1)
    with pytest.raises(ValueError, match="thickness must be non-negative"):
        dc.Sphere((0, 0, 0), 1.0, thickness=-1.0)


def slope_scene(mu, solver="newton", frames=48):
    """A 10 cm patch resting on a 30° incline (a two-triangle mesh), no air damping."""
    quad = np.array([[-20, -20, 0], [20, -20, 0], [20, 20, 0], [-20, 20, 0.0]]) @ TURN.T
    verts, tris = dc.grid(6, 6, 0.1)
    verts = (verts + [0, 0, 0.0015]) @ TURN.T
    cloth = dc.Fabric(0.15, 90.0, 5e-6, 0.0).cloth(verts, tris)
    return dc.Scene(
        cloth,
        steps=frames,
        dt=1 / 24,
        solver=solver,
        colliders=[dc.MeshCollider(quad, [[0, 1, 2], [0, 2, 3]], friction=mu)],
    )


@pytest.mark.parametrize("solver", ["newton", "linearized"])
def test_coulomb_friction_on_a_slope(solver):
    """μ = 0.7 holds the patch on a 30° incline (tan 30° = 0.58): once landed, it moves less than
    1 cm in 2 s; with μ = 0.3 it slides at g·(sin 30° − μ·cos 30°) = 2.36 m/s²."""
    held = dc.simulate(slope_scene(0.7, solver, frames=60)).x.mean(axis=1)
    assert abs((held[-1] - held[12]) @ DOWNHILL) < 0.01  # the last 2 s
    sliding = dc.simulate(slope_scene(0.3, solver)).x.mean(axis=1) @ DOWNHILL
    t = np.arange(len(sliding)) / 24
    acceleration = np.polyfit(t[12:], np.gradient(sliding, t)[12:], 1)[0]
    expected = 9.81 * (math.sin(INCLINE) - 0.3 * math.cos(INCLINE))
    assert acceleration == pytest.approx(expected, rel=0.05)


@pytest.mark.parametrize("target", ["quad", "board", "closed"])
def test_a_dropped_cloth_stays_on_the_side_it_came_from(target):
    """Dropped at 24 fps from 40 cm (12 cm a frame on impact) onto a zero-thickness quad
    (two-sided: it keeps a 2 mm shell), a 1 cm board and a closed sphere mesh (one-sided, no
    thickness: the penalty's zone lies under the surface): no vertex ever gets through, nor
    deeper than 3 mm into the surface."""
    if target == "quad":
        mesh = dc.MeshCollider([[-0.3, -0.3, 0], [0.3, -0.3, 0], [0.3, 0.3, 0], [-0.3, 0.3, 0]], [[0, 1, 2], [0, 2, 3]])
    elif target == "board":
        mesh = dc.MeshCollider(*box((0.6, 0.6, 0.01), (0, 0, -0.005)), one_sided=True)
    else:
        verts, tris = uv_sphere(0.2)
        mesh = dc.MeshCollider(verts - [0, 0, 0.2], tris, one_sided=True)
    verts, tris = dc.grid(12, 12, 0.4)
    cloth = dc.FABRICS["cotton"].cloth(verts + [0.05, 0.0, 0.4], tris)
    for solver in ("newton", "linearized"):
        traj = dc.simulate(dc.Scene(cloth, steps=24, dt=1 / 24, solver=solver, colliders=[mesh]))
        x = traj.step_x
        if target == "closed":
            height = np.array([mesh.signed(xs, 0.0) for xs in x])
        else:
            over = (np.abs(x[:, :, 0]) < 0.3) & (np.abs(x[:, :, 1]) < 0.3)  # above the quad or board
            height = x[:, :, 2][over]
        assert height.min() > (0.0 if target == "quad" else -0.003), (solver, height.min())
        assert (x[-1][:, 2] < 0.3).all()  # it did fall onto it


def gradient_scene(mu, moving):
    """A small cloth landing on a roof of two 30° slopes (a convex mesh), optionally moving."""
    roof = np.array([[-1, -1, -0.3], [1, -1, -0.3], [1, 0, 0.28], [-1, 0, 0.28], [1, 1, -0.3], [-1, 1, -0.3]])
    tris = [[0, 1, 2], [0, 2, 3], [3, 2, 4], [3, 4, 5]]
    steps = 8
    if moving:
        roof = roof[None] + np.linspace(0, 1, steps + 1)[:, None, None] * np.array([0.02, 0.01, 0.005])
    verts, t = dc.grid(4, 4, 0.1)
    on_slope = np.array([0.02, -0.3, 0.28 - 0.3 * math.tan(INCLINE)])  # a point of the −y slope
    verts = verts @ TURN.T + on_slope + 0.003 * (TURN @ [0.0, 0.0, 1.0])  # 3 mm above it
    rng = np.random.default_rng(2)
    n_tension = dc.Cloth(verts, t).n_tension
    cloth = dc.Cloth(verts, t, mass=0.01, k_tension=rng.uniform(20, 30, n_tension), k_bending=1e-5, damping=0.2)
    return dc.Scene(
        cloth,
        steps=steps,
        dt=1 / 24,
        tol=1e-12,
        contact_stiffness=1e4,
        colliders=[dc.MeshCollider(roof, tris, friction=mu, thickness=0.002)],
        v0=rng.normal(size=(16, 3)) * 0.05,
        forces=np.zeros((steps, 16, 3)),
    )


@pytest.mark.parametrize(
    "mu,moving",
    [(0.9, False), (0.3, False), (0.9, True), (0.3, True)],
    ids=["sticking", "sliding", "sticking-moving", "sliding-moving"],
)
def test_gradients_with_a_mesh_collider_and_friction(mu, moving):
    scene = gradient_scene(mu, moving)
    traj = dc.simulate(scene)
    assert traj.stats.converged.all()
    in_contact = np.isfinite(scene.colliders[0].signed(traj.x[-1], 1.0, 0.01)).all()
    assert in_contact
    rng = np.random.default_rng(3)
    loss = dc.KeyframeLoss({8: traj.x[8] + 0.003 * rng.normal(size=(16, 3)), 4: traj.x[4]})
    _, grad = dc.value_and_grad(scene, loss)
    cloth = scene.cloth
    directions = dict(
        k_tension=rng.normal(size=cloth.n_tension) * cloth.k_tension,
        x0=rng.normal(size=(16, 3)) * 0.01,
        v0=rng.normal(size=(16, 3)),
        forces=rng.normal(size=(8, 16, 3)) * 0.01,
    )

    def moved(eps, field):
        if field == "k_tension":
            return scene.replace(cloth=cloth.replace(k_tension=cloth.k_tension + eps * directions[field]))
        if field == "friction":
            return scene.replace(colliders=[scene.colliders[0].replace(friction=mu + eps)])
        if field == "contact_stiffness":
            return scene.replace(contact_stiffness=scene.contact_stiffness * (1 + eps))
        if field == "damping":
            return scene.replace(cloth=cloth.replace(damping=cloth.damping * (1 + eps)))
        return scene.replace(**{field: getattr(scene, field) + eps * directions[field]})

    analytic = {f: float(np.sum(getattr(grad, f) * d)) for f, d in directions.items()}
    analytic.update(
        friction=float(grad.friction[0]),
        contact_stiffness=grad.contact_stiffness * scene.contact_stiffness,
        damping=grad.damping * cloth.damping,
    )
    for field, value in analytic.items():
        numeric = (loss(dc.simulate(moved(1e-6, field))) - loss(dc.simulate(moved(-1e-6, field)))) / 2e-6
        # + the differences' rounding floor: held from its first contact, a sticking patch soon stops,
        # and its damping gradient (~1e-11) is at it
        assert abs(value - numeric) <= 1e-4 * abs(numeric) + 1e-12, (field, value, numeric)


def test_friction_tangents_match_the_adjoint():
    scene = gradient_scene(0.5, True)
    traj = dc.simulate(scene)
    rng = np.random.default_rng(4)
    a = dict(
        friction=np.array([0.7]),
        x0=rng.normal(size=(16, 3)) * 0.01,
        v0=rng.normal(size=(16, 3)),
        contact_stiffness=100.0,
        forces=rng.normal(size=(8, 16, 3)) * 0.01,  # friction's normal force holds against them too
    )
    forward, reverse = paired(scene, traj, a, rng)
    assert forward == pytest.approx(reverse, rel=1e-8)


def test_linearized_gradients_over_meshes_are_refused_by_name():
    scene = gradient_scene(0.3, False).replace(solver="linearized")
    loss = dc.KeyframeLoss({8: np.zeros((16, 3))})
    with pytest.raises(ValueError, match="solver='newton'"):
        dc.value_and_grad(scene, loss)


def test_friction_is_an_optimizable_design_parameter():
    """The slope's μ recovered from where the patch is after a second."""
    truth = slope_scene(0.35, frames=24)
    loss = dc.KeyframeLoss({24: dc.simulate(truth).x[24]})
    start = truth.replace(colliders=[truth.colliders[0].replace(friction=0.2)])
    result = dc.optimize(start, loss, [dc.Friction()], max_iter=20)
    assert result.params["friction"] == pytest.approx(0.35, rel=1e-3)


def test_friction_scale_has_exact_gradients_and_is_recovered():
    """FrictionScale, one factor on every collider's μ (the add-on's Friction): dL/dθ by central
    differences, and the slope's μ 0.35 recovered from 0.2 (a factor 1.75) by where the patch is."""
    truth = slope_scene(0.35, frames=24)
    loss = dc.KeyframeLoss({24: dc.simulate(truth).x[24]})
    start = truth.replace(colliders=[truth.colliders[0].replace(friction=0.2)])
    check = dc.check_gradient(start, loss, [dc.FrictionScale()], eps=1e-6, components=[0])
    assert abs(check[0]["numeric"]) > 1e-6 and check[0]["rel_error"] < 1e-5, check
    result = dc.optimize(start, loss, [dc.FrictionScale()], max_iter=20)
    assert result.params["friction_scale"] == pytest.approx(1.75, rel=1e-3)
    frictionless = start.replace(colliders=[start.colliders[0].replace(friction=0.0)])
    with pytest.raises(ValueError, match="no collider has friction"):
        dc.optimize(frictionless, loss, [dc.FrictionScale()])


def test_friction_costs_newton_few_iterations():
    """The artist scene at 24×24 draped over a mesh sphere with converged steps (Optimize's): with
    friction (μ 0.5) Newton needs at most 1.5× the iterations per step it needs without."""
    verts, tris = dc.grid(24, 24, size=1.0)
    top = np.flatnonzero(np.isclose(verts[:, 1], verts[:, 1].max()))
    cloth = dc.FABRICS["cotton"].cloth(verts, tris, pinned=[top[0], top[-1]])
    ball, faces = uv_sphere(0.25)
    iterations = {}
    for mu in (0.0, 0.5):
        sphere = dc.MeshCollider(ball + [0.0, 0.1, -0.45], faces, one_sided=True, friction=mu)
        traj = dc.simulate(dc.Scene(cloth, steps=36, dt=1 / 24, solver="newton", colliders=[sphere]))
        assert traj.stats.converged.all()
        iterations[mu] = traj.stats.iterations.mean()
    assert iterations[0.5] <= 1.5 * iterations[0.0], iterations


def test_inside_at_start_counts_the_vertices_deeper_than_each_tolerance():
    """inside_at_start: per collider, the positions deeper inside it than the tolerance (a
    sequence of tolerances: a count for each, from one measurement of the depths)."""
    ball, floor = dc.Sphere([0.0, 0.0, 0.0], 0.5), dc.Plane([0.0, 0.0, -1.0], [0.0, 0.0, 1.0])
    x = np.array([[0.0, 0.0, 0.45], [0.0, 0.0, 0.2], [0.0, 0.0, 0.9], [0.0, 0.0, -1.03]])
    assert dc.inside_at_start([ball, floor], x, 0.01) == [2, 1]
    assert dc.inside_at_start([ball, floor], x, (0.01, 0.1, 0.4)) == [[2, 1, 0], [1, 0, 0]]


def test_pseudonormals_of_the_features_asked_are_those_of_every_feature():
    """A mesh's vertex and edge pseudonormals, computed for a few features, equal the sums over
    the whole mesh (angle-weighted face normals per vertex, the two faces' per edge)."""
    verts, tris = uv_sphere(0.3, 8, 5)
    verts, tris = np.asarray(verts, float), np.asarray(tris)
    mesh = dc.MeshCollider(verts, tris, one_sided=True)
    normals = mesh._normals(verts)
    face = normals.face
    corner = verts[tris]
    vertex = np.zeros((len(verts), 3))
    for t in range(len(tris)):
        for k in range(3):
            a, b = corner[t, (k + 1) % 3] - corner[t, k], corner[t, (k + 2) % 3] - corner[t, k]
            angle = np.arccos(np.clip(a @ b / np.linalg.norm(a) / np.linalg.norm(b), -1, 1))
            vertex[tris[t, k]] += angle * face[t]
    slots, n_edges = _edge_slots(tris)
    edge = np.zeros((n_edges, 3))
    for t in range(len(tris)):
        for j in range(3):
            edge[slots[t, j]] += face[t]
    ids = np.array([5, 0, 5, len(verts) - 1])
    np.testing.assert_allclose(normals.vertex(ids), vertex[ids], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(
        normals.edge(np.array([3, 0, n_edges - 1])), edge[[3, 0, n_edges - 1]], rtol=1e-12, atol=1e-12
    )


def test_a_moving_mesh_answers_each_pose_as_a_mesh_held_there():
    """A moving mesh's broad phase is kept for the pose it was built for: asked again and again at
    the same time, then at others, it answers as a mesh held still at each (a stale tree would not)."""
    verts, tris = uv_sphere(0.3)
    rng = np.random.default_rng(3)
    poses = np.array([verts * (1 + 0.3 * k) + [0.1 * k, 0.0, 0.0] for k in range(4)])
    moving = dc.MeshCollider(poses, tris, one_sided=True)
    x = rng.uniform(-0.6, 0.8, size=(300, 3))
    for t in (0.0, 0.0, 1.5, 1.5, 3.0, 0.5):
        frozen = moving.frozen(t)
        assert np.array_equal(moving.signed(x, t), frozen.signed(x, 0.0))
        assert np.array_equal(moving.signed(x, t, 0.05), frozen.signed(x, 0.0, 0.05))


def test_a_missing_compiled_library_is_named(monkeypatch, tmp_path):
    """A checkout or an extension without this platform's compiled queries says which file is
    missing and how to build it, at the first query."""
    from diffcloth.core.contact import compiled

    monkeypatch.setattr(compiled, "NATIVE", tmp_path)
    compiled.library.cache_clear()
    try:
        with pytest.raises(RuntimeError, match=r"missing \(.*\): run scripts/build_native.py"):
            dc.MeshCollider(*box((1, 1, 1))).signed(np.zeros((1, 3)), 0.0)
    finally:
        compiled.library.cache_clear()
