"""The audit read model (projections/audit.py; docs/dashboard.md, "Audit log"): one line per
operator change, as the log reads it, rebuilt by `sandesh replay`; and a page of it is an index
scan that stops at its last row, however many lines other workspaces have."""
from __future__ import annotations

import orjson

from sandesh.api.dashboard.paging import PAGE
from sandesh.domain.sending import parse_send
from sandesh.projections import audit, follower
from scripts.bench.audit_page import fill, measured, pages
from tests.helpers import funded_workspace


def changes(app):
    """Operator changes of two workspaces and of a SIM, and a recipient's STOP, which is none."""
    made = []
    for name in ("Kathmandu", "Pokhara"):
        ws = funded_workspace(app, name, 10**6, "op")
        client = app.operators.create_client(ws, f"{name} shop", None, 100, "op")[0].id
        request, _ = parse_send({"to": "9779841000002", "text": "Offer", "messageType": "promotional"})
        message = app.sending.send(client, ws, request, 100)
        reply = app.dispatch.store_reply_part(None, "sim_x", "+9779841000002", None, 1, 1, "STOP")
        app.dispatch.finish_reply(reply.id, app.history.message(message.id))
        app.operators.rotate_key(client, "op")  # its event does not carry the workspace
        app.operators.update_client(client, "Renamed", None, None, "op")
        app.operators.disable_client(client, "op")
        app.people.add_person(f"owner@{name.lower()}.example", "Owner", ws, "owner", False, "op")
        app.operators.opt_out(ws, "9779841000001", "operator", "op")
        made.append((ws, client))
    sim = app.sims.add_sim("audited", "loop://", 115200, None, "op")
    app.sims.disable_sim(sim.id, "op")
    return made


def same(lines):
    return sorted(lines, key=lambda line: orjson.dumps(line, option=orjson.OPT_SORT_KEYS))


def lines_of(runtime, workspace_id=None):
    with runtime.connection() as conn:
        rows = conn.execute("SELECT * FROM audit_lines WHERE %(ws)s::text IS NULL OR workspace_id = %(ws)s"
                            " ORDER BY at, originator_id, originator_version", {"ws": workspace_id}).fetchall()
    return [audit.line(row) for row in rows]


def test_each_operator_change_is_one_line_of_its_workspace_as_the_log_reads_it(runtime):
    made = changes(runtime.sandesh)
    follower.catch_up(runtime)
    for ws, client in made:
        lines = lines_of(runtime, ws)
        assert same(lines) == same(runtime.sandesh.history.audit(ws))
        rotated = [line for line in lines if line["action"] == "client.key_rotated"]
        assert [(line["workspaceId"], line["clientId"]) for line in rotated] == [(ws, client)]
        assert [line["actor"] for line in lines if line["action"] == "optout.added"] == ["op"]  # not the STOP
    assert same(lines_of(runtime)) == same(runtime.sandesh.history.audit())  # the SIM's lines too, of no workspace
    assert {line["action"] for line in lines_of(runtime) if line["workspaceId"] is None} == {"sim.added",
                                                                                            "sim.disabled"}


def test_replay_rebuilds_the_audit_lines_row_for_row(runtime, sandesh):
    follower.catch_up(runtime)
    before = lines_of(runtime)
    assert sandesh("replay", "--check", "audit")["ok"] is True
    done = sandesh("replay", "audit")
    assert done["projections"]["audit"]["rows"] == len(before) + 2  # and the two clients' workspaces
    assert lines_of(runtime) == before


def test_a_page_of_any_filter_is_an_index_scan_that_stops_at_its_last_row(runtime):
    """50 a page, newest first, by (at, id): each filter is read on an index of its own, so a page
    reads at most its 51 rows (per half of the person filter), whatever other workspaces hold."""
    lines, workspaces = 200_000, 400
    with runtime.connection() as conn:
        fill(conn, lines, workspaces)
        try:
            for name, page in pages(lines, workspaces).items():
                cost = measured(conn, name, page, runs=1)
                assert cost["indexScans"] and cost["filteredOut"] == 0, cost
                assert 0 < cost["rows"] <= 2 * (PAGE + 1), cost
        finally:
            conn.execute("DELETE FROM audit_lines WHERE originator_id LIKE 'gen_%'")


def test_pages_of_a_person_walk_their_lines_once_each_newest_first_and_back(runtime):
    """Next (before a line's key) and Previous (after it) over the Person filter's two merged
    halves: every line by or about the person, once, in the order of (at, id)."""
    lines, workspaces = 6_000, 4
    person = "p5@example.com"  # of ws_1
    with runtime.connection() as conn:
        fill(conn, lines, workspaces)
        try:
            expected = [(r["at"], r["originator_id"]) for r in conn.execute(
                "SELECT * FROM audit_lines WHERE workspace_id = 'ws_1' AND (actor = %(actor)s"
                " OR (action LIKE 'person.%%' AND details->>'email' = %(email)s))"
                " ORDER BY at DESC, originator_id DESC", {"actor": f"user:{person}", "email": person}).fetchall()]
            walked, pages, page = [], [], None
            while True:
                rows = audit.search(conn, "ws_1", None, None, person, None, None, page, PAGE)
                if not rows:
                    break
                pages.append(rows)
                walked += [(r["at"], r["originator_id"]) for r in rows]
                page = ("before", tuple(rows[-1][c] for c in audit.ORDER))
            back = audit.search(conn, "ws_1", None, None, person, None, None,
                                ("after", tuple(pages[1][0][c] for c in audit.ORDER)), PAGE)
        finally:
            conn.execute("DELETE FROM audit_lines WHERE originator_id LIKE 'gen_%'")
    assert len(expected) > 2 * PAGE and walked == expected
    assert back == pages[0]
