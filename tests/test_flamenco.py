"""The Flamenco job type (flamenco/diffcloth_optimize.js): compiled in V8 (mini-racer) against a shim of
Flamenco's job-compiler API, its tasks' command lines as a Worker would run them, and those command
lines run here through the batch command, then the summary."""

import json
import os
import shlex
import shutil
import sys

import pytest
from conftest import REPO

py_mini_racer = pytest.importorskip("py_mini_racer")

JOB_TYPE_FILE = REPO / "flamenco" / "diffcloth_optimize.js"

# Flamenco's job compiler globals, reproduced from its Go source (projects.blender.org/studio/flamenco, 3.9-dev):
# - author.Task, author.Command, task.addCommand, task.addDependency, job.addTask:
#   internal/manager/job_compilers/author.go (goja lower-cases the Go names: scripts.go, newGojaVM with
#   UncapFieldNameMapper); AddTask and AddCommand append copies (a task changed after addTask is not in the job);
# - path.basename/dirname/join/stem: internal/manager/job_compilers/js_path.go -> pkg/crosspath/crosspath.go
#   (Go's path package, then backslashes to slashes);
# - print: internal/manager/job_compilers/js_globals.go.
SHIM = r"""
var __taskCount = 0;
const author = {
    Task(name, taskType) {
        name = String(name).trim();
        taskType = String(taskType).trim();
        if (name == "") throw "author.Task(name, type): name is required";
        if (taskType == "") throw "author.Task(name, type): type is required";
        return {uuid: "task-" + (++__taskCount), name: name, type: taskType, priority: 50, commands: [], dependencies: [],
                addCommand(cmd) { this.commands.push(Object.assign({}, cmd)); },
                addDependency(dep) { this.dependencies.push(dep); }};
    },
    Command(name, parameters, totalStepCount) {
        return {name: name, parameters: parameters, totalStepCount: totalStepCount || 0};
    },
};
function __toSlash(p) { return p.split("\\").join("/"); }
function __clean(p) {  // Go's path.Clean
    if (p == "") return ".";
    const rooted = p[0] == "/", out = [];
    for (const part of p.split("/")) {
        if (part == "" || part == ".") continue;
        if (part == "..") {
            if (out.length > 0 && out[out.length - 1] != "..") out.pop();
            else if (!rooted) out.push("..");
            continue;
        }
        out.push(part);
    }
    const cleaned = (rooted ? "/" : "") + out.join("/");
    return cleaned == "" ? "." : cleaned;
}
function __base(p) {  // Go's path.Base
    if (p == "") return ".";
    p = p.replace(/\/+$/, "");
    return p == "" ? "/" : p.slice(p.lastIndexOf("/") + 1);
}
const path = {
    basename(p) { return __base(__toSlash(p)); },
    dirname(p) {
        if (p == "") return ".";
        const slashed = __toSlash(p), dir = slashed.slice(0, slashed.lastIndexOf("/") + 1);
        return dir == "" ? "." : dir.length > 1 ? dir.slice(0, -1) : dir;
    },
    join(...elems) {
        const parts = elems.filter((e) => e != "");
        return parts.length == 0 ? "" : __toSlash(__clean(parts.join("/")));
    },
    stem(p) {
        const base = __base(__toSlash(p)), dot = base.lastIndexOf(".");
        return dot < 0 ? base : base.slice(0, dot);
    },
};
function print() {}
function __compile(settings) {
    const job = {name: "test job", settings: settings, tasks: [],
                 addTask(task) {
                     this.tasks.push(Object.assign({}, task, {commands: task.commands.slice(),
                                                              dependencies: task.dependencies.slice()}));
                 }};
    try {
        compileJob(job);
    } catch (err) {
        return JSON.stringify({error: String(err)});
    }
    const names = {};
    for (const task of job.tasks) names[task.uuid] = task.name;
    return JSON.stringify({settings: job.settings, tasks: job.tasks.map((task) => ({
        name: task.name, type: task.type, commands: task.commands,
        dependencies: task.dependencies.map((dep) => names[dep.uuid] || "not in the job: " + dep.name)}))});
}
"""

