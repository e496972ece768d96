"""The wiring: settings in, a running Runtime out.  This is the one place that builds the real
adapters: the PostgreSQL log and its pool, the clock, the sealers, the read models the use cases
ask (Idempotency-Keys, OTP windows, opt-outs, the keys of texts, failed sign-ins, what the Send
page reads and keeps), the password hasher, the group commit, the webhook guard; each is given
to the use cases at construction (domain/application.py).

Every entry point (`sandesh serve`, the workers, the operator commands) starts here; nothing
below `scripts/` builds these parts itself (docs/design.md, "Layers")."""
from __future__ import annotations

import functools
from ssl import RAND_bytes
from typing import Any, Callable, ContextManager

from sandesh.api.answers import batch_answer
from sandesh.domain import credentials, release
from sandesh.domain.application import Sandesh
from sandesh.domain.clock import Clock, OffsetClock, SystemClock
from sandesh.domain.errors import NeedsNewerRelease
from sandesh.domain.settings import Settings
from sandesh.domain.usecases.log import Log

from sandesh.projections import campaigns, contacts, follower, idempotency, optouts, otp_limits, registry, webhooks
from sandesh.projections.engine import replay
from sandesh.projections.storage import db, drafts, keys, releases, sessions, text_keys
from sandesh.projections.storage.group_commit import GroupCommit
from sandesh.projections.storage.health import DatabaseHealth, DatabaseUnavailable, is_outage
from sandesh.projections.storage.passwords import Argon2Hasher
from sandesh.projections.storage.releases import Watch
from sandesh.projections.storage.runtime import Runtime, pooled_connections
from sandesh.projections.storage.keys import KeyRing, RingCipher, RingHashes, RingSealer
from sandesh.projections.storage.store import eventsourcing_env
from sandesh.workers.webhook_guard import check_url


def bootstrap(settings: Settings, *, pool_size: int | None = None, create_table: bool = False,
              group_commit: bool = False, process: str | None = None) -> Runtime:
    """`group_commit` batches concurrent sends of this process into shared appends (the API).
    `process` names a long-running process (serve, projections, dispatch, webhooks): it reports
    its release and follows the upgrade gate every second; a command reads the gate once.
    Either refuses (NeedsNewerRelease) a database finalized at a newer release."""
    credentials.use_random_bytes(RAND_bytes)  # ids without a thread switch each (domain/credentials.py)
    ring = KeyRing(settings.require_key_ring())
    try:
        log = Log(eventsourcing_env(settings, create_table=create_table, pool_size=pool_size),
                  inline=registry.inline_writer)
    except Exception as error:  # the library wraps psycopg's connection errors in its own
        if is_outage(error):
            raise DatabaseUnavailable(db.describe_unreachable(settings, error)) from error
        raise
    log.mapper.cipher = RingCipher(ring)  # type: ignore[attr-defined]
    connection = pooled_connections(log)
    ring.reload = functools.partial(_read_keys, connection, ring)
    health = DatabaseHealth(settings.database_url, log.recorder.datastore.pool)  # type: ignore[attr-defined]
    try:
        watch = _follow_the_gate(log, connection, health, process, ring)
    except BaseException as error:
        log.close()
        if is_outage(error):  # a command needs the database now; a process waits for it (below)
            raise DatabaseUnavailable(db.describe_unreachable(settings, error)) from error
        raise
    clock: Clock = SystemClock()
    if settings.test_clock:
        clock = OffsetClock(lambda: _clock_offset(connection))
    commits = GroupCommit(log.append_events) if group_commit else None
    sandesh = Sandesh.build(
        log, clock=clock, sealer=RingSealer(ring),
        texts=text_keys.TextKeys(connection, RingSealer(ring, "text-keys"), clock),
        idempotency=idempotency.Keys(connection), otp_windows=otp_limits.Windows(connection),
        opt_outs=optouts.OptOuts(connection), otp_keys=RingHashes(ring, "otp-codes"),
        append=commits.save if commits is not None else log.save, batch_answer=batch_answer,
        webhook_guard=lambda url: check_url(url, settings.webhook_allow_private),
        hasher=Argon2Hasher(settings.runtime_dir), sign_in_tries=sessions.SignInTries(connection),
        sessions=sessions.Sessions(connection),
        webhook_history=webhooks.History(connection),
        sending_states=registry.SendingStates(connection, settings.route_window), drafts=drafts.Drafts(connection),
        contact_book=contacts.ContactBook(connection), campaign_progress=campaigns.Progress(connection))
    return Runtime(settings=settings, sandesh=sandesh, clock=clock, connection=connection, health=health,
                   commits=commits, watch=watch, keys=ring)


