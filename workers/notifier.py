"""`sandesh worker notifier` (docs/operations.md, "Alerts"): every second, reads what holds of
the pool, the queue and the projections (the read models GET /metrics reads), raises an alert
for a condition that has held for its delay, clears one that stopped holding, and tells the
operators' destinations of each: an `sms:` destination by an SMS through the pool itself, every
other through Apprise (mailto://, tgram://, ntfy://, json:// and the rest: no channel is
written here).  Edge-triggered: one message when a condition starts, one
when it ends, none between, and none again for the interval after one ended (a setting).

What the notifier remembers between seconds is only when each condition started to hold; after a
restart a condition holding already waits its delay again.  The alerts themselves are events."""
from __future__ import annotations

import logging
import re
import threading
from datetime import date, datetime, timedelta
from typing import Any, Callable

import apprise
import psycopg

from sandesh.domain.alerts import (BALANCE_MAIL_BODY, CLIENT, CONDITIONS, DEAD_WITHIN, DIGEST, OTP_WAIT, POOL,
                                   QUEUE_WAIT, SIM, SMS_PER_HOUR, VALIDITY_DAYS, WORKSPACE, Alert, balance_mail,
                                   balance_mail_cleared, delay_of, digest_text, interval_of, lasted, low_balance, npr,
                                   raised_text, sms_number)
from sandesh.domain.clock import NEPAL
from sandesh.domain.said import Said
from sandesh.domain.sim import DEFAULT_MIN_CREDIT
from sandesh.domain.sim_plan import days_left, validity_of
from sandesh.domain.errors import DomainError, InvalidInput
from sandesh.projections import alerts, dispatch, follower, registry, sim_health
from sandesh.projections.storage import db
from sandesh.projections.storage.runtime import Runtime
from sandesh.projections.storage.health import is_outage

from . import mail

logger = logging.getLogger("sandesh.worker.notifier")

EVERY = 1.0  # seconds between two looks
STANDBY_EVERY = 5.0  # seconds between two tries for the turn, while another notifier looks
POOL_SIZE = 2
LAG_CAP = 100_000  # events of lag counted at most
DIGEST_WAITING_CAP = 100_000  # waiting messages the digest counts at most
# How often the clients whose webhooks fail are looked for: the condition holds 30 minutes before
# it alerts, and the look walks back past a slow receiver's untried deliveries (projections/alerts.py).
FAILING_WEBHOOKS_EVERY = 30.0


def check_url(url: str) -> str:
    """The URL as a destination takes it, or InvalidInput with why; its form without a password."""
    url = url.strip()
    number = sms_number(url)
    if number is not None:
        return f"sms:+{number}"
    if not apprise.Apprise().add(url):
        raise InvalidInput(f"{shown(url)!r} is not an Apprise URL Sandesh can send to (https://appriseit.com)")
    return shown(url)


def shown(url: str) -> str:
    """The URL with its secrets hidden, as Apprise hides them (a password, a bot's token),
    without the options Apprise adds."""
    plugin = apprise.Apprise.instantiate(url)
    return plugin.url(privacy=True).split("?")[0].rstrip("/") if plugin else re.sub(r"://.*", "://…", url)


def tell(url: str, text: str, kind: str = apprise.NotifyType.INFO) -> str | None:
    """Send `text` to one destination, as Apprise's `kind` (a raised alert a warning, its end a
    success, the rest information: the channels that can show it by colour or icon do); None
    when it went, else why not."""
    sender = apprise.Apprise()
    if not sender.add(url):
        return "not an Apprise URL"
    try:
        told = sender.notify(body=text, title="Sandesh", notify_type=kind)
        return None if told else "the channel refused or did not answer"
    except Exception as error:  # noqa: BLE001 - a channel's own failure is recorded, never kills the loop
        return f"{type(error).__name__}: {error}"[:300]


