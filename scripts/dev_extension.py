"""Load this repository as the extension package `diffcloth` into the running bpy module.

Blender imports an installed extension as a package; the add-on reaches the simulator through
`from ..core import ...`, so scripts and tests must import the repo root as a package too.
"""

import importlib.util
import pathlib
import sys

REPO = pathlib.Path(__file__).resolve().parent.parent


def load_extension():
    if "diffcloth" in sys.modules:
        return sys.modules["diffcloth"]
    spec = importlib.util.spec_from_file_location(
        "diffcloth", REPO / "__init__.py", submodule_search_locations=[str(REPO)]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["diffcloth"] = module
    spec.loader.exec_module(module)
    return module
