"""One settings object, read once from the environment (docs/operations.md, "Configuration") and passed
explicitly."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Mapping

DEFAULT_DATABASE_URL = "postgresql://127.0.0.1:5432/sandesh"
DEFAULT_METRICS_DIR = "var/metrics"  # beside what `sandesh up` keeps in ./var
DEFAULT_PUBLIC_URL = "http://127.0.0.1:8000"  # what `sandesh up` serves
MIN_SECRET_KEY_LENGTH = 32


class ConfigurationError(Exception):
    """A setting is missing or malformed; the message says which and how to fix it."""


def _flag(value: str | None) -> bool:
    return (value or "").strip().lower() in {"1", "true", "yes", "on", "y"}


def _megabytes(env: Mapping[str, str], name: str, default: int) -> int:
    text = (env.get(name) or "").strip()
    if not text:
        return default
    if not text.isdigit() or int(text) < 64:
        raise ConfigurationError(f"{name} must be a whole number of megabytes, at least 64, not {text!r}")
    return int(text)


def _positive(env: Mapping[str, str], name: str, default: int) -> int:
    text = (env.get(name) or "").strip()
    if not text:
        return default
    if not text.isdigit() or int(text) < 1:
        raise ConfigurationError(f"{name} must be a whole number, at least 1, not {text!r}")
    return int(text)


def _smtp_url(text: str) -> str | None:
    text = text.strip()
    if not text:
        return None
    scheme, _, rest = text.partition("://")
    if scheme.lower() not in ("smtp", "smtps") or not rest.rsplit("@", 1)[-1].split(":")[0].strip("/"):
        raise ConfigurationError("SANDESH_SMTP_URL must be smtp://[USER:PASSWORD@]HOST[:PORT] or "
                                 "smtps://[USER:PASSWORD@]HOST[:PORT]")
    return text


@dataclass(frozen=True)
class Settings:
    database_url: str = DEFAULT_DATABASE_URL
    secret_key: str = ""
    previous_keys: tuple[str, ...] = field(default_factory=tuple)  # older keys still read (a key rotation)
    clock_mode: str = "system"  # "system" or "test" (docs/design.md, "Decisions: the test clock")
    webhook_allow_private: bool = False
    requests_ca_bundle: str | None = None
    log_level: str = "INFO"
    log_format: str = "text"  # or "json": one JSON object per line (scripts/service/logs.py)
    trusted_proxies: tuple[str, ...] = field(default_factory=tuple)
    pool_size: int = 4
    route_window: float = 60.0  # a SIM is a route while its last healthy heartbeat is this recent
    metrics_dir: str = DEFAULT_METRICS_DIR  # where every process keeps its counters for GET /metrics
    public_url: str = DEFAULT_PUBLIC_URL  # where people reach the dashboard: the base of set-password links
    metrics_token: str | None = None  # GET /metrics answers whoever sends it as a bearer token; else loopback only
    replay_memory_mb: int = 1024  # what `sandesh replay`, `replay --check` and `checkpoint` may hold
    modem_ports: str | None = None  # a glob of this host's modem ports: where a SIM whose port is gone is looked for
    feed_polls: int = 10  # long polls of GET /v1/events one client may hold waiting, over every API process
    runtime_dir: str = "var"  # what the processes of one machine share while they run: systemd's RuntimeDirectory
    smtp_url: str | None = None  # where the notifier hands e-mail: smtp://host:25, smtps://user:password@host:465
    mail_from: str = "sandesh@localhost"  # the From of the e-mail Sandesh sends

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> "Settings":
        env = os.environ if environ is None else environ
        clock_mode = (env.get("SANDESH_CLOCK") or "system").strip().lower()
        if clock_mode not in {"system", "test"}:
            raise ConfigurationError(f"SANDESH_CLOCK must be 'system' or 'test', not {clock_mode!r}")
        log_format = (env.get("SANDESH_LOG_FORMAT") or "text").strip().lower()
        if log_format not in {"text", "json"}:
            raise ConfigurationError(f"SANDESH_LOG_FORMAT must be 'text' or 'json', not {log_format!r}")
        proxies = tuple(p.strip() for p in (env.get("SANDESH_TRUSTED_PROXIES") or "").split(",") if p.strip())
        return cls(
            database_url=env.get("DATABASE_URL") or DEFAULT_DATABASE_URL,
            secret_key=env.get("SANDESH_SECRET_KEY") or "",
            previous_keys=tuple(k for k in (env.get("SANDESH_PREVIOUS_KEYS") or "").replace(",", " ").split()),
            clock_mode=clock_mode,
            webhook_allow_private=_flag(env.get("SANDESH_WEBHOOK_ALLOW_PRIVATE")),
            requests_ca_bundle=env.get("REQUESTS_CA_BUNDLE") or None,
            log_level=(env.get("SANDESH_LOG_LEVEL") or "INFO").upper(),
            log_format=log_format,
            trusted_proxies=proxies,
            pool_size=int(env.get("SANDESH_DB_POOL_SIZE") or 4),
            route_window=float(env.get("SANDESH_ROUTE_WINDOW") or 60),
            metrics_dir=env.get("SANDESH_METRICS_DIR") or DEFAULT_METRICS_DIR,
            public_url=(env.get("SANDESH_PUBLIC_URL") or DEFAULT_PUBLIC_URL).rstrip("/"),
            metrics_token=env.get("SANDESH_METRICS_TOKEN") or None,
            replay_memory_mb=_megabytes(env, "SANDESH_REPLAY_MEMORY_MB", 1024),
            modem_ports=(env.get("SANDESH_MODEM_PORTS") or "").strip() or None,
            feed_polls=_positive(env, "SANDESH_FEED_POLLS", 10),
            runtime_dir=(env.get("RUNTIME_DIRECTORY") or "var").split(":")[0],
            smtp_url=_smtp_url(env.get("SANDESH_SMTP_URL") or ""),
            mail_from=(env.get("SANDESH_MAIL_FROM") or "").strip() or "sandesh@localhost",
        )

    def require_secret_key(self) -> str:
        if len(self.secret_key) < MIN_SECRET_KEY_LENGTH:
            raise ConfigurationError(
                "SANDESH_SECRET_KEY must be set to a string of at least "
                f"{MIN_SECRET_KEY_LENGTH} characters (e.g. `python -c 'import secrets; print(secrets.token_hex(32))'`)"
            )
        return self.secret_key

    def require_key_ring(self) -> tuple[str, ...]:
        """SANDESH_SECRET_KEY, then SANDESH_PREVIOUS_KEYS (docs/operations.md, "Rotating the key")."""
        short = [i + 1 for i, key in enumerate(self.previous_keys) if len(key) < MIN_SECRET_KEY_LENGTH]
        if short:
            raise ConfigurationError(f"SANDESH_PREVIOUS_KEYS: key {', '.join(map(str, short))} is shorter than "
                                     f"{MIN_SECRET_KEY_LENGTH} characters; keys are separated by commas or spaces")
        return (self.require_secret_key(), *self.previous_keys)

    @property
    def test_clock(self) -> bool:
        return self.clock_mode == "test"
