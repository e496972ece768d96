"""The wiring: settings in, a running Runtime out (the PostgreSQL store and its pool, the
clock, the sealer, the application with its inline read models and webhook guard).

Every entry point (`sandesh serve`, the workers, the operator commands) starts here; nothing
below `scripts/` builds these parts itself (docs/design.md, "Layers")."""
from __future__ import annotations

from ssl import RAND_bytes
from typing import Any

from sandesh.domain import credentials
from sandesh.domain.application import Sandesh
from sandesh.domain.clock import Clock, OffsetClock, SystemClock
from sandesh.domain.settings import Settings

from sandesh.projections import db, idempotency, optouts, otp_limits, registry, text_keys
from sandesh.projections.group_commit import GroupCommit
from sandesh.projections.health import DatabaseHealth, DatabaseUnavailable, is_outage
from sandesh.projections.runtime import Runtime
from sandesh.projections.store import Sealer, derive_key, eventsourcing_env
from sandesh.workers.webhook_guard import check_url


# An outage answers within 2 s (docs/reliability.md): a request waits at most this long for a
# pooled connection (the library's default is 30 s), a connection attempt at most 2 s, and a
# pool slot whose reconnection keeps failing is given up after 2 s so that the first request
# after the database returns opens a fresh connection instead of waiting out a backoff.
POOL_WAIT_SECONDS = 1.5
CONNECT_TIMEOUT_SECONDS = 2
RECONNECT_GIVE_UP_SECONDS = 2.0


def bootstrap(settings: Settings, *, pool_size: int | None = None, create_table: bool = False,
              group_commit: bool = False) -> Runtime:
    """`group_commit` batches concurrent sends of this process into shared appends (the API)."""
    credentials.use_random_bytes(RAND_bytes)  # ids without a thread switch each (domain/credentials.py)
    sealer = Sealer(settings.require_secret_key())
    env = eventsourcing_env(settings, create_table=create_table, pool_size=pool_size)
    holder: dict[str, Any] = {}

    def offset() -> float:
        with holder["runtime"].connection() as conn:
            return db.read_clock_offset(conn)

    clock: Clock = OffsetClock(offset) if settings.test_clock else SystemClock()
    try:
        app = Sandesh(env, clock=clock, sealer=sealer, otp_key=derive_key(settings.require_secret_key(), "otp-codes"),
                     inline=registry.inline_writer, webhook_guard=_webhook_guard(settings))
    except Exception as error:  # the library wraps psycopg's connection errors in its own
        if is_outage(error):
            raise DatabaseUnavailable(db.describe_unreachable(settings, error)) from error
        raise
    commits = GroupCommit(app.append_events) if group_commit else None
    if commits is not None:
        app.append = commits.save
    pool = app.recorder.datastore.pool  # type: ignore[attr-defined]
    pool.timeout = POOL_WAIT_SECONDS
    pool.reconnect_timeout = RECONNECT_GIVE_UP_SECONDS
    pool.kwargs["connect_timeout"] = CONNECT_TIMEOUT_SECONDS
    runtime = Runtime(settings=settings, app=app, clock=clock,
                      health=DatabaseHealth(settings.database_url, pool), commits=commits)
    app.idempotency = idempotency.Keys(runtime.connection)
    app.otp_windows = otp_limits.Windows(runtime.connection)
    app.opt_outs = optouts.OptOuts(runtime.connection)
    app.texts = text_keys.TextKeys(runtime.connection, Sealer(settings.require_secret_key(), "text-keys"), clock)
    holder["runtime"] = runtime
    return runtime


def _webhook_guard(settings: Settings) -> Any:
    return lambda url: check_url(url, settings.webhook_allow_private)


def migrate(settings: Settings) -> None:
    """`sandesh db migrate`: the database, the event table, every read model. Idempotent."""
    db.ensure_database(settings)
    with db.migration_lock(settings) as conn:
        bootstrap(settings, pool_size=1, create_table=True).close()  # the library creates the events table
        db.create_tables(conn)
