"""Several cloths in one run (Cloths Together), through the operators in the real Blender: they
collide with one another both ways, are optimized together with keys on any of them, and each
keeps its own bake and design."""

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")

from test_addon import evaluated, grid_cloth  # noqa: E402
from test_careless_input import refused  # noqa: E402

FRAMES = 13


def skirt_and_cape(blank, cape_z=0.03):
    """A 0.5 m sheet held at its corners (the skirt) and a 0.2 m one dropped on it (the cape), Cotton,
    at an artist's frame rate."""
    scene = blank.scene
    scene.frame_start, scene.frame_end, scene.render.fps = 1, FRAMES, 24
    skirt = grid_cloth("Skirt", n=9, size=0.5, fabric=True, pins=False)
    skirt.vertex_groups.new(name="corners").add([0, 8, 72, 80], 1.0, "REPLACE")
    skirt.diffcloth.pin_group = "corners"
    cape = grid_cloth("Cape", n=5, size=0.2, fabric=True, pins=False, location=(0.0, 0.0, cape_z))
    return skirt, cape


def key_shifted(scene, name, frame, shift):
    """New Target from Cloth of cloth `name` at `frame`, its copy moved by shift (m); back to frame 1."""
    scene.frame_set(frame)
    assert bpy.ops.diffcloth.new_target(cloth=name) == {"FINISHED"}
    target = next(o for o in scene.objects if o.diffcloth.role == "TARGET")
    target.data.vertices.foreach_set("co", (np.array([v.co for v in target.data.vertices]) + shift).ravel())
    target.data.update()  # else Blender 4.2 evaluates the mesh as it was
    scene.frame_set(1)
    return target


def motion(scene, obj):
    """The object's evaluated world positions at every frame (frames, n, 3)."""
    out = []
    for f in range(1, FRAMES + 1):
        scene.frame_set(f)
        out.append(evaluated(obj))
    scene.frame_set(1)
    return np.array(out)


def test_cloths_run_together_collide_both_ways(blank):
    """Simulate & Bake with no cloth named runs both: the cape lands on the skirt and stays there,
    and the skirt sags under it further than it does alone."""
    scene = blank.scene
    skirt, cape = skirt_and_cape(blank)
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    low, up = motion(scene, skirt), motion(scene, cape)
    below = np.argmin(np.linalg.norm(up[-1][:, None, :2] - low[-1][None, :, :2], axis=2), axis=1)
    assert (up[:, :, 2].min(axis=1) > low[:, :, 2].min(axis=1)).all()
    assert (up[-1, :, 2] - low[-1, below, 2]).min() > -0.005  # on the skirt (its nearest vertex)
    assert bpy.ops.diffcloth.simulate(cloth="Skirt") == {"FINISHED"}  # named: alone, the cape not a collider
    alone = motion(scene, skirt)
    assert low[-1, :, 2].min() < alone[-1, :, 2].min() - 1e-3  # the cape's weight bears on it


def test_cloths_optimized_together_keep_their_own_designs(blank):
    """A key on the cape alone: both cloths are optimized in one run, each keeps its bake and
    design, and a plain Simulate & Bake of the result reproduces the optimized motion."""
    scene = blank.scene
    skirt, cape = skirt_and_cape(blank)
    settings = scene.diffcloth
    settings.opt_tension, settings.opt_velocity, settings.max_iterations = True, True, 4
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    blank.view_layer.objects.active = cape
    key_shifted(scene, "Cape", 9, [0.0, 0.0, 0.02])
    assert skirt.get("diffcloth_motion_solver") == "newton"  # re-baked together with converged steps
    assert bpy.ops.diffcloth.optimize() == {"FINISHED"}
    stored = {o.name: o["diffcloth_result"].to_dict() for o in (skirt, cape)}
    assert list(stored["Cape"]["keyframes"]) == ["9"] and not stored["Skirt"]["keyframes"]
    before, _, after, _ = stored["Cape"]["keyframes"]["9"]
    assert after < 0.8 * before
    assert len(stored["Skirt"]["k_tension"]) == len(skirt.data.edges)
    assert len(stored["Cape"]["v0"]) == 3 * len(cape.data.vertices)
    # the keyed cape got its own stiffness and velocity; the skirt, without keys, kept its own
    assert stored["Skirt"]["tension_setting"] == pytest.approx(skirt.diffcloth.stretch)
    assert not np.any(stored["Skirt"]["v0"])
    assert stored["Cape"]["tension_setting"] != pytest.approx(cape.diffcloth.stretch) or np.any(stored["Cape"]["v0"])
    assert "forces" not in stored["Skirt"] or not np.any(stored["Skirt"]["forces"])
    optimized = motion(scene, skirt), motion(scene, cape)
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    for was, obj in zip(optimized, (skirt, cape)):
        assert np.abs(motion(scene, obj) - was).max() < 1e-3


