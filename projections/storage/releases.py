"""Which releases share the database (docs/operations.md, "Upgrading").

Owns `sandesh_release` and `sandesh_processes`.  `sandesh_release` is one row: the newest
release that ran `sandesh db migrate` (`migrated`), and the release the log is finalized at
(`finalized`, the upgrade gate: event shapes of releases up to it may be written).  Every
long-running process (`sandesh serve`'s workers, each `sandesh worker`) reports its release
in `sandesh_processes` every few seconds, with the server keys it holds and the one it writes
with, and reads the gate and the key ring every second (`Watch`, keys.py).

A release older than `finalized` refuses to start (`check`), and `finalize` refuses while a
process of an older release is running.  Processes of releases before 0.3.0 report nothing:
only their dispatchers can be seen, by their SIM heartbeats.
"""
from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable, ContextManager

from psycopg.rows import dict_row

from sandesh.domain import release
from sandesh.domain.errors import NeedsNewerRelease

from . import keys
from .health import DatabaseHealth, is_outage

logger = logging.getLogger("sandesh.release")

DDL = """
CREATE TABLE IF NOT EXISTS sandesh_release (
    id boolean PRIMARY KEY DEFAULT true CHECK (id),
    migrated text NOT NULL, migrated_at timestamptz NOT NULL DEFAULT now(),
    finalized text NOT NULL, finalized_at timestamptz, finalized_by text);
CREATE TABLE IF NOT EXISTS sandesh_processes (
    id text PRIMARY KEY, kind text NOT NULL, host text NOT NULL, pid integer NOT NULL, release text NOT NULL,
    started_at timestamptz NOT NULL DEFAULT now(), seen_at timestamptz NOT NULL DEFAULT now());
ALTER TABLE sandesh_processes ADD COLUMN IF NOT EXISTS keys text[], ADD COLUMN IF NOT EXISTS writes text;
"""

LIVE_SECONDS = 30.0      # a process that reported within this is running
REPORT_EVERY = 5.0       # seconds between a process's reports
READ_EVERY = 1.0         # seconds between its reads of the gate
FORGET_SECONDS = 86_400  # reports older than this are deleted


@dataclass(frozen=True)
class Releases:
    migrated: str
    finalized: str
    finalized_at: Any = None
    finalized_by: str | None = None


def _rows(conn: Any, query: str, params: Any = None) -> list[dict[str, Any]]:
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(query, params).fetchall()


def read(conn: Any) -> Releases | None:
    """The database's releases; None for a database no release since 0.3.0 has migrated."""
    if _rows(conn, "SELECT to_regclass('sandesh_release') IS NOT NULL AS present")[0]["present"]:
        for row in _rows(conn, "SELECT migrated, finalized, finalized_at, finalized_by FROM sandesh_release"):
            return Releases(row["migrated"], row["finalized"], row["finalized_at"], row["finalized_by"])
    return None


def check(conn: Any) -> Releases | None:
    """Refuse (NeedsNewerRelease) to run on a log finalized at a newer release."""
    found = read(conn)
    if found is not None and release.older(release.VERSION, found.finalized):
        raise NeedsNewerRelease(
            f"this database is finalized at Sandesh {found.finalized}: its log may hold events that "
            f"Sandesh {release.VERSION} cannot read. Run Sandesh {found.finalized} or newer "
            "(docs/operations.md, \"Upgrading\")")
    return found


def before_migration(conn: Any) -> Releases | None:
    """Refuse to migrate a database that a newer release migrated or finalized; what it was."""
    found = check(conn)
    if found is not None and release.older(release.VERSION, found.migrated):
        raise NeedsNewerRelease(
            f"this database was migrated by Sandesh {found.migrated}; Sandesh {release.VERSION} would not "
            "migrate it back. Run `sandesh db migrate` of that release or a newer one")
    return found


def record_migration(conn: Any, found: Releases | None) -> None:
    """After `db migrate`: this release migrated it.  A database new to the gate is finalized at
    this release: a new database, or one of a release before the gate (0.2.0 and earlier), whose
    processes were stopped for the upgrade, as an upgrade that skips a release needs
    (docs/operations.md, "Upgrading").  The previous release, which has the gate, keeps the
    database at its own finalized release until `sandesh upgrade finalize`."""
    if found is None:
        finalized = release.VERSION
        conn.execute("INSERT INTO sandesh_release (migrated, finalized) VALUES (%s, %s) ON CONFLICT (id) DO NOTHING",
                     (release.VERSION, finalized))
    elif release.older(found.migrated, release.VERSION):
        conn.execute("UPDATE sandesh_release SET migrated = %s, migrated_at = now()", (release.VERSION,))


def processes(conn: Any, live_seconds: float = LIVE_SECONDS) -> list[dict[str, Any]]:
    """The processes that reported within `live_seconds`, oldest release first."""
    return _rows(conn, "SELECT id, kind, host, pid, release, started_at, seen_at, keys, writes FROM sandesh_processes"
                       " WHERE seen_at > now() - make_interval(secs => %s)"
                       " ORDER BY string_to_array(release, '.')::int[], host, pid", (live_seconds,))


