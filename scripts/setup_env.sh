#!/usr/bin/env bash
# Create .envs/STACK with the pinned requirements/STACK.txt, and build this platform's compiled
# contact queries with it (scripts/build_native.py); a no-op when both are in place.
#   bash scripts/setup_env.sh py311-bpy4.2     # Blender 4.2 LTS's Python 3.11 + bpy 4.2
#   bash scripts/setup_env.sh py313-bpy5.2     # Blender 5.2 LTS's Python 3.13 + bpy 5.2
# The interpreter is python3.X on PATH or, failing that, an installed pyenv 3.X.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
stack="${1:?usage: setup_env.sh STACK (one of: $(cd requirements && ls | sed 's/\.txt$//' | tr '\n' ' '))}"
req="requirements/$stack.txt"
[ -f "$req" ] || { echo "error: no $req (stacks: $(cd requirements && ls | sed 's/\.txt$//' | tr '\n' ' '))" >&2; exit 2; }
want="${stack#py3}"; want="3.${want%%-*}"   # py313-bpy5.2 -> 3.13

is_python() {  # $1 runs and is Python $want
  "$1" -c "import sys; sys.exit(f'{sys.version_info[0]}.{sys.version_info[1]}' != '$want')" >/dev/null 2>&1
}
find_python() {
  if is_python "python$want"; then echo "python$want"; return; fi
  if command -v pyenv >/dev/null 2>&1; then
    for v in $(pyenv versions --bare 2>/dev/null | grep -E "^$want\.[0-9]+$" | sort -rV); do
      cand="$(PYENV_VERSION="$v" pyenv which "python$want" 2>/dev/null || true)"
      if [ -n "$cand" ] && is_python "$cand"; then echo "$cand"; return; fi
    done
  fi
  return 1
}

env=".envs/$stack"
stamp="$env/.requirements.sha256"
sum="$(sha256sum "$req" | cut -d' ' -f1)"
if ! [ -x "$env/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$sum" ]; then
  if [ ! -x "$env/bin/python" ]; then
    py="$(find_python)" || { echo "error: Python $want not found (neither python$want on PATH nor a pyenv $want.x); the $stack stack needs it" >&2; exit 1; }
    "$py" -m venv "$env"
  fi
  echo "setup_env: installing $req into $env" >&2
  # this machine's pip configuration may name package indexes that do not exist here: pip warns
  # about each on every install ("Location … is ignored"), which says nothing about this project
  "$env/bin/python" -m pip install --quiet --disable-pip-version-check -r "$req" \
    2> >(grep -v "^WARNING: Location '.*' is ignored" >&2)
  echo "$sum" > "$stamp"
fi
# this platform's compiled contact queries (core/contact/native/), with the stack's pinned Zig;
# kept while newer than their source
"$env/bin/python" scripts/build_native.py >/dev/null
