#!/usr/bin/env bash
# The main job, in Blender 5.2 LTS (the .envs/py313-bpy5.2 stack; STACK=py311-bpy4.2 for 4.2 LTS):
# build the extension zip for this machine, install it into a scratch Blender user directory
# (out/blender_user) and run its headless optimization of a sample scene -> out/ (optimized .blend,
# report.json, preview.png).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
stack="${STACK:-py313-bpy5.2}"
bash "$root/scripts/setup_env.sh" "$stack"
cd "$root"
py=".envs/$stack/bin/python"
scene="${1:-sample_scenes/character.blend}"
zip="$("$py" scripts/build_extension.py --this-platform)"
rm -rf out/blender_user
mkdir -p out/blender_user
if BLENDER_USER_RESOURCES="$root/out/blender_user" "$py" scripts/run_installed.py "$zip" \
    optimize "$scene" --output out/optimized.blend --report out/report.json --preview out/preview.png; then
  echo "main job: done: out/optimized.blend, out/report.json, out/preview.png"
else
  code=$?
  echo "main job: failed (exit code $code; the line above says why)" >&2
  exit "$code"
fi
