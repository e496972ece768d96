"""`sandesh worker dispatch`: drives the SIMs of this host and takes queued messages from the log.

Several dispatchers never take the same message: a message is leased from the inline
`dispatch_queue` with FOR UPDATE SKIP LOCKED, and its `Submitted` event is appended before the
first AT+CMGS.  A message whose outcome is unknown after a crash stays `submitted` for
reconciliation; it is not leased again.
"""
from __future__ import annotations

import logging
import queue
import random
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from domain.cms import Action, classify
from domain.pacing import OTP_RESERVE, capacity, fits
from domain.inbound import ATTRIBUTION_WINDOW, FLUSH_AFTER, sender_number
from domain.pdu import PduError, decode_deliver, decode_status_report, encode_submit
from projections import sim_health
from projections.bootstrap import Runtime

from .modem import CmsError, CommandTimeout, Modem, ModemError, PortGone, Unsolicited
from .sims import attach

log = logging.getLogger("sandesh.dispatcher")

LEASE_SECONDS = 300
HEARTBEAT_SECONDS = 10.0
VALIDITY_SECONDS = 24 * 3600  # the TP-VP every SUBMIT asks for
RETRY_DELAY = 30.0
MAX_ATTEMPTS = 5
REPORT_MATCH_WINDOW = 7 * 24 * 3600


def heartbeat_seconds(route_window: float) -> float:
    """How often each SIM is reported: every 10 s, and at least 3 times per route window so that
    one slow answer to AT+CSQ does not cost the SIM its route."""
    return min(HEARTBEAT_SECONDS, route_window / 3)


_LEASE = f"""
WITH waiting AS (
    SELECT q.message_id, q.priority, q.enqueued_at, (last.sim_id = %(sim)s) AS sticky,
           row_number() OVER (PARTITION BY q.client_id, q.priority ORDER BY q.enqueued_at) AS turn
    FROM dispatch_queue q
    LEFT JOIN LATERAL (SELECT p.sim_id FROM sent_parts p WHERE p."to" = q."to" AND p.at > %(recent)s
                       ORDER BY p.at DESC LIMIT 1) last ON true
    LEFT JOIN sim_health h ON h.sim_id = last.sim_id
    WHERE q.sim_id IS NULL AND q.not_before <= %(now)s AND q.parts <= %(max_parts)s
      AND (%(otp_only)s = false OR q.message_type = 'otp')
      AND (q.leased_until IS NULL OR q.leased_until < %(now)s)
      -- sticky sender: a recipient stays on the SIM it last heard from while that SIM is healthy
      AND (last.sim_id IS NULL OR last.sim_id = %(sim)s
           OR NOT COALESCE({sim_health.HEALTHY}, false))
    ORDER BY q.priority, turn, q.enqueued_at
    LIMIT 50)
UPDATE dispatch_queue SET leased_by = %(me)s, leased_until = %(until)s
WHERE message_id = (
    SELECT q.message_id FROM dispatch_queue q JOIN waiting w USING (message_id)
    ORDER BY w.priority, w.sticky DESC NULLS LAST, w.turn, w.enqueued_at
    LIMIT 1 FOR UPDATE OF q SKIP LOCKED)
  -- checked again on the row as it is now: another dispatcher may have leased it meanwhile
  AND sim_id IS NULL AND (leased_until IS NULL OR leased_until < %(now)s)
RETURNING message_id, message_type, parts
"""
# Oldest first within a type, and fair between clients: each client's n-th waiting message of
# a type goes before anyone's (n+1)-th, so one client's campaign does not starve another's one.


@dataclass
class SimWorker:
    """One SIM: its modem, its health, and a thread that sends one message at a time."""
    sim: dict[str, Any]
    modem: Modem
    jobs: queue.Queue = field(default_factory=queue.Queue)
    healthy: bool = True
    quarantined: bool = False  # barred, no credit, SIM failure: stays out until an operator acts
    busy: bool = False
    last_error: str | None = None
    reported_at: float = 0.0  # time.monotonic() of its last heartbeat


