"""The alerts' read model (domain/alerts.py; docs/operations.md, "Alerts"): `alerts` (each
raised, its end, how many destinations were told of each), `alert_destinations` and
`alert_tuning`.  An inline read model of the registry's projection: written in the append of
its events, rebuilt by `sandesh replay registry`, so the history of alerts survives a replay."""
from __future__ import annotations

from typing import Any

from psycopg.types.json import Jsonb

from sandesh.domain.alerts import DIGEST, INTERVAL_KEY, Alert, Destination, Tuning

from .contract import ReadModel
from .rows import Add, Rows, Table
from .webhooks import WAITING_CLIENTS

DDL = """
CREATE TABLE IF NOT EXISTS alerts (
    id text PRIMARY KEY, condition text NOT NULL, subject text NOT NULL, text text NOT NULL,
    raised_at double precision NOT NULL, cleared_at double precision, cleared_text text,
    told integer NOT NULL DEFAULT 0, told_cleared integer NOT NULL DEFAULT 0, failed integer NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS alerts_open ON alerts (condition, subject) WHERE cleared_at IS NULL;
CREATE INDEX IF NOT EXISTS alerts_latest ON alerts (condition, subject, raised_at);
CREATE TABLE IF NOT EXISTS alert_destinations (
    id text PRIMARY KEY, url_sealed text NOT NULL, shown text NOT NULL, conditions jsonb NOT NULL,
    added_at double precision NOT NULL, removed boolean NOT NULL DEFAULT false);
CREATE TABLE IF NOT EXISTS alert_tuning (condition text PRIMARY KEY, delay double precision, off boolean NOT NULL);
CREATE TABLE IF NOT EXISTS alert_texts (
    message_id text PRIMARY KEY, alert_id text NOT NULL, destination_id text NOT NULL, cleared boolean NOT NULL,
    at double precision NOT NULL);
CREATE INDEX IF NOT EXISTS alert_texts_destination ON alert_texts (destination_id, at);
CREATE INDEX IF NOT EXISTS alert_texts_alert ON alert_texts (alert_id);
"""

MODEL = ReadModel(tables={"alerts": Table("alerts", ("id",)),
                          "alert_destinations": Table("alert_destinations", ("id",)),
                          "alert_tuning": Table("alert_tuning", ("condition",)),
                          "alert_texts": Table("alert_texts", ("message_id",))}, ddl=DDL)


@MODEL.on(Alert.Raised)
def _raised(rows: Rows, e: Alert.Raised) -> None:
    rows.insert("alerts", {"id": e.originator_id, "condition": e.condition, "subject": e.subject, "text": e.text,
                           "raised_at": e.at})


@MODEL.on(Alert.Cleared)
def _cleared(rows: Rows, e: Alert.Cleared) -> None:
    rows.update("alerts", (e.originator_id,), {"cleared_at": e.at, "cleared_text": e.text})


@MODEL.on(Alert.Told)
def _told(rows: Rows, e: Alert.Told) -> None:
    column = "failed" if e.error else ("told_cleared" if e.cleared else "told")
    rows.update("alerts", (e.originator_id,), {column: Add(1)})


def texted(rows: Rows, e: Alert.Texted) -> None:
    """An alert's SMS queued (registry.py writes it with the queue row's SIM to avoid)."""
    rows.insert("alert_texts", {"message_id": e.message_id, "alert_id": e.originator_id,
                                "destination_id": e.destination_id, "cleared": e.cleared, "at": e.at})
    rows.update("alerts", (e.originator_id,), {"told_cleared" if e.cleared else "told": Add(1)})


@MODEL.on(Destination.Added)
def _destination_added(rows: Rows, e: Destination.Added) -> None:
    rows.insert("alert_destinations", {"id": e.originator_id, "url_sealed": e.url_sealed, "shown": e.shown,
                                       "conditions": Jsonb(e.conditions), "added_at": e.at})


