#!/usr/bin/env bash
# The main job: headless optimization of a sample scene -> out/ (optimized .blend, report.json, preview.png).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/setup_env.sh"
cd "$root"
mkdir -p out
exec .venv/bin/python scripts/main_job.py "${1:-sample_scenes/hanging_cloth.blend}"
