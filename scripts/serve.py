"""`sandesh serve`: the Falcon app under gunicorn, built in each worker after the fork
(eventsourcing opens its pool when constructed, so never before the fork)."""
from __future__ import annotations

from typing import Any

from gunicorn.app.base import BaseApplication

from sandesh.domain.settings import Settings


class SandeshServer(BaseApplication):
    def __init__(self, settings: Settings, options: dict[str, Any]):
        self.settings = settings
        self.options = options
        super().__init__()

    def load_config(self) -> None:
        for key, value in self.options.items():
            self.cfg.set(key, value)
        if "control_socket_disable" in self.cfg.settings:  # gunicorn >= 24 opens one by default
            self.cfg.set("control_socket_disable", True)

    def load(self) -> Any:
        from sandesh.api.app import create_app
        from sandesh.scripts.bootstrap import bootstrap
        from sandesh.scripts.logs import configure_logging

        configure_logging(self.settings)
        runtime = bootstrap(self.settings, group_commit=True)
        return create_app(runtime.app, runtime.connection, route_window=self.settings.route_window,
                          health=runtime.health, trusted_proxies=self.settings.trusted_proxies)


def serve(settings: Settings, bind: str, workers: int, threads: int, connections: int = 1000) -> None:
    settings.require_secret_key()
    SandeshServer(settings, {
        "bind": bind, "workers": workers, "threads": threads, "worker_class": "gthread",
        "worker_connections": connections,
        "preload_app": False, "accesslog": None, "loglevel": settings.log_level.lower(),
        "graceful_timeout": 10, "keepalive": 5,
    }).run()
