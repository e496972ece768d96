"""Opt-outs of promotional messages (docs/api.md, "Opt-out"; docs/design.md, "Opt-outs").

A recipient who replies a stop word to a message of a workspace no longer gets that
workspace's promotional messages; a start word takes it back.  Operators may do either by hand.
One aggregate per workspace + number holds whether the number is opted out; each change is
an event, so the read model of opt-outs is rebuilt from the log like every other.

A help word is answered with the workspace's help text, at most once a day per number
(HelpSent, one aggregate per workspace, number and Nepal day).  The answers, and the
confirmations of a change, are the workspace's settings (domain/workspace.py).
"""
from __future__ import annotations

import hashlib
import unicodedata
from typing import NamedTuple

from eventsourcing.domain import event

from .aggregate import Aggregate
from .segments import segment

STOP, START, HELP = "stop", "start", "help"
# The words a whole reply may be, in English, romanised Nepali and Devanagari (docs/api.md, "Opt-out").
REPLY_WORDS = {**dict.fromkeys(("stop", "unsubscribe", "रोक", "band", "बन्द", "radda", "रद्द"), STOP),
               **dict.fromkeys(("start", "suru", "सुरु"), START),
               **dict.fromkeys(("help", "sahayog", "सहयोग"), HELP)}
# The release whose finalized log every process reads a help answer in.
HELP_FROM = "0.4.0"
REPLY, OPERATOR = "reply", "operator"  # who made a change: the recipient's reply, or an operator
RECIPIENT = "recipient"  # the actor of a change a reply made


def optout_id(workspace_id: str, number: str) -> str:
    """The aggregate of one workspace + number (`number` as domain/phone.py normalises it)."""
    return "optout_" + hashlib.sha256(f"{workspace_id}\x1f{number}".encode()).hexdigest()[:32]


class Word(NamedTuple):
    meaning: str   # STOP, START or HELP
    language: str  # "ne" for a word in Devanagari, "en" for one in Latin letters


def reply_word(text: str) -> Word | None:
    """The word the whole text is, in any case and with spaces around; None for anything else
    ("stop it" is a reply, not a request)."""
    word = unicodedata.normalize("NFC", text).strip().casefold()
    meaning = REPLY_WORDS.get(word)
    if meaning is None:
        return None
    return Word(meaning, "en" if word.isascii() else "ne")


CONFIRMATIONS = {
    (STOP, "en"): "You will get no more promotional messages from us. Send START to get them again.",
    (STOP, "ne"): "प्रचार सन्देश बन्द भयो। फेरि पाउन START पठाउनुहोस्।",
    (START, "en"): "You will get our promotional messages again. Send STOP to stop them.",
    (START, "ne"): "प्रचार सन्देश फेरि सुरु भयो। रोक्न STOP पठाउनुहोस्।",
}


def confirmation(meaning: str, language: str, workspace: str) -> str:
    """What a recipient is sent once their reply opted them out (STOP) or back in (START): one
    SMS, led by the workspace's name where it fits."""
    text = CONFIRMATIONS[(meaning, language)]
    named = f"{workspace}: {text}"
    return named if segment(named).segments == 1 else text


def help_id(workspace_id: str, number: str, day: str) -> str:
    """The help answer of one workspace to one number on one Nepal day (YYYY-MM-DD)."""
    return "help_" + hashlib.sha256(f"{workspace_id}\x1f{number}\x1f{day}".encode()).hexdigest()[:32]


class HelpSent(Aggregate):
    """The workspace's help text went to a number today: no second one until tomorrow."""

    class Created(Aggregate.Created):
        written_from = HELP_FROM

        workspace_id: str
        number: str
        day: str
        message_id: str
        at: float

    @staticmethod
    def create_id(workspace_id: str, number: str, day: str, **_: object) -> str:
        return help_id(workspace_id, number, day)

    @event(Created)
    def __init__(self, workspace_id: str, number: str, day: str, message_id: str, at: float):
        self.workspace_id, self.number, self.day, self.message_id = workspace_id, number, day, message_id


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
