"""What the dispatcher asks of PostgreSQL: the head of the queue, leases, pacing history,
status-report matching; and the channel that wakes it (docs/design.md, "The queue").

Owns `dispatch_queue`, `sent_parts`, `awaiting_reports` and `scheduled_sends` (`MODEL`): inline
read models written by the handlers below in the transaction that appends their events (part of
registry.py's projection, whose handlers of `Accepted`, `Failed`, `Rejected` and `Canceled` call
`enqueue` and `dequeue` beside the debit and the refund; rebuilt by `sandesh replay registry`).
A lease is not history: it lives only on the queue row, for the moment between choosing a
message and appending its `Submitted` event.
sim_health.py's pool counts `sent_parts` (a read).

The head of the queue is read from one index, in (priority, turn, age) order.  A message's
turn is fixed when it is queued: one more than its client's last waiting turn of that type,
and never below the turn the queue is serving now, so each client's n-th waiting message goes
before anyone's (n+1)-th without ranking the queue at every lease.

A scheduled message waits in `scheduled_sends`, not in the queue, so messages due days ahead
cost the lease nothing; the dispatcher releases it at its `sendAt` (a `Released` event) and it
joins the queue then, its turn taken at that moment.
"""
from __future__ import annotations

import functools
import threading
from typing import Any, Callable

from sandesh.domain.message import Message
from sandesh.domain.operators import of_number
from sandesh.domain.pacing import PRIORITY, WINDOW_SECONDS
from sandesh.domain.settings import Settings

from .storage import channels
from .contract import ReadModel
from .rows import Add, AppendNew, Batching, Computed, Rows, Table, Tally

CHANNEL = "sandesh_dispatch"
# Something to send (no OTP among it; or any, an OTP included); the SIM pool changed; the test clock moved.
WORK, ANY_WORK, POOL, CLOCK = "work", "any-work", "pool", "clock"
NOTIFY_WORK = f"NOTIFY {CHANNEL}, '{WORK}'"
NOTIFY_ANY_WORK = f"NOTIFY {CHANNEL}, '{ANY_WORK}'"
NOTIFY_POOL = f"NOTIFY {CHANNEL}, '{POOL}'"
NOTIFY_CLOCK = f"NOTIFY {CHANNEL}, '{CLOCK}'"

# Taken by every append that puts messages in the queue, before their turns are computed, and
# held to its commit: the turns are then computed in the order the events enter the log, so
# replay gives the same turns as the live path (two API processes would otherwise compute theirs
# from the same queue at once).  Two int keys: a space apart from the idempotency keys' locks.
TURN_LOCK = "SELECT pg_advisory_xact_lock(7305, 1)"

