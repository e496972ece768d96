"""One SIM of the live pool: its modem, its heartbeat, and a thread that sends one message at a
time (docs/design.md, "The SIM pool").

The thread opens the port itself and opens it again, with capped backoff, whenever it closes,
so a modem that vanishes and returns is used again within seconds.  It never exits on a modem
or database error: it logs once when trouble starts and once when it ends.  It ends only when
the dispatcher retires it (the SIM was disabled, moved, or the dispatcher stops): then it
finishes the message it is submitting and hands back the ones it had leased and not started.
"""
from __future__ import annotations

import itertools
import logging
import queue
import threading
import time
from typing import Any, Callable, Protocol

from prometheus_client import Counter

from sandesh.domain import log_context
from sandesh.domain.application import Sandesh
from sandesh.domain.usecases.dispatch import RELEASE, SEND, Submission
from sandesh.domain.cms import REPEATS_BEFORE_QUARANTINE, Action, classify
from sandesh.domain.errors import NameTaken
from sandesh.domain.operators import of_imsi
from sandesh.domain.routing import FAIL, REJECT, RETRY_DELAY, after_refusal
from sandesh.domain.sim import CREDIT, DEVICE_EVENTS, FAILURES, NETWORK, PIN
from sandesh.domain.sim_plan import Plan, Usage, credit_due, credit_of, day_start, month_start
from sandesh.projections import dispatch, registry, sim_health
from sandesh.projections.storage.health import is_outage
from sandesh.projections.storage.runtime import Runtime

from .device import SimNotReady
from .links import Arrivals, Link, link_for
from .modem import CmsError, CommandTimeout, ModemError, NotSubmitted, PortGone, Unsolicited
from .ports import REFIND_AFTER, PortSearch
from .sim_load import Heartbeat, Job, Load, Report, Send, SimRecord, Stop, Stored
from .sims import attach

logger = logging.getLogger("sandesh.dispatcher")

REOPEN_BACKOFF = (0.5, 1.0, 2.0, 4.0, 5.0)
NOT_REGISTERED = "not registered on the network"
SILENT_AFTER = 2  # heartbeats in a row its modem leaves unanswered before the SIM is unreachable

# GET /metrics (docs/design.md, "Metrics"): one submit is one part handed to the modem (AT+CMGS).
# accepted: the network took it; cms_error: +CMS ERROR; not_submitted: the modem proved it was not
# sent; unknown: no answer, the message waits for reconciliation.
SUBMIT_OUTCOMES = ("accepted", "cms_error", "not_submitted", "unknown")
SUBMITS = Counter("sandesh_sim_submits", "Parts handed to a SIM's modem (AT+CMGS), by SIM and outcome",
                  ["sim", "outcome"])
CMS_ERRORS = Counter("sandesh_sim_cms_errors", "+CMS ERROR answers to a SIM's submits", ["sim"])


class Driver(Protocol):
    """What a SIM's thread needs from the dispatcher that drives it (workers/dispatcher.py's
    Dispatcher), so that this module does not import that one."""
    runtime: Runtime
    sandesh: Sandesh
    me: str
    heartbeat_seconds: float
    port_search: PortSearch | None

    def held_ports(self) -> set[str]: ...

    def trouble(self, error: BaseException) -> None: ...
    def nudge(self) -> None: ...
    def usable_sims(self) -> set[str]: ...
    def unsolicited_for(self, worker: SimWorker) -> Callable[[Unsolicited], None]: ...
    def reconcile(self, sim_id: str) -> int: ...
    def arrivals_for(self, worker: SimWorker) -> Arrivals: ...
    def status_report(self, sim_id: str, pdu: str) -> None: ...
    def record(self, message_id: str, change: Callable[[Any], None]) -> Any: ...


