"""The headless batch command: help, success, bad arguments and failures with exit codes."""

import json
import os
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
    code = cli.execute(
        [
            "optimize",
            str(scene),
            "--max-iter",
            "8",
            "--output",
            str(out),
            "--report",
            str(report),
            "--preview",
            str(png),
        ]
    )
    assert code == 0
    data = json.loads(report.read_text())
    assert data["exit_code"] == 0 and data["final_loss"] < 1e-3 * data["initial_loss"] and data["history"]
    # per keyframe the distances an artist reads, in mm: the target is reached
    for distances in data["keyframes_mm"].values():
        assert distances["mean_before"] > 1.0 and distances["mean_after"] < 0.1 * distances["mean_before"]
        assert distances["largest_after"] >= distances["mean_after"]
    assert data["max_control_g"] == 0.0  # stiffness only: no control forces
    assert data["unreachable_keys"] == {}  # keys posed from a simulation are within the fabric's stretch
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


def test_the_output_of_a_carried_cloth_keeps_its_caches_under_its_own_name(cli, tmp_path):
    """The character's cloths play Mesh Cache files: the output, saved under a temporary name then
    renamed, plays them from diffcloth_cache/<its own name>/, beside it; the file read keeps its
    own (what it played before is not overwritten)."""
    scene = tmp_path / "shot.blend"
    shutil.copy(REPO / "sample_scenes" / "character.blend", scene)
    out = tmp_path / "out.blend"
    assert cli.execute(["optimize", str(scene), "--max-iter", "1", "--output", str(out)]) == 0
    # not under its temporary name, and the file read keeps (here: has) no cache of the output's
    assert [p.name for p in (tmp_path / "diffcloth_cache").iterdir()] == ["out"]
    import bpy

    bpy.ops.wm.open_mainfile(filepath=str(out))
    for name in ("Cape", "Skirt"):
        path = bpy.path.abspath(bpy.data.objects[name].modifiers["DiffCloth"].filepath)
        assert path == str(tmp_path / "diffcloth_cache" / "out" / f"{name}.pc2") and os.path.isfile(path)


def test_a_preview_that_cannot_be_drawn_costs_nothing_else(cli, capsys, monkeypatch, tmp_path):
    """The picture is drawn last and alone: when it fails, the optimized .blend and the report are
    still written, the report and one stderr line name the failure, and the exit code is 3; the
    summary shows the shot's distances beside it."""
    from diffcloth.diffcloth_addon import preview

    def broken(path, *args):
        open(path, "wb").close()  # a half-written picture must not be left behind either
        raise RuntimeError("no GPU context")

    monkeypatch.setattr(preview, "write", broken)
    out, report, png = tmp_path / "out.blend", tmp_path / "sh010.json", tmp_path / "p.png"
    argv = ["optimize", str(SCENE), "--max-iter", "2", "--output", str(out), "--report", str(report)]
    assert cli.execute(argv + ["--preview", str(png)]) == 3
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "diffcloth: error: the preview could not be drawn: RuntimeError: no GPU context "
        "(the optimized .blend and the report are saved)"
    ]
    data = json.loads(report.read_text())
    assert data["exit_code"] == 3 and data["preview_error"].endswith("RuntimeError: no GPU context")
    assert data["iterations"] >= 1 and data["keyframes_mm"] and out.stat().st_size > 0
    assert not png.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["out.blend", "sh010.json"]
    assert cli.execute(["summary", str(report)]) == 1
    row = capsys.readouterr().out.splitlines()[2]
    assert row.startswith("| sh010 | frame ") and "| 3 | ok: " in row and "preview could not be drawn" in row


def test_stop_within_ends_the_run_there(cli, tmp_path):
    out, report = tmp_path / "out.blend", tmp_path / "r.json"
    assert (
        cli.execute(["optimize", str(SCENE), "--stop-within", "1000", "--output", str(out), "--report", str(report)])
        == 0
    )
    data = json.loads(report.read_text())  # the sample's keys are already within a metre
    assert data["reason"] == "within" and data["iterations"] == 0


@pytest.mark.parametrize(
    "argv,code,message",
    [
        (["optimize", "--bogus"], 2, "unrecognized arguments"),
        (["frobnicate"], 2, "invalid choice"),
        (["optimize", "/nonexistent/scene.blend"], 1, "no such .blend"),
        (["optimize", str(SCENE), "--cloth", "Nope"], 1, "no object named 'Nope'"),
        (["optimize", str(SCENE), "--output", "/nonexistent/dir/out.blend"], 1, "cannot write the output"),
        (["optimize", str(SCENE), "--report", "/nonexistent/dir/r.json"], 1, "cannot write the report"),
        (["optimize", str(SCENE), "--stop-within", "0"], 1, "--stop-within must be a positive distance"),
        (["optimize", str(SCENE), "--stop-within", "nan"], 1, "--stop-within must be a positive distance"),
    ],
)
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
    bpy.context.scene.diffcloth.together = False  # else they run together