DDL = """
CREATE TABLE IF NOT EXISTS dispatch_queue (
    message_id text PRIMARY KEY, client_id text NOT NULL, message_type text NOT NULL, priority integer NOT NULL,
    "to" text NOT NULL, parts integer NOT NULL, enqueued_at double precision NOT NULL,
    not_before double precision NOT NULL, attempts integer NOT NULL DEFAULT 0, sim_id text,
    leased_by text, leased_until double precision);
ALTER TABLE dispatch_queue ADD COLUMN IF NOT EXISTS turn bigint NOT NULL DEFAULT 0;
ALTER TABLE dispatch_queue ADD COLUMN IF NOT EXISTS operator text;
ALTER TABLE dispatch_queue ADD COLUMN IF NOT EXISTS failed_sims text[] NOT NULL DEFAULT '{}';
ALTER TABLE dispatch_queue ADD COLUMN IF NOT EXISTS expires_at double precision;
ALTER TABLE dispatch_queue ADD COLUMN IF NOT EXISTS leased_sim text;
ALTER TABLE dispatch_queue ADD COLUMN IF NOT EXISTS unknown_since double precision;
DROP INDEX IF EXISTS dispatch_queue_waiting;
CREATE INDEX IF NOT EXISTS dispatch_queue_head ON dispatch_queue (priority, turn, enqueued_at) WHERE sim_id IS NULL;
CREATE INDEX IF NOT EXISTS dispatch_queue_client_turn ON dispatch_queue (client_id, priority, turn);
CREATE INDEX IF NOT EXISTS dispatch_queue_on_sim ON dispatch_queue (sim_id) WHERE sim_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS dispatch_queue_leased_sim ON dispatch_queue (leased_sim) WHERE leased_sim IS NOT NULL;
DROP INDEX IF EXISTS dispatch_queue_expiring;
CREATE INDEX IF NOT EXISTS dispatch_queue_expiring_at ON dispatch_queue (expires_at)
    WHERE sim_id IS NULL AND expires_at IS NOT NULL;
-- The oldest waiting message per priority (GET /metrics).  Its predicate names `enqueued_at > 0`
-- (always true) so that no query of the head can use it: on a queue without statistics yet the
-- planner took it, plus a sort of every waiting message, for the turn probes and the lease
-- (docs/performance.md, "The caller cache").
DROP INDEX IF EXISTS dispatch_queue_age;
CREATE INDEX IF NOT EXISTS dispatch_queue_oldest ON dispatch_queue (priority, enqueued_at)
    WHERE sim_id IS NULL AND enqueued_at > 0;
CREATE TABLE IF NOT EXISTS sent_parts (
    message_id text NOT NULL, part integer NOT NULL, sim_id text NOT NULL, mr integer NOT NULL, "to" text NOT NULL,
    at double precision NOT NULL, PRIMARY KEY (message_id, part, at));
CREATE INDEX IF NOT EXISTS sent_parts_sim ON sent_parts (sim_id, at);
CREATE INDEX IF NOT EXISTS sent_parts_match ON sent_parts (sim_id, mr, "to", at);
CREATE INDEX IF NOT EXISTS sent_parts_recipient ON sent_parts ("to", at);
CREATE TABLE IF NOT EXISTS awaiting_reports (message_id text PRIMARY KEY, sent_at double precision NOT NULL);
CREATE TABLE IF NOT EXISTS scheduled_sends (message_id text PRIMARY KEY, send_at double precision NOT NULL);
CREATE INDEX IF NOT EXISTS scheduled_sends_due ON scheduled_sends (send_at);
"""

# Made once in the public schema (db.create_tables), not with each rebuild's tables: its queries
# name `dispatch_queue` as the caller's search_path finds it.
FUNCTIONS = """
-- The queue's turn rule, written here and nowhere else in SQL (`turn` below is its mirror in a
-- replay's memory).  A function, so that each server process plans its two probes once:
-- written inline, the parse and plan of each enqueue cost more than its insert
-- (docs/performance.md, "The turn as a function").
CREATE OR REPLACE FUNCTION public.sandesh_turn(p_client text, p_priority integer) RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN greatest(
        (SELECT turn + 1 FROM dispatch_queue WHERE client_id = p_client AND priority = p_priority
         ORDER BY turn DESC LIMIT 1),
        (SELECT turn FROM dispatch_queue WHERE priority = p_priority AND sim_id IS NULL ORDER BY turn LIMIT 1),
        0);
END $$;
-- Many queue rows of one append, one after another, each taking its turn from `sandesh_turn`
-- as a message queued alone does (each INSERT sees the ones before it).
CREATE OR REPLACE FUNCTION public.sandesh_enqueue(
    p_ids text[], p_clients text[], p_types text[], p_priorities integer[], p_tos text[], p_operators text[],
    p_parts integer[], p_ats double precision[], p_expires double precision[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1 .. cardinality(p_ids) LOOP
        INSERT INTO dispatch_queue (message_id, client_id, message_type, priority, "to", operator, parts,
                                    enqueued_at, not_before, expires_at, turn)
        VALUES (p_ids[i], p_clients[i], p_types[i], p_priorities[i], p_tos[i], p_operators[i], p_parts[i],
                p_ats[i], p_ats[i], p_expires[i], public.sandesh_turn(p_clients[i], p_priorities[i]));
    END LOOP;
END $$;
"""

