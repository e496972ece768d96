"""`sandesh worker dispatch`: drives the SIMs of this host and takes queued messages from the log
(docs/design.md, "The dispatcher").

The pool is live: the dispatcher reads the registered SIMs whenever an operator changes one
(a notification) and at least every second, starting a thread for each SIM it should drive
and retiring the thread of a SIM that was disabled, moved or given to another host.

Work wakes it: every accepted or requeued message notifies it, so an idle pool, or one whose
pacing windows are full, costs almost nothing.  Each wake-up pairs the idle SIMs with the
head of the queue (domain/routing.py) and leases those messages with FOR UPDATE SKIP LOCKED,
so several dispatchers never take the same message.  A message's `Submitted` event is
appended before its first AT+CMGS; one whose outcome is unknown after a crash stays
`submitted` for reconciliation and is never leased again.
"""
from __future__ import annotations

import logging
import threading
import time
import uuid
from typing import Any, Callable

from sandesh.domain.errors import Contended
from sandesh.domain.inbound import FLUSH_AFTER, sender_number
from sandesh.domain.pacing import otp_reserve
from sandesh.domain.pdu import PduError, StatusReport, decode, decode_status_report
from sandesh.domain.routing import Offer, Pool, Waiting, assign
from sandesh.projections import device_cursors, dispatch, inbound, replies, sim_health
from sandesh.projections.storage.runtime import Runtime
from sandesh.projections.storage.health import is_outage

from .modem import ModemError, Unsolicited
from .ports import PortSearch
from .sim_load import Report, Stored, Wakeups
from .sim_worker import SimWorker

logger = logging.getLogger("sandesh.dispatcher")

LEASE_SECONDS = 30.0        # a lease covers the moment between choosing a message and `Submitted`
HEARTBEAT_SECONDS = 10.0
VALIDITY_SECONDS = 24 * 3600  # the TP-VP every SUBMIT asks for
REPORT_MATCH_WINDOW = 7 * 24 * 3600
POOL_EVERY = 1.0            # seconds between reads of the pool, besides notifications
NUDGE = "nudge"             # why the loop wakes when a SIM's thread is free again
HOUSEKEEPING_EVERY = 5.0


def heartbeat_seconds(route_window: float) -> float:
    """How often each SIM is reported: every 10 s, and at least 3 times per route window so that
    one slow answer to AT+CSQ does not cost the SIM its route."""
    return min(HEARTBEAT_SECONDS, route_window / 3)


class Arrivals:
    """What one SIM's link hands the dispatcher (workers/links.py)."""

    def __init__(self, dispatcher: Dispatcher, worker: SimWorker):
        self.dispatcher, self.worker = dispatcher, worker

    def pdu(self, pdu: str) -> None:
        self.dispatcher.record_pdu(self.worker, pdu)

    def reply(self, sender: str, text: str, key: str | None = None) -> None:
        if key is None:
            self.dispatcher.record_reply_part(self.worker, sender, None, 1, 1, text)
        else:
            replies.record_once(self.dispatcher.runtime, self.worker.id, key, sender, text)

    def report(self, recipient: str, delivered: bool) -> None:
        self.dispatcher.recipient_report(self.worker.id, recipient, delivered)

    def message_report(self, message_id: str, delivered: bool) -> None:
        """The device's word on the whole message: every part not reported yet."""
        status, now = (0x00 if delivered else 0x40), self.dispatcher.sandesh.clock.now()
        self.dispatcher.record(message_id, lambda m: m.report_whole(status, at=now))

    def awaiting(self, limit: int, after: tuple[float, str] | None = None) -> list[tuple[float, str]]:
        with self.dispatcher.runtime.connection() as conn:
            return dispatch.awaiting_reports_of(conn, self.worker.id, limit, after)

    def cursor(self) -> str | None:
        with self.dispatcher.runtime.connection() as conn:
            return device_cursors.get(conn, self.worker.id)

    def advance(self, cursor: str) -> None:
        with self.dispatcher.runtime.connection() as conn:
            device_cursors.put(conn, self.worker.id, cursor)


