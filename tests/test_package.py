"""The installable extension: the zip builds, validates, installs into an isolated Blender user
directory through Blender's own operator, and optimizes a sample scene from the installed copy
with scipy and threadpoolctl imported from the bundled wheels."""

import ast
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tomllib
import zipfile

import pytest
from conftest import REPO

sys.path.insert(0, str(REPO / "scripts"))
import build_extension  # noqa: E402


def test_manifest_gets_wheels_and_platforms_as_top_level_keys():
    text = (REPO / "blender_manifest.toml").read_text()
    edited = tomllib.loads(
        build_extension.manifest_with_wheels(text, ["linux-x64", "windows-x64"], ["a-1-py3-none-any.whl"])
    )
    assert edited["platforms"] == ["linux-x64", "windows-x64"]
    assert edited["wheels"] == ["./wheels/a-1-py3-none-any.whl"]
    assert edited["permissions"] == tomllib.loads(text)["permissions"]


@pytest.fixture(scope="module")
def built_zip(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    run = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "build_extension.py"), "--this-platform", "--output-dir", str(out)],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    (zip_path,) = run.stdout.split()
    return pathlib.Path(zip_path)


def test_zip_holds_the_extension_and_its_wheels_only(built_zip):
    names = zipfile.ZipFile(built_zip).namelist()
    assert (
        "blender_manifest.toml" in names and "core/solver/integrator.py" in names and "diffcloth_addon/cli.py" in names
    )
    assert "LICENSE" in names  # GPL-3.0-or-later, as the manifest declares
    platform = build_extension.this_platform()  # its compiled contact queries, no other platform's
    assert [n for n in names if n.startswith("core/contact/native/") and not n.endswith(".c")] == [
        f"core/contact/native/{platform}/{build_extension.build_native.compiled.LIBRARY[platform]}"
    ]
    wheels = sorted(n for n in names if n.endswith(".whl"))
    # scipy for each Python Blender uses (3.11: 4.2-5.0, 3.13: 5.1+), pure-Python threadpoolctl once
    assert [w.split("-")[0] + "-" + w.split("-")[2] for w in wheels] == [
        "wheels/scipy-cp311",
        "wheels/scipy-cp313",
        "wheels/threadpoolctl-py3",
    ]
    assert not [
        n
        for n in names
        if n.startswith(("tests/", "benchmarks/", "scripts/", "sample_scenes/", "docs/", "flamenco/", "."))
    ]
    manifest = tomllib.loads(zipfile.ZipFile(built_zip).read("blender_manifest.toml").decode())
    assert manifest["platforms"] == [build_extension.this_platform()]
    assert sorted(manifest["wheels"]) == ["./" + w for w in wheels]


def test_installed_copy_optimizes_with_bundled_wheels(built_zip, tmp_path):
    user = tmp_path / "blender_user"
    user.mkdir()
    report, output = tmp_path / "report.json", tmp_path / "optimized.blend"
    run = subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts" / "run_installed.py"),
            str(built_zip),
            "optimize",
            str(REPO / "sample_scenes" / "hanging_cloth.blend"),
            "--max-iter",
            "4",
            "--report",
            str(report),
            "--output",
            str(output),
        ],
        env={**os.environ, "BLENDER_USER_RESOURCES": str(user)},
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    installed = user / "extensions"
    assert f"diffcloth from {installed / 'user_default' / 'diffcloth'}" in run.stdout
    for name in ("scipy", "threadpoolctl"):  # the bundled wheels, not the venv's
        assert f"{name} from {installed / '.local' / 'lib'}" in run.stdout
    data = json.loads(report.read_text())
    assert data["initial_loss"] / data["final_loss"] > 1e2 and output.stat().st_size > 0


def test_installed_copy_runs_its_worker_process(built_zip, tmp_path):
    """The UI path: the installed extension (package bl_ext.user_default.diffcloth) starts its worker
    under this Python, which loads the same package and simulates the sample scene."""
    user = tmp_path / "blender_user"
    user.mkdir()
    code = f"""
import bpy, importlib
bpy.ops.extensions.package_install_files(filepath={str(built_zip)!r}, repo="user_default", enable_on_install=True)
bpy.ops.wm.open_mainfile(filepath={str(REPO / "sample_scenes" / "hanging_cloth.blend")!r})
ops = importlib.import_module("bl_ext.user_default.diffcloth.diffcloth_addon.operators")
runner = importlib.import_module("bl_ext.user_default.diffcloth.diffcloth_addon.runner")
setup, job = ops.prepare(bpy.context, "simulate")
run = runner.Process(job).start()
infos, _ = run.wait()
print("worker", run.error, run.result.x.shape, len(infos))
"""
    run = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "BLENDER_USER_RESOURCES": str(user)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "worker None (41, 144, 3) 40" in run.stdout  # 40 frames of a 12×12 cloth, one report each


def test_refuses_to_touch_the_real_user_directory(built_zip):
    env = {k: v for k, v in os.environ.items() if k != "BLENDER_USER_RESOURCES"}
    run = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "run_installed.py"), str(built_zip), "optimize"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert run.returncode != 0 and "set BLENDER_USER_RESOURCES" in run.stderr


def test_pip_builds_one_package_named_diffcloth(tmp_path):
    """`pip install .` (a wheel built offline from pyproject.toml): one top-level package, diffcloth,
    holding the simulator as diffcloth.core; every import it needs declared; the licence inside."""
    source = tmp_path / "source"  # a copy: setuptools writes its egg-info beside the sources
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(".*", "__pycache__", "out", "dist", "build"))
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(source),
        ],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    (wheel,) = tmp_path.glob("diffcloth-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"diffcloth", "diffcloth-0.1.0.dist-info"}
    assert "diffcloth/core/solver/integrator.py" in names and "diffcloth/diffcloth_addon/cli.py" in names
    # every package of the repository, and this platform's compiled contact queries
    packages = {
        str(p.parent.relative_to(REPO)) for d in ("core", "diffcloth_addon") for p in (REPO / d).rglob("__init__.py")
    }
    assert {f"diffcloth/{p}/__init__.py" for p in packages} <= set(names), packages
    assert any(n.startswith("diffcloth/core/contact/native/") and n.endswith((".so", ".dll", ".dylib")) for n in names)
    assert not [n for n in names if n.startswith(("diffcloth/tests/", "diffcloth/benchmarks/", "diffcloth/scripts/"))]
    assert "diffcloth-0.1.0.dist-info/licenses/LICENSE" in names
    meta = zipfile.ZipFile(wheel).read("diffcloth-0.1.0.dist-info/METADATA").decode()
    required = {
        line.split(":", 1)[1].split(">")[0].strip() for line in meta.splitlines() if line.startswith("Requires-Dist:")
    }
    # every third-party module the simulator imports is a declared dependency
    imported = set()
    for path in (REPO / "core").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                imported.add(node.module.split(".")[0])
    stdlib = set(sys.stdlib_module_names)
    assert imported - stdlib <= required, imported - stdlib - required
    assert "GPL-3.0-or-later" in meta
