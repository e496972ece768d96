"""The operators' alerts (docs/operations.md, "Alerts"): destinations added and removed,
conditions tuned, and what the notifier records: an alert raised, cleared, and each
destination told (domain/alerts.py)."""
from __future__ import annotations

from typing import Callable

from eventsourcing.persistence import IntegrityError

from ..alerts import (SMS_CLIENT, SMS_WORKSPACE, TEST_ALERT, Alert, Destination, Digest, Tuning, check_condition,
                      check_conditions)
from ..clock import Clock
from ..errors import InvalidInput, InvalidTransition, NotFound
from ..message import Message
from ..ports import Sealer
from ..sending import parse_send
from ..steps import Read, Steps, retried, run
from .log import Log
from .sending import Sending, text_key


class Alerts:
    def __init__(self, log: Log, clock: Clock, sealer: Sealer, sending: Sending):
        self.log, self.clock, self.sealer, self.sending = log, clock, sealer, sending

    def _writes(self) -> None:
        if not self.log.writes(Destination.Added):
            raise InvalidTransition("Alerts start once the upgrade to 0.4.0 is finalized (`sandesh upgrade finalize`).")

    def add_destination(self, url: str, shown: str, conditions: list[str], actor: str) -> Destination:
        """`url` checked by the caller (workers/notify.py knows the channels); `shown`: it
        without its password."""
        self._writes()
        if not url.strip():
            raise InvalidInput("give the destination's URL: sms:+977…, mailto://…, tgram://…, json://…")
        destination = Destination(url_sealed=self.sealer.seal(url.strip()), shown=shown,
                                  conditions=check_conditions(conditions), actor=actor, at=self.clock.now())
        self.log.save(destination)
        return destination

    def remove_destination(self, destination_id: str, actor: str) -> Destination:
        destination = self.log.find(destination_id, Destination)
        if destination is None or destination.removed:
            raise NotFound(f"no destination {destination_id!r}")
        destination.remove(actor=actor, at=self.clock.now())
        self.log.save(destination)
        return destination

    def opened(self, url_sealed: str) -> str:
        """A destination's URL, as the notifier sends to it."""
        return self.sealer.open(url_sealed)

    def tune(self, condition: str, delay: float | None, actor: str) -> Tuning:
        """A condition's delay in seconds, or None to turn it off."""
        self._writes()
        check_condition(condition)
        if delay is not None and not 0 <= delay <= 7 * 86400:
            raise InvalidInput("a delay is 0 to 604800 seconds")
        return self._tuned(lambda tuning, at: tuning.tune(condition=condition, delay=delay, actor=actor, at=at))

    def set_interval(self, seconds: float | None, actor: str) -> Tuning:
        """How long after an alert ended the same one is not raised again; None: the default."""
        self._writes()
        if seconds is not None and not 0 <= seconds <= 7 * 86400:
            raise InvalidInput("an interval is 0 to 604800 seconds")
        return self._tuned(lambda tuning, at: tuning.set_interval(seconds=seconds, actor=actor, at=at))

    def set_digest(self, seconds: float | None, actor: str) -> Tuning:
        """The daily digest's time, seconds after a Nepal midnight (domain/alerts.py, digest_time);
        None: no digest."""
        self._writes()
        return self._tuned(lambda tuning, at: tuning.set_digest(seconds=seconds, actor=actor, at=at))

    def _tuned(self, change: Callable[[Tuning, float], None]) -> Tuning:
        """The one tuning aggregate (made at its first change), changed and saved."""
        tuning = self.log.find(Tuning.ID, Tuning) or Tuning()
        change(tuning, self.clock.now())
        self.log.save(tuning)
        return tuning

    def compose_digest(self, day: str, text: str) -> Digest | None:
        """The digest of a Nepal day, recorded before anyone is told; None when it was already
        (by this notifier before a restart, or by another)."""
        digest = Digest(day=day, text=text, at=self.clock.now())
        try:
            self.log.save(digest)
        except IntegrityError:
            return None
        return digest

    def digest_of(self, day: str) -> Digest | None:
        """The digest of a Nepal day (`2026-12-06`), if it was composed."""
        return self.log.find(Digest.create_id(day=day), Digest)

    def digest_told(self, digest: Digest, destination_id: str, message_id: str | None, error: str | None) -> None:
        digest.tell(destination_id=destination_id, message_id=message_id, error=error, at=self.clock.now())
        self.log.save(digest)

    def text_digest(self, number: str, text: str) -> Message:
        """The digest's SMS through the pool, charged to no workspace."""
        return self._free_text(number, text)

    def raise_alert(self, condition: str, subject: str, text: str) -> Alert:
        alert = Alert(condition=condition, subject=subject, text=text, at=self.clock.now())
        self.log.save(alert)
        return alert

    def clear(self, alert_id: str, about: str | None = None) -> Alert:
        alert = self.log.get(alert_id, Alert, "alert")
        alert.clear(at=self.clock.now(), about=about)
        self.log.save(alert)
        return alert

    def told(self, alert_id: str, destination_id: str, cleared: bool, error: str | None) -> None:
        """Record that a destination was told (or failed to be); a conflict with another
        record of the same alert is read again and recorded after it."""
        for _ in range(3):
            alert = self.log.get(alert_id, Alert, "alert")
            alert.tell(destination_id=destination_id, cleared=cleared, error=error, at=self.clock.now())
            try:
                self.log.save(alert)
                return
            except IntegrityError:
                continue

    def text(self, alert_id: str, destination_id: str, number: str, cleared: bool, avoid_sim: str | None) -> Message:
        """Queue the alert's message (or its end's) to `number` through the pool, charged to no
        workspace, in one append with the record of it (Alert.Texted): a transactional message,
        behind every waiting OTP, by another SIM than `avoid_sim` while another can send."""
        return run(retried(lambda: self._text(alert_id, destination_id, number, cleared, avoid_sim),
                           f"the SMS of alert {alert_id}"), self.log.save)

    def text_test(self, number: str) -> Message:
        """`sandesh alerts test` of an `sms:` destination: a test SMS through the pool, charged
        to no workspace."""
        return self._free_text(number, TEST_ALERT)

    def _free_text(self, number: str, text: str) -> Message:
        request, problems = parse_send({"to": number, "text": text, "messageType": "transactional"})
        if request is None or problems:
            raise InvalidInput("; ".join(p.message for p in problems))
        return self.sending.send(SMS_CLIENT, SMS_WORKSPACE, request, 0)

    def _text(self, alert_id: str, destination_id: str, number: str, cleared: bool,
              avoid_sim: str | None) -> Steps[tuple[tuple[Message | Alert, ...], Message]]:
        alert = yield Read(self.log.get, (alert_id, Alert, "alert"))
        now = self.clock.now()
        request, problems = parse_send({"to": number, "text": alert.cleared_text if cleared else alert.text,
                                        "messageType": "transactional"}, now)
        if request is None or problems:  # the number was checked when added, the text is one SMS
            raise InvalidInput("; ".join(p.message for p in problems))
        key = yield from text_key(self.sending.texts, SMS_WORKSPACE)
        message = self.sending.message(SMS_CLIENT, SMS_WORKSPACE, request, 0, now, key)
        alert.texted(destination_id=destination_id, cleared=cleared, message_id=message.id, avoid_sim=avoid_sim,
                     at=now)
        return (message, alert), message

    def alert(self, alert_id: str) -> Alert:
        return self.log.get(alert_id, Alert, "alert")

