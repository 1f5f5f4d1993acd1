"""Install a built extension zip into an isolated Blender user directory and run its batch command.

    BLENDER_USER_RESOURCES=<dir> python scripts/run_installed.py <zip> optimize <scene.blend> [options]

Installs through Blender's own operator (`extensions.package_install_files`, which also installs the
bundled wheels), enables the add-on, then runs `diffcloth <args>` from the installed copy, the
way `blender -b -c diffcloth ...` would. scipy and threadpoolctl are imported from the extension's
bundled wheels only: the copies in this Python's site-packages are hidden. Exit code: the command's, or 3 if installing failed.
"""

import importlib
import importlib.machinery
import os
import sys
import sysconfig

if not os.environ.get("BLENDER_USER_RESOURCES"):
    sys.exit("run_installed: set BLENDER_USER_RESOURCES to a scratch directory (keeps your Blender config untouched)")

HIDDEN = {os.path.realpath(sysconfig.get_paths()["purelib"]), os.path.realpath(sysconfig.get_paths()["platlib"])}


BUNDLED = ("scipy", "threadpoolctl")


class BundledOnly:
    """Find the bundled packages anywhere on sys.path except this Python's own site-packages."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name not in BUNDLED:
            return None
        visible = [p for p in sys.path if os.path.realpath(p or ".") not in HIDDEN]
        spec = importlib.machinery.PathFinder.find_spec(name, visible)
        if spec is None:
            raise ModuleNotFoundError(f"{name} is not installed from the extension's bundled wheel", name=name)
        return spec


sys.meta_path.insert(0, BundledOnly)

import bpy  # noqa: E402  (after the finder: nothing may import them from site-packages first)


def install(zip_path):
    """Install and enable; return the installed package's batch-command module."""
    result = bpy.ops.extensions.package_install_files(
        filepath=os.path.abspath(zip_path), repo="user_default", enable_on_install=True
    )
    if result != {"FINISHED"}:
        raise RuntimeError(f"installing {zip_path} returned {result}")
    return importlib.import_module("bl_ext.user_default.diffcloth.diffcloth_addon.cli")


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        cli = install(argv[0])
    except (RuntimeError, ImportError) as err:
        print(f"run_installed: {err}", file=sys.stderr)
        return 3
    origins = ", ".join(f"{name} from {os.path.dirname(importlib.import_module(name).__file__)}" for name in BUNDLED)
    print(f"run_installed: diffcloth from {os.path.dirname(os.path.dirname(cli.__file__))}, {origins}", flush=True)
    return cli.execute(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
