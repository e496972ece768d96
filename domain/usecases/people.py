"""The use cases of people who sign in to the dashboard (`sandesh user`, the dashboard's
set-password and sign-in pages; docs/dashboard.md).  Each change is an event of the person with
its actor, so the audit trail reads it back (history.py)."""
from __future__ import annotations

import math
import secrets
from dataclasses import dataclass
from functools import cached_property

from ..clock import Clock
from ..credentials import sha256_hex
from ..errors import InvalidInput, InvalidTransition, NameTaken, NotFound
from ..person import (LINK_HOURS, OPERATOR, OWNER, Person, actor_of, check_name, check_role, new_link_token,
                      normalise_email, password_problem, person_id, person_of_token)
from ..ports import PasswordHasher, Sealer, Sessions, SignInTries
from ..said import _
from ..signin import SignInRefused, TryKeys, turn_of
from ..totp import matching_step
from ..workspace import Workspace
from .log import Log


SECOND_FACTOR_CODE, SECOND_FACTOR_ENROLL = "code", "enroll"


@dataclass(frozen=True)
class SignInTry:
    """A try recorded by the throttle: its id, and when it may be checked."""
    id: str
    at: float


class People:
    def __init__(self, log: Log, clock: Clock, hasher: PasswordHasher, tries: SignInTries, sealer: Sealer,
                 sessions: Sessions):
        self.log, self.clock, self.hasher, self.tries, self.sealer = log, clock, hasher, tries, sealer
        self.sessions = sessions  # a person's end when they are disabled, removed or added again

    def add_person(self, email: str, name: str, workspace_id: str | None, role: str | None, operator: bool,
                   actor: str) -> tuple[Person, str]:
        """A person of a workspace with a role, or of the operator team; returns them with the
        token of their one-time set-password link."""
        email, name = normalise_email(email), check_name(name)
        if operator:
            workspace_id, role = None, OPERATOR
        elif workspace_id is None or role is None:
            raise InvalidInput("a person of a workspace needs --workspace and --role (or --operator)")
        else:
            role = check_role(role)
            self.log.get(workspace_id, Workspace, "workspace")
        token = new_link_token(person_id(email))
        now = self.clock.now()
        found = self.log.find(person_id(email), Person)
        if found is not None and not found.removed:
            raise NameTaken(f"{email} is a person already (`sandesh user reset` sends them a new link)")
        if found is not None:
            found.rejoin(name, workspace_id, role, token, actor=actor, at=now)
            self.log.save(found)
            self.sessions.end_all(found.id)  # none outlives the removal: a new start, through the new link
            return found, token
        person = Person(email=email, name=name, workspace_id=workspace_id, role=role, token_hash=sha256_hex(token),
                        token_expires=now + LINK_HOURS * 3600, actor=actor, at=now)
        self.log.save(person)
        return person, token

    def reset_password(self, email: str, actor: str) -> tuple[Person, str]:
        """A new one-time link; the previous one stops at once.  The password stays until it is replaced."""
        person = self._person(email)
        token = new_link_token(person.id)
        person.issue_link(token, actor=actor, at=self.clock.now())
        self.log.save(person)
        return person, token

    def disable_person(self, email: str, actor: str) -> Person:
        person = self._person(email)
        person.disable(actor=actor, at=self.clock.now())
        self.log.save(person)
        self.sessions.end_all(person.id)
        return person

    def enable_person(self, email: str, actor: str) -> Person:
        person = self._person(email)
        person.enable(actor=actor, at=self.clock.now())
        self.log.save(person)
        return person

    def change_role(self, target: str, workspace_id: str, role: str, by: str) -> Person:
        """An owner's change of another person's (`target`, an id) role in their workspace (`by`:
        the owner's email)."""
        person = self._member(target, workspace_id, by)
        person.change_role(role, actor=actor_of(by), at=self.clock.now())
        self.log.save(person)
        return person

    def remove_person(self, target: str, workspace_id: str, by: str) -> Person:
        """An owner takes another person (`target`, an id) out of their workspace."""
        person = self._member(target, workspace_id, by)
        person.remove(actor=actor_of(by), at=self.clock.now())
        self.log.save(person)
        self.sessions.end_all(person.id)
        return person

    def _member(self, target: str, workspace_id: str, by: str) -> Person:
        """A person of the workspace other than `by`: an owner never demotes or removes themselves,
        so a workspace is not left without the owner who acts."""
        person = self.log.find(target, Person)
        if person is None or person.removed or person.workspace_id != workspace_id:
            raise NotFound(f"no person {target!r} in this workspace")
        if person.email == by:
            raise InvalidTransition(_("you cannot change your own role or remove yourself; ask another owner"))
        return person

    def person_of_link(self, token: str) -> Person | None:
        """The person a set-password link is for while it is valid, else None."""
        person = self.log.find(person_of_token(token), Person)
        return person if person is not None and person.link_valid(token, self.clock.now()) else None

    def set_password(self, token: str, password: str) -> Person:
        """Through a valid link: InvalidInput says what is wrong with the password,
        InvalidTransition that the link is not valid."""
        problem = password_problem(password)
        if problem:
            raise InvalidInput(problem)
        person = self.person_of_link(token)
        if person is None:
            raise InvalidTransition(_("this link is not valid: it was used, replaced or is older than 24 hours"))
        person.set_password(token, self.hasher.hash(password), at=self.clock.now())
        self.log.save(person)
        return person

    def try_sign_in(self, email: str, ip: str, device: str | None = None) -> SignInTry:
        """A try to sign in to this account from this address, recorded before its password is
        checked: when it may be (its turn, later than now while the account is paced), or
        SignInRefused(wait) when it may not (domain/signin.py).  `device`: the id of a trusted
        device of this account (its device cookie, checked by the dashboard), counted apart.  The
        dashboard awaits the turn without holding a thread, then calls `sign_in` with the try."""
        return self._try(email.strip().lower(), ip, device)

    def withdraw_try(self, attempt: SignInTry) -> None:
        """A try that was never checked (the service was too busy to): it counts as no failure."""
        self.tries.succeeded(attempt.id)

    def sign_in(self, email: str, password: str, ip: str, attempt: SignInTry | None = None) -> Person:
        """The person whose email and password these are, or SignInRefused: the same refusal,
        after the same work (one hash verified), whether the email exists or not.  Without
        `attempt`, the try is taken now."""
        email = email.strip().lower()
        attempt = self._turn_came(attempt or self._try(email, ip))
        person = self.log.find(person_id(email), Person)
        known = person is not None and person.may_sign_in
        hashed = person.password_hash if known and person is not None else None
        matches = self.hasher.verify(hashed or self._decoy, password)
        if not (known and matches):
            raise SignInRefused()  # the try stays recorded: a failure
        self.tries.succeeded(attempt.id)
        assert person is not None
        return person

    def choose_language(self, person_id: str, language: str) -> None:
        """The dashboard's language the person chose, kept for every browser they sign in on
        (once the upgrade is finalized; before, the browser's cookie alone keeps it)."""
        person = self.log.find(person_id, Person)
        if person is None or not self.log.writes(Person.LanguageChosen):
            return
        person.choose_language(language, at=self.clock.now())
        if person.pending_events:
            self.log.save(person)

    def person(self, id: str) -> Person | None:
        return self.log.find(id, Person)

    # The second factor: an authenticator app (domain/totp.py)
    def second_factor(self, person: Person) -> str | None:
        """What a person who gave the right password still owes before their session begins: a
        code of their app ("code"), setting one up ("enroll": a member of the operator team, or
        an owner of a workspace that requires codes), or nothing (None)."""
        if person.totp_sealed is not None:
            return SECOND_FACTOR_CODE
        if person.role == OPERATOR:  # the operator team always signs in with a second factor
            return SECOND_FACTOR_ENROLL
        if person.role == OWNER and person.workspace_id and self.totp_required(person.workspace_id):
            return SECOND_FACTOR_ENROLL
        return None

    def totp_required(self, workspace_id: str) -> bool:
        workspace = self.log.find(workspace_id, Workspace)
        return workspace is not None and workspace.totp_required

    def try_code(self, person_id: str, ip: str, device: str | None = None) -> SignInTry:
        """A try of an authenticator code, throttled as a password is (`try_sign_in`)."""
        return self._try(self.log.get(person_id, Person, "person").email, ip, device)

    def verify_code(self, person_id: str, code: str, ip: str, attempt: SignInTry | None = None) -> Person:
        """The person, once `code` is their app's for now and unused; else SignInRefused, and the
        try counts as a failure toward the same throttle as a wrong password."""
        person = self.log.get(person_id, Person, "person")
        attempt = self._turn_came(attempt or self._try(person.email, ip))
        now = self.clock.now()
        step = None
        if person.totp_sealed is not None and person.may_sign_in:
            step = matching_step(self.sealer.open(person.totp_sealed), code, now, after=person.totp_step)
        if step is None:
            raise SignInRefused()
        person.use_totp(step, at=now)
        self.log.save(person)  # two sign-ins with one code race on the version: one wins
        self.tries.succeeded(attempt.id)
        return person

    def enroll_totp(self, person_id: str, secret: str, code: str, *, proof: str = "", ip: str = "",
                    after_password: bool = False) -> Person:
        """Set up an authenticator app: `code` proves it holds `secret`.  It also takes `proof`,
        a code of the app in use or the password, so that a session alone (a stolen cookie)
        cannot set or swap the second factor and lock the person out; a wrong proof counts as a
        failed sign-in.  Only a first app set up during a sign-in (`after_password`: the password
        was given a moment ago, in this session) needs none.  InvalidInput says which is wrong."""
        person = self.log.get(person_id, Person, "person")
        now = self.clock.now()
        if person.totp_sealed is not None or not after_password:
            self._proven(person, proof, ip, now)
        step = matching_step(secret, code, now, after=0)  # no code of this new secret was ever accepted
        if step is None:
            raise InvalidInput(_("That code is not right: type the 6 digits the app shows now."))
        person.enroll_totp(self.sealer.seal(secret), max(step, person.totp_step), at=now)
        self.log.save(person)
        return person

    def _proven(self, person: Person, proof: str, ip: str, now: float) -> None:
        attempt = self._turn_came(self._try(person.email, ip))
        step = None
        if person.totp_sealed is not None:
            step = matching_step(self.sealer.open(person.totp_sealed), proof, now, after=person.totp_step)
        if step is not None:
            person.use_totp(step, at=now)  # a code is never accepted twice
        elif not (person.password_hash is not None and proof and self.hasher.verify(person.password_hash, proof)):
            raise InvalidInput(_("To replace your app, type a code it shows now, or your password.")
                               if person.totp_sealed is not None else _("To set up an app, type your password too."))
        self.tries.succeeded(attempt.id)

    def _try(self, email: str, ip: str, device: str | None = None) -> SignInTry:
        keys, now = TryKeys.of(email, ip, device), self.clock.now()
        try_id, turn = self.tries.take(keys, now, lambda tries, next_turn: turn_of(keys, tries, next_turn, now))
        return SignInTry(try_id, turn.at)

    def _turn_came(self, attempt: SignInTry) -> SignInTry:
        """A paced try is checked at its turn, not before."""
        early = attempt.at - self.clock.now()
        if early > 0:
            raise SignInRefused(math.ceil(early))
        return attempt

    @cached_property
    def _decoy(self) -> str:
        """A hash no password matches, verified when the email is unknown so that answer takes as long."""
        return self.hasher.hash(secrets.token_urlsafe(32))

    def _person(self, email: str) -> Person:
        person = self.log.find(person_id(normalise_email(email)), Person)
        if person is None or person.removed:
            raise NotFound(f"no person {email.strip()!r}")
        return person
