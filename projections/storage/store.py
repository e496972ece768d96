"""How the event log is stored: orjson states, AES-GCM encryption, inline read models.

Every event state is encrypted under a data key of the server's key ring before it reaches
PostgreSQL (docs/design.md, "Decisions: event store and security"): keys.RingCipher, which the
wiring gives the mapper, in eventsourcing's AESCipher format with the data key's id before it.
Inline read models (the
registry of workspaces, clients and SIMs, the balance ledger, idempotency keys) are written by
the same transaction that appends their events: the recorder runs them before it takes the
events table lock, so a failed guard (e.g. a balance that would go below zero) aborts the append
and the lock is always the last one a writer takes.
"""
from __future__ import annotations

import functools
import os
from datetime import datetime
from typing import Any, Callable, Sequence

import orjson
from eventsourcing.persistence import InterfaceError, OperationalError, StoredEvent, Transcoder
from eventsourcing.postgres import PostgresApplicationRecorder, PostgresFactory
import psycopg
import psycopg_pool
from psycopg import ClientCursor
from psycopg.conninfo import conninfo_to_dict
from psycopg.pq import TransactionStatus
from psycopg.types.json import set_json_dumps, set_json_loads

from sandesh.domain.errors import GuardRefused, IdempotencyKeyTaken, InsufficientBalance, NameTaken, OtpLimited
from sandesh.domain.settings import Settings


# What each guard of an append means, by the name PostgreSQL reports in the error's
# constraint field (the CHECKs and unique keys of the inline read models, and the
# `sandesh_guard` function's window limits, which name themselves the same way).
GUARDS: dict[str, Callable[[], GuardRefused]] = {
    "balance_never_negative": InsufficientBalance,                  # registry: workspaces.balance
    "idempotency_keys_pkey": IdempotencyKeyTaken,                    # idempotency_keys (client_id, key)
    "otp_number_limit": lambda: OtpLimited("otp_number_limit"),     # otp_limits: codes per number
    "otp_ip_limit": lambda: OtpLimited("otp_ip_limit"),             # otp_limits: codes per end-user IP
    "sims_name_key": lambda: NameTaken("a SIM with this name exists already"),
    "sims_iccid_key": lambda: NameTaken("another SIM is registered with this ICCID"),
    "client_keywords_pkey": lambda: NameTaken("the keyword is another client's already: a keyword is unique "
                                              "across the pool"),
}


def refusal(error: BaseException) -> GuardRefused | None:
    """The domain error for a guard's refusal, or None when `error` is something else."""
    if isinstance(error, psycopg.errors.IntegrityError):
        make = GUARDS.get(error.diag.constraint_name or "")
        return make() if make is not None else None
    return None

# jsonb columns (rates, types) are read on every request: parse them with orjson, not json.
set_json_loads(orjson.loads)
set_json_dumps(orjson.dumps)


class OrjsonTranscoder(Transcoder):
    """Event states hold JSON values only; the library's `timestamp` comes back as a datetime."""

    def encode(self, obj: Any) -> bytes:
        return orjson.dumps(obj)

    def decode(self, data: bytes) -> Any:
        state = orjson.loads(data)
        stamp = state.get("timestamp")
        if isinstance(stamp, str):
            state["timestamp"] = datetime.fromisoformat(stamp)
        return state


class StatementBuffer:
    """The cursor inline read-model writers get: it renders each statement with its literals
    (psycopg's client-side quoting) instead of running it, so the whole append can be sent as
    one script.  Inline writers therefore only write; they never read results."""

    def __init__(self, conn: Any):
        self._cursor = ClientCursor(conn)
        self.statements: list[str] = []

    def execute(self, query: Any, params: Any = None, **_: Any) -> None:
        self.statements.append(self._cursor.mogrify(query, params))

    def render(self, query: Any, params: Any) -> str:
        return self._cursor.mogrify(query, params)


def _once_more(read: Callable[..., Any]) -> Callable[..., Any]:
    """A read that failed on a dropped connection is tried once more, at once; one the pool
    could not serve within its timeout is not (the database is away: the caller says so,
    docs/reliability.md).  The library's own policy, 10 tries 0.2 s apart, would hold a
    request for many seconds in an outage."""
    @functools.wraps(read)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return read(*args, **kwargs)
        except (InterfaceError, OperationalError) as error:
            if isinstance(error.__cause__, psycopg_pool.PoolTimeout):
                raise
            return read(*args, **kwargs)
    return run