class SimWorker:
    def __init__(self, dispatcher: Driver, sim: dict[str, Any]):
        self.dispatcher = dispatcher
        self.runtime = dispatcher.runtime
        self.sandesh = dispatcher.sandesh
        self.sim = SimRecord(sim)    # the pool's row and what this thread learns: shared with the loop
        self.id: str = sim["id"]
        self.name: str = sim["name"]
        self.quarantine: str | None = sim["quarantine"]   # mirror of the log, refreshed by the pool
        self.link: Link | None = None   # the device that holds the SIM (workers/links.py)
        self.arrivals = dispatcher.arrivals_for(self)
        self.jobs: queue.Queue[Job] = queue.Queue()
        self.ready = False           # the port is open and the modem initialised
        self.registered = True
        self.load = Load()           # its window, caps and message in hand: shared with the loop
        self.sent = 0                # parts the network accepted from it since this thread started
        self.credit_checked_at: float | None = sim.get("credit_at")
        self.credit_code: str | None = sim.get("balance_ussd")  # the code that credit was asked with
        self.parts_since_credit = 0
        self.refusals_in_row = 0
        self.unanswered = 0          # heartbeats in a row its modem did not answer
        self.last_error: str | None = None
        self.reported_at = 0.0
        # Written by the SIM's thread alone; `searching` is read by the others (Driver.held_ports).
        self.gone_since: float | None = None  # when its port was first found gone (service clock)
        self.searching = False       # gone for REFIND_AFTER: looked for on the ports of SANDESH_MODEM_PORTS
        self.retiring = threading.Event()
        self.first_try = threading.Event()  # set once the port was tried: open or not
        self.thread = threading.Thread(target=self._run, name=f"sim {self.name}", daemon=True)
        for outcome in SUBMIT_OUTCOMES:  # each series exists from the start, at 0
            SUBMITS.labels(self.id, outcome)
        CMS_ERRORS.labels(self.id)

    # What the dispatcher asks

    @property
    def operator(self) -> str | None:
        return self.sim.get("operator")

    @property
    def answering(self) -> bool:
        """Fewer than SILENT_AFTER heartbeats in a row unanswered: a modem gone silent is unreachable."""
        return self.unanswered < SILENT_AFTER

    @property
    def usable(self) -> bool:
        return (self.ready and self.answering and self.registered and self.quarantine is None
                and not self.retiring.is_set())

    @property
    def plan(self) -> Plan:
        sim = self.sim.snapshot()  # the three as one refresh left them
        return Plan(sim.get("daily_cap"), sim.get("monthly_cap"), sim.get("pace"))

    @property
    def busy(self) -> bool:
        return self.load.busy

    def available(self, now: float) -> bool:
        """Usable, and not resting at a cap of its plan."""
        return self.usable and self.resting(now)[0] is None

    def resting(self, now: float) -> tuple[float | None, str | None]:
        return self.load.resting(self.plan, now)

    def left(self, now: float) -> int:
        """Parts it may take now: its pacing window's room, within what its caps leave."""
        return self.load.left(self.plan, now)

    def give(self, message_id: str, parts: int) -> None:
        self.load.give(parts)
        self.jobs.put(Send(message_id))

    def start(self) -> None:
        self.thread.start()

    def report_soon(self) -> None:
        self.reported_at = 0.0
        self.jobs.put(Heartbeat())

    def retire(self) -> None:
        """Finish the message in hand, hand back the rest, close the port."""
        self.retiring.set()
        self.jobs.put(Stop())

    # The thread

    def _run(self) -> None:
        log_context.set_fields(sim_id=self.id)  # every line this SIM's thread logs names the SIM
        backoff = 0
        try:
            # A dispatcher that stops retires the threads it holds; one started by a pool read
            # that crossed its close sees `stop` instead, and never takes its port.
            while not (self.retiring.is_set() or self.dispatcher.stop.is_set()):
                try:
                    if not self.ready:
                        opened = self._open()
                        self.first_try.set()
                        if not opened:
                            self._report()
                            if self._refound():
                                backoff = 0
                                continue
                            self.retiring.wait(REOPEN_BACKOFF[min(backoff, len(REOPEN_BACKOFF) - 1)])
                            backoff += 1
                            continue
                    self._serve_one()
                    backoff = 0
                except Exception as error:  # no error ends the SIM's thread; a database outage is
                    self.dispatcher.trouble(error)  # told once and tried again every second at most
                    self.retiring.wait(min(1.0, REOPEN_BACKOFF[min(backoff, len(REOPEN_BACKOFF) - 1)]))
                    backoff += 1
        finally:
            self.first_try.set()
            if self.link is not None:
                self.link.close()  # nothing more comes in: what came is recorded or handed back
            self._hand_back()
            self.ready = False
            self.dispatcher.nudge()

    def _open(self) -> bool:
        self._hand_back()  # anything given before the port was lost is leased again by someone
        if self.link is not None:
            self.link.close()
        with self.runtime.connection() as conn:  # its PIN as the log has it now, not as the pool read it last
            row = registry.find_sim(conn, "id", self.id)
        # The loop refreshes the record from its pool reads meanwhile: the PIN entered and the PIN
        # judged must be the same one, so both come from this copy.
        sim = self.sim.pin_read(row["pin_sealed"], row["pin_refused"]) if row is not None else self.sim.snapshot()
        port = self.sandesh.sims.sim_port(sim["port"], row["port_secret_sealed"] if row is not None else None)
        public = self.runtime.settings.public_url
        self.link = link_for(port, sim["baud"], on_unsolicited=self.dispatcher.unsolicited_for(self),
                             on_gone=self.report_soon, callbacks=f"{public}{DEVICE_EVENTS.format(sim_id=self.id)}")
        try:
            device = attach(self.runtime, sim, self.link)
        except SimNotReady as error:  # an operator must act: no SIM, a PIN needed or refused, a PUK
            self._trouble(str(error))
            self.link.close()
            self._port_seen(gone=False)
            if error.kind == PIN:  # judged with the PIN read above: one set since is entered next time
                quarantined = self.sandesh.sims.quarantine_for_pin(self.id, sim["pin_sealed"], str(error),
                                                               self.dispatcher.me)
            else:
                quarantined = self.sandesh.sims.quarantine_sim(self.id, error.kind, str(error), self.dispatcher.me)
            if quarantined:
                logger.warning("SIM %s quarantined: %s", self.name, error)
                self.quarantine = error.kind
            return False
        except ModemError as error:
            self._trouble(str(error))
            self.link.close()
            self._port_seen(gone=isinstance(error, PortGone))
            return False
        except NameTaken as error:  # its card is another enabled SIM's: an operator disables one
            self._trouble(str(error))
            self.link.close()
            self._port_seen(gone=False)
            return False
        except BaseException:  # an outage, say: the port is let go before the thread waits and tries again
            self.link.close()
            raise
        self._port_seen(gone=False)
        self.sim.identified(device.iccid, device.imsi, of_imsi(device.imsi))
        self._recovered_from_trouble()
        # The port is ours alone now: whatever was leased or left submitted on this SIM belongs
        # to a dispatcher that is gone.
        with self.runtime.connection() as conn:
            dispatch.release_leases_of(conn, self.id)
            now = self.sandesh.clock.now()
            self.load.opened(dispatch.part_times(conn, self.id, now),
                             Usage(day_start(now), dispatch.parts_since(conn, self.id, day_start(now)),
                                   month_start(now), dispatch.parts_since(conn, self.id, month_start(now))))
        self.dispatcher.reconcile(self.id)
        self.ready, self.unanswered = True, 0  # it answered its initialisation
        self._heartbeat()
        try:
            self.link.collect(self.arrivals, everything=True)  # what came while nobody listened
        except ModemError as error:
            logger.warning("SIM %s: reading what came in failed: %s", self.name, error)
        self.dispatcher.nudge()
        return True

    # Its modem on another port (SANDESH_MODEM_PORTS; workers/ports.py)

    def _port_seen(self, gone: bool) -> None:
        if not gone:
            self.gone_since, self.searching = None, False
        elif self.gone_since is None:
            self.gone_since = self.sandesh.clock.now()

    def _refound(self) -> bool:
        """Its port gone for REFIND_AFTER: the free ports of the glob are asked for its ICCID, and
        the SIM is moved to the one that answers with it (`Sim.PortChanged`, by this dispatcher).
        Never a port another SIM holds, nor one that gives another ICCID or none."""
        search, iccid = self.dispatcher.port_search, self.sim.get("iccid")
        if search is None or not iccid or self.gone_since is None:
            return False
        if not self.searching:
            gone_for = self.sandesh.clock.now() - self.gone_since
            if gone_for < REFIND_AFTER:
                return False
            self.searching = True
            logger.warning("SIM %s (ICCID %s): %s gone for %.0f s; looking for it on %s", self.name, iccid,
                        self.sim["port"], gone_for, search.pattern)
        port = search.find(iccid, self.sim["baud"], self.dispatcher.held_ports(), stop=self.retiring)
        if port is None or self.retiring.is_set():
            return False
        was = self.sim["port"]
        self.sandesh.sims.place_sim(self.id, self.name, port, self.sim["baud"], None, self.dispatcher.me)
        # The thread goes on there; should the loop read the move first, it retires this thread and
        # starts another on the new port instead.
        self.sim.moved(port)
        self._port_seen(gone=False)  # held from now on; gone again, it waits REFIND_AFTER again
        logger.warning("SIM %s (ICCID %s): found on %s; moved there from %s", self.name, iccid, port, was)
        return True

    def _serve_one(self) -> None:
        due = self.reported_at + self.dispatcher.heartbeat_seconds - time.monotonic()
        if due <= 0:
            self._heartbeat()
            return
        try:
            job = self.jobs.get(timeout=due)
        except queue.Empty:
            return
        if isinstance(job, Send):
            try:
                self._send(job.message_id)
            finally:
                self.load.done()
                self.dispatcher.nudge()
        elif isinstance(job, (Report, Stored)):
            try:
                if isinstance(job, Report):
                    self.dispatcher.status_report(self.id, job.pdu)
                else:
                    self.link.announced(job.index, job.store, self.arrivals)
            except Exception as error:
                if is_outage(error):  # not recorded yet: kept for when the database is back
                    self.jobs.put(job)
                raise
        # Heartbeat: reported_at was reset, so the next turn reports; Stop: the loop sees `retiring`

    def _hand_back(self) -> None:
        """Empty the SIM's queue as its thread stops or its port is opened again: the messages it
        was given are released to be leased again, and the status reports read from its modem
        but not recorded yet (they wait behind a send) are recorded, not dropped."""
        leased, reports = [], []
        while True:
            try:
                job = self.jobs.get_nowait()
            except queue.Empty:
                break
            if isinstance(job, Send):
                leased.append(job.message_id)
            elif isinstance(job, Report):
                reports.append(job.pdu)
        for n, pdu in enumerate(reports):
            try:
                self.dispatcher.status_report(self.id, pdu)
            except Exception as error:  # a database outage: the rest are lost, as on a port nobody reads
                logger.warning("SIM %s: %d status report(s) not recorded: %s", self.name, len(reports) - n, error)
                break
        if leased:
            try:
                with self.runtime.connection() as conn:
                    dispatch.release(conn, leased)
            except Exception:  # the lease runs out by itself
                logger.exception("SIM %s: handing back %d message(s) failed", self.name, len(leased))

    # Health

    def _heartbeat(self) -> None:
        """Ask the modem how it is (AT+CREG?, AT+CSQ), act on it, and record it."""
        registered = signal = None
        if self.ready and self.link is not None and not self.link.gone:
            try:
                health = self.link.health()
                registered, signal = health.registered, health.signal_dbm
                self._registration(health.registered)
                self.link.collect(self.arrivals)  # what came in that nothing announced
                self._credit_if_due()
                if not self.answering:
                    logger.warning("SIM %s: the modem answers again", self.name)
                self.unanswered = 0
            except PortGone as error:
                self._lost(error)
            except CommandTimeout as error:  # the port is there and the modem says nothing
                self.unanswered += 1
                self.last_error = str(error)
                if self.unanswered == SILENT_AFTER:  # one slow answer costs no route
                    logger.warning("SIM %s: the modem stopped answering (%s); unreachable until it answers", self.name,
                                   error)
            except ModemError as error:
                self.last_error = str(error)
        elif self.ready:
            self._lost(PortGone(f"{self.sim['port']} vanished"))
        self._report(registered, signal)

    def _report(self, registered: bool | None = None, signal: int | None = None) -> None:
        now = self.sandesh.clock.now()
        resting_until, why = self.resting(now)
        parts_today, parts_month = self.load.used()
        with self.runtime.connection() as conn:
            sim_health.record(conn, self.id, healthy=self.available(now), registered=registered, signal_dbm=signal,
                              last_error=self.last_error, dispatcher=self.dispatcher.me, at=now,
                              reachable=self.ready and self.answering, resting_until=resting_until, resting_reason=why,
                              parts_today=parts_today, parts_month=parts_month)
        self.reported_at = time.monotonic()

    # Credit

    def _credit_if_due(self) -> None:
        """The SIM's balance query (its USSD code), when due (domain/sim_plan.py credit_due)."""
        code, now = self.sim.get("balance_ussd"), self.sandesh.clock.now()
        if not code or self.link is None or not self.ready:
            return
        if code == self.credit_code and not credit_due(  # a code the operator just set is asked at once
                checked_at=self.credit_checked_at, parts_since=self.parts_since_credit,
                every_parts=self.sim.get("balance_every"), low=self.quarantine == CREDIT, now=now):
            return
        self.credit_checked_at, self.credit_code, self.parts_since_credit = now, code, 0
        try:
            reply = self.link.ussd(code)
        except ModemError as error:  # asked again at the next interval
            logger.warning("SIM %s: the balance query %s failed: %s", self.name, code, error)
            return
        amount = credit_of(reply)
        if amount is None:
            logger.warning("SIM %s: no amount in the answer to %s: %r", self.name, code, reply)
        quarantine = self.sandesh.sims.record_sim_credit(self.id, amount, reply[:200], self.dispatcher.me)
        if quarantine != self.quarantine:
            logger.warning("SIM %s: %s", self.name, "quarantined: credit below its minimum" if quarantine == CREDIT
                        else "credit again: back in the pool")
        self.quarantine = quarantine

    def _registration(self, registered: bool) -> None:
        was, self.registered = self.registered, registered
        if not registered:
            self.last_error = NOT_REGISTERED
            if self.quarantine is None and self.sandesh.sims.quarantine_sim(self.id, NETWORK, NOT_REGISTERED,
                                                                   self.dispatcher.me):
                self.quarantine = NETWORK
                logger.warning("SIM %s quarantined: %s", self.name, NOT_REGISTERED)
        elif not was or self.quarantine == NETWORK:
            if self.last_error == NOT_REGISTERED:
                self.last_error = None
            if self.quarantine == NETWORK and self.sandesh.sims.recover_sim(self.id, NETWORK, "registered on the network again",
                                                                   self.dispatcher.me):
                self.quarantine = None
                logger.info("SIM %s recovered: registered on the network again", self.name)

    def _lost(self, error: Exception) -> None:
        """The port closed under us: reopened by the thread's loop with backoff."""
        self.ready = False
        self._trouble(str(error))

    def _trouble(self, reason: str) -> None:
        if self.last_error != reason:
            logger.warning("SIM %s (%s): %s; retrying with backoff", self.name, self.sim["port"], reason)
        self.last_error = reason

    def _recovered_from_trouble(self) -> None:
        if self.last_error is not None:
            logger.info("SIM %s (%s): the modem answers again", self.name, self.sim["port"])
        self.last_error = None

    # Sending

    def _send(self, message_id: str) -> None:
        with log_context.bound(message_id=message_id):
            self._send_one(message_id)

    def _send_one(self, message_id: str) -> None:
        submission = self.sandesh.dispatch.submit_message(message_id, self.id) if self.usable else Submission(RELEASE)
        if submission.action == RELEASE:
            with self.runtime.connection() as conn:
                dispatch.release(conn, [message_id])
            return
        if submission.action != SEND:
            return
        message, now = submission.message, self.sandesh.clock.now()
        accepted = self.link.submit(message_id, message.to, submission.text, message.parts,
                                    message.validity_minutes(now))
        for number in itertools.count(1):
            try:
                mr = next(accepted)
            except StopIteration:
                return
            except CmsError as error:
                SUBMITS.labels(self.id, "cms_error").inc()
                CMS_ERRORS.labels(self.id).inc()
                return self._refused(message_id, f"CMS {error.code}", classify(error.code), error.code)
            except NotSubmitted as error:
                SUBMITS.labels(self.id, "not_submitted").inc()
                if isinstance(error, PortGone) or not self.link.recover():
                    self._lost(error)
                return self._refused(message_id, str(error), Action.RETRY_ELSEWHERE, None)
            except (CommandTimeout, PortGone) as error:
                # The part may have left: the message stays `submitted` for reconciliation.
                SUBMITS.labels(self.id, "unknown").inc()
                self.last_error = str(error)
                if isinstance(error, PortGone) or not self.link.recover():
                    self._lost(error)
                logger.warning("%s: outcome of %s part %d unknown: %s", self.name, message_id, number, error)
                return
            SUBMITS.labels(self.id, "accepted").inc()
            now = self.sandesh.clock.now()
            self.load.part_accepted(now)
            self.parts_since_credit += 1
            self.sent += 1
            if self.resting(now)[0] is not None:  # at a cap of its plan: the pool learns it now
                self.report_soon()
            self.refusals_in_row = 0
            self.dispatcher.record(message_id, lambda m, n=number, r=mr: m.part_accepted(n, r, at=now))

    def _refused(self, message_id: str, cause: str, action: Action, code: int | None) -> None:
        """The modem proved the part was not sent: quarantine the SIM when the cause is the
        SIM's, then end the message or send it on to another SIM."""
        self.last_error = cause
        if action == Action.QUARANTINE:
            self._quarantine(FAILURES, f"the network refuses this SIM ({cause})")
        elif action == Action.RETRY:  # unknown (CMS 500): the SIM's fault once it repeats
            self.refusals_in_row += 1
            if self.refusals_in_row >= REPEATS_BEFORE_QUARANTINE:
                self._quarantine(FAILURES, f"{self.refusals_in_row} refusals in a row (last: {cause})")
        usable = self.dispatcher.usable_sims() - ({self.id} if not self.usable else set())

        def decide(message: Any) -> None:
            now = self.sandesh.clock.now()
            outcome, why = after_refusal(action.value, attempts=message.attempts, ever_accepted=message.ever_accepted,
                                         tried=set(message.failed_on) | {self.id}, usable=usable)
            if outcome == REJECT:
                message.reject(f"{why} ({cause})", at=now)
            elif outcome == FAIL:
                message.fail(f"could not be sent: {why} (last: {cause} on SIM {self.name})", at=now)
            else:
                message.requeue(f"SIM {self.name}: {cause}", not_before=now + RETRY_DELAY, at=now)

        self.dispatcher.record(message_id, decide)

    def _quarantine(self, kind: str, reason: str) -> None:
        if self.quarantine is None and self.sandesh.sims.quarantine_sim(self.id, kind, reason, self.dispatcher.me):
            logger.warning("SIM %s quarantined: %s", self.name, reason)
        self.quarantine = self.quarantine or kind
