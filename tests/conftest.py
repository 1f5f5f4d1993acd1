"""Shared fixtures: the repository loaded as the extension package `diffcloth` in the real bpy module."""

import importlib.util
import pathlib
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent


def load_extension():
    """Import the repo root as package `diffcloth`, the way Blender imports the installed extension."""
    if "diffcloth" in sys.modules:
        return sys.modules["diffcloth"]
    spec = importlib.util.spec_from_file_location("diffcloth", REPO / "__init__.py",
                                                  submodule_search_locations=[str(REPO)])
    module = importlib.util.module_from_spec(spec)
    sys.modules["diffcloth"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def addon():
    bpy = pytest.importorskip("bpy")
    ext = load_extension()
    ext.register()
    yield ext
    ext.unregister()
    assert not hasattr(bpy.types.Object, "diffcloth")


@pytest.fixture
def blank(addon):
    """An empty scene with the add-on registered."""
    import bpy

    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    scene.render.fps, scene.render.fps_base = 10, 1.0
    return bpy.context
