"""Opt-outs of promotional messages (docs/api.md, "Opt-out"; docs/design.md, "Opt-outs").

A recipient who replies a stop word to a message of a workspace no longer gets that
workspace's promotional messages; START takes it back.  Operators may do either by hand.
One aggregate per workspace + number holds whether the number is opted out; each change is
an event, so the read model of opt-outs is rebuilt from the log like every other.
"""
from __future__ import annotations

import hashlib
import unicodedata

from eventsourcing.domain import event

from .aggregate import Aggregate

STOP, START = "stop", "start"
STOP_WORDS = {"stop": STOP, "unsubscribe": STOP, "रोक": STOP, "start": START}
REPLY, OPERATOR = "reply", "operator"  # who made a change: the recipient's reply, or an operator
RECIPIENT = "recipient"  # the actor of a change a reply made


def optout_id(workspace_id: str, number: str) -> str:
    """The aggregate of one workspace + number (`number` as domain/phone.py normalises it)."""
    return "optout_" + hashlib.sha256(f"{workspace_id}\x1f{number}".encode()).hexdigest()[:32]


def stop_word(text: str) -> str | None:
    """STOP when the whole text is STOP, UNSUBSCRIBE or रोक, START when it is START, in any case
    and with spaces around; None for anything else ("stop it" is a reply, not a request)."""
    return STOP_WORDS.get(unicodedata.normalize("NFC", text).strip().casefold())


class OptOut(Aggregate):
    @staticmethod
    def create_id(workspace_id: str, number: str) -> str:
        return optout_id(workspace_id, number)

    @event("Opened")
    def __init__(self, workspace_id: str, number: str):
        self.workspace_id = workspace_id
        self.number = number
        self.opted_out = False

    def change(self, opted_out: bool, source: str, actor: str, reply_id: str | None, at: float) -> bool:
        """Opt the number out (or back in); False when it is so already: nothing is recorded."""
        if opted_out == self.opted_out:
            return False
        record = self._opted_out if opted_out else self._opted_in
        record(workspace_id=self.workspace_id, number=self.number, source=source, reply_id=reply_id, actor=actor,
               at=at)
        return True

    @event("OptedOut")
    def _opted_out(self, workspace_id: str, number: str, source: str, reply_id: str | None, actor: str,
                   at: float) -> None:
        self.opted_out = True

    @event("OptedIn")
    def _opted_in(self, workspace_id: str, number: str, source: str, reply_id: str | None, actor: str,
                  at: float) -> None:
        self.opted_out = False


def held_back(message_type: str) -> bool:
    """Only promotional messages are refused to an opted-out number; transactional and OTP
    messages always go."""
    return message_type == "promotional"