# The Manager's default variables (internal/manager/config/defaults.go), expanded in every string and
# list item of a command's parameters (internal/manager/api_impl/varrepl.go, replaceTaskVariables).
VARIABLES = {"blender": "blender", "blenderArgs": "-b -y"}


def job_type():
    ctx = py_mini_racer.MiniRacer()
    ctx.eval(SHIM + JOB_TYPE_FILE.read_text())
    return json.loads(ctx.eval("JSON.stringify(JOB_TYPE)"))


def compile_job(settings):
    """The authored job as {"tasks": [...]} or {"error": message}; a fresh VM per job, as the Manager's."""
    ctx = py_mini_racer.MiniRacer()
    ctx.eval(SHIM + JOB_TYPE_FILE.read_text())
    return json.loads(ctx.eval(f"__compile({json.dumps(settings)})"))


def expand(value):
    for name, replacement in VARIABLES.items():
        value = value.replace("{" + name + "}", replacement)
    return value


def command_line(command):
    """The Worker's argv for a blender-render command: {exe} {exeArgs} {argsBefore} {blendfile} {args}
    (internal/worker/command_blender.go, cmdBlenderRenderParams: exe non-empty, blendfile a string, exeArgs
    split as a shell would)."""
    assert command["name"] == "blender-render" and command["totalStepCount"] == 0
    params = command["parameters"]
    assert set(params) == {"exe", "exeArgs", "argsBefore", "blendfile", "args"}
    assert all(isinstance(a, str) for a in params["argsBefore"] + params["args"])  # no numbers left to Go's %v
    blendfile = expand(params["blendfile"])
    return (
        [expand(params["exe"])]
        + shlex.split(expand(params["exeArgs"]))
        + [expand(a) for a in params["argsBefore"]]
        + ([blendfile] if blendfile else [])
        + [expand(a) for a in params["args"]]
    )


def tasks_of(job):
    assert "error" not in job, job.get("error")
    out = []
    for task in job["tasks"]:
        assert task["type"] == "blender" and len(task["commands"]) == 1
        out.append((task["name"], command_line(task["commands"][0]), task["dependencies"]))
    return out


MKDIR = [
    "blender",
    "-b",
    "-y",
    "--python-exit-code",
    "1",
    "--python-expr",
    "import os, sys; os.makedirs(sys.argv[-1], exist_ok=True)",
    "--",
]


def test_job_type_settings_follow_flamenco_schema():
    # AvailableJobSetting in pkg/api/flamenco-openapi.yaml; the job type's name is the file's stem with - for _
    jt = job_type()
    assert JOB_TYPE_FILE.stem.replace("_", "-") == "diffcloth-optimize"
    assert jt["label"] == "DiffCloth Optimize" and jt["description"]
    allowed = {
        "key",
        "type",
        "subtype",
        "choices",
        "propargs",
        "description",
        "label",
        "default",
        "eval",
        "evalInfo",
        "visible",
        "required",
        "editable",
    }
    for setting in jt["settings"]:
        assert set(setting) <= allowed and setting["description"], setting
        assert setting["type"] in ("string", "int32", "float", "bool")
        assert setting.get("subtype", "file_path") in ("file_path", "dir_path", "file_name", "hashed_file_path")
        assert setting.get("visible", "visible") in ("visible", "hidden", "submission", "web")
    settings = {s["key"]: s for s in jt["settings"]}
    assert list(settings) == ["shots", "cloth", "max_iter", "stop_within_mm", "output_dir", "blendfile"]
    assert settings["output_dir"]["required"] and settings["output_dir"]["subtype"] == "dir_path"
    assert (settings["max_iter"]["type"], settings["max_iter"]["default"]) == ("int32", 0)
    assert (settings["stop_within_mm"]["type"], settings["stop_within_mm"]["default"]) == ("float", 0)
    assert not any(s.get("required") for k, s in settings.items() if k != "output_dir")


