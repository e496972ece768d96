#!/usr/bin/env bash
# Creates ./.venv (Python 3.11+) and installs Sandesh into it as a user installs it: a wheel of
# this checkout, not editable, so that what the tests and `sandesh up` run is what ships.
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
quiet() { "$@" 2>&1 | grep -v '^WARNING: Location' >&2 || true; }
digest() { "$PYTHON" -c 'import hashlib,sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest()[:16])'; }

# The dependencies, the test tools and the build backend: again only when pyproject.toml changes.
stamp=.venv/.installed-$(digest < pyproject.toml)
if [ ! -f "$stamp" ]; then
  quiet .venv/bin/python -m pip install --quiet --upgrade pip
  quiet .venv/bin/python -m pip install --quiet '.[test]'
  .venv/bin/python -c 'import eventsourcing, falcon, gunicorn, psycopg, orjson, serial, requests, pytest, hatchling' \
    || { echo "installing Sandesh's dependencies failed" >&2; exit 1; }
  rm -f .venv/.installed-* .venv/.package-* && touch "$stamp"
fi

# The package itself: a wheel built from what the checkout holds now (pyproject.toml says which
# folders ship), installed over the last one whenever a file of those folders changed, or over
# a developer's editable install (README, "Developers").
if grep -qs '"editable": *true' .venv/lib/python3*/site-packages/sandesh-*.dist-info/direct_url.json; then
  rm -f .venv/.package-*
fi
package=.venv/.package-$(find pyproject.toml domain projections api workers scripts/__init__.py scripts/service -type f \
  ! -path '*/__pycache__/*' ! -name '*.pyc' | LC_ALL=C sort | while read -r f; do echo "$f"; cat "$f"; done | digest)
if [ ! -f "$package" ]; then
  quiet .venv/bin/python -m pip install --quiet --no-deps --force-reinstall --no-build-isolation .
  rm -f .venv/.package-* && touch "$package"
fi
