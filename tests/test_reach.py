"""Keys out of the fabric's reach: core.key_reach finds what a key asks of the fabric's stretch and
how close the cloth can come; the add-on tells the artist and colours the target."""

import numpy as np
import pytest

import diffcloth.core as dc
from diffcloth.core.design.reach import edge_strains, nearest_within
from diffcloth.core.model.mesh import edges as mesh_edges


@pytest.fixture(scope="module")
def hanging():
    """A 12×12 Cotton cloth hung by two corners for 20 frames: its motion and triangles."""
    verts, tris = dc.grid(12, 12, size=0.5)
    top = np.flatnonzero(np.isclose(verts[:, 1], verts[:, 1].max()))
    cloth = dc.FABRICS["cotton"].cloth(verts, tris, pinned=[top[0], top[-1]])
    return dc.simulate(dc.Scene(cloth, steps=20, dt=1 / 24)).x, tris


def lifted(x, height=0.15, radius=0.06):
    """x with a bump lifted as proportional editing lifts it (Gaussian falloff), and its centre."""
    centre = int(np.argmin(np.linalg.norm(x - x.mean(axis=0), axis=1)))
    w = np.exp(-np.sum((x - x[centre]) ** 2, axis=1) / (2 * radius**2))
    return x + w[:, None] * [0.0, 0.0, height], centre


def turned(x, degrees):
    a = np.radians(degrees)
    rot = np.array([[np.cos(a), -np.sin(a), 0], [np.sin(a), np.cos(a), 0], [0, 0, 1]])
    return (x - x.mean(axis=0)) @ rot.T + x.mean(axis=0) + [0.05, 0.0, 0.02]


def test_poses_of_the_motion_moved_as_a_whole_are_within_reach(hanging):
    x, tris = hanging
    reach = dc.key_reach(tris, x, {10: turned(x[10], 30.0), 20: x[20]})
    for f, r in reach.items():
        assert r.reachable and r.closest == (0.0, 0.0) and not r.vertex_excess.any()
        assert r.demand == pytest.approx(edge_strains(x[f], *_rest(x, tris)).max(), rel=1e-9)


def _rest(x, tris):
    edges, _ = mesh_edges(tris)
    return edges, np.linalg.norm(x[0][edges[:, 1]] - x[0][edges[:, 0]], axis=1)


def test_a_lifted_bump_is_out_of_reach_and_located(hanging):
    x, tris = hanging
    key, centre = lifted(x[20])
    r = dc.key_reach(tris, x, {20: key})[20]
    assert not r.reachable and r.demand > r.fabric and r.demand_p95 < r.demand
    assert r.closest[1] > 0.005 and r.closest[0] < r.closest[1]
    # the excess sits on the bump: at its slopes, not on the far edges of the cloth
    far = np.linalg.norm(x[20] - x[20][centre], axis=1) > 0.2
    assert r.vertex_excess[~far].max() > 0.5 and r.vertex_excess[far].max() < 0.05 * r.vertex_excess.max()


def test_the_nearest_pose_within_a_stretch_is_feasible_and_nearest(hanging):
    """The projection keeps every edge within its length (to the penalty's 10⁻⁵ of the move), and
    no feasible pose tried is nearer: the motion's own frame, and blends of it with the result
    (the feasible set is convex)."""
    x, tris = hanging
    key, _ = lifted(x[20])
    edges, rest = _rest(x, tris)
    allowed = np.maximum(edge_strains(x[20], edges, rest), 0.02)
    near = nearest_within(key, edges, (1 + allowed) * rest)
    length = np.linalg.norm(near[edges[:, 1]] - near[edges[:, 0]], axis=1)
    moved = np.linalg.norm(near - key, axis=1).max()
    assert moved > 0.01 and (length - (1 + allowed) * rest).max() < 1e-4 * moved
    best = np.sum((near - key) ** 2)
    for t in (0.0, 0.25, 0.5, 0.9):
        other = t * near + (1 - t) * x[20]
        assert np.sum((other - key) ** 2) >= best * (1 - 1e-6)