@pytest.mark.parametrize(
    "kind,message",
    [
        ("other substeps", "cloths 'Skirt' and 'Cape' run together, but their Substeps"),
        ("a target naming no cloth", "target 'Target' names no Cloth, and the scene's cloths run together"),
        ("through one another", "pass through one another at frame 1"),
    ],
)
def test_cloths_that_cannot_run_together_are_refused_by_name(blank, kind, message):
    skirt, cape = skirt_and_cape(blank, cape_z=0.0 if kind == "through one another" else 0.03)
    op = bpy.ops.diffcloth.simulate
    if kind == "other substeps":
        cape.diffcloth.substeps = 2
    elif kind == "a target naming no cloth":
        target = grid_cloth("Target", n=5, size=0.2, fabric=True, pins=False)
        target.diffcloth.role = "TARGET"
        target.keyframe_insert("location", frame=5)
        op = bpy.ops.diffcloth.optimize
    elif kind == "through one another":
        cape.rotation_euler = (0.5, 0.0, 0.0)
    refused(blank, op, message)


def test_a_cloth_blender_does_not_evaluate_is_left_out_with_a_warning(blank):
    """Disabled in viewports, the cape is no part of the run (as Blender's physics leaves it), and
    the warning says so; the skirt runs alone."""
    from diffcloth.diffcloth_addon import convert

    skirt, cape = skirt_and_cape(blank)
    cape.hide_viewport = True
    setup = convert.gather(blank, need_targets=False)
    assert setup.cloth_name == "Skirt" and not setup.parts
    assert any("cloth 'Cape' is disabled in viewports" in w for w in setup.warnings)
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}


def test_a_cloth_on_a_simulation_mesh_runs_together_with_one_on_its_own(blank):
    """The skirt simulated on a 40-vertex proxy, the cape on its own mesh: together they collide,
    keys on the proxied skirt are reached through its embedding, and each cloth's bake is its own
    render mesh."""
    scene = blank.scene
    skirt, cape = skirt_and_cape(blank)
    skirt.diffcloth.proxy_vertices = 40
    settings = scene.diffcloth
    settings.opt_tension, settings.opt_velocity, settings.max_iterations = True, True, 4
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    low, up = motion(scene, skirt), motion(scene, cape)
    assert low.shape[1] == len(skirt.data.vertices) and (up[:, :, 2].min(axis=1) > low[:, :, 2].min(axis=1)).all()
    key_shifted(scene, "Skirt", 9, [0.0, 0.0, -0.01])
    assert bpy.ops.diffcloth.optimize() == {"FINISHED"}
    before, _, after, _ = skirt["diffcloth_result"]["keyframes"]["9"]
    assert after < 0.8 * before and not cape["diffcloth_result"]["keyframes"]