def unreported_dispatchers(conn: Any, now: float, live_seconds: float = LIVE_SECONDS) -> list[str]:
    """Dispatchers (by the name they give in SIM heartbeats) heard from within `live_seconds` of
    the service clock that no live process report accounts for: releases before 0.3.0."""
    rows = _rows(
        conn, "SELECT DISTINCT h.dispatcher FROM sim_health h WHERE h.heartbeat_at > %s AND h.dispatcher IS NOT NULL"
        " AND NOT EXISTS (SELECT 1 FROM sandesh_processes p WHERE p.id = h.dispatcher"
        " AND p.seen_at > now() - make_interval(secs => %s))",
        (now - live_seconds, live_seconds))
    return sorted(row["dispatcher"] for row in rows)


def holding_back(conn: Any, now: float) -> list[str]:
    """What keeps the log from being finalized at this release: the running processes of an
    older release, and the dispatchers of releases before 0.3.0 (`now`: the service clock)."""
    older = [f"{p['kind']} on {p['host']} (pid {p['pid']}, Sandesh {p['release']})"
             for p in processes(conn) if release.older(p["release"], release.VERSION)]
    return older + [f"dispatcher {name} (a release before 0.3.0)" for name in unreported_dispatchers(conn, now)]


def finalize(conn: Any, actor: str, now: float, *, force: bool = False) -> dict[str, Any]:
    """Finalize the log at this release: from now on every process writes this release's event
    shapes, and older releases refuse to start.  NotFinalizable while an older release runs
    (`holding_back`), unless `force`."""
    found = read(conn)
    if found is None:
        raise NotFinalizable("the database has no release recorded: run `sandesh db migrate` first")
    blocking = holding_back(conn, now)
    if blocking and not force:
        raise NotFinalizable("processes of an older release are running: " + "; ".join(blocking)
                             + ". Upgrade or stop them first (docs/operations.md, \"Upgrading\")")
    if not release.older(found.finalized, release.VERSION):
        return {"finalized": found.finalized, "changed": False}
    conn.execute("UPDATE sandesh_release SET finalized = %s, finalized_at = now(), finalized_by = %s",
                 (release.VERSION, actor))
    return {"finalized": release.VERSION, "previous": found.finalized, "changed": True}


class NotFinalizable(Exception):
    """The gate cannot be moved yet; the message says why and what to do."""


class Watch:
    """A process's thread that reads the gate every second into the mapper (which writes the
    shapes it allows, domain/events.py), and the database's keys into the process's ring (which
    data keys write, and whether this process may), and reports the process's release and root
    keys every few seconds, and at once when the root key changed."""

    def __init__(self, connection: Callable[[], ContextManager[Any]], kind: str, mapper: Any, health: DatabaseHealth,
                 ring: keys.KeyRing | None = None):
        self.connection, self.kind, self.mapper, self.health, self.ring = connection, kind, mapper, health, ring
        # A dispatcher's id is also the name its SIM heartbeats give (sim_health.dispatcher).
        self.id = f"{'dispatcher' if kind == 'dispatch' else kind}-{uuid.uuid4().hex[:8]}"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"release-watch-{kind}", daemon=True)

    def start(self) -> Watch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        try:
            with self.connection() as conn:
                conn.execute("DELETE FROM sandesh_processes WHERE id = %s", (self.id,))
        except Exception:  # noqa: BLE001 - the report ages out by itself
            pass

    def _run(self) -> None:
        reported = 0.0
        while not self._stop.is_set():
            if self.health.down:  # its watcher tells when the database is back; no pooled connection is asked
                self._stop.wait(READ_EVERY)
                continue
            try:
                with self.connection() as conn:
                    found = read(conn)
                    if found is not None:
                        self.mapper.finalized = found.finalized
                    writing = None
                    if self.ring is not None:
                        writing = self.ring.current
                        keys.follow(conn, self.ring, found.finalized if found is not None else None)
                    if time.monotonic() - reported >= REPORT_EVERY or (self.ring and self.ring.current != writing):
                        self._report(conn)
                        reported = time.monotonic()
            except Exception as error:  # noqa: BLE001 - the thread never dies
                if is_outage(error):
                    self.health.failed(error)
                else:
                    logger.warning("could not read the database's release: %s", error)
            self._stop.wait(READ_EVERY)

    def _report(self, conn: Any) -> None:
        conn.execute(
            "INSERT INTO sandesh_processes (id, kind, host, pid, release, keys, writes) VALUES (%s, %s, %s, %s, %s, %s, %s)"
            " ON CONFLICT (id) DO UPDATE SET seen_at = now(), release = excluded.release, keys = excluded.keys,"
            " writes = excluded.writes",
            (self.id, self.kind, socket.gethostname(), os.getpid(), release.VERSION,
             list(self.ring.ids) if self.ring else None, self.ring.current if self.ring else None))
        conn.execute("DELETE FROM sandesh_processes WHERE seen_at < now() - make_interval(secs => %s)",
                     (FORGET_SECONDS,))
