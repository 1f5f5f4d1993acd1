"""Run `diffcloth optimize` on a sample scene through the extension's batch command (bpy module)."""

import sys

from dev_extension import load_extension

import bpy  # noqa: F401  (the real Blender as a module)

ext = load_extension()
ext.register()
try:
    from diffcloth.diffcloth_addon import cli

    code = cli.execute(["optimize", sys.argv[1], "--output", "out/optimized.blend", "--report", "out/report.json",
                        "--preview", "out/preview.png"])
finally:
    ext.unregister()
sys.exit(code)
