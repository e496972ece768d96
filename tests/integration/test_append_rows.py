"""One path per event (projections/contract.py): an append of many events, written by the inline
projection's live executor (`AppendRows`: the queue in one statement, the balances summed, the
turn lock first) makes the same rows as the same handlers run one event at a time on `SqlRows`,
which is what a replay's catch-up does."""
from __future__ import annotations

import psycopg
import pytest
from psycopg.rows import dict_row

from sandesh.domain.message import accept
from sandesh.domain.workspace import Workspace
from sandesh.projections import dispatch, registry
from sandesh.projections.rows import SqlRows
from sandesh.projections.store import StatementBuffer

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
    """As the recorder runs it (projections/store.py): the writer's statements as one script."""
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
    assert sum("WITH new AS MATERIALIZED" in s for s in statements) == 1  # the queue rows in one statement
    assert sum(s.lstrip().startswith("WITH locked") for s in statements) == 1  # the balances in another
    one_by_one, appended = _tables(schemas["one_by_one"]), _tables(schemas["appended"])
    assert appended == one_by_one
    assert len(appended["dispatch_queue"]) > 40 and len({r["turn"] for r in appended["dispatch_queue"]}) > 1
