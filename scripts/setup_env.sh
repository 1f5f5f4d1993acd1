#!/usr/bin/env bash
# Create .venv (Python 3.11) with the pinned dependencies; a no-op when they are already in place.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
py="${PYTHON:-python3.11}"
if ! command -v "$py" >/dev/null 2>&1; then
  echo "error: $py not found; DiffCloth needs Python 3.11 (what Blender 4.2-4.5 ship)" >&2
  exit 1
fi
stamp=".venv/.requirements.sha256"
want="$(sha256sum requirements-dev.txt | cut -d' ' -f1)"
if [ -x .venv/bin/python ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  exit 0
fi
[ -x .venv/bin/python ] || "$py" -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
echo "$want" > "$stamp"
