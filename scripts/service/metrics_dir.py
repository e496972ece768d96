"""The directory where every process keeps what it counts for GET /metrics: prometheus_client's
multiprocess mode (docs/design.md, "Metrics").

Each process writes its own files there (`counter_<pid>.db`, `histogram_<pid>.db`), and a
scrape sums them all.  prometheus_client reads PROMETHEUS_MULTIPROC_DIR once, when it is first
imported, so `use` runs at the start of every command that runs processes, before anything
imports it; the processes those commands start inherit the variable.

A process that ends leaves its files, so its counts stay in the sums and a counter never goes
back while the service runs.  `sandesh up`, which starts every process itself, first removes
the files of processes that no longer run; when the processes are started some other way,
empty the directory before starting them all."""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from sandesh.domain.settings import ConfigurationError, Settings

ENV = "PROMETHEUS_MULTIPROC_DIR"


def use(settings: Settings) -> Path:
    """Point this process, and the ones it starts, at SANDESH_METRICS_DIR."""
    path = Path(settings.metrics_dir).resolve()
    if "prometheus_client" in sys.modules and os.environ.get(ENV) != str(path):
        raise RuntimeError("prometheus_client was imported before the metrics directory was set")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ConfigurationError(f"SANDESH_METRICS_DIR {str(path)!r} cannot be created: {error}") from None
    os.environ[ENV] = str(path)
    return path


def forget_ended_processes(path: Path) -> int:
    """Remove the files of processes that no longer run; returns how many were removed."""
    removed = 0
    for file in path.glob("*_*.db"):
        pid = file.stem.rpartition("_")[2]
        if pid.isdigit() and not _running(int(pid)):
            file.unlink(missing_ok=True)
            removed += 1
    return removed


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def child_exit(server: Any, worker: Any) -> None:
    """gunicorn's hook in the master when a worker ends: its live gauges go (its counts stay)."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)
