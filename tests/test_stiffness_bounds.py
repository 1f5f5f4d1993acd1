"""Every stiffness, mass and damping at its bounds (issue 37, item 4): the motion is right (a stiff
plate pinned at two corners swings down as a rigid one, a free one falls at g, a heavily damped one
sinks at g/c), or the scene is refused before the run naming the setting, its value and its limit."""

import numpy as np
import pytest

import diffcloth.core as dc
from diffcloth.core.model.scene import HINGE_DRAG_EXACT, BoundsError, hinge_drag

DT = 1 / 24  # the add-on's usual frame, one substep


def plate(n, solver, pinned=True, frames=24, fabric=None, **kw):
    """A 1 m square of n×n vertices, pinned at two corners of one edge (or free)."""
    verts, tris = dc.grid(n, n)
    cloth = (fabric or dc.FABRICS["cotton"]).cloth(verts, tris, pinned=[0, n - 1] if pinned else [])
    return dc.Scene(cloth, steps=frames, dt=DT, solver=solver, **kw)


def far_edge_drop(scene):
    """How far the edge opposite the pins has fallen at the last frame (m)."""
    x = dc.simulate(scene, keep_factors=False).x
    return -float(x[-1][scene.cloth.rest[:, 1] > 0.49, 2].mean())


def test_a_very_stiff_plate_swings_down_as_a_rigid_one():
    """Bending 3e3 N·m made Newton stall at its first step (a single-precision factor of a matrix
    3e7 times stiffer than its mass); it swings as a plate of 1 N·m, already rigid, does."""
    rigid = far_edge_drop(plate(16, "newton", fabric=dc.Fabric(0.15, 90.0, 1.0, 1.0)))
    assert 0.75 < rigid < 0.9  # about 56° down after a second
    assert far_edge_drop(plate(16, "newton", fabric=dc.Fabric(0.15, 90.0, 3e3, 1.0))) == pytest.approx(rigid, abs=0.01)


@pytest.mark.parametrize("solver", ["linearized", "newton"])
def test_bending_at_its_bound_swings_right_and_beyond_is_refused_by_name(solver):
    """Just under the limit the refusal names, the plate swings as Newton's stiff plate; beyond it,
    the scene is refused naming bending rigidity, its value and the limit."""
    with pytest.raises(BoundsError, match=r"bending rigidity 1e\+09 N·m is too stiff for this cloth's 9.1 cm cells "):
        plate(12, solver, fabric=dc.Fabric(0.15, 90.0, 1e9, 1.0))
    try:
        plate(12, solver, fabric=dc.Fabric(0.15, 90.0, 1e9, 1.0))
    except BoundsError as err:
        limit = float(str(err).split("at most ")[1].split(" ")[0])
    edge = far_edge_drop(plate(12, solver, fabric=dc.Fabric(0.15, 90.0, 0.9 * limit, 1.0)))
    rigid = far_edge_drop(plate(12, "newton", fabric=dc.Fabric(0.15, 90.0, 1.0, 1.0)))
    assert edge == pytest.approx(rigid, rel=0.1)
    with pytest.raises(BoundsError, match="bending rigidity"):
        plate(12, solver, fabric=dc.Fabric(0.15, 90.0, 1.1 * limit, 1.0))


@pytest.mark.parametrize("bending", [1e-3, 1.0])
def test_stiff_bending_swings_with_linearized_steps_as_with_newton(bending):
    """Where the linearized step's hinge matrix bounded to mesh edges would hold the cloth from
    swinging (Denim on 32²: the far edge 6% too low; bending 1 N·m: it hardly moved), the step takes
    the exact hinge matrix and swings as Newton's plate."""
    stiff = dc.Fabric(0.15, 90.0, bending, 1.0)
    fast = plate(32, "linearized", fabric=stiff)
    assert hinge_drag(fast) > HINGE_DRAG_EXACT and not fast.hinges_bounded
    assert far_edge_drop(fast) == pytest.approx(far_edge_drop(plate(32, "newton", fabric=stiff)), rel=0.06)
    assert plate(32, "linearized").hinges_bounded  # Cotton: the bound's narrower band


def test_a_stiff_free_plate_falls_at_g():
    """Implicit Euler's fall with air damping c: v ← (v + h·g)/(1 + h·c)."""
    scene = plate(16, "newton", pinned=False, fabric=dc.Fabric(0.15, 90.0, 3e3, 1.0))
    v, z = 0.0, 0.0
    for _ in range(scene.steps):
        v = (v - DT * 9.81) / (1 + DT * 1.0)
        z += DT * v
    assert np.allclose(dc.simulate(scene, keep_factors=False).x[-1][:, 2], z, atol=1e-6)


@pytest.mark.parametrize("solver", ["linearized", "newton"])
def test_stiff_stretch_light_cloth_and_hard_contact_are_refused_by_name(solver):
    plane = [dc.Plane((0.0, 0.0, -1.0), (0.0, 0.0, 1.0))]
    cases = [
        # a linearized step locks stretch this stiff (the plate swings a tenth of the way), and Newton's floor
        (
            dict(fabric=dc.Fabric(0.15, 1e7, 5e-6, 1.0)),
            r"stretch stiffness 1e\+07 N/m .*\((the linearized step locks|Newton's rounding floor)",
        ),
        # a nearly massless cloth is as stiff as a stiff one
        (dict(fabric=dc.Fabric(1e-9, 90.0, 5e-6, 1.0)), "density at least"),
        # contact stiffness counts in Newton's rounding floor only
        (
            dict(colliders=plane, contact_stiffness=1e13),
            r"contact_stiffness 1e\+13 N/m per kg" if solver == "newton" else None,
        ),
    ]
    for kw, message in cases:
        if message is None:
            plate(16, solver, **kw)
        else:
            with pytest.raises(BoundsError, match=message):
                plate(16, solver, **kw)


