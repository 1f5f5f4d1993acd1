"""The headless batch command: help, success, bad arguments and failures with exit codes."""

import json
import shutil

import numpy as np
import pytest

from conftest import REPO

SCENE = REPO / "sample_scenes" / "pinned_to_animated.blend"


@pytest.fixture
def cli(addon):
    from diffcloth.diffcloth_addon import cli
    return cli


def test_help(cli, capsys):
    assert cli.execute(["optimize", "--help"]) == 0
    assert "--max-iter" in capsys.readouterr().out


def test_success_writes_outputs(cli, tmp_path):
    scene = tmp_path / "scene.blend"
    shutil.copy(SCENE, scene)
    out, report, png = tmp_path / "out.blend", tmp_path / "r.json", tmp_path / "p.png"
    code = cli.execute(["optimize", str(scene), "--max-iter", "8", "--output", str(out), "--report", str(report),
                        "--preview", str(png)])
    assert code == 0
    data = json.loads(report.read_text())
    assert data["final_loss"] < 1e-3 * data["initial_loss"] and data["history"]
    # per keyframe the distances an artist reads, in mm: the target is reached
    for distances in data["keyframes_mm"].values():
        assert distances["mean_before"] > 1.0 and distances["mean_after"] < 0.1 * distances["mean_before"]
        assert distances["largest_after"] >= distances["mean_after"]
    assert data["max_control_g"] == 0.0  # stiffness only: no control forces
    assert out.stat().st_size > 0
    import bpy
    # the preview is Blender's render: the result in blue, the target's wireframe in red, nothing left behind
    assert len(bpy.data.scenes) == 1 and not [o for o in bpy.data.objects if o.users == 0]
    img = bpy.data.images.load(str(png))
    px = np.empty(img.size[0] * img.size[1] * 4, np.float32)
    img.pixels.foreach_get(px)
    px = px.reshape(-1, 4)
    assert img.size[0] == 420 * max(2, sum(len(frames) for frames in data["targets"].values()))
    blue = (px[:, 2] > px[:, 0] + 0.15) & (px[:, 2] > px[:, 1])
    red = (px[:, 0] > px[:, 1] + 0.25) & (px[:, 0] > px[:, 2] + 0.2)
    assert blue.sum() > 2000 and red.sum() > 100
    bpy.ops.wm.open_mainfile(filepath=str(out))
    keys = bpy.data.objects["Cloth"].data.shape_keys.key_blocks
    assert len([k for k in keys if k.name.startswith("DiffCloth_f")]) == 31


def test_stop_within_ends_the_run_there(cli, tmp_path):
    out, report = tmp_path / "out.blend", tmp_path / "r.json"
    assert cli.execute(["optimize", str(SCENE), "--stop-within", "1000", "--output", str(out), "--report",
                        str(report)]) == 0
    data = json.loads(report.read_text())  # the sample's keys are already within a metre
    assert data["reason"] == "within" and data["iterations"] == 0


@pytest.mark.parametrize("argv,code,message", [
    (["optimize", "--bogus"], 2, "unrecognized arguments"),
    (["frobnicate"], 2, "invalid choice"),
    (["optimize", "/nonexistent/scene.blend"], 1, "no such .blend"),
    (["optimize", str(SCENE), "--cloth", "Nope"], 1, "no object named 'Nope'"),
    (["optimize", str(SCENE), "--output", "/nonexistent/dir/out.blend"], 1, "cannot write the output"),
    (["optimize", str(SCENE), "--stop-within", "0"], 1, "--stop-within must be a positive distance"),
    (["optimize", str(SCENE), "--stop-within", "nan"], 1, "--stop-within must be a positive distance"),
])
def test_failures(cli, capsys, tmp_path, argv, code, message):
    assert cli.execute(argv) == code
    assert message in capsys.readouterr().err
    assert not list(tmp_path.iterdir())  # nothing left behind


def saved_variant(folder, edit):
    """The sample scene with `edit(bpy)` applied, saved under folder."""
    import bpy

    bpy.ops.wm.open_mainfile(filepath=str(SCENE))
    edit(bpy)
    path = folder / "variant.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    return path


def no_cloth(bpy):
    bpy.data.objects["Cloth"].diffcloth.role = "NONE"


def two_cloths(bpy):
    copy = bpy.data.objects["Cloth"].copy()
    copy.name = "Cloth.second"
    bpy.context.collection.objects.link(copy)


@pytest.mark.parametrize("edit,message", [(no_cloth, "no cloth: mark a mesh"),
                                          (two_cloths, "several cloths (Cloth, Cloth.second): make one active, or name one (--cloth NAME)")])
def test_scene_without_a_single_cloth(cli, capsys, tmp_path_factory, tmp_path, edit, message):
    scene = saved_variant(tmp_path_factory.mktemp("scene"), edit)
    report = tmp_path / "report.json"
    assert cli.execute(["optimize", str(scene), "--report", str(report)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]
    assert not list(tmp_path.iterdir())