def test_refine_carries_the_design_of_cloths_run_together_to_their_own_meshes(blank):
    """The skirt on a proxy with Refine, the cape on its own mesh: after the joined run on the proxy,
    Refine goes on with both cloths on their own meshes; each stores its own design (the skirt's
    refined, where Refine started), and a plain Simulate & Bake reproduces the refined motion."""
    scene = blank.scene
    skirt, cape = skirt_and_cape(blank)
    skirt.diffcloth.proxy_vertices, skirt.diffcloth.refine_iterations = 40, 2
    settings = scene.diffcloth
    settings.opt_tension, settings.opt_velocity, settings.max_iterations = True, True, 3
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    key_shifted(scene, "Skirt", 9, [0.0, 0.0, -0.01])
    assert bpy.ops.diffcloth.optimize() == {"FINISHED"}
    stored = {o.name: o["diffcloth_result"].to_dict() for o in (skirt, cape)}
    assert stored["Skirt"]["refined"] and "refine_start" in stored["Skirt"] and not stored["Cape"]["refined"]
    before, _, after, _ = stored["Skirt"]["keyframes"]["9"]
    assert after < 0.8 * before and not stored["Cape"]["keyframes"]
    assert len(stored["Skirt"]["k_tension"]) == len(skirt.data.edges)  # its own mesh's springs
    optimized = motion(scene, skirt), motion(scene, cape)
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    for was, obj in zip(optimized, (skirt, cape)):
        assert np.abs(motion(scene, obj) - was).max() < 1e-3


def test_the_sidebar_shows_the_cloths_run_together(blank):
    from test_addon import draw_all

    skirt, cape = skirt_and_cape(blank)
    labels = []
    assert "together" in draw_all(blank, labels)
    assert "Cloths: Skirt, Cape" in labels
    blank.scene.diffcloth.together = False  # the active cloth alone, as before
    labels = []
    draw_all(blank, labels)
    assert "Cloth: Cape" in labels and "Cloths: Skirt, Cape" not in labels


def test_the_preview_draws_a_cloth_without_keys_as_simulated(blank):
    """The batch command's picture: at a key on the cape, the skirt (on its Simulation Mesh) is drawn
    where it is, not at the joined loss's placeholder."""
    from diffcloth.diffcloth_addon import cli, convert

    skirt, cape = skirt_and_cape(blank)
    skirt.diffcloth.proxy_vertices = 40
    target = grid_cloth("Target", n=5, size=0.2, fabric=True, pins=False)
    target.diffcloth.role, target.diffcloth.cloth = "TARGET", cape
    target.keyframe_insert("location", frame=5)
    setup = convert.gather(blank)
    shown = np.ones((setup.n_render, 3))
    drawn = cli._keyed(setup.loss, 4, shown)
    n = len(skirt.data.vertices)
    assert (drawn[:n] == 1).all() and np.allclose(drawn[n:], setup.loss.targets[4][n:]) and not (drawn[n:] == 1).all()


def test_the_batch_command_reports_each_cloth_and_its_unreachable_key(blank, tmp_path, capsys):
    """Headless, both cloths run together; a key stretching the cape to twice its size is told by
    its target's name, the skirt's untouched."""
    import json

    from diffcloth.diffcloth_addon import cli

    skirt, cape = skirt_and_cape(blank)
    blank.scene.diffcloth.max_iterations = 2
    target = grid_cloth("Stretched", n=5, size=0.4, fabric=True, pins=False, location=(0.0, 0.0, 0.03))
    target.diffcloth.role, target.diffcloth.cloth = "TARGET", cape
    target.keyframe_insert("location", frame=7)
    path, report = tmp_path / "shot.blend", tmp_path / "report.json"
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    assert cli.execute(["optimize", str(path), "--report", str(report)]) == 0
    data = json.loads(report.read_text())
    assert data["cloth"] == "Skirt, Cape" and data["cloths"] == ["Skirt", "Cape"]
    assert [k["target"] for k in data["unreachable_keys"].values()] == ["Stretched"]
    assert "target 'Stretched' at frame 7 asks 'Cape' to stretch" in capsys.readouterr().out


