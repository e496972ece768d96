#!/usr/bin/env bash
# The test command: installs what is missing, checks PostgreSQL, runs the whole suite.
# Tests create and drop their own databases on $SANDESH_TEST_POSTGRES
# (default postgresql://root@127.0.0.1:5432/postgres).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap-venv.sh
export SANDESH_TEST_POSTGRES=${SANDESH_TEST_POSTGRES:-postgresql://root@127.0.0.1:5432/postgres}
if ! .venv/bin/python - <<'PY'
import os, sys, psycopg
url = os.environ["SANDESH_TEST_POSTGRES"]
try:
    psycopg.connect(url, connect_timeout=5).close()
except Exception as error:
    sys.stderr.write(
        f"\nThe tests need a running PostgreSQL server they may create databases on: {url}\n"
        f"  ({str(error).strip().splitlines()[0]})\n"
        "Start one (e.g. `pg_ctlcluster 15 main start`), or point SANDESH_TEST_POSTGRES at one.\n")
    sys.exit(1)
PY
then
  exit 1
fi
exec .venv/bin/python -m pytest "$@"
