"""Build the installable extension zip(s), one per platform, with scipy's wheels bundled.

    python scripts/build_extension.py [--platform linux-x64 ... | --this-platform] [--output-dir dist]

Downloads scipy and threadpoolctl for each platform and each Python Blender uses (3.11 for 4.2-5.0,
3.13 for 5.1+; Blender installs the wheels that match its own) into build/wheels/,
stages per platform a copy of the repository with its compiled contact queries
(scripts/build_native.py) and a manifest that lists its wheels and platform, then runs Blender's
own extension builder (`blender_ext.py build --split-platforms`, shipped inside the bpy
wheel) and `validate` on every zip. numpy is Blender's own and is not bundled. Prints the zip paths.
"""

import argparse
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

import build_native

ROOT = Path(__file__).resolve().parent.parent
# Per Python of the supported Blenders, the scipy and threadpoolctl pins of its test stack
# (requirements/py3XX-bpyY.Z.txt): the tests run against the versions that ship. scipy is not in
# Blender; threadpoolctl keeps the solver on one BLAS thread (core/numerics/threads.py).
BUNDLED = {}
for _req in sorted((ROOT / "requirements").glob("py3*-bpy*.txt")):
    BUNDLED["3." + re.match(r"py3(\d+)-", _req.name).group(1)] = [
        line.strip() for line in _req.read_text().splitlines() if line.startswith(("scipy==", "threadpoolctl=="))
    ]
# Blender platform -> the newest OS tag pip may pick a wheel for; it takes the oldest OS tag scipy publishes
# up to that (widest support). Intel Macs: Blender 4.2+ needs macOS 11.2, scipy 1.16 publishes 10.14+.
PLATFORMS = {
    "linux-x64": "manylinux_2_17_x86_64",
    "windows-x64": "win_amd64",
    "macos-arm64": "macosx_12_0_arm64",
    "macos-x64": "macosx_11_0_x86_64",
}
# what the builder's own exclude patterns don't already keep out of the staged copy
STAGE_IGNORE = shutil.ignore_patterns(
    ".git", ".venv", ".envs", "requirements", "build", "dist", "out", "wheels", "__pycache__", "*.pyc"
)


def blender_ext():
    spec = importlib.util.find_spec("bpy")  # located, not imported: the builder runs without Blender
    root = Path(spec.origin).parent if spec else Path()
    found = sorted(root.glob("*/scripts/addons_core/bl_pkg/cli/blender_ext.py"))
    if not found:
        sys.exit("build_extension: blender_ext.py not found inside the bpy module")
    return found[-1]


def this_platform():
    """The running system in Blender's platform names (what its extension builder calls it)."""
    name = build_native.compiled.this_platform()
    if name not in PLATFORMS:
        sys.exit(f"build_extension: no scipy wheel is bundled for this platform ({name})")
    return name


IGNORED_INDEX = re.compile(r"WARNING: Location '.*' is ignored")


def download_wheels(target, python, wheel_dir):
    """pip download one Python's bundled requirements for one platform; reuses wheels already there."""
    wheel_dir.mkdir(parents=True, exist_ok=True)
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            *BUNDLED[python],
            "--quiet",
            "--no-deps",
            "--only-binary=:all:",
            "--python-version",
            python,
            "--implementation",
            "cp",
            "--platform",
            PLATFORMS[target],
            "--dest",
            str(wheel_dir),
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    # this machine's pip configuration may name package indexes that do not exist here: pip warns
    # about each ("Location … is ignored"), which says nothing about this project
    sys.stderr.write("".join(line for line in run.stderr.splitlines(True) if not IGNORED_INDEX.match(line)))
    if run.returncode:
        sys.exit(f"build_extension: no wheel of {' '.join(BUNDLED[python])} for {target}, Python {python}")
    tag = "cp" + python.replace(".", "")
    wheels = []
    for req in BUNDLED[python]:
        name, version = req.split("==")
        found = [w for w in sorted(wheel_dir.glob(f"{name}-{version}-*.whl")) if w.name.split("-")[2] in (tag, "py3")]
        if len(found) != 1:
            sys.exit(
                f"build_extension: expected one {name} {version} wheel for {target}, Python {python} in "
                f"{wheel_dir}, found {len(found)}"
            )
        wheels.append(found[0])
    return wheels


def manifest_with_wheels(text, platforms, wheel_names):
    """Insert `platforms` and `wheels` as top-level keys, before the first [table]."""
    keys = "platforms = [{}]\nwheels = [\n{}]\n\n".format(
        ", ".join(f'"{p}"' for p in platforms), "".join(f'  "./wheels/{w}",\n' for w in wheel_names)
    )
    head, *tail = re.split(r"(?m)^(?=\[)", text, maxsplit=1)
    return head + keys + "".join(tail)


def builder(args):
    """Run Blender's extension builder; its complaints (on stdout) become the error."""
    run = subprocess.run([sys.executable, *map(str, args)], capture_output=True, text=True)
    if run.returncode:
        sys.exit(f"build_extension: {Path(args[0]).name} {args[1]} failed:\n{run.stdout}{run.stderr}")


def build(platforms, output_dir):
    """One zip per platform, each staged on its own: its wheels and its compiled contact queries
    only (the builder's --split-platforms sorts wheels by platform, not other files)."""
    return [build_one(blender_ext(), target, output_dir) for target in platforms]


def build_one(tool, target, output_dir):
    build_native.build(target)
    with tempfile.TemporaryDirectory(prefix="diffcloth-stage-") as tmp:
        stage = Path(tmp) / "diffcloth"
        shutil.copytree(ROOT, stage, ignore=STAGE_IGNORE)
        for other in {p.name for p in build_native.compiled.NATIVE.iterdir() if p.is_dir()} - {target}:
            shutil.rmtree(stage / "core" / "contact" / "native" / other)
        (stage / "wheels").mkdir()
        wheels = [w for python in BUNDLED for w in download_wheels(target, python, ROOT / "build" / "wheels" / target)]
        names = sorted({w.name for w in wheels})  # a pure-Python wheel once for both Pythons
        for wheel in wheels:
            shutil.copy2(wheel, stage / "wheels" / wheel.name)
        manifest = stage / "blender_manifest.toml"
        manifest.write_text(manifest_with_wheels(manifest.read_text(), [target], names))
        version = tomllib.loads(manifest.read_text())["version"]  # fails here, not in the builder, if malformed

        output_dir.mkdir(parents=True, exist_ok=True)
        zip_path = output_dir / f"diffcloth-{version}-{target.replace('-', '_')}.zip"
        zip_path.unlink(missing_ok=True)
        builder([tool, "build", "--source-dir", stage, "--output-dir", output_dir, "--split-platforms"])
    if not zip_path.is_file():
        sys.exit(f"build_extension: the builder did not write {zip_path}")
    builder([tool, "validate", zip_path])
    return zip_path


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--platform",
        action="append",
        choices=sorted(PLATFORMS),
        help="build only for this platform (repeatable; default: all)",
    )
    parser.add_argument("--this-platform", action="store_true", help="build only for the running system")
    parser.add_argument("--output-dir", type=Path, default=ROOT / "dist")
    args = parser.parse_args(argv)
    platforms = [this_platform()] if args.this_platform else args.platform or list(PLATFORMS)
    for zip_path in build(platforms, args.output_dir.resolve()):
        print(zip_path)
    return 0


if __name__ == "__main__":
    os.chdir(ROOT)
    sys.exit(main())
