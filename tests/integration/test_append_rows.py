"""One path per event (projections/contract.py): an append of many events, written by the inline
projection's live executor (`AppendRows`: the queue in one statement, the balances summed, the
turn lock first) makes the same rows as the same handlers run one event at a time on `SqlRows`,
which is what a replay's catch-up does, and the same turns as a replay's memory computes."""
from __future__ import annotations

import random

import psycopg
import pytest
from psycopg.rows import dict_row

from sandesh.domain.message import accept
from sandesh.domain.workspace import Workspace
from sandesh.projections import dispatch, registry
from sandesh.projections.engine import replay
from sandesh.projections.engine.sql import SqlRows
from sandesh.projections.engine.memory import MemoryRows
from sandesh.projections.storage.store import StatementBuffer

PROJECTION = registry.PROJECTION


def _events(*aggregates):
    return [e for a in aggregates for e in a.collect_events()]


def _message(workspace, client, i, kind, *, key=None, send_at=None):
    return accept(client_id=client, workspace_id=workspace.id, to=f"97798{i:08d}", text="t", message_type=kind,
                  segments=1 + i % 2, encoding="GSM-7", cost=100 + i, idempotency_key=key,
                  request_hash="h" if key else None, at=1000.0 + i, send_at=send_at)


@pytest.fixture
def schemas(database_url):
    """Two empty copies of the inline tables, each on a connection whose search_path finds it."""
    conns = {}
    for name in ("one_by_one", "appended"):
        conn = psycopg.connect(database_url, autocommit=True, row_factory=dict_row)
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
        conn.execute(f'CREATE SCHEMA "{name}"')
        conn.execute(f'SET search_path = "{name}"')
        conn.execute(PROJECTION.ddl)
        conns[name] = conn
    yield conns
    for name, conn in conns.items():
        conn.execute(f'DROP SCHEMA "{name}" CASCADE')
        conn.close()


def _one_by_one(conn, events):
    with conn.transaction(), conn.cursor() as cur:
        rows = SqlRows(cur, PROJECTION.tables)
        for event in events:
            PROJECTION.apply(rows, event)


def _appended(conn, events):
    """As the recorder runs it (projections/storage/store.py): the writer's statements as one script."""
    buffer = StatementBuffer(conn)
    PROJECTION.inline_writer(events)(buffer)
    conn.execute(";\n".join(["BEGIN", *buffer.statements, "COMMIT"]), prepare=False)
    return buffer.statements


def _tables(conn):
    return {table: conn.execute(f"SELECT * FROM {table} ORDER BY 1, 2").fetchall() for table in PROJECTION.tables}


def test_an_append_of_many_events_makes_the_rows_one_event_at_a_time_makes(schemas):
    workspaces = [Workspace(name=f"W{i}", types=["transactional", "otp", "promotional"], rates={}, actor="t",
                            at=1.0) for i in range(3)]
    for workspace in workspaces:
        workspace.credit(10**6, None, "t", 2.0)
    clients = ["cl_a", "cl_b", "cl_c", "cl_d"]
    earlier = [_message(workspaces[i % 3], clients[i % 4], i, ("otp", "transactional", "promotional")[i % 3])
               for i in range(12)]
    released = _message(workspaces[1], "cl_b", 91, "transactional", send_at=900.0)
    before = _events(*workspaces, *earlier, released)
    for conn in schemas.values():  # a queue and a schedule already there, the same on both sides
        _one_by_one(conn, before)
        conn.execute("UPDATE dispatch_queue SET sim_id = 'sim_1' WHERE message_id = ANY(%s)",
                     ([m.id for m in earlier[:5]],))

    earlier[7].fail("CMS 500", at=2000.0)
    released.release(at=2001.0)
    append = _events(earlier[7], released, *[
        _message(workspaces[i % 3], clients[(i * 7) % 4], 100 + i, ("promotional", "otp", "transactional")[i % 3],
                 key=f"key-{i}" if i % 4 == 0 else None, send_at=6000.0 + i if i % 9 == 0 else None)
        for i in range(40)])

    _one_by_one(schemas["one_by_one"], append)
    statements = _appended(schemas["appended"], append)

    assert statements[0] == dispatch.TURN_LOCK
    assert sum("sandesh_enqueue" in s for s in statements) == 1  # the queue rows in one statement
    assert sum(s.lstrip().startswith("WITH locked") for s in statements) == 1  # the balances in another
    one_by_one, appended = _tables(schemas["one_by_one"]), _tables(schemas["appended"])
    assert appended == one_by_one
    assert len(appended["dispatch_queue"]) > 40 and len({r["turn"] for r in appended["dispatch_queue"]}) > 1