class SandeshRecorder(PostgresApplicationRecorder):
    """The library's recorder, appending in one round trip.

    One script carries the whole transaction: BEGIN, the inline read-model writes given to
    `save(..., inline=writer)` (debits, registry rows, idempotency keys), the events table lock
    and NOTIFY exactly as the library takes them, the insert, COMMIT.  A refused guard (the
    balance CHECK, an idempotency key) stops the script before the lock is taken, and the lock
    is always the last lock a writer takes.  Locks are held for the server's work only, never
    across a client round trip, which is what lets many processes append at once.
    """

    def __init__(self, datastore: Any, *, events_table_name: str = "stored_events"):
        register, datastore.register_type_adapters = datastore.register_type_adapters, lambda: None
        try:  # the library registers a composite type it uses and we do not: a process starts without the database
            super().__init__(datastore, events_table_name=events_table_name)
        finally:
            datastore.register_type_adapters = register
        table = f'"{self.datastore.schema or "public"}"."{self.events_table_name}"'
        self._lock_and_notify = (
            f"SET LOCAL lock_timeout = '{self.datastore.lock_timeout}s';"
            f" LOCK TABLE {table} IN EXCLUSIVE MODE; NOTIFY \"{self.channel_name}\""
        )
        self._insert = f"INSERT INTO {table} (originator_id, originator_version, topic, state) VALUES "
        self._select_events_of = (f"SELECT originator_id, originator_version, topic, state FROM {table}"
                                  " WHERE originator_id = ANY(%s) ORDER BY originator_id, originator_version")

    select_events = _once_more(PostgresApplicationRecorder.select_events.__wrapped__)  # type: ignore[attr-defined]
    select_notifications = _once_more(
        PostgresApplicationRecorder.select_notifications.__wrapped__)  # type: ignore[attr-defined]
    max_notification_id = _once_more(
        PostgresApplicationRecorder.max_notification_id.__wrapped__)  # type: ignore[attr-defined]

    @_once_more
    def select_events_of(self, originator_ids: Sequence[str]) -> list[StoredEvent]:
        """The events of several aggregates in one round trip, each one's in version order (the
        webhook sender reads the deliveries of one lease at once, workers/webhooks.py)."""
        with self.datastore.get_connection() as conn, conn.cursor() as curs:
            curs.execute(self._select_events_of, (list(originator_ids),), prepare=True)
            return [StoredEvent(originator_id=row["originator_id"], originator_version=row["originator_version"],
                                topic=row["topic"], state=bytes(row["state"])) for row in curs.fetchall()]

    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        """A refused guard raises its domain error (GUARDS).  Not retried: after a dropped connection the commit may or may not have happened.  The
        caller reports the failure (a 503, whose retry with the same Idempotency-Key replays a
        committed send) or reads the aggregate again (the workers).

        Returns None, not the new notification ids: nothing here reads them (the library then
        makes no Recordings), and walking every statement's result to find them costs the group
        commit CPU (docs/performance.md, "The append's results")."""
        inline: Callable[[Any], None] | None = kwargs.get("inline")
        with self.datastore.get_connection() as conn:
            buffer = StatementBuffer(conn)
            if inline is not None:
                inline(buffer)
            script = ["BEGIN", *buffer.statements]
            if stored_events:
                rows = ", ".join(buffer.render("(%s, %s, %s, %s)", (e.originator_id, e.originator_version,
                                                                     e.topic, e.state)) for e in stored_events)
                script += [self._lock_and_notify, self._insert + rows]
            script.append("COMMIT")
            try:
                with conn.cursor() as curs:
                    curs.execute(";\n".join(script), prepare=False)  # a script is never the same twice
                    return None
            except BaseException as error:
                if conn.info.transaction_status != TransactionStatus.IDLE:
                    conn.execute("ROLLBACK")
                refused = refusal(error)
                if refused is not None:
                    raise refused from error
                raise


# An outage answers within 2 s (docs/reliability.md): a request waits at most this long for a
# pooled connection (the library's default is 30 s), a connection attempt at most 2 s, and a
# pool slot whose reconnection keeps failing is given up after 2 s so that the first request
# after the database returns opens a fresh connection instead of waiting out a backoff.
POOL_WAIT_SECONDS = 1.5
CONNECT_TIMEOUT_SECONDS = 2
RECONNECT_GIVE_UP_SECONDS = 2.0


class SandeshFactory(PostgresFactory):
    """The library's PostgreSQL store, with the pool's waits of an outage set where the pool is
    made (the library's environment names only some of them), and every parameter of
    DATABASE_URL the library's environment has no name for (`target_session_attrs` of a
    primary and its standby, `sslmode`, `application_name`...) given to each connection."""

    def __init__(self, env: Any):
        super().__init__(env)
        pool = self.datastore.pool
        pool.timeout = POOL_WAIT_SECONDS
        pool.reconnect_timeout = RECONNECT_GIVE_UP_SECONDS
        pool.kwargs.update(orjson.loads(self.env.get(CONNINFO_REST) or "{}"))
        pool.kwargs["connect_timeout"] = CONNECT_TIMEOUT_SECONDS


CONNINFO_REST = "SANDESH_CONNINFO_REST"  # DATABASE_URL's parameters beyond the library's own names, as JSON
NAMED = ("dbname", "host", "port", "user", "password", "connect_timeout")


def eventsourcing_env(settings: Settings, *, create_table: bool = False, pool_size: int | None = None) -> dict[str, str]:
    """The eventsourcing library's configuration, built from our settings (never from os.environ)."""
    params = conninfo_to_dict(settings.database_url)
    rest = {name: value for name, value in params.items() if name not in NAMED}
    return {
        "PERSISTENCE_MODULE": "sandesh.projections.storage.store:SandeshFactory",
        "POSTGRES_DBNAME": str(params.get("dbname") or "sandesh"),
        "POSTGRES_HOST": str(params.get("host") or "127.0.0.1"),
        "POSTGRES_PORT": str(params.get("port") or "5432"),
        "POSTGRES_USER": str(params.get("user") or os.environ.get("USER") or "postgres"),
        "POSTGRES_PASSWORD": str(params.get("password") or ""),
        "POSTGRES_LOCK_TIMEOUT": "5",
        "POSTGRES_CONNECT_TIMEOUT": "5",  # a command against an absent server gives up after 5 s, not 30
        "POSTGRES_POOL_SIZE": str(pool_size or settings.pool_size),
        "POSTGRES_MAX_OVERFLOW": "8",
        "POSTGRES_PRE_PING": "n",  # a round trip per checkout; the pool replaces broken connections itself
        "CREATE_TABLE": "y" if create_table else "n",
        "ORIGINATOR_ID_TYPE": "text",
        "TRANSCODER_TOPIC": "sandesh.projections.storage.store:OrjsonTranscoder",
        "APPLICATION_RECORDER_TOPIC": "sandesh.projections.storage.store:SandeshRecorder",
        CONNINFO_REST: orjson.dumps(rest).decode(),
    }
