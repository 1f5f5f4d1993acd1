"""Bad input gets a ValueError that names the problem, never a crash deep inside numpy."""

import numpy as np
import pytest

import diffcloth.core as dc

VERTS, TRIS = dc.grid(3, 3)


@pytest.mark.parametrize(
    "verts,faces,match",
    [
        (VERTS, np.zeros((0, 3), int), "no triangles"),
        (VERTS, [], "no triangles"),
        (VERTS, [[0, 1, 9]], "out of range"),
        (VERTS, [[0, 1]], "at least 3"),
        (np.where(np.arange(27).reshape(9, 3) == 4, np.nan, VERTS), TRIS, "NaN or infinite"),
        (np.where(np.arange(27).reshape(9, 3) == 4, np.inf, VERTS), TRIS, "NaN or infinite"),
        (np.array([[0, 0, 0], [1, 0, 0], [2, 0, 0.0]]), [[0, 1, 2]], "zero area"),
        (
            np.array([[0, 0, 0], [1, 0, 0], [1, 0, 0], [0, 1, 0.0]]),
            [[0, 1, 3], [1, 2, 3]],
            "zero area|zero rest length",
        ),
        (np.vstack([VERTS, [[5, 5, 5]]]), TRIS, "loose vertex"),
        (np.zeros((4, 2)), [[0, 1, 2]], r"shape \(n, 3\)"),
    ],
    ids=["empty array", "empty list", "index", "short face", "nan", "inf", "collinear", "duplicate", "loose", "2d"],
)
def test_bad_meshes(verts, faces, match):
    with pytest.raises(ValueError, match=match):
        dc.Cloth(verts, faces)


@pytest.mark.parametrize("bending", ["hinge", "springs"])
def test_degenerate_hinge(bending):
    # the second triangle of the hinge across edge 0-1 is flat (its third vertex on the edge's line)
    verts = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [2, 0, 0.0]])
    with pytest.raises(ValueError, match="triangle 1 has zero area"):
        dc.Cloth(verts, [[0, 1, 2], [1, 0, 3]], bending=bending)


def test_non_manifold_edge():
    verts = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, -1, 0], [0, 0, 1.0]])
    with pytest.raises(ValueError, match="non-manifold"):
        dc.Cloth(verts, [[0, 1, 2], [0, 1, 3], [0, 1, 4]])


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(pinned=[9]), "pin index 9 is out of range"),
        (dict(pinned=[-1]), "pin index -1 is out of range"),
        (dict(mass=0.0), "mass must be positive"),
        (dict(mass=-1.0), "mass must be positive"),
        (dict(k_tension=0.0), "k_tension must be positive"),
        (dict(k_bending=-0.1), "bending rigidity k_bending must be positive"),
        (dict(k_bending=0.0), "bending rigidity k_bending must be positive"),
        (dict(k_bending=np.nan), "bending rigidity k_bending must be positive and finite"),
        (dict(k_bending=np.full(8, np.inf)), "bending rigidity k_bending must be positive and finite"),
        (dict(k_bending=np.ones(16)), r"bending rigidity k_bending must be a scalar or have shape \(8,\)"),
        (dict(k_bending=-0.1, bending="springs"), "k_bending must be positive"),
        (dict(bending="shells"), "bending must be one of 'hinge', 'springs', got 'shells'"),
        (dict(k_tension=np.ones(3)), r"k_tension must be a scalar or have shape \(16,\)"),
        (dict(damping=-1.0), "damping must be non-negative"),
    ],
)
def test_bad_cloth_parameters(kwargs, match):
    with pytest.raises(ValueError, match=match):
        dc.Cloth(VERTS, TRIS, **kwargs)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(dt=0.0), "dt must be positive"),
        (dict(dt=np.nan), "dt must be positive"),
        (dict(steps=0), "positive integer"),
        (dict(substeps=0), "substeps must be a positive integer"),
        (dict(contact_stiffness=0.0), "contact stiffness must be positive"),
        (dict(contact_thickness=-0.1), "thickness must be non-negative"),
        (dict(x0=np.zeros((4, 3))), r"x0 must have shape \(9, 3\)"),
        (dict(x0=np.full((9, 3), np.nan)), "x0 has a NaN"),
        (dict(v0=np.zeros((2, 3))), "v0 must have shape"),
        (dict(forces=np.zeros((3, 9, 3))), "forces must have shape"),
        (dict(pin_path=np.zeros((5, 2, 3))), r"pin_path must have shape \(11, 0, 3\)"),
        (dict(colliders=[dc.Sphere(np.zeros((4, 3)), 0.1)]), "one pose per frame"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_bad_scene_parameters(kwargs, match):
    kwargs = {"steps": 10, **kwargs}
    with pytest.raises(ValueError, match=match):
        dc.Scene(dc.Cloth(VERTS, TRIS), **kwargs)


def test_bad_colliders():
    with pytest.raises(ValueError, match="radius must be positive"):
        dc.Sphere((0, 0, 0), 0.0)
    with pytest.raises(ValueError, match="radius must be positive"):
        dc.Sphere((0, 0, 0), -1.0)
    with pytest.raises(ValueError, match="normal must be non-zero"):
        dc.Plane((0, 0, 0), (0, 0, 0))
    with pytest.raises(ValueError, match="center has a NaN"):
        dc.Sphere((0, np.nan, 0), 1.0)


def test_bad_losses():
    with pytest.raises(ValueError, match="empty"):
        dc.KeyframeLoss({})
    with pytest.raises(ValueError, match=r"frame 3 has shape \(9,\)"):
        dc.KeyframeLoss({3: np.zeros(9)})
    with pytest.raises(ValueError, match="frame 2 has a NaN"):
        dc.KeyframeLoss({2: np.full((9, 3), np.nan)})
    with pytest.raises(ValueError, match="weights given for frames without targets"):
        dc.KeyframeLoss({2: np.zeros((9, 3))}, weights={5: 1.0})
    scene = dc.Scene(dc.Cloth(VERTS, TRIS), steps=4)
    with pytest.raises(ValueError, match="target at frame 2 has 4 vertices, the cloth has 9"):
        dc.value_and_grad(scene, dc.KeyframeLoss({2: np.zeros((4, 3))}))
    with pytest.raises(ValueError, match="frame 7 is outside the simulated frames 0..4"):
        dc.value_and_grad(scene, dc.KeyframeLoss({7: np.zeros((9, 3))}))
    with pytest.raises(ValueError, match=r"vertex weights for frame 2 have shape \(3,\)"):
        dc.value_and_grad(scene, dc.KeyframeLoss({2: np.zeros((9, 3))}, vertex_weights=np.ones(3)))


def test_bad_parameterizations():
    with pytest.raises(ValueError, match="kind must be 'tension' or 'bending'"):
        dc.SpringStiffness("shear")
    with pytest.raises(ValueError, match="two distinct 3D points"):
        dc.InitialRotation((0, 0, 0), (0, 0, 0))
    with pytest.raises(ValueError, match="regularizer weights must be non-negative"):
        dc.ControlForces(magnitude=-1.0)
    with pytest.raises(ValueError, match="unknown parameter"):
        dc.make_param("velocity")