@pytest.mark.parametrize("basis,move", [("KEYS", True), ("FRAMES", False)])
def test_control_forces_steer_cloths_run_together(blank, basis, move):
    """Control Forces with both cloths run together, keyed on the skirt: the skirt's forces are its
    own (none push the cape, which has no key), and Move Pins moves the skirt's pins its key poses
    off where they are held."""
    scene = blank.scene
    skirt, cape = skirt_and_cape(blank)
    s = scene.diffcloth
    s.opt_tension, s.opt_forces, s.force_basis, s.force_move_pins, s.max_iterations = False, True, basis, move, 2
    target = grid_cloth("Shifted", n=9, size=0.5, fabric=True, pins=False, location=(0.0, 0.05, 0.0))
    target.diffcloth.role, target.diffcloth.cloth = "TARGET", skirt
    target.keyframe_insert("location", frame=7)
    assert bpy.ops.diffcloth.optimize() == {"FINISHED"}
    skirt_forces = np.array(skirt["diffcloth_result"]["forces"]).reshape(FRAMES - 1, -1, 3)
    assert skirt_forces.shape[1] == len(skirt.data.vertices) and np.abs(skirt_forces).max() > 0
    cape_forces = cape["diffcloth_result"].get("forces")  # the cape has no key: no force pushes it
    assert cape_forces is None or not np.any(cape_forces)
    assert ("pin_offset" in skirt["diffcloth_result"]) == move


def test_apply_makes_the_design_of_cloths_optimized_together_their_own(blank):
    """Apply Optimized Stiffness on one cloth of a together run applies the run's design (here the
    wind's strength) to every cloth of it, so the next run still takes them together (applied to
    one alone, their Field Weights differed and the next run was refused)."""
    from test_wind_addon import wind_field

    scene = blank.scene
    skirt, cape = skirt_and_cape(blank)
    wind_field(strength=2.0)
    settings = scene.diffcloth
    settings.opt_tension, settings.opt_wind_fields, settings.max_iterations = False, True, 2
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    key_shifted(scene, "Cape", 9, [0.0, 0.03, 0.0])
    assert bpy.ops.diffcloth.optimize() == {"FINISHED"}
    scale = cape["diffcloth_result"]["wind_scale"]
    assert scale > 1.0 and skirt["diffcloth_result"]["wind_scale"] == pytest.approx(scale)
    blank.view_layer.objects.active = cape
    assert bpy.ops.diffcloth.apply_result(cloth="Cape") == {"FINISHED"}
    assert cape.diffcloth.wind_weight == pytest.approx(scale) and skirt.diffcloth.wind_weight == pytest.approx(scale)
    assert "wind_scale" not in skirt["diffcloth_result"]
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}  # still together
    assert skirt.get("diffcloth_motion_solver") and cape.get("diffcloth_motion_solver")


def test_a_cloth_without_self_collisions_may_start_through_itself_beside_another(blank):
    """The cape made of two flaps crossing each other (a garment modelled that way), Self
    Collisions off: run together with the skirt, it simulates (only the pairs the run keeps apart
    are refused); with Self Collisions on, it is refused by name."""
    scene = blank.scene
    skirt, _ = skirt_and_cape(blank)
    bpy.data.objects.remove(bpy.data.objects["Cape"])
    flat = np.array([(x, y, 0.0) for y in np.linspace(-0.1, 0.1, 3) for x in np.linspace(-0.1, 0.1, 3)])
    upright = flat[:, [0, 2, 1]] - [0.0, 0.0, 0.05]
    quads = [(3 * r + c, 3 * r + c + 1, 3 * r + c + 4, 3 * r + c + 3) for r in range(2) for c in range(2)]
    mesh = bpy.data.meshes.new("Cape")
    mesh.from_pydata(
        list(map(tuple, np.r_[flat, upright] + [0.0, 0.0, 0.2])), [], quads + [tuple(i + 9 for i in q) for q in quads]
    )
    cape = bpy.data.objects.new("Cape", mesh)
    scene.collection.objects.link(cape)
    cape.diffcloth.role = "CLOTH"
    assert cape.diffcloth.use_self_collision is False
    assert bpy.ops.diffcloth.simulate() == {"FINISHED"}
    assert motion(scene, cape)[-1, :, 2].mean() < 0.19  # it fell
    cape.diffcloth.use_self_collision = True
    refused(blank, bpy.ops.diffcloth.simulate, "cloth 'Cape' passes through itself at frame 1")
    assert skirt.diffcloth.role == "CLOTH"
