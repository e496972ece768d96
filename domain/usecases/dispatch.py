"""What the dispatcher records (workers/dispatcher.py, workers/sim_worker.py): a leased message
submitted to a SIM, its status reports, and the replies read from a SIM with the opt-outs a
STOP or START reply asks for."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Callable

from eventsourcing.persistence import IntegrityError

from ..client import first_word
from ..clock import NEPAL, Clock
from ..errors import InsufficientBalance
from ..inbound import Reply, keyed_reply_id, reply_owner
from ..message import TEXT_ERASED, Message
from ..optout import HELP, RECIPIENT, REPLY, STOP, HelpSent, OptOut, confirmation, help_id, optout_id, reply_word
from ..ports import Texts
from ..steps import Read, Steps, retried, run
from ..workspace import ACTIVE, Workspace
from .log import Log
from .sending import Sending

SEND, RELEASE, SKIP = "send", "release", "skip"


@dataclass(frozen=True)
class KeywordOwner:
    """The client a keyword belongs to (projections/registry.py keyword_owner)."""
    client_id: str
    workspace_id: str


@dataclass(frozen=True)
class Submission:
    """What a SIM does with a message it leased: SEND it (`message` is submitted to it),
    RELEASE the lease (the message is no longer queued), or SKIP it (it expired, recorded,
    or another SIM submitted it first)."""
    action: str
    message: Message | None = None
    text: str | None = None  # the message's text, opened (it is sealed in the log)


class Dispatch:
    def __init__(self, log: Log, clock: Clock, texts: Texts, sending: Sending):
        self.log, self.clock, self.texts, self.sending = log, clock, texts, sending

    def submit_message(self, message_id: str, sim_id: str) -> Submission:
        """A SIM is about to send a message it leased.  Submitted is recorded before the first
        AT+CMGS, so a message is never sent twice blindly (docs/design.md, "The dispatcher")."""
        message = self.log.find(message_id, Message)
        if message is None or message.status != "queued":
            return Submission(RELEASE)
        now = self.clock.now()
        if message.expired(now):  # it ran out while leased: not sent either
            self.change_message(message_id, lambda m: m.expire(at=now))
            return Submission(SKIP)
        text = self.texts.open(message.text)
        if text is None:  # its workspace's texts were erased before it went out: failed, refunded
            self.change_message(message_id, lambda m: m.fail(TEXT_ERASED, at=now))
            return Submission(SKIP)
        message.submit(sim_id, at=now)
        try:
            self.log.save(message)
        except IntegrityError:
            return Submission(SKIP)  # another SIM submitted it first (its lease had been handed back)
        return Submission(SEND, message, text)

    def change_message(self, message_id: str, change: Callable[[Message], None]) -> Message:
        return run(self.change_message_steps(message_id, change), self.log.save)

    def change_message_steps(self, message_id: str, change: Callable[[Message], None]) -> Steps[Message]:
        """Apply `change` to the message as the log has it now and append what it decided.
        The sender and the status-report reader both write to a message: a version conflict
        means the other one wrote first, so read it again."""
        def attempt() -> Steps[tuple[tuple[Message, ...], Message]]:
            message = yield Read(self.log.get, (message_id, Message, "message"))
            change(message)
            return (message,), message

        return (yield from retried(attempt, f"a change to {message_id}"))

    # Replies from recipients
    def store_reply_part(self, open_reply_id: str | None, sim_id: str, sender: str, reference: int | None,
                         total: int, sequence: int, text: str) -> Reply:
        """Record one part read from a SIM (before it is deleted there); duplicates are dropped.
        A part is sealed under a key of the reply alone until the reply is finished."""
        now = self.clock.now()
        reply = self.log.find(open_reply_id, Reply) if open_reply_id else None
        if reply is None:
            reply = Reply(sim_id=sim_id, sender=sender, reference=reference, total=max(total, 1), at=now)
        reply.store_part(sequence, self.texts.seal(reply_owner(reply.id), text), at=now)
        self.log.save(reply)
        return reply

    def store_keyed_reply(self, sim_id: str, key: str, sender: str, text: str) -> tuple[Reply, bool]:
        """A whole reply a device names by `key`, recorded once however often it is read (its id is
        the key's, `keyed_reply_id`): the reply, and whether this call recorded it."""
        reply_id, now = keyed_reply_id(sim_id, key), self.clock.now()
        known = self.log.find(reply_id, Reply)
        if known is not None:  # told again: sealing it would make its finished reply's key anew
            return known, False
        reply = Reply._create(Reply.Opened, id=reply_id, sim_id=sim_id, sender=sender, reference=None, total=1,
                              at=now)
        reply.store_part(1, self.texts.seal(reply_owner(reply_id), text), at=now)
        try:
            self.log.save(reply)
            return reply, True
        except IntegrityError:  # read before: by this SIM's thread, or posted by the phone
            return self.reply(reply_id), False

    def reply(self, reply_id: str) -> Reply:
        return self.log.get(reply_id, Reply, "reply")

    def finish_reply(self, reply_id: str, attributed_to: Message | None,
                     keyword_owner: Callable[[str], KeywordOwner | None] = lambda word: None) -> Reply:
        """The whole reply, its text sealed under the key of the workspace it is attributed to;
        the parts' own key is then destroyed.  A reply no one sent to keeps the parts' key.
        A reply whose first word is a client's keyword (`keyword_owner` tells whose) is that
        client's, whatever it answers.  A STOP or START reply changes its sender's opt-out, and
        the workspace's answer to a word goes, in the same append, so a crash never records one
        without the other (docs/design.md, "Opt-outs"); an answer the balance cannot pay is
        left out."""
        owned, answering = False, True

        def attempt() -> Steps[tuple[tuple[Reply | OptOut | Message | HelpSent, ...], Reply]]:
            nonlocal owned
            reply = self.reply(reply_id)
            if reply.complete:  # finished elsewhere
                return (), reply
            text = "".join(self.texts.open(reply.parts[s]) or "" for s in sorted(reply.parts))
            word = first_word(text)
            service = keyword_owner(word) if word else None
            now = self.clock.now()
            if service is not None:
                owned = True
                reply.finish(self.texts.seal(service.workspace_id, text), service.client_id, None, at=now)
                return (reply,), reply
            owned = attributed_to is not None
            owner = attributed_to.workspace_id if attributed_to else reply_owner(reply.id)
            reply.finish(self.texts.seal(owner, text), attributed_to.client_id if attributed_to else None,
                         attributed_to.id if attributed_to else None, at=now)
            answered = yield from self._words(reply.id, text, attributed_to, answering, now)
            return (reply, *answered), reply

        try:
            reply = run(retried(attempt, f"reply {reply_id}"), self.log.save)
        except InsufficientBalance:  # the workspace cannot pay its answer: the reply and its opt-out go alone
            answering = False
            reply = run(retried(attempt, f"reply {reply_id}"), self.log.save)
        if owned:
            self.texts.shred(reply_owner(reply.id))
        return reply

    def _words(self, reply_id: str, text: str, attributed_to: Message | None, answering: bool,
               now: float) -> Steps[list[OptOut | Message | HelpSent]]:
        """What a reply that is one of the words asks for (docs/api.md, "Opt-out"), of the
        workspace of the message it answers, for the number that message went to: a STOP or
        START changes the number's opt-out of its promotional messages, confirmed by SMS when
        the workspace confirms; a HELP gets its help text, once a Nepal day.  Each answer is a
        transactional message of the client that sent the message, charged as a send."""
        word = reply_word(text)
        if word is None or attributed_to is None:
            return []
        workspace_id, number = attributed_to.workspace_id, attributed_to.to
        changed: list[OptOut | Message | HelpSent] = []
        if word.meaning != HELP:
            optout = (self.log.find(optout_id(workspace_id, number), OptOut)
                      or OptOut(workspace_id=workspace_id, number=number))
            if not optout.change(word.meaning == STOP, REPLY, RECIPIENT, reply_id, at=now):
                return []
            changed.append(optout)
        workspace = self.log.find(workspace_id, Workspace)
        if not answering or workspace is None or workspace.status != ACTIVE:
            return changed
        if word.meaning == HELP:
            day = datetime.fromtimestamp(now, NEPAL).date().isoformat()
            if workspace.help_text is None or self.log.find(help_id(workspace_id, number, day), HelpSent):
                return changed
            answer = yield from self._answer(attributed_to, workspace, workspace.help_text, now)
            return [answer, HelpSent(workspace_id=workspace_id, number=number, day=day, message_id=answer.id, at=now)]
        if workspace.confirmations:
            changed.append((yield from self._answer(attributed_to, workspace,
                                                    confirmation(word.meaning, word.language, workspace.name), now)))
        return changed

    def _answer(self, answered: Message, workspace: Workspace, text: str, now: float) -> Steps[Message]:
        message, problems = yield from self.sending.answer_steps(answered.client_id, workspace.id, workspace.rates,
                                                                 answered.to, text, now)
        assert message is not None, problems  # a number that was sent to, a text that was checked
        return message
