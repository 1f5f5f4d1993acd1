#!/usr/bin/env bash
# The whole test suite (what CI runs) on both ends of the supported range, each in its own pinned
# environment (scripts/setup_env.sh): Blender 4.2 LTS (Python 3.11, numpy 1.26), then Blender 5.2
# LTS (Python 3.13, numpy 2.x); ruff's lint and format check first on each.
#   bash scripts/test.sh                          # both stacks
#   bash scripts/test.sh --stack py313-bpy5.2 -k bake   # one stack; the rest goes to pytest
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
stacks=(py311-bpy4.2 py313-bpy5.2)
if [ "${1:-}" = "--stack" ]; then
  stacks=("${2:?--stack needs a name}")
  shift 2
fi
failed=()
for stack in "${stacks[@]}"; do
  bash scripts/setup_env.sh "$stack" || exit 1
  echo "== $stack"
  # lint and formatting first: a lint error or an unformatted file fails the run (pyproject.toml's rules)
  { ".envs/$stack/bin/ruff" check --quiet . && ".envs/$stack/bin/ruff" format --check --quiet .; } || failed+=("$stack (ruff)")
  ".envs/$stack/bin/python" -m pytest -q "$@" || failed+=("$stack")
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "test.sh: failed on ${failed[*]}" >&2
  exit 1
fi
