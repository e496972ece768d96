#!/usr/bin/env bash
# Starts Sandesh for a first look: installs into ./.venv, then `sandesh up` (an embedded
# PostgreSQL under ./var when DATABASE_URL is not set, a demo workspace and key, the API on
# http://127.0.0.1:8000/v1 and the workers) until Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap-venv.sh
exec .venv/bin/sandesh up "$@"