@functools.lru_cache(maxsize=4096)  # a value of its arguments alone; a batch send asks for few of them
def turn(client_id: str, priority: int) -> Computed:
    """One more than the client's last turn of this priority in the queue, and never below the
    turn the queue is serving now (the lowest waiting one).  Live, the function `sandesh_turn`
    (FUNCTIONS above) computes it; a replay computes the same from its memory, with the two
    tallies of `MODEL` for the two probes (tests/integration/test_append_rows.py holds them
    equal over random queues).  Written as ORDER BY ... LIMIT 1 so that each probe reads one
    index entry even before the table has statistics."""
    def compute(memory: Any) -> int:
        last = memory.highest("dispatch_queue", "client_turns", (client_id, priority))
        serving = memory.lowest("dispatch_queue", "waiting_turns", (priority,))
        return max(last + 1 if last is not None else 0, serving if serving is not None else 0, 0)
    return Computed("public.sandesh_turn(%s, %s)", (client_id, priority), compute)


# Below this, a statement per message costs the API less (docs/performance.md, "The group commit's append").
ENQUEUE_MANY_FROM = 16


def enqueue_many(cur: Any, rows: list[dict[str, Any]]) -> None:
    """The queue rows of one append, in the order its events came, in one statement
    (`sandesh_enqueue`): their `not_before` is their `enqueued_at` (`_join_queue`), their `turn`
    is the function's."""
    assert all(r["not_before"] == r["enqueued_at"] for r in rows)
    cur.execute("SELECT public.sandesh_enqueue(%s, %s, %s, %s, %s, %s, %s, %s, %s)", (
        [r["message_id"] for r in rows], [r["client_id"] for r in rows], [r["message_type"] for r in rows],
        [r["priority"] for r in rows], [r["to"] for r in rows], [r["operator"] for r in rows],
        [r["parts"] for r in rows], [r["enqueued_at"] for r in rows], [r["expires_at"] for r in rows]))


def schedule_many(cur: Any, rows: list[dict[str, Any]]) -> None:
    """The scheduled messages of one append as one statement."""
    cur.execute("INSERT INTO scheduled_sends (message_id, send_at)"
                " SELECT * FROM unnest(%s::text[], %s::double precision[])",
                ([r["message_id"] for r in rows], [r["send_at"] for r in rows]))


MODEL = ReadModel(
    tables={
        "dispatch_queue": Table("dispatch_queue", ("message_id",), (
            Tally("client_turns", ("client_id", "priority"), "turn"),
            Tally("waiting_turns", ("priority",), "turn", where=lambda row: row["sim_id"] is None)),
            Batching(lock=TURN_LOCK, insert_many=enqueue_many, many_from=ENQUEUE_MANY_FROM)),
        "sent_parts": Table("sent_parts", ("message_id", "part", "at")),
        "awaiting_reports": Table("awaiting_reports", ("message_id",)),
        "scheduled_sends": Table("scheduled_sends", ("message_id",), (),
                                 Batching(insert_many=schedule_many, many_from=ENQUEUE_MANY_FROM)),
    },
    ddl=DDL,
    # Written by the dispatcher's lease, not by events: `sandesh replay --check` leaves them out.
    working_columns={"dispatch_queue": ("leased_by", "leased_sim", "leased_until")})


# The handlers, run in the append's transaction (projections/storage/store.py StatementBuffer).

def enqueue(rows: Rows, e: Message.Accepted) -> None:
    """An accepted message joins the queue, or waits for its `sendAt` (registry.py writes it
    with the debit)."""
    if e.send_at is not None:
        rows.insert("scheduled_sends", {"message_id": e.originator_id, "send_at": e.send_at})
    else:
        _join_queue(rows, e)


def _join_queue(rows: Rows, e: Message.Accepted | Message.Released) -> None:
    """The queue row of an `Accepted` or `Released` event (both carry the message's fixed fields)."""
    priority = PRIORITY[e.message_type]
    rows.insert("dispatch_queue", {
        "message_id": e.originator_id, "client_id": e.client_id, "message_type": e.message_type,
        "priority": priority, "to": e.to, "operator": of_number(e.to), "parts": e.segments, "enqueued_at": e.at,
        "not_before": e.at, "expires_at": e.expires_at, "turn": turn(e.client_id, priority)})


