"""DiffCloth's Blender glue: properties, panel, operators, conversion, baking."""

import bpy

from . import operators, properties, ui

_CLASSES = operators.CLASSES + ui.CLASSES


def register():
    properties.register()
    for cls in _CLASSES:
        bpy.utils.register_class(cls)


def unregister():
    for cls in reversed(_CLASSES):
        bpy.utils.unregister_class(cls)
    properties.unregister()
