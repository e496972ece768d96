"""Replies from phones (docs/design.md, "Decisions: SIMs, modems and replies"): the `replies` table.

Owns `replies` (`MODEL`): an inline read model written by the handlers below in the transaction
that appends the reply's events (part of registry.py's projection, rebuilt by `sandesh replay
registry`), and the queries on it: a multi-part reply still gathering parts, those to
complete by force, the operators' list (`sandesh inbound list` and the console's Replies
page, which joins `clients` for the workspace and brand a reply was attributed to), a
client's own (GET /v1/sms/inbound), and the keyword SMS whose service is to be asked or
answered (`service`: waiting, then asked; workers/services.py).  A reply's text is kept only
in the encrypted log.
"""
from __future__ import annotations

from typing import Any

from psycopg.types.json import Jsonb

from sandesh.domain.inbound import Reply

from . import keyset
from .contract import ReadModel
from .rows import Add, Rows, Table

DDL = """
CREATE TABLE IF NOT EXISTS replies (
    id text PRIMARY KEY, sim_id text NOT NULL, sender text NOT NULL, reference integer, total integer NOT NULL,
    parts integer NOT NULL DEFAULT 0, opened_at double precision NOT NULL, received_at double precision,
    client_id text, in_reply_to text, missing jsonb);
CREATE INDEX IF NOT EXISTS replies_open ON replies (opened_at) WHERE received_at IS NULL;
CREATE INDEX IF NOT EXISTS replies_in_reply_to ON replies (in_reply_to) WHERE in_reply_to IS NOT NULL;
CREATE INDEX IF NOT EXISTS replies_received ON replies (received_at, id) WHERE received_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS replies_client ON replies (client_id, received_at, id) WHERE received_at IS NOT NULL;
ALTER TABLE replies ADD COLUMN IF NOT EXISTS service text, ADD COLUMN IF NOT EXISTS service_asked_at double precision;
CREATE INDEX IF NOT EXISTS replies_service ON replies (received_at) WHERE service IS NOT NULL;
"""


MODEL = ReadModel(tables={"replies": Table("replies", ("id",))}, ddl=DDL)


@MODEL.on(Reply.Opened)
def _opened(rows: Rows, e: Reply.Opened) -> None:
    rows.insert("replies", {"id": e.originator_id, "sim_id": e.sim_id, "sender": e.sender, "reference": e.reference,
                            "total": e.total, "opened_at": e.at})


@MODEL.on(Reply.PartStored)
def _part_stored(rows: Rows, e: Reply.PartStored) -> None:
    rows.update("replies", (e.originator_id,), {"parts": Add(1)})


@MODEL.on(Reply.Received)
def _received(rows: Rows, e: Reply.Received) -> None:
    keyword = e.client_id is not None and e.in_reply_to is None  # a client's keyword SMS (domain/inbound.py)
    rows.update("replies", (e.originator_id,), {"received_at": e.at, "client_id": e.client_id,
                                                "in_reply_to": e.in_reply_to, "missing": Jsonb(e.missing),
                                                "service": "waiting" if keyword else None})


@MODEL.on(Reply.ServiceAsked)
def _service_asked(rows: Rows, e: Reply.ServiceAsked) -> None:
    rows.update("replies", (e.originator_id,), {"service": "asked", "service_asked_at": e.at})


@MODEL.on(Reply.ServiceAnswered)
def _service_answered(rows: Rows, e: Reply.ServiceAnswered) -> None:
    rows.update("replies", (e.originator_id,), {"service": None})


def services_due(conn: Any, asked_before: float, limit: int = 50) -> list[dict[str, Any]]:
    """Keyword SMS to answer, oldest first: those waiting, and those whose service was asked
    before `asked_before` and never answered (the sender that asked stopped meanwhile)."""
    return conn.execute(
        "SELECT id, client_id, sender, sim_id, service FROM replies WHERE service IS NOT NULL"
        " AND (service = 'waiting' OR service_asked_at < %s) ORDER BY received_at LIMIT %s",
        (asked_before, limit)).fetchall()


def open_reply(conn: Any, sim_id: str, sender: str, reference: int | None, total: int) -> str | None:
    """A multi-part reply still gathering parts with this reference."""
    row = conn.execute("SELECT id FROM replies WHERE sim_id = %s AND sender = %s AND reference IS NOT DISTINCT FROM %s"
                       " AND total = %s AND received_at IS NULL AND total > 1 ORDER BY opened_at DESC LIMIT 1",
                       (sim_id, sender, reference, total)).fetchone()
    return row["id"] if row else None


def replies_to_flush(conn: Any, opened_before: float, sim_ids: list[str]) -> list[str]:
    """Replies of these SIMs opened before `opened_before` whose missing parts never came."""
    return [r["id"] for r in conn.execute(
        "SELECT id FROM replies WHERE received_at IS NULL AND opened_at <= %s AND sim_id = ANY(%s)",
        (opened_before, sim_ids)).fetchall()]


def received(conn: Any, unattributed: bool, limit: int,
             before: tuple[float, str] | None = None) -> list[dict[str, Any]]:
    """The latest complete replies, newest first, with the workspace and brand of the client each
    is attributed to; only those attributed to no client if `unattributed`; only those older than
    `before` (received_at, id: the last row of the page before) when given.  Read backwards on
    `replies_received`, so a page costs the same however many replies there are."""
    at, reply_id = before or (None, None)
    return conn.execute(
        "SELECT r.*, c.workspace_id, c.brand FROM replies r LEFT JOIN clients c ON c.id = r.client_id"
        " WHERE r.received_at IS NOT NULL AND (NOT %s OR r.client_id IS NULL)"
        " AND (%s::float8 IS NULL OR (r.received_at, r.id) < (%s::float8, %s::text))"
        " ORDER BY r.received_at DESC, r.id DESC LIMIT %s", (unattributed, at, at, reply_id, limit)).fetchall()


ORDER = ("received_at", "id")  # a reply's place in a client's list, newest first


def for_client(conn: Any, client_id: str, since: float | None, until: float | None,
               before: tuple[float, str] | None, limit: int) -> list[dict[str, Any]]:
    """GET /v1/sms/inbound: `limit` of the complete replies attributed to the client, received
    in [since, until), newest first, older than `before` (a row's received_at and id) when
    given.  Keyset pages on replies_client."""
    page = ("before", before) if before is not None else None
    where = (["client_id = %s", "received_at IS NOT NULL"], [client_id])
    return keyset.read_page(conn, keyset.newest_first_query("replies", ORDER, where, since, until, page, limit), page)


def client_reply(conn: Any, reply_id: str, client_id: str) -> dict[str, Any] | None:
    """The complete reply `reply_id` if it is attributed to the client."""
    return conn.execute("SELECT * FROM replies WHERE id = %s AND client_id = %s AND received_at IS NOT NULL",
                        (reply_id, client_id)).fetchone()


def replies_to(conn: Any, message_id: str) -> list[str]:
    """The replies attributed to this message, oldest first (`sandesh message history`)."""
    return [r["id"] for r in conn.execute(
        "SELECT id FROM replies WHERE in_reply_to = %s ORDER BY received_at", (message_id,)).fetchall()]
