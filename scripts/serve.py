"""`sandesh serve`: the Falcon app under gunicorn, built in each worker after the fork
(eventsourcing opens its pool when constructed, so never before the fork)."""
from __future__ import annotations

import os
from typing import Any, Callable

from gunicorn.app.base import BaseApplication

from sandesh.domain.settings import Settings

from .metrics_dir import child_exit


class Gunicorn(BaseApplication):
    """gunicorn with options given in code; `load` builds the WSGI app in each worker."""

    def __init__(self, options: dict[str, Any], load: Callable[[], Any]):
        self.options = options
        self._load = load
        super().__init__()

    def load_config(self) -> None:
        for key, value in self.options.items():
            self.cfg.set(key, value)
        if "control_socket_disable" in self.cfg.settings:  # gunicorn >= 24 opens one by default
            self.cfg.set("control_socket_disable", True)

    def load(self) -> Any:
        return self._load()


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def options(bind: str, workers: int | None = None, threads: int | None = None, connections: int | None = None,
            log_level: str = "info") -> dict[str, Any]:
    """The gunicorn settings `sandesh serve` runs with: what the flags give, the rest derived from
    the machine (docs/performance.md, "Send benchmark as installed").  The send benchmark runs its bare
    baseline app under the same settings."""
    return {
        "bind": bind, "workers": workers or DEFAULT_WORKERS_PER_CORE * _cores(), "threads": threads or DEFAULT_THREADS,
        "worker_class": "gthread", "worker_connections": connections or DEFAULT_CONNECTIONS,
        "preload_app": False, "accesslog": None, "loglevel": log_level.lower(),
        "graceful_timeout": 10, "keepalive": 5,
        "child_exit": child_exit,  # a worker that ends: prometheus_client's bookkeeping (scripts/metrics_dir.py)
        "pre_fork": choose_core, "post_fork": keep_to_core,  # one core per worker
    }


def choose_core(server: Any, worker: Any) -> None:
    """Before a worker is forked (in the arbiter): the core with the fewest live workers, so a
    worker that replaces a dead one takes the core its predecessor left."""
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    taken = [getattr(w, "sandesh_core", None) for w in server.WORKERS.values()]
    worker.sandesh_core = min(cores, key=lambda core: (taken.count(core), core)) if cores else None


def keep_to_core(server: Any, worker: Any) -> None:
    """In the new worker, before its threads start: run on the chosen core only
    (docs/performance.md, "One core per worker")."""
    core = getattr(worker, "sandesh_core", None)
    if core is not None:
        try:
            os.sched_setaffinity(0, {core})
        except OSError as error:  # a container may forbid it: the worker runs unpinned
            server.log.warning("worker %s not kept to core %s: %s", worker.pid, core, error)


DEFAULT_WORKERS_PER_CORE = 1
# 16 threads per process (scripts/cli.py's help says so too): 3,350 sends/s against 2,780 with 8
# and 2,240 with 4, the group commit's batches being larger; 32 and 64 gave no more
# (docs/performance.md, "The caller cache").
DEFAULT_THREADS = 16
DEFAULT_CONNECTIONS = 1000


def serve(settings: Settings, bind: str, workers: int | None = None, threads: int | None = None,
          connections: int | None = None) -> None:
    settings.require_secret_key()

    def load() -> Any:
        from sandesh.api.app import create_app
        from sandesh.projections.callers import Callers
        from sandesh.scripts.bootstrap import bootstrap
        from sandesh.scripts.logs import configure_logging

        configure_logging(settings)
        runtime = bootstrap(settings, group_commit=True)
        callers = Callers(runtime.connection, settings.route_window, settings.database_url)
        return create_app(runtime.app, runtime.connection, route_window=settings.route_window,
                          health=runtime.health, trusted_proxies=settings.trusted_proxies, callers=callers)

    Gunicorn(options(bind, workers, threads, connections, settings.log_level), load).run()