def avoid(rows: Rows, message_id: str, sim_id: str) -> None:
    """A SIM the queued message should not go through while another can send it (an alert's
    SMS about that SIM): counted as one it failed on, whose retry time has come."""
    rows.update("dispatch_queue", (message_id,), {"failed_sims": AppendNew(sim_id)})


def dequeue(rows: Rows, e: Message.Failed | Message.Rejected | Message.Canceled) -> None:
    """A failed, rejected or canceled message leaves the queue, or the schedule (registry.py
    writes it with the refund)."""
    rows.delete("dispatch_queue", (e.originator_id,))
    rows.delete("scheduled_sends", (e.originator_id,))


# The events only these tables record; `Accepted`, `Failed`, `Rejected` and `Canceled` are registry.py's.

@MODEL.on(Message.Released)
def _released(rows: Rows, e: Message.Released) -> None:
    rows.delete("scheduled_sends", (e.originator_id,))
    _join_queue(rows, e)


@MODEL.on(Message.Submitted)
def _submitted(rows: Rows, e: Message.Submitted) -> None:
    rows.update("dispatch_queue", (e.originator_id,), {"sim_id": e.sim_id})


@MODEL.on(Message.OutcomeUnknown)
def _outcome_unknown(rows: Rows, e: Message.OutcomeUnknown) -> None:
    rows.update("dispatch_queue", (e.originator_id,), {"unknown_since": e.at})


@MODEL.on(Message.PartAccepted)
def _part_accepted(rows: Rows, e: Message.PartAccepted) -> None:
    rows.insert("sent_parts", {"message_id": e.originator_id, "part": e.part, "sim_id": e.sim_id, "mr": e.mr,
                               "to": e.to, "at": e.at})


@MODEL.on(Message.Requeued)
def _requeued(rows: Rows, e: Message.Requeued) -> None:
    rows.update("dispatch_queue", (e.originator_id,), {
        "sim_id": None, "leased_by": None, "leased_sim": None, "leased_until": None, "attempts": Add(1),
        "not_before": e.not_before, "failed_sims": AppendNew(e.sim_id)})


@MODEL.on(Message.Sent)
def _sent(rows: Rows, e: Message.Sent) -> None:
    rows.delete("dispatch_queue", (e.originator_id,))
    rows.insert("awaiting_reports", {"message_id": e.originator_id, "sent_at": e.at}, on_conflict="nothing")


@MODEL.on(Message.Delivered, Message.Undelivered, Message.ReportUnknown)
def _report_settled(rows: Rows, e: Message.Delivered | Message.Undelivered | Message.ReportUnknown) -> None:
    rows.delete("awaiting_reports", (e.originator_id,))


# What the dispatcher asks

HEAD = """
SELECT q.message_id, q.message_type, q.parts, q.operator, q.failed_sims, q.not_before, q.expires_at,
       last.sim_id AS sticky_sim
FROM dispatch_queue q
LEFT JOIN LATERAL (SELECT p.sim_id FROM sent_parts p WHERE p."to" = q."to" AND p.at > %(recent)s
                   ORDER BY p.at DESC LIMIT 1) last ON true
WHERE q.sim_id IS NULL AND q.priority <= %(max_priority)s
  AND (q.leased_until IS NULL OR q.leased_until < %(now)s)
ORDER BY q.priority, q.turn, q.enqueued_at
LIMIT %(limit)s
FOR UPDATE OF q SKIP LOCKED
"""

_LEASE = ("UPDATE dispatch_queue SET leased_by = %(me)s, leased_sim = sims.sim, leased_until = %(until)s"
          " FROM unnest(%(ids)s::text[], %(sims)s::text[]) AS sims(id, sim) WHERE message_id = sims.id")