class Dispatcher:
    def __init__(self, runtime: Runtime, host: str | None = None):
        self.runtime = runtime
        self.sandesh = runtime.sandesh
        self.host = host
        # the name its SIM heartbeats and leases give: its release report's, when it makes one
        self.me = runtime.watch.id if runtime.watch is not None else f"dispatcher-{uuid.uuid4().hex[:8]}"
        # The SIMs it drives, by id: replaced whole by the loop (sync_pool), never changed in place,
        # so any thread reads the dict it took without a lock (docs/design.md, "The dispatcher's threads").
        self.sims: dict[str, SimWorker] = {}
        self.retired: list[SimWorker] = []
        self.stop = threading.Event()
        self.route_window = runtime.settings.route_window
        self.heartbeat_seconds = heartbeat_seconds(self.route_window)
        self._wakeups = Wakeups()             # what woke the loop since its last tick
        self._only_otp_placeable = False      # the last tick could lease only OTP, and found none
        self._pool_changed = threading.Event()
        self._clock_moved = threading.Event()
        self._elsewhere: set[str] = set()      # usable SIMs of other dispatchers with room
        self._usable_elsewhere: set[str] = set()
        self._pool_read = 0.0
        # where a SIM whose port is gone is looked for (SANDESH_MODEM_PORTS); None: nowhere
        self.port_search = PortSearch(runtime.settings.modem_ports) if runtime.settings.modem_ports else None

    # Life

    def start(self) -> None:
        threading.Thread(target=dispatch.listen, args=(self.runtime.settings, self._notified, self.stop),
                         name="dispatch channel", daemon=True).start()
        self.sync_pool()
        for worker in self.sims.values():  # each SIM had its first try before sends rely on it
            worker.first_try.wait(timeout=15)

    def close(self, wait: float = 5.0) -> list[str]:
        """Retire every SIM's thread and wait up to `wait` seconds for each to let go of its
        port; returns the names of those still holding one."""
        self.stop.set()
        for worker in self.sims.values():
            worker.retire()
        workers = [*self.sims.values(), *self.retired]
        for worker in workers:
            if worker.thread.ident is not None:  # one not started yet sees `retiring` when it starts
                worker.thread.join(timeout=wait)
        return [w.name for w in workers if w.thread.is_alive()]

    def trouble(self, error: BaseException) -> None:
        """An error in a loop: an outage is told once (runtime.health); anything else is logged."""
        if is_outage(error):
            self.runtime.health.failed(error)
        else:
            logger.exception("dispatcher: unexpected error (%s); going on", error)

    def nudge(self) -> None:
        """A SIM became free, or anything else worth a look."""
        self._wakeups.add(NUDGE)

    def _notified(self, payload: str) -> None:
        if payload == dispatch.POOL:
            self._pool_changed.set()
        elif payload == dispatch.CLOCK:  # the test clock jumped: heartbeats are stale in service time
            for worker in self.sims.values():
                worker.report_soon()
            self._clock_moved.set()  # and scheduled messages may be due: released before the next tick
        self._wakeups.add(payload)

    def run(self) -> None:
        last_housekeeping = 0.0
        while not self.stop.is_set():
            try:
                if self._pool_changed.is_set() or time.monotonic() - self._pool_read >= POOL_EVERY:
                    self.sync_pool()
                    self.release_scheduled()
                    self.expire_waiting()
                elif self._clock_moved.is_set():
                    self.release_scheduled()
                self._clock_moved.clear()
                if time.monotonic() - last_housekeeping >= HOUSEKEEPING_EVERY:
                    last_housekeeping = time.monotonic()
                    self.housekeeping()
                woken_by = self._wakeups.take()
                if not (woken_by == {dispatch.WORK} and self._only_otp_placeable):
                    self.tick()  # new work that is not an OTP cannot go where only an OTP may
            except Exception as error:  # the loop never dies: a database outage is waited out
                self.trouble(error)
                self.stop.wait(1.0)
            self._wakeups.wait(POOL_EVERY)

    # The live pool

    def sync_pool(self) -> None:
        """Start a thread for each SIM this dispatcher should drive; retire the thread of a SIM
        that was disabled, moved (port, baud, host) or removed; refresh what the others know."""
        self._pool_changed.clear()
        now = self.sandesh.clock.now()
        with self.runtime.connection() as conn:
            rows = sim_health.pool(conn, now, self.route_window)
        self._pool_read = time.monotonic()
        self.retired = [w for w in self.retired if w.thread.is_alive()]
        wanted = {r["id"]: r for r in rows if r["enabled"] and (self.host is None or r["host"] == self.host)}
        sims = dict(self.sims)
        for sim_id, worker in self.sims.items():
            row = wanted.get(sim_id)
            if not worker.thread.is_alive():  # it catches every error; should it die anyway, start it again
                logger.warning("SIM %s: its thread died; starting it again", worker.name)
                del sims[sim_id]
                continue
            if row is None or (row["port"], row["baud"]) != (worker.sim["port"], worker.sim["baud"]):
                logger.info("SIM %s: %s; retiring its thread", worker.name,
                         "moved" if row is not None else "disabled or given to another host")
                worker.retire()
                self.retired.append(sims.pop(sim_id))
            else:
                worker.quarantine = row["quarantine"]
                if worker.sim.refresh(row) and row["balance_ussd"]:
                    worker.report_soon()  # its heartbeat asks the new code for the credit
        busy_ids = {w.id for w in self.retired}
        started = []
        for sim_id, row in wanted.items():
            if sim_id not in sims and sim_id not in busy_ids:  # a retiring thread first lets go of the port
                sims[sim_id] = SimWorker(self, row)
                started.append(sims[sim_id])
        self.sims = sims  # published whole before any new thread runs: it may read the pool at once
        for worker in started:
            worker.start()
        others = [r for r in rows if r["id"] not in sims and r["usable"]]
        self._usable_elsewhere = {r["id"] for r in others}
        self._elsewhere = {r["id"] for r in others if r["has_room"]}

    def held_ports(self) -> set[str]:
        """The ports a SIM of this dispatcher holds or will open again: the registered port of
        every SIM not itself searching for its modem, and those of threads still letting go."""
        return {w.sim["port"] for w in self.sims.values() if not w.searching} | \
               {w.sim["port"] for w in tuple(self.retired) if w.thread.is_alive()}

    def usable_sims(self) -> set[str]:
        """The SIMs of the whole pool that could send now."""
        now = self.sandesh.clock.now()
        return {w.id for w in self.sims.values() if w.available(now)} | self._usable_elsewhere

    # Scheduling

    def tick(self) -> int:
        """Pair the idle SIMs with the head of the queue; returns how many messages were given."""
        now = self.sandesh.clock.now()
        usable = [w for w in self.sims.values() if w.available(now)]
        room = {w.id: w.left(now) for w in usable}
        offers = [Offer(w.id, w.operator, room[w.id], w.sent) for w in usable if not w.busy and room[w.id] > 0]
        self._only_otp_placeable = False
        if not offers:
            return 0
        pool = Pool(free=sum(max(0, r) for r in room.values()), reserve=otp_reserve(len(usable)),
                    elsewhere=self._elsewhere | {w.id for w in usable if w.busy and room[w.id] > 0},
                    holder=max(usable, key=lambda w: (w.sent, w.id)).id)
        only_otp = pool.free <= pool.reserve

        sizes: dict[str, int] = {}

        def choose(head: list[dict[str, Any]]) -> list[tuple[str, str]]:
            waiting = [Waiting(r["message_id"], r["message_type"], r["parts"], r["operator"],
                               tuple(r["failed_sims"]), r["not_before"], r["sticky_sim"])
                       for r in head if r["expires_at"] is None or r["expires_at"] > now]
            sizes.update((m.message_id, m.parts) for m in waiting)
            return [(m.message_id, o.sim_id) for m, o in assign(waiting, offers, pool, now)]

        with self.runtime.connection() as conn:
            pairs = dispatch.lease(conn, me=self.me, now=now, until=now + LEASE_SECONDS,
                                   recent=now - REPORT_MATCH_WINDOW, max_priority=0 if only_otp else 2,
                                   limit=max(16, 4 * len(offers)), choose=choose)
        for message_id, sim_id in pairs:
            self.sims[sim_id].give(message_id, sizes[message_id])
        self._only_otp_placeable = only_otp and not pairs
        return len(pairs)

    def record(self, message_id: str, change: Callable[[Any], None]) -> Any:
        """Apply `change` to the message and append what it decided (dispatch.change_message, domain/usecases/dispatch.py)."""
        try:
            return self.sandesh.dispatch.change_message(message_id, change)
        except Contended as error:
            raise ModemError(str(error)) from None

    def reconcile(self, sim_id: str) -> int:
        """Messages left `submitted` on this SIM by a dispatcher that stopped mid-send: the
        network may have them, so they are never resent (docs/reliability.md, "Unknown outcomes").
        They wait for a status report, matched on SIM and recipient, until the validity period ends."""
        with self.runtime.connection() as conn:
            left = dispatch.left_submitted(conn, sim_id)
        for message_id in left:
            self.record(message_id, lambda m: m.outcome_unknown(at=self.sandesh.clock.now()))
        if left:
            logger.warning("%d message(s) left submitted by a stopped dispatcher: not resent; waiting for their "
                        "status reports", len(left))
        return len(left)

    def release_scheduled(self) -> int:
        """Scheduled messages whose `sendAt` came (service clock) join the queue, in pages."""
        released = 0
        while True:
            with self.runtime.connection() as conn:
                due = dispatch.due_scheduled(conn, self.sandesh.clock.now())
            now_released = self.sandesh.sending.release_scheduled(due) if due else 0
            released += now_released
            if not now_released:  # none left, or none of these could move: look again next time
                return released

    def expire_waiting(self) -> int:
        """Waiting messages whose validity ended (an OTP's code expired, a `validFor` ran out)
        before any SIM took them: failed and refunded, never sent late (docs/design.md, "Validity")."""
        with self.runtime.connection() as conn:
            expired = dispatch.expired(conn, self.sandesh.clock.now())

        for message_id in expired:
            self.record(message_id, lambda m: m.expire(at=self.sandesh.clock.now()))
        return len(expired)

    # Housekeeping

    def housekeeping(self) -> None:
        self.flush_replies()
        self.give_up_on_reports()

    def give_up_on_reports(self) -> int:
        """Sent messages whose reports did not come within the validity period (24 h)."""
        with self.runtime.connection() as conn:
            overdue = dispatch.reports_overdue(conn, self.sandesh.clock.now() - VALIDITY_SECONDS)
        for message_id in overdue:
            self.record(message_id, lambda m: m.report_unknown(at=self.sandesh.clock.now()))
        with self.runtime.connection() as conn:
            unknown = dispatch.unknown_since_before(conn, self.sandesh.clock.now() - VALIDITY_SECONDS)

        for message_id in unknown:
            self.record(message_id, lambda m: m.never_reported(at=self.sandesh.clock.now()))
        return len(overdue) + len(unknown)

    def flush_replies(self) -> int:
        """Complete multi-part replies whose missing parts never came within 10 minutes."""
        with self.runtime.connection() as conn:
            stale = inbound.replies_to_flush(conn, self.sandesh.clock.now() - FLUSH_AFTER, list(self.sims))
        for reply_id in stale:
            replies.finish(self.runtime, reply_id)
        return len(stale)

    # What the modems say by themselves

    def unsolicited_for(self, worker: SimWorker) -> Callable[[Unsolicited], None]:
        def handle(event: Unsolicited) -> None:
            if event.line.startswith("+CDS:") and event.pdu:  # recorded by the SIM's thread, kept until it is
                worker.jobs.put(Report(event.pdu))
            elif event.line.startswith(("+CMTI:", "+CDSI:")):  # a reply or a report stored: read by the SIM's
                store, _, index = event.line.split(":", 1)[1].rpartition(",")  # own thread, not the reader
                if index.strip().isdigit():
                    worker.jobs.put(Stored(int(index), store.strip().strip('"') or None))
        return handle

    def status_report(self, sim_id: str, pdu: str) -> None:
        """On the SIM's own thread, after the +CMGS of the part it reports was recorded."""
        try:
            report = decode_status_report(pdu)
        except PduError as error:
            logger.warning("unreadable status report on %s (%s); dropped", sim_id, error)
            return
        now = self.sandesh.clock.now()
        with self.runtime.connection() as conn:
            row = dispatch.match_report(conn, sim_id, report.message_reference, report.recipient,
                                        now - REPORT_MATCH_WINDOW)
        if row is None:
            with self.runtime.connection() as conn:
                unknown = dispatch.unknown_to(conn, sim_id, report.recipient)
            if unknown is not None:  # the network had the part whose +CMGS was never recorded
                self.record(unknown, lambda m: m.report_after_unknown(report.message_reference, report.status, at=now))
                return
            logger.info("status report for MR %d to %s on %s matches no part", report.message_reference,
                     report.recipient, sim_id)
            return
        self.record(row["message_id"], lambda m: m.report(row["part"], report.status, at=now))

    # Replies

    def arrivals_for(self, worker: SimWorker) -> Arrivals:
        """Where `worker`'s link hands what came in (workers/links.py, Arrivals)."""
        return Arrivals(self, worker)

    def record_pdu(self, worker: SimWorker, pdu: str) -> None:
        """A message a modem stored: a status report or a reply's part.  The link deletes it from
        the device once this returns, so the store never fills and nothing is lost."""
        try:
            part = decode(pdu)
        except PduError as error:
            logger.warning("%s: unreadable stored message (%s); deleted", worker.name, error)
            return
        if isinstance(part, StatusReport):
            self.status_report(worker.id, pdu)
            return
        self.record_reply_part(worker, sender_number(part.sender), part.reference, part.total, part.sequence,
                               part.text)

    def record_reply_part(self, worker: SimWorker, sender: str, reference: int | None, total: int, sequence: int,
                          text: str) -> None:
        replies.record_part(self.runtime, worker.id, sender, reference, total, sequence, text)

    def recipient_report(self, sim_id: str, recipient: str, delivered: bool) -> None:
        """A delivery report that names no part (a HiLink device's): it is about the oldest part
        sent to `recipient` through this SIM that has no report yet."""
        now = self.sandesh.clock.now()
        number = recipient.lstrip("+")
        with self.runtime.connection() as conn:
            message_id = dispatch.awaiting_report_to(conn, sim_id, number, now - REPORT_MATCH_WINDOW)
        if message_id is None:
            logger.info("delivery report to %s on %s matches no message", recipient, sim_id)
            return
        self.record(message_id, lambda m: m.report_next(0x00 if delivered else 0x40, at=now))