def _follow_the_gate(log: Log, connection: Callable[[], ContextManager[Any]], health: DatabaseHealth,
                     process: str | None, ring: KeyRing) -> Watch | None:
    """Check the database's releases (this one must not be older than its finalized release)
    and its keys (this process must hold the root key that wraps them), and give the mapper the
    gate and the ring the data keys that write: read once for a command, followed by a Watch for
    a process.  A process starts with the database away (its API answers 503, its loops wait):
    the check waits for the Watch, and until it reads the keys the process encrypts and seals
    nothing (keys.KeyRing.refusal).  A command needs the database: the outage is raised."""
    mapper: Any = log.mapper
    try:
        with connection() as conn:
            found = releases.check(conn)
            keys.check(conn, ring, found.finalized if found is not None else None)
    except (NeedsNewerRelease, keys.KeyMissing):
        raise
    except Exception as error:
        if process is None or not is_outage(error):
            raise
        health.failed(error)
        found = None
    mapper.finalized = found.finalized if found is not None else release.OLDEST_PEER
    if process is None:
        return None
    watch = Watch(connection, process, mapper, health, ring)
    return watch.start()


def _read_keys(connection: Callable[[], ContextManager[Any]], ring: KeyRing) -> None:
    with connection() as conn:
        found = releases.read(conn)
        keys.follow(conn, ring, found.finalized if found is not None else None)


def _clock_offset(connection: Callable[[], ContextManager[Any]]) -> float:
    with connection() as conn:
        return db.read_clock_offset(conn)


def check_release(settings: Settings) -> None:
    """Refuse (NeedsNewerRelease) to start on a database finalized at a newer release, and
    (KeyMissing) without a key its log still needs; a database that cannot be reached now is
    checked by each process when it is back."""
    ring = KeyRing(settings.require_key_ring())
    try:
        with db.connect(settings) as conn:
            found = releases.check(conn)
            keys.check(conn, ring, found.finalized if found is not None else None)
    except DatabaseUnavailable:
        pass


def migrate(settings: Settings, waiting: Callable[[int], None] = lambda tries: None) -> dict[str, Any]:
    """`sandesh db migrate`: the database, the event table, every read model, and this release
    recorded as the one that migrated it (projections/storage/releases.py), the database's first root key
    when it has none recorded, a current data key for each use, and the keys of 0.3.0's formats
    when the log holds them (projections/storage/keys.py); then each followed read model the database
    never had is built from its log, as `sandesh replay NAME` builds it (docs/operations.md,
    "Upgrading"). Idempotent. Returns what it built: per read model, its events and rows. Under
    traffic the tables' locks are waited for in short tries (db.create_tables), each failed one
    told to `waiting`."""
    db.ensure_database(settings)
    with db.migration_lock(settings) as conn:
        found = releases.before_migration(conn)
        bootstrap(settings, pool_size=1, create_table=True).close()  # the library creates the events table
        db.create_tables(conn, waiting)
        releases.record_migration(conn, found)
        ring = KeyRing(settings.require_key_ring())
        keys.record_first_key(conn, ring, lambda ring: _key_of_log(conn, ring))
        finalized = releases.read(conn).finalized  # type: ignore[union-attr]
        logged = keys.first_event_state(conn) is not None
        legacy = logged or release.older(finalized, keys.NEW_FORMATS_FROM)
        keys.record_data_keys(conn, ring, legacy=legacy)
        new = follower.unpositioned(conn) if logged else []
        if not new:
            return {}
        # Built here rather than by the projections worker from the log's first event: the worker
        # takes each projection to the head before the next, so the others would wait meanwhile.
        runtime = bootstrap(settings, pool_size=2)
        try:
            built = replay.rebuild_all(runtime, new)["projections"]
        finally:
            runtime.close()
        return {name: {"events": done["events"], "rows": done["rows"]} for name, done in built.items()}


def _key_of_log(conn: Any, ring: KeyRing) -> str | None:
    """The id of the key that opens the log's first event; None for an empty log."""
    state = keys.first_event_state(conn)
    if state is None:
        return None
    for kid, secret in ring.secrets.items():
        try:
            RingCipher(KeyRing([secret])).decrypt(state)
            return kid
        except ValueError:
            continue
    raise keys.KeyMissing("no key in SANDESH_SECRET_KEY or SANDESH_PREVIOUS_KEYS opens this database's log: "
                          "set the key it was written with")
