#!/usr/bin/env bash
# The main job: build the extension zip for this machine, install it into a scratch Blender user
# directory (out/blender_user) and run its headless optimization of a sample scene -> out/
# (optimized .blend, report.json, preview.png).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/setup_env.sh"
cd "$root"
scene="${1:-sample_scenes/hanging_cloth.blend}"
zip="$(.venv/bin/python scripts/build_extension.py --this-platform)"
rm -rf out/blender_user
mkdir -p out/blender_user
BLENDER_USER_RESOURCES="$root/out/blender_user" exec .venv/bin/python scripts/run_installed.py "$zip" \
    optimize "$scene" --output out/optimized.blend --report out/report.json --preview out/preview.png
