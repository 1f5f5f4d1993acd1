"""Compile DiffCloth's contact queries (core/contact/native/queries.c) with Zig's C compiler (the
pinned `ziglang` wheel of the test stacks: one compiler that cross-compiles to every platform
Blender runs on), into core/contact/native/<platform>/, where core/contact/compiled.py loads them.

    python scripts/build_native.py [--platform linux-x64 ... | --all]   # default: this platform

A library newer than the source and this script is kept. The library is plain C with libm, so one
build serves every Python a platform's Blender uses.
"""

import argparse
import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# the loader's platform names and file names, read without importing the package (and scipy)
_spec = importlib.util.spec_from_file_location("compiled", ROOT / "core" / "contact" / "compiled.py")
compiled = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(compiled)
SOURCE = compiled.NATIVE / "queries.c"
# Blender's platform name -> Zig's target (glibc 2.17 and macOS 11: no newer than Blender's own)
TARGETS = {
    "linux-x64": "x86_64-linux-gnu.2.17",
    "windows-x64": "x86_64-windows-gnu",
    "macos-arm64": "aarch64-macos.11.0",
    "macos-x64": "x86_64-macos.11.0",
}
# no fused multiply-adds (the same rounding on every platform and as numpy's), the baseline CPU of
# each target (no instruction a user's machine may lack)
FLAGS = ["-std=c99", "-O2", "-g0", "-ffp-contract=off", "-fno-fast-math", "-fvisibility=hidden", "-mcpu=baseline"]


def build(name):
    """Compile for platform `name` unless its library is newer than the source; returns its path."""
    out = compiled.NATIVE / name / compiled.LIBRARY[name]
    if out.exists() and out.stat().st_mtime >= max(SOURCE.stat().st_mtime, Path(__file__).stat().st_mtime):
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    pic = [] if name.startswith("windows") else ["-fPIC"]
    cmd = [
        sys.executable,
        "-m",
        "ziglang",
        "cc",
        "-target",
        TARGETS[name],
        "-shared",
        *FLAGS,
        *pic,
        "-o",
        str(out),
        str(SOURCE),
    ]
    try:
        subprocess.run(cmd, check=True, cwd=out.parent)
    except FileNotFoundError:
        sys.exit(f"build_native: {sys.executable} not found")
    except subprocess.CalledProcessError as err:
        sys.exit(f"build_native: compiling for {name} failed ({err.returncode}); is ziglang installed? {' '.join(cmd)}")
    for junk in [*out.parent.glob("*.lib"), *out.parent.glob("*.pdb")]:  # Windows' import library, symbols
        junk.unlink()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--platform", nargs="+", choices=sorted(TARGETS), help="Blender platforms to build for")
    ap.add_argument("--all", action="store_true", help="every platform")
    args = ap.parse_args()
    names = sorted(TARGETS) if args.all else args.platform or [compiled.this_platform()]
    for name in names:
        if name not in TARGETS:
            sys.exit(f"build_native: no build for this platform ({name}); platforms: {', '.join(sorted(TARGETS))}")
        print(build(name))


if __name__ == "__main__":
    main()
