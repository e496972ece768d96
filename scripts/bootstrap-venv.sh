#!/usr/bin/env bash
# Creates ./.venv (Python 3.11+) and installs Sandesh into it with its test dependencies.
# Its output goes to stderr, so `scripts/up.sh` prints only JSON on stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "Sandesh needs Python 3.11 or newer as \$PYTHON or python3 (found: $("$PYTHON" --version 2>&1 || echo none))." >&2
  exit 1
fi
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.installed-$(cat pyproject.toml | "$PYTHON" -c 'import hashlib,sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest()[:16])')
if [ ! -f "$stamp" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip 2>&1 | grep -v '^WARNING: Location' >&2 || true
  .venv/bin/python -m pip install --quiet -e '.[test]' 2>&1 | grep -v '^WARNING: Location' >&2 || true
  .venv/bin/python -c 'import eventsourcing, falcon, gunicorn, psycopg, orjson, serial, requests, pytest' \
    || { echo "installing Sandesh's dependencies failed" >&2; exit 1; }
  rm -f .venv/.installed-* && touch "$stamp"
fi