def test_a_key_inside_a_collider_is_out_of_reach_and_located(hanging):
    """The same pose with part of it inside a sphere: that part is named, by collider, with its
    depth; the sphere's thickness counts, and a pose outside it is within reach."""
    x, tris = hanging
    key = x[20]
    low = key[:, 2] < np.percentile(key[:, 2], 20)
    centre = key[low].mean(axis=0)
    scene = dc.Scene(
        dc.Cloth(x[0], tris), steps=20, colliders=[dc.Plane((0, 0, -5.0), (0, 0, 1)), dc.Sphere(centre, 0.08)]
    )
    r = dc.key_reach(tris, x, {20: key}, scene=scene)[20]
    inside = np.linalg.norm(key - centre, axis=1) < 0.08 - 0.005
    assert not r.reachable and set(r.inside) == {1} and r.inside[1][0] == int(inside.sum()) > 0
    assert np.array_equal(r.vertex_inside, inside) and 0.005 < r.inside[1][1] <= 0.08
    away = scene.replace(colliders=[dc.Sphere(centre + [0, 0, -1.0], 0.08)])
    assert dc.key_reach(tris, x, {20: key}, scene=away)[20].reachable


def _on_a_slope(friction, degrees=30.0):
    """A 10×10 Cotton cloth laid at rest on a plane sloping `degrees` with Coulomb's μ `friction`,
    the scene, and a motion that misses the key by 0.5 m (the cloth held above it)."""
    verts, tris = dc.grid(10, 10, size=0.4)
    a = np.radians(degrees)
    normal = np.array([0.0, -np.sin(a), np.cos(a)])
    rot = np.array([[1, 0, 0], [0, np.cos(a), -np.sin(a)], [0, np.sin(a), np.cos(a)]])
    key = (verts - verts.mean(axis=0)) @ rot.T + 0.006 * normal  # 1 mm beyond the plane's 5 mm
    cloth = dc.FABRICS["cotton"].cloth(key, tris)
    plane = dc.Plane((0, 0, 0), normal, friction=friction)
    scene = dc.Scene(cloth, steps=12, dt=1 / 24, colliders=[plane], contact_thickness=0.005)
    motion = np.repeat(key[None] + [0.0, 0.0, 0.5], 13, axis=0)
    return scene, tris, key, motion


def test_a_key_resting_where_friction_cannot_hold_it_is_told():
    """On a 30° slope, μ = 0.2 lets the placed cloth slide (g·(sin − μ·cos)·t²/2 ≈ 10 cm in 0.25 s):
    every vertex slides, on the plane; μ = 1 holds it; a key the motion reaches, or one resting
    on nothing, is not placed."""
    scene, tris, key, motion = _on_a_slope(0.2)
    r = dc.key_reach(tris, motion, {12: key}, scene=scene, placed=(motion, 0))[12]
    assert not r.reachable and set(r.slides) == {0} and r.vertex_slides.all()
    assert r.slides[0][0] == len(key) and 0.05 < r.slides[0][1] < 0.2
    assert not r.inside and r.closest[1] <= 0.005  # the pose itself is fine: only friction fails
    held, tris, key, motion = _on_a_slope(1.0)
    r = dc.key_reach(tris, motion, {12: key}, scene=held, placed=(motion, 0))[12]
    assert r.reachable and not r.slides and not r.vertex_slides.any()
    reached = np.repeat(key[None], 13, axis=0)
    assert dc.key_reach(tris, reached, {12: key}, scene=scene, placed=(reached, 0))[12].reachable
    lifted = key + [0.0, 0.0, 0.3]
    assert dc.key_reach(tris, motion, {12: lifted}, scene=scene, placed=(motion, 0))[12].reachable


def test_a_placed_key_keeps_the_other_cloths_and_pins_where_the_motion_has_them():
    """In a scene of two cloths, the keyed one second (first = 100), the key is placed among the
    scene's motion at its frame: the same answer as alone, whichever pose the scene starts in."""
    scene, tris, key, motion = _on_a_slope(0.2)
    other = key + [0.0, 0.0, 1.0]  # the first cloth, held 1 m above the slope at that frame
    both = scene.replace(cloth=dc.join([scene.cloth, scene.cloth]), x0=np.concatenate([key, key]) + [3.0, 0, 0], v0=0.0)
    scene_motion = np.concatenate([np.repeat(other[None], 13, axis=0), motion], axis=1)
    r = dc.key_reach(tris, motion, {12: key}, scene=both, placed=(scene_motion, 100))[12]
    assert set(r.slides) == {0} and r.slides[0][0] == len(key) and r.vertex_slides.all()