def test_one_shot_submitted_from_blender():
    # the Flamenco add-on sends every setting (empty ones too) and the packed file as blendfile
    job = compile_job(
        {
            "shots": "",
            "cloth": "",
            "max_iter": 0,
            "stop_within_mm": 0.0,
            "output_dir": "{jobs}/out",
            "blendfile": "{jobs}/2026-07-01-1200-ep01/ep01/sh010.blend",
        }
    )
    assert tasks_of(job) == [
        ("output-folder", MKDIR + ["{jobs}/out"], []),
        (
            "optimize-sh010",
            [
                "blender",
                "-b",
                "-y",
                "-c",
                "diffcloth",
                "optimize",
                "{jobs}/2026-07-01-1200-ep01/ep01/sh010.blend",
                "--output",
                "{jobs}/out/sh010.blend",
                "--report",
                "{jobs}/out/sh010.json",
                "--preview",
                "{jobs}/out/sh010.png",
            ],
            ["output-folder"],
        ),
        (
            "summary",
            [
                "blender",
                "-b",
                "-y",
                "-c",
                "diffcloth",
                "summary",
                "{jobs}/out/sh010.json",
                "--output",
                "{jobs}/out/summary.md",
            ],
            ["optimize-sh010"],
        ),
    ]


def test_three_shots_with_every_option():
    job = compile_job(
        {
            "shots": "/farm/ep01/sh010.blend; /farm/ep01/sh020.blend;;/farm/ep02/sh030.BLEND ;",
            "cloth": "Cape",
            "max_iter": 12,
            "stop_within_mm": 2.5,
            "output_dir": "/farm/out/ep01/",
            "blendfile": "/farm/jobs/packed/ignored.blend",
        }
    )
    options = ["--cloth", "Cape", "--max-iter", "12", "--stop-within", "2.5"]

    def shot(name, blend):
        out = f"/farm/out/ep01/{name}"
        command = [
            "blender",
            "-b",
            "-y",
            "-c",
            "diffcloth",
            "optimize",
            blend,
            "--output",
            f"{out}.blend",
            "--report",
            f"{out}.json",
            "--preview",
            f"{out}.png",
        ]
        return f"optimize-{name}", command + options, ["output-folder"]

    assert tasks_of(job) == [
        ("output-folder", MKDIR + ["/farm/out/ep01"], []),
        shot("sh010", "/farm/ep01/sh010.blend"),
        shot("sh020", "/farm/ep01/sh020.blend"),
        shot("sh030", "/farm/ep02/sh030.BLEND"),
        (
            "summary",
            [
                "blender",
                "-b",
                "-y",
                "-c",
                "diffcloth",
                "summary",
                "/farm/out/ep01/sh010.json",
                "/farm/out/ep01/sh020.json",
                "/farm/out/ep01/sh030.json",
                "--output",
                "/farm/out/ep01/summary.md",
            ],
            ["optimize-sh010", "optimize-sh020", "optimize-sh030"],
        ),
    ]


@pytest.mark.parametrize(
    "settings,message",
    [
        ({"shots": " ; ", "blendfile": ""}, "no shots: list their .blend files"),
        ({"shots": "/farm/ep01/"}, 'shot "/farm/ep01/" is not a .blend file'),
        ({"shots": "/farm/ep01/sh010.blend;/farm/ep02/sh010.blend"}, 'two shots are named "sh010"'),
        ({"shots": "/farm/out/sh010.blend"}, 'the output folder is the folder of shot "/farm/out/sh010.blend"'),
        ({"shots": "/farm/ep01/sh010.blend", "output_dir": ""}, "no output_dir setting"),
    ],
)
def test_refused_jobs(settings, message):
    job = compile_job({"output_dir": "/farm/out/", **settings})
    assert message in job.get("error", "")


def run_locally(cli, argv):
    """A task's command line, run in this process: the batch command through cli.execute (what
    `blender -b -y -c diffcloth ...` calls), the folder task's --python-expr with Blender's sys.argv."""
    if argv[: len(MKDIR) - 2] == MKDIR[:-2]:
        saved, sys.argv = sys.argv, argv
        try:
            exec(argv[argv.index("--python-expr") + 1], {})
        finally:
            sys.argv = saved
        return 0
    assert argv[:5] == ["blender", "-b", "-y", "-c", "diffcloth"]
    return cli.execute(argv[5:])