def of_sim(sim: dict[str, Any], now: float) -> dict[str, str]:
    """condition -> detail, of the conditions that hold of one enabled SIM (a row of the pool)."""
    found = {}
    if sim["state"] in ("unreachable", "quarantined"):
        found["sim_unusable"] = f"{sim['state']}, {sim['reason'] or 'no reason given'}"
    floor = sim["min_credit"] if sim["min_credit"] is not None else DEFAULT_MIN_CREDIT
    if sim["credit"] is not None and sim["credit"] < floor:
        found["sim_credit_low"] = f"{npr(sim['credit'])}, below {npr(floor)}"
    valid_until = validity_of(sim["credit_reply"] or "")
    if valid_until is not None and (left := days_left(valid_until, now)) <= VALIDITY_DAYS:
        found["sim_validity_ending"] = f"{valid_until.isoformat()}" + (" (ended)" if left < 0 else
                                                                       f" (in {left} days)" if left > 1 else
                                                                       " (tomorrow)" if left == 1 else " (today)")
    if sim["resting_until"] is not None and sim["resting_until"] > now:
        found["sim_cap_reached"] = sim["resting_reason"] or "resting"
    return found


def in_english(said: Said, language: str | None) -> str:
    return str(said)


class Notifier:
    """`say(sentence, language)`: a sentence in a person's language (the dashboard's catalog,
    given by the wiring: scripts/service/commands.py); English without it."""

    def __init__(self, runtime: Runtime, say: Callable[[Said, str | None], str] = in_english):
        self.runtime, self.sandesh, self.clock, self.settings = runtime, runtime.sandesh, runtime.clock, runtime.settings
        self.say = say
        self.holding_since: dict[tuple[str, str], float] = {}
        self.sim_ids: dict[str, str] = {}  # a SIM's name -> its id, as the last look saw the pool
        self.names: dict[str, str] = {}  # a workspace's or client's id -> its name, for the end of its alert
        self.usable_sims = (0, 0)  # the enabled SIMs usable, and the enabled, as the last look saw the pool
        self.digested: date | None = None  # the Nepal day whose digest this notifier found composed
        self.failing: tuple[float, list[dict[str, Any]]] | None = None  # when they were looked for, and found
        self.waiting_said = False  # whether it said another notifier looks

    def holding(self, conn: Any, now: float) -> dict[tuple[str, str], str]:
        """(condition, subject) -> the detail of each condition that holds now."""
        found: dict[tuple[str, str], str] = {}
        pool = sim_health.pool(conn, now, self.runtime.settings.route_window)
        self.sim_ids = {sim["name"]: sim["id"] for sim in pool}
        enabled = [sim for sim in pool if sim["enabled"]]
        self.usable_sims = (sum(1 for sim in enabled if sim["usable"]), len(enabled))
        for sim in pool:
            if sim["enabled"]:
                found.update({(condition, sim["name"]): detail for condition, detail in of_sim(sim, now).items()})
        if pool and not any(sim["usable"] for sim in pool if sim["enabled"]):
            found[("no_route", POOL)] = ""
        waiting = dispatch.waiting(conn, 1)
        _, oldest_otp = waiting.get("otp", (0, None))
        if oldest_otp is not None and now - oldest_otp > OTP_WAIT:
            found[("otp_waiting", POOL)] = lasted(now - oldest_otp)
        oldest = min((o for _, o in waiting.values() if o is not None), default=None)
        if oldest is not None and now - oldest > QUEUE_WAIT:
            found[("queue_stuck", POOL)] = lasted(now - oldest)
        events_table = self.sandesh.log.recorder.events_table_name  # type: ignore[attr-defined]
        lags = {name: events for name, events in follower.lags(conn, events_table, LAG_CAP).items() if events}
        if lags:
            found[("projections_lag", POOL)] = ", ".join(f"{name} {events} events" for name, events in lags.items())
        if self.failing is None or not 0 <= now - self.failing[0] < FAILING_WEBHOOKS_EVERY:
            self.failing = (now, alerts.failing_webhooks(conn))
        for client in self.failing[1]:
            self.names[client["client_id"]] = client["brand"]
            found[("webhooks_failing", client["client_id"])] = f"{client['brand']} failing: deliveries retried"
        for client in alerts.dead_webhooks(conn, now - DEAD_WITHIN):
            self.names[client["client_id"]] = client["brand"]
            found[("webhooks_dead", client["client_id"])] = (f"{client['brand']}: {client['n']} given up in the last "
                                                             "hour")
        for workspace in alerts.low_balances(conn):
            self.names[workspace["id"]] = workspace["name"]
            found[("balance_low", workspace["id"])] = low_balance(workspace["name"], workspace["balance"],
                                                                  workspace["balance_alert"])
        return found

    def step(self) -> None:
        now = self.clock.now()
        with self.runtime.connection() as conn:
            holding = self.holding(conn, now)
            opened = {(a["condition"], a["subject"]): a for a in alerts.open_alerts(conn)}
            tuning = alerts.tuning(conn)
            ended = alerts.last_cleared(conn, now - interval_of(tuning))
            destinations = alerts.destinations(conn)
        for key in list(self.holding_since):
            if key not in holding:
                del self.holding_since[key]
        for key, detail in holding.items():
            since = self.holding_since.setdefault(key, now)
            delay = delay_of(tuning, key[0])
            if key in opened or delay is None or now - since < delay or key in ended:
                continue
            alert = self.sandesh.alerts.raise_alert(key[0], key[1], raised_text(key[0], key[1], detail))
            logger.warning("alert %s: %s", alert.id, alert.text)
            self.tell_all(alert, destinations, cleared=False)
        for key, row in opened.items():
            if key not in holding:
                about = self.name_of(key[1], CONDITIONS[key[0]].of)
                alert = self.sandesh.alerts.clear(row["id"], about)
                logger.info("alert %s ended: %s", alert.id, alert.cleared_text)
                self.tell_all(alert, destinations, cleared=True)
        if tuning.get(DIGEST) is not None:
            self.digest(now, tuning[DIGEST], destinations)

    def digest(self, now: float, at: float, destinations: list[dict[str, Any]]) -> None:
        """Once a Nepal day, from `at` seconds after its midnight: the digest of the day before to
        every destination that takes all conditions or names `digest` (Digest: at most once a day)."""
        today = datetime.fromtimestamp(now, NEPAL).date()
        midnight = datetime.combine(today, datetime.min.time(), NEPAL).timestamp()
        if now < midnight + at or self.digested == today:
            return
        yesterday = today - timedelta(days=1)
        with self.runtime.connection() as conn:
            counts = alerts.day_counts(conn, midnight - 86400, midnight)
            waiting = dispatch.waiting(conn, DIGEST_WAITING_CAP)
        counts.update(usable=self.usable_sims[0], enabled=self.usable_sims[1],
                      waiting=sum(depth for depth, _ in waiting.values()))
        digest = self.sandesh.alerts.compose_digest(yesterday.isoformat(), digest_text(yesterday.isoformat(), counts))
        self.digested = today
        if digest is None:  # composed already, before a restart or by another notifier
            return
        logger.info("digest of %s: %s", digest.day, digest.text)
        for destination in destinations:
            if destination["conditions"] and DIGEST not in destination["conditions"]:
                continue
            url, message_id = self.sandesh.alerts.opened(destination["url_sealed"]), None
            number = sms_number(url)
            try:
                error = tell(url, digest.text) if number is None else None
                if number is not None:
                    message_id = self.sandesh.alerts.text_digest(number, digest.text).id
            except DomainError as refused:  # the pool refused the SMS: no route, the switch off
                error = f"not texted: {refused}"
            if error:
                logger.warning("digest of %s not told to %s: %s", digest.day, destination["shown"], error)
            self.sandesh.alerts.digest_told(digest, destination["id"], message_id, error)

    def name_of(self, subject: str, of: str) -> str | None:
        """A workspace's or a client's name, as the end of its alert gives it; None for the others."""
        if of not in (WORKSPACE, CLIENT):
            return None
        if subject not in self.names:
            with self.runtime.connection() as conn:
                row = registry.fetch_one(conn, "workspaces" if of == WORKSPACE else "clients", "id", subject)
            self.names[subject] = (row["name"] if of == WORKSPACE else row["brand"]) if row else subject
        return self.names[subject]

    def tell_all(self, alert: Alert, destinations: list[dict[str, Any]], cleared: bool) -> None:
        text = alert.cleared_text if cleared else alert.text
        per_workspace = CONDITIONS[alert.condition].per_workspace
        if per_workspace:
            self.mail_owners(alert, text or "", cleared)
        for destination in destinations:
            # a workspace's alerts go to operators who asked for them by name, all others to all
            if (destination["conditions"] or per_workspace) and alert.condition not in destination["conditions"]:
                continue
            url = self.sandesh.alerts.opened(destination["url_sealed"])
            number = sms_number(url)
            if number is None:
                error = tell(url, text or "", apprise.NotifyType.SUCCESS if cleared else apprise.NotifyType.WARNING)
            else:
                error = self.text(alert, destination["id"], number, cleared)
            if error:
                logger.warning("alert %s not told to %s: %s", alert.id, destination["shown"], error)
            if error or number is None:  # an SMS queued is recorded by Alert.Texted
                self.sandesh.alerts.told(alert.id, destination["id"], cleared, error)

    def mail_owners(self, alert: Alert, text: str, cleared: bool) -> None:
        """One e-mail to each owner of the alert's workspace (Alert.Told names the person), in
        the language they chose for the dashboard."""
        settings = self.settings
        with self.runtime.connection() as conn:
            owners = alerts.owners(conn, alert.subject)
            workspace = registry.fetch_one(conn, "workspaces", "id", alert.subject)
        subject: Said | str = text
        if workspace is not None and cleared:
            subject = balance_mail_cleared(workspace["name"], (alert.cleared_at or self.clock.now()) - alert.raised_at)
        elif workspace is not None and workspace["balance_alert"] is not None:
            subject = balance_mail(workspace["name"], workspace["balance"], workspace["balance_alert"])
        overview = f"{settings.public_url}/dashboard/w/{alert.subject}/overview"
        for owner in owners:
            said = self.say(subject, owner["language"]) if isinstance(subject, Said) else subject
            body = f"{said}\n\n{self.say(BALANCE_MAIL_BODY, owner['language'])}\n{overview}\n"
            error = (mail.send(settings.smtp_url, settings.mail_from, owner["email"], said, body)
                     if settings.smtp_url else "not e-mailed: SANDESH_SMTP_URL is not set")
            if error:
                logger.warning("alert %s not e-mailed to %s: %s", alert.id, owner["id"], error)
            self.sandesh.alerts.told(alert.id, owner["id"], cleared, error)

    def text(self, alert: Alert, destination_id: str, number: str, cleared: bool) -> str | None:
        """Queue the alert's SMS through the pool (Alert.Texted records it); None when it was
        queued, else why not.  At most SMS_PER_HOUR to a destination in an hour, so that a
        flapping pool cannot crowd out the OTPs."""
        with self.runtime.connection() as conn:
            sent = alerts.texts_since(conn, destination_id, self.clock.now() - 3600)
        if sent >= SMS_PER_HOUR:
            return f"not texted: {SMS_PER_HOUR} alert SMS went to this number in the last hour"
        avoid = self.sim_ids.get(alert.subject) if CONDITIONS[alert.condition].of == SIM else None
        try:
            message = self.sandesh.alerts.text(alert.id, destination_id, number, cleared, avoid)
        except DomainError as error:
            return f"not texted: {error}"
        logger.info("alert %s texted to +%s as %s", alert.id, number, message.id)
        return None

    def run(self, stop: threading.Event) -> None:
        """Until `stop`: while this notifier holds the notifiers' turn, a look every second; else a
        try for the turn every STANDBY_EVERY.  One notifier looks at a time, whatever runs on
        how many hosts, so an alert is raised and told once; when it stops, another takes over.
        An outage is waited out, any other error logged."""
        turn: psycopg.Connection | None = None
        try:
            while not stop.is_set():
                try:
                    turn = self.turn(turn)
                    if turn is not None:
                        self.step()
                except Exception as error:  # noqa: BLE001 - no loop dies
                    if turn is not None and turn.closed:
                        turn = None
                    if is_outage(error):
                        self.runtime.health.failed(error)
                    else:
                        logger.exception("the notifier's look failed; it looks again in a second")
                stop.wait(EVERY if turn is not None else STANDBY_EVERY)
        finally:
            if turn is not None:
                turn.close()

    def turn(self, held: psycopg.Connection | None) -> psycopg.Connection | None:
        """The session that holds the notifiers' turn: `held` while it lives, else a new one that
        took the turn, or None while another notifier holds it."""
        if held is not None:
            try:
                alerts.still_held(held)
                return held
            except Exception:
                held.close()  # the turn ended with its session: another may hold it now
                raise
        conn = db.connect(self.settings)
        if alerts.take_turn(conn):
            logger.info("this notifier looks; any other waits for its turn")
            self.holding_since.clear()  # what held before this turn was seen by another
            return conn
        conn.close()
        if not self.waiting_said:
            logger.info("another notifier looks; this one takes over when it stops")
            self.waiting_said = True
        return None


def run(runtime: Runtime, stop: threading.Event, say: Callable[[Said, str | None], str] = in_english) -> None:
    logger.info("watching %d conditions", len(CONDITIONS))
    Notifier(runtime, say).run(stop)