@pytest.mark.parametrize(
    "edit,message",
    [
        (no_cloth, "no cloth: mark a mesh"),
        (two_cloths, "several cloths (Cloth, Cloth.second): make one active, or name one (--cloth NAME)"),
    ],
)
def test_scene_without_a_single_cloth(cli, capsys, tmp_path_factory, tmp_path, edit, message):
    scene = saved_variant(tmp_path_factory.mktemp("scene"), edit)
    report = tmp_path / "report.json"
    assert (
        cli.execute(
            [
                "optimize",
                str(scene),
                "--report",
                str(report),
                "--output",
                str(tmp_path / "out.blend"),
                "--preview",
                str(tmp_path / "p.png"),
            ]
        )
        == 1
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]
    # the failure's report alone (for summary), no partial .blend or preview
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]
    data = json.loads(report.read_text())
    assert data.pop("timings_s")["total"] >= 0
    assert data == {"exit_code": 1, "error": err[0].removeprefix("diffcloth: error: "), "blend": str(scene)}


def write_report(path, **fields):
    path.write_text(json.dumps(fields))
    return str(path)


def test_summary_merges_reports(cli, capsys, tmp_path):
    ok = write_report(
        tmp_path / "sh010.json",
        exit_code=0,
        reason="within",
        iterations=7,
        timings_s={"total": 12.34},
        keyframes_mm={
            "30": dict(mean_before=9, largest_before=20, mean_after=0.456, largest_after=1.5),
            "5": dict(mean_before=3, largest_before=4, mean_after=0.1, largest_after=0.25),
        },
    )
    old = write_report(
        tmp_path / "sh015.json",
        final_loss=1.0,
        reason="converged",
        iterations=2,  # before exit_code
        timings_s={"total": 3.0},
        keyframes_mm={},
        unreachable_keys={"40": {"target": "pose", "stretch_largest": 0.9}},
    )
    failed = write_report(
        tmp_path / "sh020.json",
        exit_code=1,
        error="simulation diverged at frame 12 | try substeps",
        timings_s={"total": 0.5},
    )
    (tmp_path / "sh030.json").write_text("{not json")
    summary = tmp_path / "summary.md"
    args = [ok, old, failed, str(tmp_path / "sh030.json"), str(tmp_path / "sh040.json"), "--output"]
    assert cli.execute(["summary", *args, str(summary)]) == 1
    out, err = capsys.readouterr()
    table = [
        "| shot | keys: mean (largest) mm | iterations | time s | exit code | status |",
        "| --- | --- | --- | --- | --- | --- |",
        "| sh010 | frame 5 0.10 (0.25), frame 30 0.46 (1.50) | 7 | 12.3 | 0 | ok: every key within Stop Within |",
        "| sh015 |  | 2 | 3.0 | 0 | ok: converged; frame 40 out of the cloth's reach |",
        "| sh020 |  |  | 0.5 | 1 | failed: simulation diverged at frame 12 \\| try substeps |",
        "| sh030 |  |  |  |  | unreadable report: Expecting property name enclosed in double quotes: "
        "line 1 column 2 (char 1) |",
        "| sh040 |  |  |  |  | no report |",
    ]
    assert out.splitlines() == table and summary.read_text().splitlines() == table
    assert err.splitlines() == ["diffcloth: error: 3 of 5 shots failed or have no report: sh020, sh030, sh040"]

    assert cli.execute(["summary", *args, str(tmp_path / "summary.csv")]) == 1
    assert (tmp_path / "summary.csv").read_text().splitlines()[:3] == [
        "shot,keys: mean (largest) mm,iterations,time s,exit code,status",
        'sh010,"frame 5 0.10 (0.25), frame 30 0.46 (1.50)",7,12.3,0,ok: every key within Stop Within',
        "sh015,,2,3.0,0,ok: converged; frame 40 out of the cloth's reach",
    ]
    assert cli.execute(["summary", *args, str(tmp_path / "summary.json")]) == 1
    data = json.loads((tmp_path / "summary.json").read_text())
    assert (data["succeeded"], data["total"]) == (2, 5)
    assert data["shots"][0] == {
        "shot": "sh010",
        "keys_mm": {"5": [0.1, 0.25], "30": [0.456, 1.5]},
        "iterations": 7,
        "time_s": 12.34,
        "exit_code": 0,
        "status": "ok: every key within Stop Within",
        "report": ok,
    }
    assert [s["exit_code"] for s in data["shots"]] == [0, 0, 1, None, None]
    capsys.readouterr()

    # a folder: its .json reports (not the summary it writes); every shot succeeded: exit code 0
    folder = tmp_path / "good"
    folder.mkdir()
    for name in ("sh010.json", "sh015.json"):
        shutil.copy(tmp_path / name, folder / name)
    (folder / "summary.json").write_text("{}")
    assert cli.execute(["summary", str(folder), "--output", str(folder / "summary.json")]) == 0
    assert [s["shot"] for s in json.loads((folder / "summary.json").read_text())["shots"]] == ["sh010", "sh015"]
    assert capsys.readouterr().err == ""
    assert not [p for p in tmp_path.rglob("*.tmp")]


@pytest.mark.parametrize(
    "argv,code,message",
    [
        (["summary"], 2, "the following arguments are required: REPORT_OR_FOLDER"),
        (["summary", "r.json", "--output", "summary.txt"], 2, "must end in .md, .csv or .json"),
        (["summary", "r.json", "--output", "/nonexistent/dir/s.md"], 1, "cannot write the summary"),
        (["summary", "{tmp}"], 1, "no .json reports in the folder"),
    ],
)
def test_summary_failures(cli, capsys, tmp_path, argv, code, message):
    assert cli.execute([a.replace("{tmp}", str(tmp_path)) for a in argv]) == code
    err = capsys.readouterr().err
    assert message in err and err.count("diffcloth: error:") == 1
    assert not list(tmp_path.iterdir())
