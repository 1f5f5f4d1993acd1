#!/usr/bin/env bash
# The whole test suite (what CI runs): sets up .venv on first use, then pytest.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/setup_env.sh"
cd "$root"
exec .venv/bin/python -m pytest -q "$@"