@MODEL.on(Destination.Removed)
def _destination_removed(rows: Rows, e: Destination.Removed) -> None:
    rows.update("alert_destinations", (e.originator_id,), {"removed": True})


@MODEL.on(Tuning.IntervalSet)
def _interval_set(rows: Rows, e: Tuning.IntervalSet) -> None:
    rows.insert("alert_tuning", {"condition": INTERVAL_KEY, "delay": e.seconds, "off": False}, on_conflict="update")


@MODEL.on(Tuning.DigestSet)
def _digest_set(rows: Rows, e: Tuning.DigestSet) -> None:
    rows.insert("alert_tuning", {"condition": DIGEST, "delay": e.seconds, "off": False}, on_conflict="update")


@MODEL.on(Tuning.Tuned)
def _tuned(rows: Rows, e: Tuning.Tuned) -> None:
    rows.insert("alert_tuning", {"condition": e.condition, "delay": e.delay, "off": e.delay is None},
                on_conflict="update")


def open_alerts(conn: Any) -> list[dict[str, Any]]:
    return conn.execute("SELECT * FROM alerts WHERE cleared_at IS NULL ORDER BY raised_at").fetchall()


def last_cleared(conn: Any, since: float) -> dict[tuple[str, str], float]:
    """(condition, subject) -> when its last alert ended, for those that ended since `since`."""
    rows = conn.execute("SELECT condition, subject, max(cleared_at) AS at FROM alerts WHERE cleared_at >= %s"
                        " GROUP BY condition, subject", (since,)).fetchall()
    return {(r["condition"], r["subject"]): r["at"] for r in rows}


def destinations(conn: Any) -> list[dict[str, Any]]:
    return conn.execute("SELECT * FROM alert_destinations WHERE NOT removed ORDER BY added_at").fetchall()


def tuning(conn: Any) -> dict[str, float | None]:
    """condition -> its delay as tuned (None: off); INTERVAL_KEY -> the interval (None: default);
    DIGEST -> the daily digest's time (None: none)."""
    return {r["condition"]: None if r["off"] else r["delay"]
            for r in conn.execute("SELECT * FROM alert_tuning").fetchall()}


def texts_since(conn: Any, destination_id: str, since: float) -> int:
    """Alert SMS queued to a destination since `since`."""
    return conn.execute("SELECT count(*) AS n FROM alert_texts WHERE destination_id = %s AND at > %s",
                        (destination_id, since)).fetchone()["n"]


def messages_of(conn: Any, alert_ids: list[str]) -> dict[str, list[str]]:
    """alert id -> the ids of its SMS, oldest first."""
    found: dict[str, list[str]] = {}
    for r in conn.execute("SELECT alert_id, message_id FROM alert_texts WHERE alert_id = ANY(%s) ORDER BY at",
                          (alert_ids,)).fetchall():
        found.setdefault(r["alert_id"], []).append(r["message_id"])
    return found


# The messages each client accepted in a day (index messages_client_newest), by what became of them.
_DAY = """
SELECT count(*) AS accepted, count(*) FILTER (WHERE m.status = 'delivered') AS delivered,
       count(*) FILTER (WHERE m.status = 'undelivered') AS undelivered,
       count(*) FILTER (WHERE m.status IN ('failed', 'rejected')) AS failed
FROM clients c
CROSS JOIN LATERAL (SELECT status FROM messages WHERE client_id = c.id
                    AND created_at >= %(since)s AND created_at < %(until)s) m
"""


def day_counts(conn: Any, since: float, until: float) -> dict[str, int]:
    """For the daily digest: the messages accepted from `since` to `until`, how many of them were
    delivered, undelivered and failed (or rejected), and the alerts raised meanwhile."""
    counts = dict(conn.execute(_DAY, {"since": since, "until": until}).fetchone())
    counts["alerts"] = conn.execute("SELECT count(*) AS n FROM alerts WHERE raised_at >= %s AND raised_at < %s",
                                    (since, until)).fetchone()["n"]
    return counts