class Dispatcher:
    def __init__(self, runtime: Runtime, host: str | None = None):
        self.runtime = runtime
        self.app = runtime.app
        self.host = host
        self.me = f"dispatcher-{uuid.uuid4().hex[:8]}"
        self.sims: dict[str, SimWorker] = {}
        self.stop = threading.Event()
        self.route_window = runtime.settings.route_window
        self.heartbeat_seconds = heartbeat_seconds(self.route_window)

    # SIMs

    def start(self) -> None:
        with self.runtime.connection() as conn:
            rows = conn.execute("SELECT * FROM sims WHERE enabled AND (%(host)s::text IS NULL OR host = %(host)s)"
                                " ORDER BY name", {"host": self.host}).fetchall()
        for sim in rows:
            worker = SimWorker(sim, Modem(sim["port"], sim["baud"], on_unsolicited=self._unsolicited_for(sim["id"])))
            try:
                worker.modem.open()
                attach(self.runtime, sim, worker.modem)
            except ModemError as error:
                worker.healthy, worker.quarantined, worker.last_error = False, True, str(error)
                log.warning("SIM %s on %s is not usable: %s", sim["name"], sim["port"], error)
            self.sims[sim["id"]] = worker
            self._heartbeat(worker)
            if worker.healthy:
                try:
                    self._drain_store(worker)
                except ModemError as error:
                    log.warning("SIM %s: reading its store failed: %s", sim["name"], error)
            threading.Thread(target=self._serve_sim, args=(worker,), name=f"sim {sim['name']}", daemon=True).start()
        self.reconcile()

    def reconcile(self) -> int:
        """Messages left `submitted` on these SIMs by a dispatcher that stopped mid-send: the
        network may have them, so they are never resent.  Parts recorded as accepted complete
        them; otherwise they end `failed` with the reason (decisions §3)."""
        with self.runtime.connection() as conn:
            rows = conn.execute("SELECT q.message_id, q.parts, count(p.part) AS accepted FROM dispatch_queue q"
                                " LEFT JOIN sent_parts p ON p.message_id = q.message_id"
                                " WHERE q.sim_id = ANY(%s) GROUP BY q.message_id, q.parts",
                                (list(self.sims),)).fetchall()
        for row in rows:
            self._record(row["message_id"], lambda m: m.fail(
                "outcome unknown: the dispatcher stopped while the modem was sending it; not resent, so that "
                "the recipient never gets it twice", at=self.app.clock.now()))
        if rows:
            log.warning("reconciled %d message(s) left submitted by a stopped dispatcher", len(rows))
        return len(rows)

    def close(self) -> None:
        self.stop.set()
        for worker in self.sims.values():
            worker.jobs.put(None)
            worker.modem.close()

    def _part_times(self, sim_id: str, now: float) -> list[float]:
        with self.runtime.connection() as conn:
            rows = conn.execute("SELECT at FROM sent_parts WHERE sim_id = %s AND at > %s",
                                (sim_id, now - 1800)).fetchall()
        return [r["at"] for r in rows]

    # Scheduling

    def run(self) -> None:
        last_flush = 0.0
        while not self.stop.is_set():
            if time.monotonic() - last_flush > 5:
                self.flush_replies()
                self.give_up_on_reports()
                last_flush = time.monotonic()
            if not self.tick():
                self.stop.wait(0.2)

    def tick(self) -> int:
        """Give idle healthy SIMs, most window left first, the next message each may send;
        returns how many were given."""
        now = self.app.clock.now()
        idle = [(capacity(self._part_times(w.sim["id"], now), now), w) for w in self.sims.values()
                if not w.busy and w.healthy]
        given = 0
        for left, worker in sorted(idle, key=lambda pair: -pair[0]):
            if left <= 0:
                continue
            leased = self._lease(worker.sim["id"], now, max_parts=left, otp_only=left <= OTP_RESERVE)
            if leased is None:
                continue
            if not fits(leased["message_type"], leased["parts"], left):
                self._release(leased["message_id"])
                continue
            worker.busy = True
            worker.jobs.put(leased["message_id"])
            given += 1
        return given

    def _lease(self, sim_id: str, now: float, max_parts: int, otp_only: bool) -> dict[str, Any] | None:
        with self.runtime.connection() as conn:
            return conn.execute(_LEASE, {"me": self.me, "until": now + LEASE_SECONDS, "now": now, "sim": sim_id,
                                         "recent": now - REPORT_MATCH_WINDOW, "max_parts": max_parts,
                                         "otp_only": otp_only, "route_window": self.route_window}).fetchone()

    def _release(self, message_id: str) -> None:
        with self.runtime.connection() as conn:
            conn.execute("UPDATE dispatch_queue SET leased_by = NULL, leased_until = NULL WHERE message_id = %s",
                         (message_id,))

    # Sending

    def _heartbeat(self, worker: SimWorker) -> None:
        """Ask the modem how it is (AT+CREG?, AT+CSQ) and record it for routes and `sim list`."""
        registered = signal = None
        if not worker.modem.gone and not worker.quarantined:
            try:
                health = worker.modem.health()
                registered, signal = health.registered, health.signal_dbm
                worker.healthy = health.registered
                if not health.registered:
                    worker.last_error = "not registered on the network"
            except ModemError as error:
                worker.healthy, worker.last_error = False, str(error)
        else:
            worker.healthy = False
        with self.runtime.connection() as conn:
            sim_health.record(conn, worker.sim["id"], healthy=worker.healthy, registered=registered,
                              signal_dbm=signal, last_error=worker.last_error, dispatcher=self.me,
                              at=self.app.clock.now())
        worker.reported_at = time.monotonic()

    def _serve_sim(self, worker: SimWorker) -> None:
        while not self.stop.is_set():
            # a SIM that sends without a pause still reports: a stale heartbeat would take its route away
            due = worker.reported_at + self.heartbeat_seconds - time.monotonic()
            if due <= 0:
                self._heartbeat(worker)
                continue
            try:
                message_id = worker.jobs.get(timeout=due)
            except queue.Empty:
                continue
            if message_id is None:
                return
            if isinstance(message_id, tuple):  # ("inbound", index) from a +CMTI
                try:
                    self._read_inbound(worker, message_id[1])
                except Exception:
                    log.exception("reading stored message %s on %s failed", message_id[1], worker.sim["name"])
                continue
            try:
                self._send(worker, message_id)
            except Exception:
                log.exception("sending %s on %s failed", message_id, worker.sim["name"])
            finally:
                worker.busy = False

    def _record(self, message_id: str, change) -> Any:
        """Apply `change` to the message as the log has it now and append what it decided.
        The sender and the status-report reader both write to a message: a version conflict
        means the other one wrote first, so read it again."""
        from eventsourcing.persistence import IntegrityError

        for _ in range(10):
            message = self.app.message(message_id)
            change(message)
            try:
                self.app.save(message)
                return message
            except IntegrityError:
                continue
        raise ModemError(f"could not record a change to {message_id}")

    def _send(self, worker: SimWorker, message_id: str) -> None:
        message = self.app.message(message_id)
        if message is None or message.status != "queued":
            return self._release(message_id)
        message.submit(worker.sim["id"], at=self.app.clock.now())
        self.app.save(message)  # recorded before the first AT+CMGS: never sent twice blindly
        parts = encode_submit(message.to, message.text, reference=random.randrange(256))
        for number, part in enumerate(parts, start=1):
            try:
                mr = worker.modem.send_part(part.pdu, part.length)
            except CmsError as error:
                return self._refused(worker, message_id, error)
            except (CommandTimeout, PortGone) as error:
                # The part may have left: the message stays `submitted` for reconciliation.
                worker.last_error = str(error)
                worker.healthy = worker.modem.recover()
                log.warning("%s: outcome of %s part %d unknown: %s", worker.sim["name"], message_id, number, error)
                return
            self._record(message_id, lambda m, n=number, r=mr: m.part_accepted(n, r, at=self.app.clock.now()))

    def _refused(self, worker: SimWorker, message_id: str, error: CmsError) -> None:
        action = classify(error.code)
        worker.last_error = str(error)
        if action == Action.QUARANTINE:
            worker.healthy, worker.quarantined = False, True

        def decide(message: Any) -> None:
            now = self.app.clock.now()
            if action == Action.REJECT:
                message.reject(f"network refused the number (CMS {error.code})", at=now)
            elif action == Action.ALERT or message.ever_accepted:
                message.fail(f"could not be sent (CMS {error.code})", at=now)
            elif self._attempts(message_id) + 1 >= MAX_ATTEMPTS:
                message.fail(f"could not be sent after {MAX_ATTEMPTS} attempts (last: CMS {error.code})", at=now)
            else:
                message.requeue(f"SIM {worker.sim['name']}: CMS {error.code}", not_before=now + RETRY_DELAY, at=now)

        self._record(message_id, decide)

    def _attempts(self, message_id: str) -> int:
        with self.runtime.connection() as conn:
            row = conn.execute("SELECT attempts FROM dispatch_queue WHERE message_id = %s", (message_id,)).fetchone()
        return row["attempts"] if row else 0

    # Status reports

    def _unsolicited_for(self, sim_id: str):
        def handle(event: Unsolicited) -> None:
            if event.line.startswith("+CDS:") and event.pdu:
                self._status_report(sim_id, event.pdu)
            elif event.line.startswith("+CMTI:"):  # read by the SIM's own thread, not the reader
                index = event.line.rsplit(",", 1)[-1].strip()
                if index.isdigit() and sim_id in self.sims:
                    self.sims[sim_id].jobs.put(("inbound", int(index)))
        return handle

    # Replies

    def _drain_store(self, worker: SimWorker) -> None:
        """Everything the SIM stored while nobody listened (inbound survives a restart there)."""
        for index, pdu in worker.modem.stored():
            self._record_part(worker, index, pdu)

    def _read_inbound(self, worker: SimWorker, index: int) -> None:
        pdu = worker.modem.read_stored(index)
        if pdu is not None:
            self._record_part(worker, index, pdu)

    def _record_part(self, worker: SimWorker, index: int, pdu: str) -> None:
        """Read, save, then delete, so the SIM store never fills and nothing is lost."""
        try:
            part = decode_deliver(pdu)
        except PduError as error:
            log.warning("%s: unreadable stored message %d (%s); deleted", worker.sim["name"], index, error)
            worker.modem.delete_stored(index)
            return
        sender = sender_number(part.sender)
        with self.runtime.connection() as conn:
            open_reply = conn.execute(
                "SELECT id FROM replies WHERE sim_id = %s AND sender = %s AND reference IS NOT DISTINCT FROM %s"
                " AND total = %s AND received_at IS NULL AND total > 1 ORDER BY opened_at DESC LIMIT 1",
                (worker.sim["id"], sender, part.reference, part.total)).fetchone()
        reply = self.app.store_reply_part(open_reply["id"] if open_reply else None, worker.sim["id"], sender,
                                          part.reference, part.total, part.sequence, part.text)
        worker.modem.delete_stored(index)
        if reply.all_parts:
            self._finish_reply(reply.id)

    def _finish_reply(self, reply_id: str) -> None:
        reply = self.app.reply(reply_id)
        attributed = None
        if reply.sender.startswith("+") and reply.sender[1:].isdigit():
            with self.runtime.connection() as conn:
                row = conn.execute('SELECT message_id FROM sent_parts WHERE sim_id = %s AND "to" = %s AND at > %s'
                                   " ORDER BY at DESC LIMIT 1",
                                   (reply.sim_id, reply.sender[1:], self.app.clock.now() - ATTRIBUTION_WINDOW)).fetchone()
            attributed = self.app.message(row["message_id"]) if row else None
        self.app.finish_reply(reply_id, attributed)

    def give_up_on_reports(self) -> int:
        """Sent messages whose reports did not come within the validity period (24 h)."""
        with self.runtime.connection() as conn:
            rows = conn.execute("SELECT message_id FROM awaiting_reports WHERE sent_at <= %s",
                                (self.app.clock.now() - VALIDITY_SECONDS,)).fetchall()
        for row in rows:
            self._record(row["message_id"], lambda m: m.report_unknown(at=self.app.clock.now()))
        return len(rows)

    def flush_replies(self) -> int:
        """Complete multi-part replies whose missing parts never came within 10 minutes."""
        with self.runtime.connection() as conn:
            rows = conn.execute("SELECT id FROM replies WHERE received_at IS NULL AND opened_at <= %s"
                                " AND sim_id = ANY(%s)", (self.app.clock.now() - FLUSH_AFTER, list(self.sims))).fetchall()
        for row in rows:
            self._finish_reply(row["id"])
        return len(rows)

    def _status_report(self, sim_id: str, pdu: str) -> None:
        report = decode_status_report(pdu)
        now = self.app.clock.now()
        row = None
        for _ in range(20):  # a fast network may report a part before its +CMGS is recorded
            with self.runtime.connection() as conn:
                row = conn.execute(
                    'SELECT message_id, part FROM sent_parts WHERE sim_id = %s AND mr = %s AND "to" = %s AND at > %s'
                    " ORDER BY at DESC LIMIT 1", (sim_id, report.message_reference, report.recipient,
                                                  now - REPORT_MATCH_WINDOW)).fetchone()
            if row is not None or self.stop.wait(0.05):
                break
        if row is None:
            log.info("status report for MR %d to %s on %s matches no part", report.message_reference,
                     report.recipient, sim_id)
            return
        self._record(row["message_id"], lambda m: m.report(row["part"], report.status, at=now))
