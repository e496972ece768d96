"""`sandesh worker webhooks`: turns message events into signed deliveries and makes the attempts.

Following: the log's message and reply events become WebhookDelivery aggregates for the clients
with a webhook URL, one batch at a time by the projections' own step (projections/follower.py
`positioned_step`): the follower's position row is locked while a batch is turned into
deliveries, and a delivery's id is derived from (message, webhook status), so a batch replayed
after a crash creates nothing twice.  The same events make the clients' feed (GET /v1/events),
with the same ids and bodies, in a read model of its own (projections/feed.py).

Keyword SMS: the step also hands those due to workers/services.py, which answers each once.

Attempting: due deliveries (new ones at once, retries when the clock reaches their time) are
leased with SKIP LOCKED and posted from a bounded pool of threads, so one slow receiver holds
one thread, not the others.  Every attempt is recorded as an event, then the read model says
what is due next.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Optional

import orjson
import requests
from eventsourcing.persistence import IntegrityError
from prometheus_client import Counter, Histogram

from sandesh.domain import log_context
from sandesh.domain.inbound import Reply
from sandesh.domain.message import Message, error_of
from sandesh.domain.signature import sign
from sandesh.domain.topics import topics_of
from sandesh.domain.webhook import (DEAD, DELIVERED, HISTORY, INBOUND, SOURCES, STATUS, TIMEOUT, USER_AGENT,
                                   WAITING, WEBHOOK_STATUS, WebhookDelivery, inbound_event, new_delivery,
                                   status_event)
from sandesh.projections import follower, registry, webhooks
from sandesh.projections.storage import channels
from sandesh.projections.storage.group_commit import GroupCommit
from sandesh.projections.storage.runtime import Runtime

from . import services, webhook_guard
from .webhook_deadline import DEADLINES
from .webhook_schedule import LEASE, PER_CLIENT, SLOW_THREADS, Leased, WebhookSchedule

STEP_EVERY = 0.05  # seconds: while appends keep coming, the log is followed this often, not at each

logger = logging.getLogger("sandesh.worker.webhooks")

POSITION = "webhooks"
TOPICS = topics_of(SOURCES)
CONCURRENCY = 16  # places: attempts that run at once, slow ones aside (docs/design.md, "Webhook sender")
PURGE_EVERY = 60.0

# GET /metrics (docs/design.md, "Metrics"): each attempt by the delivery's state after it.
OUTCOMES = (DELIVERED, WAITING, DEAD)  # delivered; failed, a retry is due later; failed, no more attempts
DELIVERIES = Counter("sandesh_webhook_deliveries", "Webhook attempts, by the delivery's state after them: "
                     "delivered, waiting (a retry is scheduled), dead (no more attempts)", ["outcome"])
DELIVERY_SECONDS = Histogram("sandesh_webhook_delivery_duration_seconds", "Time a webhook attempt took")


class WebhookSender:
    def __init__(self, runtime: Runtime, *, concurrency: int = CONCURRENCY, per_client: int | None = None,
                 http: requests.Session | None = None):
        self.runtime, self.sandesh, self.clock = runtime, runtime.sandesh, runtime.clock
        settings = runtime.settings
        self.http = http or webhook_guard.session(settings.webhook_allow_private, settings.requests_ca_bundle,
                                                  concurrency + SLOW_THREADS)
        self.concurrency = concurrency
        self.schedule = WebhookSchedule(concurrency, per_client or min(PER_CLIENT, concurrency))
        # Beyond the places: threads for slow attempts, and one more, since the thread that ends
        # an attempt leases the next ones itself, and the attempt it has just started must not
        # wait for that lease (docs/design.md, "Webhook sender").
        self.pool = ThreadPoolExecutor(concurrency + SLOW_THREADS + 1, thread_name_prefix="webhook")
        self.futures: dict[str, Future[None]] = {}  # delivery id -> its attempt, started or waiting for a thread
        self.lock = threading.Lock()  # every call into the schedule holds it
        self.turn_ended = threading.Condition(self.lock)  # the loop and `close` wait here for a lease to end
        self.wake: threading.Timer | None = None  # starts waiting deliveries when a running attempt turns slow
        self.purged_at = 0.0
        self.targets = _Targets(runtime)
        self.templates: dict[str, requests.PreparedRequest] = {}  # webhook URL -> its POST, prepared once
        self.commits = GroupCommit(self.sandesh.log.append_events)  # the attempts of all threads, appended together
        self.keywords = services.KeywordCalls(runtime)  # the keyword SMS, answered by their own threads
        for outcome in OUTCOMES:  # each series exists from the start, at 0
            DELIVERIES.labels(outcome)

    @property
    def per_client(self) -> int:
        return self.schedule.per_client

    @property
    def in_flight(self) -> dict[str, str]:
        """Delivery id -> its client, for each attempt given to a thread."""
        return dict(self.schedule.running)

    @property
    def ready(self) -> Sequence[Leased]:
        """The deliveries leased ahead, waiting for a place, oldest lease first."""
        return self.schedule.waiting

    # Following the log
    def follow(self, limit: int = 500) -> int:
        """Turn the next batch of source events into deliveries; returns how many events were read."""
        return follower.positioned_step(self.runtime, POSITION, TOPICS, self._deliveries_of, limit)

    def _deliveries_of(self, cur: Any, batch: list[Any]) -> None:
        """The batch's events of the last HISTORY as deliveries to the clients with a webhook URL."""
        now, known = self.clock.now(), _Batch(self.sandesh, cur)
        events = [e for e in map(self.sandesh.log.mapper.to_domain_event, batch) if e.at >= now - HISTORY]
        known.read_messages({e.in_reply_to if isinstance(e, Reply.Received) else e.originator_id
                             for e in events} - {None})
        self.sandesh.webhooks.add_deliveries([delivery for e in events if (delivery := _delivery(known, e, now))])

    # Attempts
    def dispatch(self) -> int:
        """Once no other lease runs, lease due deliveries for the free places and as many again
        to wait behind them, and start those that have a place.  Returns how many were leased."""
        with self.lock:
            while self.schedule.leasing:
                self.turn_ended.wait()
            if not self.schedule.take_turn():
                return 0
        try:
            return self._lease_and_start()
        finally:
            self._end_turn(again=False)

    def _refill(self) -> None:
        """A thread that ended an attempt starts the next waiting one at once, then leases more,
        rather than wait for the loop to wake on its commit's notification (docs/design.md,
        "Webhook sender").  The loop stays the backstop, and an error here (the database is
        away) is the loop's to report."""
        self._start_ready()
        with self.lock:
            leasing = self.schedule.ask_turn()
        while leasing:
            again = False
            try:
                self._lease_and_start()
                again = True
            except Exception:
                logger.debug("lease after an attempt failed; the loop leases again", exc_info=True)
            finally:
                leasing = self._end_turn(again)

    def _end_turn(self, again: bool) -> bool:
        with self.lock:
            leasing = self.schedule.end_turn(again)
            if not leasing:
                self.turn_ended.notify_all()
            return leasing

    def _lease_and_start(self) -> int:
        with self.lock:
            room = self.schedule.room(time.monotonic())
        due: list[tuple[str, str, str]] = []
        if room.deliveries > 0:
            now = self.clock.now()
            with self.runtime.connection() as conn:
                due = webhooks.lease_due(conn, now, room.deliveries, LEASE, room.held, room.per_client,
                                         room.held_workspaces, room.per_workspace)
            try:
                loaded = self.sandesh.webhooks.deliveries([delivery_id for delivery_id, _, _ in due]) if due else {}
            except Exception:  # each attempt then reads its own, and reports what fails
                loaded = {}
            with self.lock:
                self.schedule.leased([(delivery_id, client_id, workspace_id, loaded.get(delivery_id))
                                      for delivery_id, client_id, workspace_id in due], now)
        self._start_ready()
        return len(due)

    def _start_ready(self) -> None:
        """Give the threads what the schedule starts, under the lock that `close` takes to stop,
        so a delivery is either started here or handed back there, never lost between."""
        with self.lock:
            if not self.schedule.waiting:
                return
            starts = self.schedule.start(self.clock.now(), time.monotonic())
            for leased in starts.attempts:
                future = self.futures[leased.delivery_id] = self.pool.submit(
                    self._attempt_in_pool, leased.delivery_id, leased.delivery)
                future.add_done_callback(
                    lambda f, key=leased.delivery_id: None if f.cancelled() else self.futures.pop(key, None))
            if starts.wake_in is not None:
                self.wake = threading.Timer(starts.wake_in, self._woken)
                self.wake.daemon = True
                self.wake.start()
        if starts.hand_back:
            self._hand_back(starts.hand_back)

    def _woken(self) -> None:
        with self.lock:
            self.schedule.woken()
            self.wake = None
        self._start_ready()

    def _attempt_in_pool(self, delivery_id: str, delivery: WebhookDelivery | None = None) -> None:
        try:
            self.attempt(delivery_id, delivery, wait=False)
        except Exception:
            logger.exception("attempt of %s failed to run; it is retried when its lease ends", delivery_id)
        finally:
            with self.lock:
                self.schedule.ended(delivery_id)
        self._refill()

    def attempt(self, delivery_id: str, delivery: WebhookDelivery | None = None, wait: bool = True) -> str:
        """One POST of a delivery, recorded as an event; returns the delivery's new state.
        `delivery`: as read with the lease (all of a lease's in one round trip), else read now.
        Without `wait`, the thread goes on while the attempt commits (docs/design.md,
        "Webhook sender"); the delivery stays leased until then, so no one attempts it again meanwhile."""
        delivery = delivery or self.sandesh.webhooks.delivery(delivery_id)
        if delivery.state in (DELIVERED, DEAD):
            return delivery.state
        log_context.set_fields(client_id=delivery.client_id)
        status_code, error, duration = self.post(delivery)
        outcome = status_code if status_code is not None else error
        if wait:
            self.sandesh.webhooks.record_attempt(delivery, status_code, error, duration, self.commits.save)
            self._recorded(delivery, outcome, duration, None)
        else:
            self.sandesh.webhooks.record_attempt(delivery, status_code, error, duration, lambda *aggregates: self.commits.submit(
                *aggregates, then=lambda failure: self._recorded(delivery, outcome, duration, failure)))
        return delivery.state

    @staticmethod
    def _recorded(delivery: WebhookDelivery, outcome: int | str | None, duration: float,
                  failure: BaseException | None) -> None:
        with log_context.bound(client_id=delivery.client_id):  # on the committer thread, without `wait`
            if failure is not None:  # the POST was made: its lease runs out, and it is made again
                why = ("another sender attempted it at the same time" if isinstance(failure, IntegrityError)
                       else f"{type(failure).__name__}: {failure}")
                logger.warning("%s attempt %d (%s) not recorded: %s; attempted again when its lease ends",
                            delivery.id, delivery.attempts, outcome, why)
                return
            DELIVERIES.labels(delivery.state).inc()
            DELIVERY_SECONDS.observe(duration)
            logger.info("%s %s attempt %d: %s", delivery.id, delivery.event_type, delivery.attempts, outcome)

    def post(self, delivery: WebhookDelivery) -> tuple[int | None, str | None, float]:
        target = self._target(delivery.client_id)
        if target is None:
            return None, "the client has no webhook URL", 0.0
        url, secrets = target
        raw = self.sandesh.texts.open(delivery.body)
        if raw is None:
            return None, "its text was erased (sandesh workspace shred-texts)", 0.0
        body = raw.encode()
        headers = {
            "content-type": "application/json", "user-agent": USER_AGENT, "x-service-event": delivery.event_type,
            "x-service-delivery": delivery.delivery_header, "x-service-signature": sign(secrets, int(self.clock.now()), body),
        }
        started = time.monotonic()
        with DEADLINES.within(TIMEOUT):  # connecting, TLS, the head and the body read, together
            try:
                response = self.http.send(self._request(url, headers, body), timeout=(TIMEOUT, TIMEOUT),
                                          allow_redirects=False, stream=True)
            except requests.Timeout:
                return None, f"no answer within {TIMEOUT:.0f} s", time.monotonic() - started
            except requests.RequestException as error:
                if time.monotonic() - started >= TIMEOUT:  # its deadline shut the connection
                    return None, f"no answer within {TIMEOUT:.0f} s", time.monotonic() - started
                return None, webhook_guard.describe(error), time.monotonic() - started
            duration = time.monotonic() - started
            _read_some(response)
        if duration > TIMEOUT:
            return None, f"answered {response.status_code} after {duration:.1f} s, over {TIMEOUT:.0f} s", duration
        return response.status_code, None if 200 <= response.status_code <= 299 else f"HTTP {response.status_code}", duration

    def _request(self, url: str, headers: dict[str, str], body: bytes) -> requests.PreparedRequest:
        """requests' prepared request for one POST, copied from one prepared per URL: the URL is
        parsed once, and the session's defaults (cookies, auth, environment) are not merged at
        every delivery, which has none of them: less CPU per POST than `Session.post`
        (docs/performance.md, "The sender's lease, its log reads and its commits")."""
        template = self.templates.get(url)
        if template is None:
            if len(self.templates) >= 1000:  # URLs of clients changed over months: start again
                self.templates.clear()
            template = self.templates[url] = requests.Request("POST", url).prepare()
        request = template.copy()
        request.prepare_headers(headers)
        request.prepare_body(body, None)
        return request

    def _target(self, client_id: str) -> tuple[str, list[str]] | None:
        """The client's URL and secrets as they are now: the new secret first, then the previous
        one while its rotation's grace period lasts (docs/api.md, "Secret rotation")."""
        target = self.targets.get(client_id)
        if target is None:
            return None
        url, secret, previous, previous_until = target
        return url, [secret, previous] if previous and previous_until > self.clock.now() else [secret]

    # The loop
    def step(self) -> None:
        while self.follow():
            pass
        self.dispatch()
        self.keywords.step()
        now = self.clock.now()
        if now - self.purged_at >= PURGE_EVERY:
            with self.runtime.connection() as conn:
                webhooks.purge(conn, now)
            self.purged_at = now

    def run(self, stop: threading.Event) -> None:
        """Until `stop`: wake on appends (new events, recorded attempts; those of one 50 ms
        together) and at least twice a second for retries that the clock made due; an outage is
        waited out."""
        follower.follow(self.runtime, stop, self.step, idle_wait=0.5, every=STEP_EVERY)

    def close(self, wait: bool = True) -> None:
        """Stop leasing, end the attempts (waiting for the running ones if `wait`), hand back the
        leases of attempts that never started, so that the next sender need not wait them out,
        and record the attempts that ended: a receiver that got its POST does not get it again
        after a clean stop."""
        self.keywords.close(wait)
        with self.lock:
            while self.schedule.leasing:
                self.turn_ended.wait()
            leased_ahead = self.schedule.close()
            if self.wake is not None:
                self.wake.cancel()
        self.pool.shutdown(wait=wait, cancel_futures=True)
        never_started = leased_ahead + [delivery_id for delivery_id, future in list(self.futures.items())
                                        if future.cancelled()]
        if never_started:
            self._hand_back(never_started)
        # What ended is recorded before this returns; without `wait`, an attempt still running
        # records nothing and is tried again when its lease runs out.
        self.commits.close(wait=True)
        self.http.close()
        self.targets.close()

    def _hand_back(self, delivery_ids: list[str]) -> None:
        """End these leases now, so that the deliveries are due again at once (for any sender)."""
        try:
            with self.runtime.connection() as conn:
                webhooks.hand_back(conn, delivery_ids)
        except Exception as error:
            logger.warning("could not hand back %d leases (%s); they run out in %.0f s", len(delivery_ids), error, LEASE)