@pytest.mark.parametrize("solver", ["linearized", "newton"])
def test_hard_contact_that_is_accepted_holds_the_cloth(solver):
    scene = plate(
        8,
        solver,
        pinned=False,
        colliders=[dc.Plane((0.0, 0.0, -0.3), (0.0, 0.0, 1.0))],
        contact_stiffness=1e15 if solver == "linearized" else 1e9,
    )
    z = dc.simulate(scene, keep_factors=False).x[-1][:, 2]
    assert np.abs(z + 0.3).max() < 2e-3


@pytest.mark.parametrize("solver", ["linearized", "newton"])
@pytest.mark.parametrize("damping", [1e2, 1e8])
def test_heavy_air_damping_sinks_at_g_over_c(solver, damping):
    """No bound: any damping runs, at implicit Euler's terminal speed."""
    scene = plate(8, solver, pinned=False, fabric=dc.Fabric(0.15, 90.0, 5e-6, damping))
    v, z = 0.0, 0.0
    for _ in range(scene.steps):
        v = (v - DT * 9.81) / (1 + DT * damping)
        z += DT * v
    assert np.allclose(dc.simulate(scene, keep_factors=False).x[-1][:, 2], z, rtol=1e-6, atol=1e-12)


@pytest.mark.parametrize("solver", ["linearized", "newton"])
@pytest.mark.parametrize("n", [8, 64])
def test_every_fabric_preset_is_within_bounds(solver, n):
    verts, tris = dc.grid(n, n)
    for fabric in dc.FABRICS.values():
        dc.Scene(
            fabric.cloth(verts, tris, pinned=[0, n - 1]),
            steps=24,
            dt=DT,
            solver=solver,
            colliders=[dc.Plane((0.0, 0.0, -1.0), (0.0, 0.0, 1.0))],
        )


def test_springs_cloth_is_named_by_its_own_arguments():
    verts, tris = dc.grid(12, 12)
    cloth = dc.Cloth(verts, tris, mass=0.15, k_tension=20.0, k_bending=1e9, pinned=[0, 11])
    with pytest.raises(BoundsError, match=r"bending rigidity|k_bending") as err:
        dc.Scene(cloth, steps=2, dt=DT, solver="linearized")
    assert "mass at least" in str(err.value)
    # a design an optimizer tries is left to the simulation
    ok = dc.Scene(cloth.replace(k_bending=1e-4), steps=2, dt=DT, solver="linearized")
    assert ok.replace(cloth=cloth).cloth is cloth


# ---- through the add-on --------------------------------------------------------------------------------


@pytest.fixture
def addon_cloth(blank):
    bpy = pytest.importorskip("bpy")
    from test_addon import grid_cloth

    blank.scene.frame_start, blank.scene.frame_end = 1, 4
    return bpy, grid_cloth(fabric=True)


@pytest.mark.parametrize(
    "setting, value, expected",
    [
        ("bending", 1e9, "cloth 'Cloth': Bending Stiffness 1e+09 N·m is too stiff"),
        ("stretch", 1e5, "cloth 'Cloth': Stretch Stiffness 1e+05 N/m is too stiff"),
        ("density", 1e-4, "Density at least"),
    ],
)
def test_the_artist_sees_the_setting_by_its_panel_name_and_the_scene_stays(addon_cloth, setting, value, expected):
    from test_careless_input import refused

    bpy, cloth = addon_cloth
    setattr(cloth.diffcloth, setting, value)
    refused(bpy.context, bpy.ops.diffcloth.simulate, expected)
    from diffcloth.diffcloth_addon import convert
    from diffcloth.diffcloth_addon.errors import InputError

    with pytest.raises(InputError, match="Substeps"):
        convert.gather(bpy.context, need_targets=False)


def test_contact_stiffness_beyond_the_converged_solvers_floor_is_refused_by_name(addon_cloth):
    from test_careless_input import refused

    bpy, cloth = addon_cloth
    cloth.diffcloth.solver = "NEWTON"
    bpy.ops.mesh.primitive_plane_add(size=2.0, location=(0.0, 0.0, -0.3))
    bpy.context.active_object.diffcloth.role = "PLANE"
    cloth.diffcloth.contact_stiffness = 1e12
    refused(bpy.context, bpy.ops.diffcloth.simulate, "cloth 'Cloth': Contact Stiffness 1e+12 N/m per kg is too stiff")
    cloth.diffcloth.contact_stiffness = 1e5
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}


def test_optimize_checks_the_converged_solvers_bounds_whatever_the_preview_solver(addon_cloth):
    """The preview's linearized steps take a contact stiffness that Optimize's converged steps cannot
    resolve: Simulate & Bake runs, Optimize is refused by name before it starts."""
    from test_careless_input import add_target, refused

    bpy, cloth = addon_cloth
    bpy.ops.mesh.primitive_plane_add(size=2.0, location=(0.0, 0.0, -0.3))
    bpy.context.active_object.diffcloth.role = "PLANE"
    cloth.diffcloth.contact_stiffness = 1e12
    bpy.context.view_layer.objects.active = cloth
    assert cloth.diffcloth.solver == "LINEARIZED" and bpy.ops.diffcloth.simulate() == {"FINISHED"}
    add_target(bpy.context, cloth, 4)
    bpy.context.view_layer.objects.active = cloth
    refused(
        bpy.context,
        bpy.ops.diffcloth.optimize,
        "cloth 'Cloth': Contact Stiffness 1e+12 N/m per kg is too stiff for this cloth's",
    )