def lease(conn: Any, *, me: str, now: float, until: float, recent: float, max_priority: int, limit: int,
          choose: Callable[[list[dict[str, Any]]], list[tuple[str, str]]]) -> list[tuple[str, str]]:
    """Lock the head of the queue (skipping rows another dispatcher holds), let `choose` pair
    messages with SIMs, and lease those pairs, in one short transaction."""
    with conn.transaction():
        head = conn.execute(HEAD, {"now": now, "recent": recent, "max_priority": max_priority,
                                    "limit": limit}).fetchall()
        pairs = choose(head) if head else []
        if pairs:
            conn.execute(_LEASE, {"me": me, "until": until, "ids": [m for m, _ in pairs],
                                  "sims": [s for _, s in pairs]})
    return pairs


def release(conn: Any, message_ids: list[str]) -> None:
    """Leased, not submitted: back to the queue at once."""
    conn.execute("UPDATE dispatch_queue SET leased_by = NULL, leased_sim = NULL, leased_until = NULL"
                 " WHERE message_id = ANY(%s) AND sim_id IS NULL", (message_ids,))


def release_leases_of(conn: Any, sim_id: str) -> int:
    """Leases of a SIM whose port we now hold exclusively: whoever took them is gone."""
    return conn.execute("UPDATE dispatch_queue SET leased_by = NULL, leased_sim = NULL, leased_until = NULL"
                        " WHERE leased_sim = %s AND sim_id IS NULL", (sim_id,)).rowcount


def left_submitted(conn: Any, sim_id: str) -> list[str]:
    """Messages a SIM was sending when its dispatcher stopped, not yet known to be so."""
    return [r["message_id"] for r in conn.execute(
        "SELECT message_id FROM dispatch_queue WHERE sim_id = %s AND unknown_since IS NULL", (sim_id,)).fetchall()]


def unknown_to(conn: Any, sim_id: str, recipient: str) -> str | None:
    """The message of unknown outcome that a status report from this SIM for `recipient` is about."""
    row = conn.execute('SELECT message_id FROM dispatch_queue WHERE sim_id = %s AND "to" = %s'
                       " AND unknown_since IS NOT NULL ORDER BY unknown_since LIMIT 1", (sim_id, recipient)).fetchone()
    return row["message_id"] if row else None


def unknown_since_before(conn: Any, before: float) -> list[str]:
    return [r["message_id"] for r in conn.execute(
        "SELECT message_id FROM dispatch_queue WHERE unknown_since <= %s", (before,)).fetchall()]


def due_scheduled(conn: Any, now: float, limit: int = 500) -> list[str]:
    """Scheduled messages whose `sendAt` has come, the earliest first."""
    return [r["message_id"] for r in conn.execute(
        "SELECT message_id FROM scheduled_sends WHERE send_at <= %s ORDER BY send_at LIMIT %s",
        (now, limit)).fetchall()]


def expired(conn: Any, now: float, limit: int = 500) -> list[str]:
    """Waiting messages whose validity ended before any SIM took them."""
    return [r["message_id"] for r in conn.execute(
        "SELECT message_id FROM dispatch_queue WHERE sim_id IS NULL AND expires_at <= %s"
        " AND (leased_until IS NULL OR leased_until < %s) ORDER BY expires_at LIMIT %s",
        (now, now, limit)).fetchall()]


# Per priority (one per message type): the waiting messages counted up to a cap, and when the
# oldest was accepted; each subquery reads a few entries of one partial index (dispatch_queue_oldest).
_WAITING = """
SELECT t.priority,
       (SELECT count(*) FROM (SELECT 1 FROM dispatch_queue q WHERE q.sim_id IS NULL AND q.priority = t.priority
                              LIMIT %(cap)s) c) AS depth,
       (SELECT min(q.enqueued_at) FROM dispatch_queue q
         WHERE q.sim_id IS NULL AND q.enqueued_at > 0 AND q.priority = t.priority) AS oldest
FROM unnest(%(priorities)s::integer[]) AS t(priority)
"""