Target = tuple[str, str, Optional[str], float]  # URL, secret, previous secret, the previous one's end


class _Targets(channels.Remembered):
    """Each client's webhook URL and opened secrets, kept while the sender listens on the
    CALLERS channel, which every change of a client notifies
    (docs/design.md, "The caller cache"): a new URL or secret is used from the next attempt on,
    without a read per attempt."""

    def __init__(self, runtime: Runtime):
        self.runtime = runtime
        self._targets: dict[str, Target] = {}
        super().__init__(runtime.settings.database_url, channels.CALLERS, "webhook-targets")

    def get(self, client_id: str) -> Target | None:
        target = self._targets.get(client_id)
        if target is None:
            generation = self.generation
            with self.runtime.connection() as conn:
                row = registry.webhook_target(conn, client_id)
            if row is None or not row["webhook_url"]:
                return None
            open_ = self.runtime.sandesh.webhooks.client_secret
            previous = row["previous_secret_sealed"]
            target = (row["webhook_url"], open_(row["secret_sealed"]), open_(previous) if previous else None,
                      row["previous_secret_until"] or 0.0)
            self.keep(generation, lambda: self._targets.__setitem__(client_id, target))
        return target

    def forget(self, payload: Optional[str]) -> None:
        if payload != channels.ROUTE:
            self._targets = {}


