"""The core's shape: its folders are layers (each imports only those below it), it never imports
Blender, and no function in it runs past a screenful."""

import ast
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parent.parent / "core"
# bottom to top
LAYERS = ("numerics", "model", "contact", "terms", "solver", "gradients", "design")
LONGEST = 80


def modules():
    return sorted(p for p in CORE.rglob("*.py") if p.parent != CORE)


def imports(path):
    """The core folders a module imports from (relative imports), and its absolute imports."""
    tree = ast.parse(path.read_text())
    folders, absolute = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 2 and node.module:
            folders.add(node.module.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            absolute.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            absolute.update(a.name.split(".")[0] for a in node.names)
    return folders, absolute


def test_every_core_folder_is_a_layer():
    assert {p.parent.name for p in modules()} == set(LAYERS)


@pytest.mark.parametrize("path", modules(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_module_imports_only_the_layers_below_its_own(path):
    folders, absolute = imports(path)
    own = LAYERS.index(path.parent.name)
    upward = sorted(f for f in folders if LAYERS.index(f) > own)
    assert not upward, f"{path.parent.name}/{path.name} imports from {upward}, above its layer"
    assert "bpy" not in absolute and "bpy_extras" not in absolute


def test_no_core_function_is_longer_than_a_screen():
    long = []
    for path in modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > LONGEST:
                    long.append(f"{path.parent.name}/{path.name}:{node.name} ({length} lines)")
    assert not long, long
