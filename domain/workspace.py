"""Workspace: status, rates and allowed types; its credits are events (docs/api.md, "Workspaces and API clients").

The spendable balance is credits minus charges plus refunds. Charges are events of each
message, so the balance itself is kept by the ledger read model, not by this aggregate.
"""
from __future__ import annotations

from eventsourcing.domain import event

from .aggregate import Aggregate

from .credentials import new_id
from .errors import InvalidInput, InvalidTransition
from .promo_hours import DEFAULT as DEFAULT_PROMO_HOURS, PromoHours, shown
from .said import _
from .segments import segment
from .types import parse_npr

PENDING, ACTIVE, SUSPENDED = "pending", "active", "suspended"


# The release whose finalized log every process reads a workspace's replies in (domain/events.py).
REPLIES_FROM = "0.4.0"
HELP_SEGMENTS = 3  # a help text is at most this many SMS
# The release whose finalized log every process reads a workspace's balance alert in.
BALANCE_ALERT_FROM = "0.4.0"
MAX_BALANCE_ALERT = 10_000_000 * 100  # paisa: NPR 1 crore


def check_help_text(text: str) -> str | None:
    """A help text as it is kept ('' or spaces: none)."""
    text = text.strip()
    if not text:
        return None
    parts = segment(text)
    if parts.segments > HELP_SEGMENTS:
        raise InvalidInput(_("the help text needs %(segments)s SMS (%(encoding)s); at most %(most)s",
                             segments=parts.segments, encoding=parts.encoding, most=HELP_SEGMENTS))
    return text


def balance_alert(text: str) -> int | None:
    """A balance alert's threshold as the owners write it, in NPR ("500", "99.50"), in paisa;
    "off" (or "" or 0): none."""
    written = text.strip().lower()
    paisa = None if written in ("", "off") else parse_npr(written)
    if paisa is not None and paisa > MAX_BALANCE_ALERT:
        raise InvalidInput(_("a balance alert is at most NPR 1,00,00,000"))
    return paisa or None


class Workspace(Aggregate):
    balance_alert: int | None = None  # paisa: its owners are told when the balance falls below it
    help_text: str | None = None  # what a help word is answered with (None: it is not)
    confirmations = False  # whether a recipient's opt-out or opt-in is confirmed by SMS

    @staticmethod
    def create_id(**_: object) -> str:
        return new_id("ws")

    @event("Created")
    def __init__(self, name: str, types: list[str], rates: dict[str, int], actor: str, at: float):
        self.name = name
        self.status = PENDING
        self.types = types
        self.rates = rates
        self.credited = 0
        self.totp_required = False  # owners sign in with an authenticator app's code too (docs/dashboard.md)
        self.promo_hours = shown(DEFAULT_PROMO_HOURS)  # `HH:MM-HH:MM` Nepal time, or `off` (domain/promo_hours.py)

    def activate(self, actor: str, at: float) -> None:
        if self.status != PENDING:
            raise InvalidTransition(f"workspace is {self.status}; only a pending workspace can be activated")
        self._activated(actor=actor, at=at)

    def suspend(self, actor: str, at: float) -> None:
        if self.status == SUSPENDED:
            raise InvalidTransition("workspace is already suspended")
        self._suspended(actor=actor, at=at)

    def reinstate(self, actor: str, at: float) -> None:
        if self.status != SUSPENDED:
            raise InvalidTransition(f"workspace is {self.status}; only a suspended workspace can be reinstated")
        self._reinstated(actor=actor, at=at)

    def credit(self, amount: int, note: str | None, actor: str, at: float) -> None:
        if amount <= 0:
            raise InvalidInput("a credit must be a positive whole number of paisa")
        self._credited(amount=amount, note=note, actor=actor, at=at)

    def set_rates(self, rates: dict[str, int], actor: str, at: float) -> None:
        self._rates_set(rates={**self.rates, **rates}, actor=actor, at=at)

    def set_types(self, types: list[str], actor: str, at: float) -> None:
        self._types_set(types=types, actor=actor, at=at)

    def set_promo_hours(self, hours: PromoHours | None, actor: str, at: float) -> None:
        """When its promotional messages may go out (None: any time); messages accepted already keep their sendAt."""
        self._promo_hours_set(hours=shown(hours), actor=actor, at=at)

    @event("PromoHoursSet")
    def _promo_hours_set(self, hours: str, actor: str, at: float) -> None:
        self.promo_hours = hours

    def require_totp(self, required: bool, actor: str, at: float) -> None:
        if required == self.totp_required:
            raise InvalidTransition("authentication codes are " + ("required already" if required else
                                                                  "not required"))
        self._totp_requirement_set(required=required, actor=actor, at=at)

    @event("TotpRequirementSet")
    def _totp_requirement_set(self, required: bool, actor: str, at: float) -> None:
        self.totp_required = required

    class RepliesSet(Aggregate.Event):
        """What the workspace answers a recipient's words with (domain/optout.py): its help text
        (None: help words are not answered), and whether an opt-out or opt-in is confirmed."""
        written_from = REPLIES_FROM

        help_text: str | None
        confirmations: bool
        actor: str
        at: float

    def set_replies(self, help_text: str | None, confirmations: bool, actor: str, at: float) -> None:
        if (help_text, confirmations) != (self.help_text, self.confirmations):  # else: so already, nothing recorded
            self._replies_set(help_text=help_text, confirmations=confirmations, actor=actor, at=at)

    @event(RepliesSet)
    def _replies_set(self, help_text: str | None, confirmations: bool, actor: str, at: float) -> None:
        self.help_text, self.confirmations = help_text, confirmations

    class BalanceAlertSet(Aggregate.Event):
        """Below this balance (paisa; None: never) the owners are told by e-mail and on the
        Overview (docs/operations.md, "Alerts")."""
        written_from = BALANCE_ALERT_FROM

        threshold: int | None
        actor: str
        at: float

    def set_balance_alert(self, threshold: int | None, actor: str, at: float) -> None:
        if threshold != self.balance_alert:  # else: so already, nothing recorded
            self._balance_alert_set(threshold=threshold, actor=actor, at=at)

    @event(BalanceAlertSet)
    def _balance_alert_set(self, threshold: int | None, actor: str, at: float) -> None:
        self.balance_alert = threshold

    def shred_texts(self, keys: int, actor: str, at: float) -> None:
        """The keys of the workspace's texts were destroyed (domain/ports.py Texts)."""
        self._texts_shredded(keys=keys, actor=actor, at=at)

    @event("TextsShredded")
    def _texts_shredded(self, keys: int, actor: str, at: float) -> None:
        pass

    @event("Activated")
    def _activated(self, actor: str, at: float) -> None:
        self.status = ACTIVE

    @event("Suspended")
    def _suspended(self, actor: str, at: float) -> None:
        self.status = SUSPENDED

    @event("Reinstated")
    def _reinstated(self, actor: str, at: float) -> None:
        self.status = ACTIVE

    @event("Credited")
    def _credited(self, amount: int, note: str | None, actor: str, at: float) -> None:
        self.credited += amount

    @event("RatesSet")
    def _rates_set(self, rates: dict[str, int], actor: str, at: float) -> None:
        self.rates = rates

    @event("TypesSet")
    def _types_set(self, types: list[str], actor: str, at: float) -> None:
        self.types = types