class _Batch:
    """What a batch of events needs, asked once per batch: whether each client has a webhook URL,
    and each message's fixed fields (to, type, segments, client), which no later event changes."""

    def __init__(self, app: Any, cur: Any):
        self.sandesh, self.cur = app, cur
        self.urls: dict[str, bool] = {}
        self.messages: dict[str, Message] = {}

    def has_url(self, client_id: str) -> bool:
        if client_id not in self.urls:
            self.urls[client_id] = bool(registry.webhook_url(self.cur, client_id))
        return self.urls[client_id]

    def workspace(self, client_id: str) -> str:
        return registry.workspace_of(self.cur, client_id)

    def read_messages(self, message_ids: set[str]) -> None:
        """The messages of a whole batch in one round trip, rather than one per event."""
        if message_ids:
            self.messages.update(self.sandesh.log.aggregates_of(message_ids, Message))

    def message(self, message_id: str) -> Message:
        if message_id not in self.messages:
            self.messages[message_id] = self.sandesh.log.repository.get(message_id)
        return self.messages[message_id]


def _delivery(known: _Batch, event: Any, now: float) -> WebhookDelivery | None:
    """The delivery of a source event, with the body its feed item carries (projections/feed.py):
    None for a reply attributed to no client, or a client without a webhook URL."""
    if isinstance(event, Reply.Received):
        if event.client_id is None or not known.has_url(event.client_id):
            return None
        # the body holds the reply's text: it is kept sealed under the workspace's key, like the text
        owner = known.message(event.in_reply_to).workspace_id if event.in_reply_to else \
            known.workspace(event.client_id)  # a keyword's SMS answers no message
        body = inbound_event(event.originator_id, event.sender, known.sandesh.texts.open(event.text), event.at,
                             event.in_reply_to)
        sealed = known.sandesh.texts.seal(owner, orjson.dumps(body).decode())
        return new_delivery(event.client_id, INBOUND, event.originator_id, None, sealed, at=now)
    message = known.message(event.originator_id)
    if not known.has_url(message.client_id):
        return None
    status = WEBHOOK_STATUS[type(event)]
    body = status_event(message.id, message.to, message.message_type, message.segments, status, event.at,
                        error_of(event))
    return new_delivery(message.client_id, STATUS, message.id, status, body, at=now)


