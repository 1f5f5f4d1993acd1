"""Shared fixtures: the repository loaded as the extension package `diffcloth` in the real bpy module."""

import pathlib
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))
from dev_extension import load_extension  # noqa: E402

load_extension()  # the repository as the package `diffcloth` (no bpy): tests import diffcloth.core


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
