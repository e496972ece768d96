"""`sandesh serve`: the Falcon ASGI app under gunicorn's asgi worker (guarded against slow
clients: scripts/service/guarded_worker.py), built in each worker after the fork (eventsourcing opens
its pool when constructed, so never before the fork)."""
from __future__ import annotations

import logging
import os
from typing import Any, Callable

from gunicorn.app.base import BaseApplication
from gunicorn.glogging import Logger

from sandesh.domain.settings import Settings

from .logs import JsonFormatter
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


def options(bind: str, workers: int | None = None, connections: int | None = None, log_level: str = "info",
            log_format: str = "text") -> dict[str, Any]:
    """The gunicorn settings `sandesh serve` runs with: what the flags give, the rest derived from
    the machine (docs/operations.md, "Production")."""
    return {
        "bind": bind, "workers": workers or DEFAULT_WORKERS_PER_CORE * _cores(),
        "worker_class": "sandesh.scripts.service.guarded_worker.GuardedWorker",  # the asgi worker, guarded
        "worker_connections": connections or DEFAULT_CONNECTIONS,
        "preload_app": False, "accesslog": None, "loglevel": log_level.lower(),
        "logger_class": JsonLogger if log_format == "json" else "gunicorn.glogging.Logger",
        "graceful_timeout": 10, "keepalive": KEEPALIVE_SECONDS, "asgi_lifespan": "off",
        # asyncio's loop, not uvloop: with two processes on one listening socket, uvloop took new
        # connections a few dozen a second, so at 1,000 connections some waited seconds to be
        # read; asyncio took them all in 2 s, at the same sends/s (docs/performance.md,
        # "Send benchmark").  gunicorn_h1c, gunicorn's HTTP parser in C, is taken when installed.
        "asgi_loop": "asyncio",
        "child_exit": child_exit,  # a worker that ends: prometheus_client's bookkeeping (scripts/service/metrics_dir.py)
        "pre_fork": choose_core, "post_fork": keep_to_core,  # one core per worker
    }


class JsonLogger(Logger):
    """gunicorn's own lines (the arbiter's, each worker's) as JSON, like every other line of the
    process when SANDESH_LOG_FORMAT=json (scripts/service/logs.py)."""

    def setup(self, cfg: Any) -> None:
        super().setup(cfg)
        for log in (self.error_log, self.access_log):
            for handler in log.handlers:
                handler.setFormatter(JsonFormatter())


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
DEFAULT_CONNECTIONS = 1000
KEEPALIVE_SECONDS = 5  # an idle keep-alive connection is closed after this


def serve(settings: Settings, bind: str, workers: int | None = None, connections: int | None = None) -> None:
    from sandesh.scripts.service.bootstrap import check_release

    settings.require_secret_key()
    check_release(settings)  # before any worker forks: an older release refuses to start

    chosen = options(bind, workers, connections)

    def load() -> Any:
        from sandesh.api.app import create_app
        from sandesh.api.events import Arrivals, PollBudget
        from sandesh.projections.callers import Callers
        from sandesh.projections.storage.keys import RingHashes
        from sandesh.scripts.service.bootstrap import bootstrap
        from sandesh.scripts.service.logs import configure_logging

        configure_logging(settings)
        runtime = bootstrap(settings, group_commit=True, process="serve")
        callers = Callers(runtime.connection, settings.route_window, settings.database_url)
        assert runtime.commits is not None and runtime.keys is not None
        return create_app(runtime.sandesh, runtime.connection, route_window=settings.route_window,
                          health=runtime.health, commits=runtime.commits, blocking_threads=settings.pool_size,
                          trusted_proxies=settings.trusted_proxies, callers=callers,
                          dashboard_keys=RingHashes(runtime.keys, "dashboard-csrf"),
                          metrics_token=settings.metrics_token, public_url=settings.public_url,
                          arrivals=Arrivals(settings.database_url),
                          # a client's waiting polls shared out among the processes; half a process's connections in all
                          polls=PollBudget(max(1, settings.feed_polls // chosen["workers"]),
                                           chosen["worker_connections"] // 2))

    logging.captureWarnings(True)  # a warning is a log line too, in the log's format
    Gunicorn(options(bind, workers, connections, settings.log_level, settings.log_format), load).run()
