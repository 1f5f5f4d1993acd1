"""Install a built extension zip into an isolated Blender user directory and run its batch command.

    BLENDER_USER_RESOURCES=<dir> python scripts/run_installed.py <zip> optimize <scene.blend> [options]

Installs through Blender's own operator (`extensions.package_install_files`, which also installs the
bundled scipy wheel), enables the add-on, then runs `diffcloth <args>` from the installed copy, the
way `blender -b -c diffcloth ...` would. scipy is imported from the extension's bundled wheel only:
the copy in this Python's site-packages is hidden. Exit code: the command's, or 3 if installing failed.
"""

import importlib
import importlib.machinery
import os
import sys
import sysconfig

if not os.environ.get("BLENDER_USER_RESOURCES"):
    sys.exit("run_installed: set BLENDER_USER_RESOURCES to a scratch directory (keeps your Blender config untouched)")

HIDDEN = {os.path.realpath(sysconfig.get_paths()["purelib"]), os.path.realpath(sysconfig.get_paths()["platlib"])}


class BundledScipyOnly:
    """Find `scipy` anywhere on sys.path except this Python's own site-packages."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name != "scipy":
            return None
        visible = [p for p in sys.path if os.path.realpath(p or ".") not in HIDDEN]
        spec = importlib.machinery.PathFinder.find_spec(name, visible)
        if spec is None:
            raise ModuleNotFoundError("scipy is not installed from the extension's bundled wheel", name=name)
        return spec


sys.meta_path.insert(0, BundledScipyOnly)

import bpy  # noqa: E402  (after the finder: nothing may import scipy from site-packages first)


def install(zip_path):
    """Install and enable; return the installed package's batch-command module."""
    result = bpy.ops.extensions.package_install_files(filepath=os.path.abspath(zip_path), repo="user_default",
                                                      enable_on_install=True)
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
    import scipy

    print(f"run_installed: diffcloth from {os.path.dirname(os.path.dirname(cli.__file__))}, scipy from "
          f"{os.path.dirname(scipy.__file__)}", flush=True)
    return cli.execute(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
