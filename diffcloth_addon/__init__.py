"""DiffCloth's Blender glue: properties, panels, operators, conversion, baking, batch command."""

import atexit

import bpy

from . import bake, cli, operators, properties, runner, ui

_CLASSES = operators.CLASSES + ui.CLASSES
_cli_handle = None


@bpy.app.handlers.persistent
def _end_runs(*_args):
    """Loading another file ends the worker processes of this one."""
    runner.stop_all()


@bpy.app.handlers.persistent
def _upgrade(*_args):
    """A file saved by an older DiffCloth keeps its cloths' springs (properties.upgrade)."""
    properties.upgrade(bpy.data.objects)


@bpy.app.handlers.persistent
def _stamp(filepath="", *_args):
    for obj in bpy.data.objects:
        properties.stamp(obj)
    if filepath:  # the first save of a file that has carried cloths' caches in the temporary folder
        bake.keep_caches(filepath)


@bpy.app.handlers.persistent
def _saved(filepath="", *_args):
    if filepath:
        bake.after_save(filepath)


_HANDLERS = (
    (bpy.app.handlers.load_pre, _end_runs),
    (bpy.app.handlers.load_post, _upgrade),
    (bpy.app.handlers.save_pre, _stamp),
    (bpy.app.handlers.save_post, _saved),
)


def register():
    global _cli_handle
    properties.register()
    for cls in _CLASSES:
        bpy.utils.register_class(cls)
    if hasattr(bpy.utils, "register_cli_command"):  # Blender 4.2+
        _cli_handle = bpy.utils.register_cli_command("diffcloth", cli.execute)
    for handlers, handler in _HANDLERS:
        handlers.append(handler)
    atexit.register(runner.stop_all)  # quitting Blender ends them too


def unregister():
    global _cli_handle
    runner.stop_all()
    atexit.unregister(runner.stop_all)
    for handlers, handler in _HANDLERS:
        if handler in handlers:
            handlers.remove(handler)
    if _cli_handle is not None:
        bpy.utils.unregister_cli_command(_cli_handle)
        _cli_handle = None
    for cls in reversed(_CLASSES):
        bpy.utils.unregister_class(cls)
    properties.unregister()
