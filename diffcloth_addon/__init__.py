"""DiffCloth's Blender glue: properties, panel, operators, conversion, baking, batch command."""

import bpy

from . import cli, operators, properties, ui

_CLASSES = operators.CLASSES + ui.CLASSES
_cli_handle = None


def register():
    global _cli_handle
    properties.register()
    for cls in _CLASSES:
        bpy.utils.register_class(cls)
    if hasattr(bpy.utils, "register_cli_command"):  # Blender 4.2+
        _cli_handle = bpy.utils.register_cli_command("diffcloth", cli.execute)


def unregister():
    global _cli_handle
    if _cli_handle is not None:
        bpy.utils.unregister_cli_command(_cli_handle)
        _cli_handle = None
    for cls in reversed(_CLASSES):
        bpy.utils.unregister_class(cls)
    properties.unregister()