MAX_ANSWER = 64 * 1024  # bytes of a receiver's answer read at most; nothing of it is kept


def _read_some(response: requests.Response) -> None:
    """Read the answer's body, up to MAX_ANSWER bytes and the attempt's deadline, then let the
    connection go: back to the pool when the whole body was read, closed otherwise.  A receiver
    that streams gigabytes, or drips them, costs 64 KiB and the deadline at most."""
    read = 0
    try:
        while read <= MAX_ANSWER:
            chunk = response.raw.read(min(16 * 1024, MAX_ANSWER + 1 - read), decode_content=False)
            if not chunk:
                break
            read += len(chunk)
    except Exception:  # noqa: BLE001 - its deadline, or the receiver gone: the status stands
        read = MAX_ANSWER + 1
    if read > MAX_ANSWER:
        response.close()  # mid-body: this connection is never used again
    else:
        response.raw.release_conn()  # the whole answer was read: the connection serves the next attempt


POOL_SIZE = 6 + services.THREADS


def run(runtime: Runtime, stop: threading.Event) -> None:
    sender = WebhookSender(runtime)
    logger.info("delivering webhooks with %d threads", sender.concurrency)
    try:
        sender.run(stop)
    finally:
        # A clean stop lets the running attempts end (each within its 10 s) and records them, so
        # that no receiver is sent one again (`sandesh worker all` kills a child still running 20 s on).
        sender.close(wait=True)
