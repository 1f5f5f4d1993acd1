"""DiffCloth extension entry point.

register()/unregister() import the add-on lazily, so importing this package (and its core
simulator) never imports bpy.
"""


def register():
    from . import diffcloth_addon

    diffcloth_addon.register()


def unregister():
    from . import diffcloth_addon

    diffcloth_addon.unregister()