def test_the_turns_sql_gives_live_are_the_turns_a_replays_memory_gives(schemas):
    """The turn rule is SQL live (`sandesh_turn`, one row at a time or many in `sandesh_enqueue`)
    and Python in a replay's memory (`dispatch.turn`): over random queues, appends of one to 40
    messages among sends, requeues, releases and failures, both give every message the same turn."""
    conn = schemas["appended"]
    memory = MemoryRows(PROJECTION.tables, replay.column_defaults(conn, "appended", PROJECTION))
    chance = random.Random(54)
    workspaces = [Workspace(name=f"W{i}", types=["transactional", "otp", "promotional"], rates={}, actor="t",
                            at=1.0) for i in range(2)]
    for workspace in workspaces:
        workspace.credit(10**9, None, "t", 2.0)
    waiting, submitted, scheduled, n = [], [], [], 0
    for step in range(80):
        at = 3000.0 + step
        changed = []
        for _ in range(chance.choice((0, 1, 4, 12, 30))):
            if waiting and chance.random() < 0.6:  # the head of the queue goes, as the dispatcher takes it
                order = [r["message_id"] for r in conn.execute(
                    "SELECT message_id FROM dispatch_queue WHERE sim_id IS NULL ORDER BY priority, turn, enqueued_at")]
                order += [m.id for m in changed]  # taken this step: not yet in the table
                message = min(waiting, key=lambda m: order.index(m.id) if m.id in order else len(order))
                waiting.remove(message)
                message.submit(f"sim_{chance.randrange(3)}", at)
                submitted.append(message)
            elif submitted and chance.random() < 0.5:
                message = submitted.pop(chance.randrange(len(submitted)))
                if chance.random() < 0.5:
                    message.requeue("CMS 38", not_before=at, at=at)
                    waiting.append(message)
                else:
                    message.part_accepted(1, 7, at)
            elif scheduled:
                message = scheduled.pop(0)
                message.release(at)
                waiting.append(message)
            elif waiting:
                waiting.pop(chance.randrange(len(waiting))).fail("expired", at)
                continue
            else:
                continue
            changed.append(message)
        new = []
        for _ in range(chance.choice((0, 1, 3, 15, 16, 40))):
            n += 1
            message = accept(client_id=f"cl_{min(int(chance.expovariate(0.5)), 9)}", workspace_id=workspaces[n % 2].id,
                             to=f"97798{n:08d}", text="t", message_type=chance.choice(("otp", "transactional", "promotional")),
                             segments=1, encoding="GSM-7", cost=1, idempotency_key=None, request_hash=None, at=at,
                             send_at=at + 5 if chance.random() < 0.1 else None)
            (scheduled if message.send_at is not None else waiting).append(message)
            new.append(message)
        events = _events(*(workspaces if step == 0 else ()), *changed, *new)
        if not events:
            continue
        _appended(conn, events)
        for event in events:
            PROJECTION.apply(memory, event)
        live = {r["message_id"]: r["turn"] for r in conn.execute("SELECT message_id, turn FROM dispatch_queue")}
        assert {key[0]: row["turn"] for key, row in memory.rows["dispatch_queue"].items()} == live, step
    # what the queues were built to exercise, so executors that agree by doing nothing would not pass
    assert n > 300 and len(set(live.values())) > 20 and any(m.sim_id for m in submitted)