def low_balances(conn: Any) -> list[dict[str, Any]]:
    """The active workspaces whose balance is below the alert their owners set (a scan of
    `workspaces`: an index on the balance would cost every send a write, docs/performance.md)."""
    return conn.execute("SELECT id, name, balance, balance_alert FROM workspaces WHERE balance_alert IS NOT NULL"
                        " AND balance < balance_alert AND status = 'active'").fetchall()


# The clients with deliveries waiting (one index entry each, webhook_deliveries_client_due), and
# the latest delivery of each that was tried: a client whose latest try failed is failing now.
_FAILING = f"""
WITH RECURSIVE {WAITING_CLIENTS}
SELECT w.client_id, c.brand
FROM waiting w JOIN clients c ON c.id = w.client_id
CROSS JOIN LATERAL (SELECT d.state FROM webhook_deliveries d WHERE d.client_id = w.client_id AND d.attempts >= 1
                    ORDER BY d.created_at DESC LIMIT 1) latest
WHERE latest.state <> 'delivered'
"""


# Advisory lock: the one notifier that looks, on any host (workers/notifier.py); the others wait.
NOTIFIER_TURN = 0x5A4E_A1E7


def take_turn(conn: Any) -> bool:
    """Whether this session (a connection of its own, db.connect) now holds the notifiers' turn,
    until it ends."""
    return bool(conn.execute("SELECT pg_try_advisory_lock(%s)", (NOTIFIER_TURN,)).fetchone()[0])


def still_held(conn: Any) -> None:
    """Raise when the session holding the turn has ended (its lock went with it)."""
    conn.execute("SELECT 1")


def failing_webhooks(conn: Any) -> list[dict[str, Any]]:
    """The clients with deliveries waiting whose latest tried delivery was not delivered: their
    receiver is failing now.  Without JIT: behind a slow receiver's long backlog the planner
    expects enough rows to compile the query, which then costs most of its time
    (docs/performance.md, "The notifier")."""
    with conn.transaction():
        conn.execute("SET LOCAL jit = off")
        return conn.execute(_FAILING).fetchall()


def dead_webhooks(conn: Any, since: float) -> list[dict[str, Any]]:
    """The clients with deliveries given up since `since`, and how many (webhook_deliveries_dead)."""
    return conn.execute("SELECT d.client_id, c.brand, count(*) AS n FROM webhook_deliveries d"
                        " JOIN clients c ON c.id = d.client_id WHERE d.state = 'dead' AND d.updated_at > %s"
                        " GROUP BY d.client_id, c.brand", (since,)).fetchall()


def owners(conn: Any, workspace_id: str) -> list[dict[str, Any]]:
    """The owners of a workspace who may sign in: whom its balance alerts are e-mailed to."""
    return conn.execute("SELECT id, email, name, language FROM people WHERE workspace_id = %s AND role = 'owner'"
                        " AND NOT disabled ORDER BY created_at", (workspace_id,)).fetchall()


def holding_for(conn: Any, condition: str, subject: str) -> dict[str, Any] | None:
    """The alert of this condition and subject that holds now, if one does."""
    return conn.execute("SELECT * FROM alerts WHERE condition = %s AND subject = %s AND cleared_at IS NULL",
                        (condition, subject)).fetchone()


def history(conn: Any, limit: int = 50) -> list[dict[str, Any]]:
    return conn.execute("SELECT * FROM alerts ORDER BY raised_at DESC LIMIT %s", (limit,)).fetchall()


def view(row: dict[str, Any]) -> dict[str, Any]:
    from sandesh.domain.clock import iso
    return {"id": row["id"], "condition": row["condition"], "subject": row["subject"], "text": row["text"],
            "since": iso(row["raised_at"]), "clearedAt": iso(row["cleared_at"]) if row["cleared_at"] else None,
            "told": row["told"], "toldCleared": row["told_cleared"], "failed": row["failed"]}
