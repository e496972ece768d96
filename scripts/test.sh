#!/usr/bin/env bash
# The test command: installs what is missing (the venv, chromium, nodejs and php-cli, systemd-analyze), checks PostgreSQL, runs the whole suite.
# Tests create and drop their own databases on $SANDESH_TEST_POSTGRES; without it, on the
# local server (postgresql://root@127.0.0.1:5432/postgres); on a machine without one, on the
# embedded PostgreSQL that `sandesh up` uses, started for the run (tests/conftest.py).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap-venv.sh
# The dashboard's browser tests drive Debian's chromium through Playwright (tests/integration/test_dashboard.py).
if [ ! -x /usr/bin/chromium ]; then
  echo "installing chromium for the dashboard's browser tests" >&2
  if [ "$(id -u)" = 0 ]; then as_root=(); else as_root=(sudo -n); fi
  { "${as_root[@]}" apt-get update -qq && DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -qq \
      --no-install-recommends chromium; } >&2 || echo "could not install chromium: the browser tests will fail" >&2
fi
# The webhook signature checks of docs/api.md run in Node.js and PHP (tests/integration/test_webhook_snippets.py).
if ! command -v node >/dev/null || ! command -v php >/dev/null; then
  echo "installing nodejs and php-cli for the docs' signature checks" >&2
  if [ "$(id -u)" = 0 ]; then as_root=(); else as_root=(sudo -n); fi
  { "${as_root[@]}" apt-get update -qq && DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -qq \
      --no-install-recommends nodejs php-cli; } >&2 || echo "could not install nodejs and php-cli: their tests will fail" >&2
fi
# The systemd units are checked by systemd-analyze (tests/integration/test_systemd_units.py).
if ! command -v systemd-analyze >/dev/null; then
  echo "installing systemd for the units' tests" >&2
  if [ "$(id -u)" = 0 ]; then as_root=(); else as_root=(sudo -n); fi
  { "${as_root[@]}" apt-get update -qq && DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -qq \
      --no-install-recommends systemd; } >&2 || echo "could not install systemd: the units' tests will fail" >&2
fi
if [ -n "${SANDESH_TEST_POSTGRES:-}" ] && ! .venv/bin/python - <<'PY'
import os, sys, psycopg
url = os.environ["SANDESH_TEST_POSTGRES"]
try:
    psycopg.connect(url, connect_timeout=5).close()
except Exception as error:
    sys.stderr.write(
        f"\nThe tests need a running PostgreSQL server they may create databases on: {url}\n"
        f"  ({str(error).strip().splitlines()[0]})\n"
        "Start it, point SANDESH_TEST_POSTGRES at another, or unset it: without it the tests use the\n"
        "local server, or an embedded one where none runs.\n")
    sys.exit(1)
PY
then
  exit 1
fi
# A module to a worker, a worker per core (pytest-xdist): most of a module's time is spent waiting
# on its processes, modems and browser.  Then, with nothing beside them, the modules marked
# `alone`: they compare latencies or throughput, or another module disturbs them.  `scripts/test.sh -n 0 …` runs the first part in
# one process.  Exit status 5 is "no test selected" (arguments that name none of one part).
status=0
.venv/bin/python -m pytest -n "${SANDESH_TEST_WORKERS:-$(nproc)}" --dist loadfile -m "not alone" "$@" || status=$?
[ "$status" = 5 ] && status=0
alone=0
.venv/bin/python -m pytest -n 0 -m alone "$@" || alone=$?
[ "$alone" = 5 ] && alone=0
[ "$status" != 0 ] && exit "$status"
exit "$alone"