def waiting(conn: Any, cap: int) -> dict[str, tuple[int, float | None]]:
    """Per message type, the messages waiting for a SIM (counted up to `cap`) and when the oldest
    of them was accepted (None when none waits); for GET /metrics."""
    types = {priority: message_type for message_type, priority in PRIORITY.items()}
    rows = conn.execute(_WAITING, {"cap": cap, "priorities": list(types)}).fetchall()
    return {types[r["priority"]]: (r["depth"], r["oldest"]) for r in rows}


def parts_since(conn: Any, sim_id: str, since: float) -> int:
    """Parts of this SIM the network accepted since `since` (its plan's day and month: index
    sent_parts_sim)."""
    return conn.execute("SELECT count(*) AS parts FROM sent_parts WHERE sim_id = %s AND at >= %s",
                        (sim_id, since)).fetchone()["parts"]


def part_times(conn: Any, sim_id: str, now: float) -> list[float]:
    """When this SIM's parts in the current pacing window were accepted by the network."""
    rows = conn.execute("SELECT at FROM sent_parts WHERE sim_id = %s AND at > %s ORDER BY at",
                        (sim_id, now - WINDOW_SECONDS)).fetchall()
    return [r["at"] for r in rows]


def match_report(conn: Any, sim_id: str, mr: int, recipient: str, since: float) -> dict[str, Any] | None:
    """The part a status report is about: the latest with this SIM, TP-MR and recipient."""
    return conn.execute('SELECT message_id, part FROM sent_parts WHERE sim_id = %s AND mr = %s AND "to" = %s'
                        " AND at > %s ORDER BY at DESC LIMIT 1", (sim_id, mr, recipient, since)).fetchone()


def awaiting_report_to(conn: Any, sim_id: str, number: str, since: float) -> str | None:
    """The message sent to `number` through this SIM longest ago that still awaits its report."""
    row = conn.execute('SELECT p.message_id FROM sent_parts p JOIN awaiting_reports a USING (message_id)'
                       ' WHERE p.sim_id = %s AND p."to" = %s AND p.at > %s ORDER BY p.at LIMIT 1',
                       (sim_id, number, since)).fetchone()
    return row["message_id"] if row else None


def awaiting_reports_of(conn: Any, sim_id: str, limit: int, after: tuple[float, str] | None) -> list[tuple[float, str]]:
    """The messages sent through this SIM that await their reports, as (sent at, id), oldest
    first from just `after` one of them (from the oldest when None)."""
    at, message_id = after if after is not None else (float("-inf"), "")
    return [(r["sent_at"], r["message_id"]) for r in conn.execute(
        "SELECT a.sent_at, a.message_id FROM awaiting_reports a"
        " WHERE (a.sent_at, a.message_id) > (%(at)s, %(id)s) AND EXISTS (SELECT 1 FROM sent_parts p"
        " WHERE p.message_id = a.message_id AND p.sim_id = %(sim)s) ORDER BY a.sent_at, a.message_id LIMIT %(limit)s",
        {"at": at, "id": message_id, "sim": sim_id, "limit": limit}).fetchall()]


def last_sent_to(conn: Any, sim_id: str, number: str, since: float) -> str | None:
    """The message last sent to `number` through this SIM (whom a reply answers)."""
    row = conn.execute('SELECT message_id FROM sent_parts WHERE sim_id = %s AND "to" = %s AND at > %s'
                       " ORDER BY at DESC LIMIT 1", (sim_id, number, since)).fetchone()
    return row["message_id"] if row else None


def reports_overdue(conn: Any, sent_before: float) -> list[str]:
    return [r["message_id"] for r in conn.execute(
        "SELECT message_id FROM awaiting_reports WHERE sent_at <= %s", (sent_before,)).fetchall()]


def listen(settings: Settings, wake: Callable[[str], None], stop: threading.Event) -> None:
    """Call `wake(payload)` for every notification on the dispatch channel until `stop`; and
    once after each (re)connection, since notifications sent while away are lost."""
    channels.listen(settings.database_url, CHANNEL, wake, stop, on_connect=lambda: wake(POOL))