def test_job_runs_shots_then_summary(addon, tmp_path, capsys):
    from diffcloth.diffcloth_addon import cli, operators

    shots = tmp_path / "shots"
    shots.mkdir()
    for name in ("pinned_to_animated", "hanging_cloth"):
        shutil.copy(REPO / "sample_scenes" / f"{name}.blend", shots / f"{name}.blend")
    out = tmp_path / "out"  # made by the job's first task
    settings = {"cloth": "Cloth", "max_iter": 3, "stop_within_mm": 0, "output_dir": str(out)}
    listed = [
        str(shots / "pinned_to_animated.blend"),
        str(shots / "hanging_cloth.blend"),
        str(shots / "lost_shot.blend"),
    ]
    job = tasks_of(compile_job({**settings, "shots": ";".join(listed)}))
    assert [name for name, _, _ in job] == [
        "output-folder",
        "optimize-pinned_to_animated",
        "optimize-hanging_cloth",
        "optimize-lost_shot",
        "summary",
    ]

    codes = {name: run_locally(cli, argv) for name, argv, _ in job[:-1]}  # in dependency order
    assert codes == {
        "output-folder": 0,
        "optimize-pinned_to_animated": 0,
        "optimize-hanging_cloth": 0,
        "optimize-lost_shot": 1,
    }
    assert capsys.readouterr().err.strip().splitlines() == [
        f"diffcloth: error: no such .blend file: '{shots / 'lost_shot.blend'}'"
    ]
    assert sorted(p.name for p in out.iterdir()) == sorted(  # each shot's outputs; the failed one its report only
        [f"{stem}{ext}" for stem in ("pinned_to_animated", "hanging_cloth") for ext in (".blend", ".json", ".png")]
        + ["lost_shot.json"]
    )

    def row(name):
        report = json.loads((out / f"{name}.json").read_text())
        assert report["exit_code"] == 0 and 1 <= report["iterations"] <= 3
        keys = ", ".join(
            f"frame {f} {d['mean_after']:.2f} ({d['largest_after']:.2f})"
            for f, d in sorted(report["keyframes_mm"].items(), key=lambda item: int(item[0]))
        )
        return (
            f"| {name} | {keys} | {report['iterations']} | {report['timings_s']['total']:.1f} | 0 | "
            f"ok: {operators.reason_text(report['reason'])} |"
        )

    lost = json.loads((out / "lost_shot.json").read_text())
    head = [
        "| shot | keys: mean (largest) mm | iterations | time s | exit code | status |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    ok_rows = [row("pinned_to_animated"), row("hanging_cloth")]
    failed_row = (
        f"| lost_shot |  |  | {lost['timings_s']['total']:.1f} | 1 | failed: no such .blend file: "
        f"'{shots / 'lost_shot.blend'}' |"
    )

    # the summary task (Flamenco runs it only when every shot task completed; by hand it runs anyway)
    name, argv, deps = job[-1]
    assert run_locally(cli, argv) == 1
    captured = capsys.readouterr()
    assert captured.out.splitlines()[-5:] == head + ok_rows + [failed_row]
    assert (out / "summary.md").read_text().splitlines() == head + ok_rows + [failed_row]
    assert captured.err.strip().splitlines() == ["diffcloth: error: 1 of 3 shots failed or have no report: lost_shot"]

    (out / "lost_shot.json").unlink()  # a shot that never ran (a crashed or cancelled task) has no report
    assert run_locally(cli, argv) == 1
    assert (out / "summary.md").read_text().splitlines()[-1] == "| lost_shot |  |  |  |  | no report |"

    # the same two good shots as a job of their own: the same shot commands, a summary that succeeds
    two = tasks_of(compile_job({**settings, "shots": ";".join(listed[:2])}))
    assert two[:3] == job[:3]
    capsys.readouterr()
    assert run_locally(cli, two[-1][1]) == 0
    assert (out / "summary.md").read_text().splitlines() == head + ok_rows
    assert capsys.readouterr().err == ""
    assert not [p for p in os.listdir(out) if p.endswith(".tmp")]
