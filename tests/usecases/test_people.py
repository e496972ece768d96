"""People of the dashboard (domain/usecases/people.py): links, passwords, signing in and its
throttle, over memory and PostgreSQL."""
from __future__ import annotations

import itertools

import pytest

from sandesh.domain import totp
from sandesh.domain.clock import FixedClock
from sandesh.domain.errors import InvalidInput, InvalidTransition, NameTaken, NotFound
from sandesh.domain.signin import FAILURE_WINDOW, TRIES_PER_ACCOUNT_ADDRESS, SignInRefused

from tests import memory

PASSWORD = "correct horse battery"
_people = itertools.count()


def an_email() -> str:
    return f"person{next(_people)}@example.com"


def test_a_person_sets_a_password_through_their_link_and_signs_in(store):
    workspace_id = store.workspace()
    person, token = store.sandesh.people.add_person(an_email().upper(), "Asha", workspace_id, "owner", False, "tester")
    assert store.sandesh.people.person_of_link(token).id == person.id
    store.sandesh.people.set_password(token, PASSWORD)
    assert store.sandesh.people.sign_in(person.email, PASSWORD, "192.0.2.1").id == person.id
    assert store.sandesh.people.person_of_link(token) is None  # spent


def test_a_short_password_is_refused_and_the_link_stays_valid(store):
    person, token = store.sandesh.people.add_person(an_email(), "Asha", store.workspace(), "viewer", False, "tester")
    with pytest.raises(InvalidInput, match="at least 12"):
        store.sandesh.people.set_password(token, "short")
    assert store.sandesh.people.person_of_link(token) is not None


def test_a_wrong_password_is_refused_as_an_unknown_email_is(store):
    person, token = store.sandesh.people.add_person(an_email(), "Asha", store.workspace(), "developer", False, "tester")
    store.sandesh.people.set_password(token, PASSWORD)
    refusals = []
    for email, password in ((person.email, "wrong password!"), (an_email(), PASSWORD)):
        with pytest.raises(SignInRefused) as refused:
            store.sandesh.people.sign_in(email, password, "192.0.2.2")
        refusals.append((str(refused.value), refused.value.wait))
    assert refusals[0] == refusals[1] == ("refused", 0)


def test_a_disabled_person_cannot_sign_in_until_enabled(store):
    person, token = store.sandesh.people.add_person(an_email(), "Asha", store.workspace(), "owner", False, "tester")
    store.sandesh.people.set_password(token, PASSWORD)
    store.sandesh.people.disable_person(person.email, "tester")
    with pytest.raises(SignInRefused):
        store.sandesh.people.sign_in(person.email, PASSWORD, "192.0.2.3")
    store.sandesh.people.enable_person(person.email, "tester")
    assert store.sandesh.people.sign_in(person.email, PASSWORD, "192.0.2.3").id == person.id


def test_an_email_is_one_person_and_a_workspace_must_exist(store):
    email = an_email()
    store.sandesh.people.add_person(email, "Asha", store.workspace(), "owner", False, "tester")
    with pytest.raises(NameTaken):
        store.sandesh.people.add_person(email, "Asha", store.workspace(), "owner", False, "tester")
    with pytest.raises(NotFound):
        store.sandesh.people.add_person(an_email(), "Asha", "ws_none", "owner", False, "tester")
    with pytest.raises(InvalidInput):
        store.sandesh.people.add_person(an_email(), "Asha", store.workspace(), "admin", False, "tester")


def test_a_reset_replaces_the_link(store):
    person, token = store.sandesh.people.add_person(an_email(), "Asha", store.workspace(), "owner", False, "tester")
    _, newer = store.sandesh.people.reset_password(person.email, "tester")
    with pytest.raises(InvalidTransition):
        store.sandesh.people.set_password(token, PASSWORD)
    store.sandesh.people.set_password(newer, PASSWORD)


def test_the_changes_are_in_the_audit_trail_with_their_actors(store):
    workspace_id = store.workspace()
    person, token = store.sandesh.people.add_person(an_email(), "Asha", workspace_id, "owner", False, "tester")
    store.sandesh.people.set_password(token, PASSWORD)
    lines = [(line["action"], line["actor"]) for line in store.sandesh.history.audit(workspace_id)
             if line["action"].startswith("person.")]
    assert lines == [("person.added", "tester"), ("person.password_set", f"user:{person.email}")]


def test_five_wrong_passwords_from_one_address_then_the_right_one_from_another_signs_in(store):
    """No one is locked out: the address that failed waits 15 minutes for that account (on the
    service clock), the right password from another address is not refused for it."""
    person, token = store.sandesh.people.add_person(an_email(), "Asha", store.workspace(), "owner", False, "tester")
    store.sandesh.people.set_password(token, PASSWORD)
    for _ in range(TRIES_PER_ACCOUNT_ADDRESS):
        with pytest.raises(SignInRefused) as refused:
            store.sandesh.people.sign_in(person.email, "wrong password!", "192.0.2.4")
        assert refused.value.wait == 0
    with pytest.raises(SignInRefused) as refused:
        store.sandesh.people.sign_in(person.email, PASSWORD, "192.0.2.4")  # that address waits, right or not
    assert 0 < refused.value.wait <= FAILURE_WINDOW
    assert store.sandesh.people.sign_in(person.email, PASSWORD, "192.0.2.5").id == person.id


def test_the_addresses_of_one_ipv6_network_count_as_one():
    """An attacker's /64 holds 2^64 addresses: each of them counts for the network."""
    clock = FixedClock()
    app = memory.in_memory(clock)
    workspace = app.operators.create_workspace("Pasal", None, {}, "tester")
    person, token = app.people.add_person(an_email(), "Asha", workspace.id, "owner", False, "tester")
    app.people.set_password(token, PASSWORD)
    for n in range(TRIES_PER_ACCOUNT_ADDRESS):
        with pytest.raises(SignInRefused):
            app.people.sign_in(person.email, "wrong password!", f"2001:db8:1:2::{n + 1:x}")
    with pytest.raises(SignInRefused) as refused:
        app.people.sign_in(person.email, "wrong password!", "2001:db8:1:2:ffff::9")
    assert refused.value.wait > 0
    assert app.people.sign_in(person.email, PASSWORD, "2001:db8:1:3::1").id == person.id  # another network
    clock.advance(FAILURE_WINDOW)
    assert app.people.sign_in(person.email, PASSWORD, "2001:db8:1:2::1").id == person.id  # the wait ended


def test_an_owner_changes_anothers_role_and_removes_them_but_not_themselves(store):
    workspace_id = store.workspace()
    owner, _ = store.sandesh.people.add_person(an_email(), "Owner", workspace_id, "owner", False, "tester")
    member, token = store.sandesh.people.add_person(an_email(), "Member", workspace_id, "developer", False, "tester")
    store.sandesh.people.set_password(token, PASSWORD)
    assert store.sandesh.people.change_role(member.id, workspace_id, "viewer", owner.email).role == "viewer"
    with pytest.raises(InvalidTransition):
        store.sandesh.people.change_role(owner.id, workspace_id, "viewer", owner.email)
    with pytest.raises(NotFound):
        store.sandesh.people.remove_person(member.id, store.workspace(), owner.email)  # not of that workspace
    store.sandesh.people.remove_person(member.id, workspace_id, owner.email)
    with pytest.raises(SignInRefused):
        store.sandesh.people.sign_in(member.email, PASSWORD, "192.0.2.6")
    again, newer = store.sandesh.people.add_person(member.email, "Member", workspace_id, "viewer", False, owner.email)
    assert again.id == member.id and store.sandesh.people.person_of_link(newer) is not None
    lines = [(line["action"], line["actor"]) for line in store.sandesh.history.audit(workspace_id)]
    assert ("person.role_changed", f"user:{owner.email}") in lines and ("person.removed", f"user:{owner.email}") in lines


def test_an_authenticator_app_is_set_up_with_a_code_and_asked_for_at_every_sign_in():
    clock = FixedClock()
    app = memory.in_memory(clock)
    workspace = app.operators.create_workspace("Pasal", None, {}, "tester")
    person, token = app.people.add_person(an_email(), "Asha", workspace.id, "owner", False, "tester")
    app.people.set_password(token, PASSWORD)
    assert app.people.second_factor(app.people.sign_in(person.email, PASSWORD, "192.0.2.7")) is None
    app.operators.require_totp(workspace.id, True, "user:" + person.email)
    assert app.people.second_factor(app.people.person(person.id)) == "enroll"  # owners must, once required

    secret = totp.new_secret()
    with pytest.raises(InvalidInput):
        app.people.enroll_totp(person.id, secret, "000000" if totp.hotp(secret, totp.step_of(clock.now())) != "000000"
                               else "111111", after_password=True)
    app.people.enroll_totp(person.id, secret, totp.hotp(secret, totp.step_of(clock.now())), after_password=True)
    assert app.people.second_factor(app.people.person(person.id)) == "code"

    clock.advance(totp.STEP)
    code = totp.hotp(secret, totp.step_of(clock.now()))
    assert app.people.verify_code(person.id, code, "192.0.2.7").id == person.id
    with pytest.raises(SignInRefused):
        app.people.verify_code(person.id, code, "192.0.2.7")  # never twice
    lines = [line["action"] for line in app.history.audit(workspace.id)]
    assert "workspace.totp_requirement_set" in lines and "person.totp_enrolled" in lines
    assert not any("secret" in str(line["details"]) for line in app.history.audit(workspace.id))


def test_the_operator_team_always_signs_in_with_a_second_factor(store):
    """An operator sets up an authenticator app right after their first password, then gives its code."""
    person, token = store.sandesh.people.add_person(an_email(), "Ops", None, None, True, "tester")
    store.sandesh.people.set_password(token, PASSWORD)
    assert store.sandesh.people.second_factor(store.sandesh.people.sign_in(person.email, PASSWORD, "192.0.2.8")) == "enroll"
    secret = totp.new_secret()
    store.sandesh.people.enroll_totp(person.id, secret, totp.hotp(secret, totp.step_of(store.sandesh.clock.now())),
                                 after_password=True)
    assert store.sandesh.people.second_factor(store.sandesh.people.person(person.id)) == "code"


def open_session(store, person_id: str) -> None:
    """A dashboard session of the person, as signing in begins one."""
    sessions = store.sandesh.people.sessions
    if isinstance(sessions, memory.Sessions):
        sessions.of[person_id] = sessions.of.get(person_id, 0) + 1
    else:
        from sandesh.projections.storage import sessions as table

        with sessions.connection() as conn:
            table.begin(conn, person_id, store.sandesh.clock.now())


def test_disabling_removing_or_adding_a_person_again_ends_their_sessions_at_once(store):
    """None of their sessions outlives the change: re-added, a person starts over through the
    new link, with no password and no authenticator app (docs/dashboard.md, "Sessions")."""
    workspace_id = store.workspace()
    owner, _ = store.sandesh.people.add_person(an_email(), "Owner", workspace_id, "owner", False, "tester")
    person, token = store.sandesh.people.add_person(an_email(), "Asha", workspace_id, "developer", False, "tester")
    store.sandesh.people.set_password(token, PASSWORD)
    secret = totp.new_secret()
    store.sandesh.people.enroll_totp(person.id, secret, totp.hotp(secret, totp.step_of(store.sandesh.clock.now())),
                                 proof=PASSWORD)

    open_session(store, person.id)
    store.sandesh.people.disable_person(person.email, "tester")
    assert store.sandesh.people.sessions.end_all(person.id) == 0, "disabling ended them"
    store.sandesh.people.enable_person(person.email, "tester")

    open_session(store, person.id)
    store.sandesh.people.remove_person(person.id, workspace_id, owner.email)
    assert store.sandesh.people.sessions.end_all(person.id) == 0, "removing ended them"

    open_session(store, person.id)  # one begun just before (a race with the removal)
    again, link = store.sandesh.people.add_person(person.email, "Asha", workspace_id, "viewer", False, owner.email)
    assert store.sandesh.people.sessions.end_all(person.id) == 0, "adding again ended them"
    assert (again.password_hash, again.totp_sealed) == (None, None), "a new start: no password, no app"
    with pytest.raises(SignInRefused):
        store.sandesh.people.sign_in(person.email, PASSWORD, "192.0.2.9")
    store.sandesh.people.set_password(link, PASSWORD)
    assert store.sandesh.people.second_factor(store.sandesh.people.sign_in(person.email, PASSWORD, "192.0.2.9")) is None


def test_replacing_an_authenticator_app_takes_a_code_of_the_current_one_or_the_password():
    """A signed-in session alone (a stolen cookie) cannot swap the second factor; a wrong proof
    counts toward the sign-in throttle."""
    clock = FixedClock()
    app = memory.in_memory(clock)
    workspace = app.operators.create_workspace("Pasal", None, {}, "tester")
    person, token = app.people.add_person(an_email(), "Asha", workspace.id, "owner", False, "tester")
    app.people.set_password(token, PASSWORD)
    first = totp.new_secret()
    app.people.enroll_totp(person.id, first, totp.hotp(first, totp.step_of(clock.now())), proof=PASSWORD)
    clock.advance(totp.STEP)

    second = totp.new_secret()
    new_code = totp.hotp(second, totp.step_of(clock.now()))
    for proof in ("", "wrong password!", "000000" if totp.hotp(first, totp.step_of(clock.now())) != "000000"
                  else "111111"):
        with pytest.raises(InvalidInput, match="a code it shows now, or your password"):
            app.people.enroll_totp(person.id, second, new_code, proof=proof, ip="192.0.2.10")
    assert len(app.people.tries.recent(f"account:{person.email}")) == 3  # counted as failed sign-ins
    assert app.people.sealer.open(app.people.person(person.id).totp_sealed) == first

    app.people.enroll_totp(person.id, second, new_code, proof=PASSWORD, ip="192.0.2.10")
    assert app.people.sealer.open(app.people.person(person.id).totp_sealed) == second

    clock.advance(totp.STEP)
    third = totp.new_secret()
    current = totp.hotp(second, totp.step_of(clock.now()))
    app.people.enroll_totp(person.id, third, totp.hotp(third, totp.step_of(clock.now())), proof=current,
                           ip="192.0.2.10")
    assert app.people.sealer.open(app.people.person(person.id).totp_sealed) == third
    with pytest.raises(SignInRefused):
        app.people.verify_code(person.id, current, "192.0.2.10")  # the proof's code was used


def test_a_first_app_set_up_outside_a_sign_in_takes_the_password():
    """A session alone (a stolen cookie) cannot set up an app of its own for a person who has none
    and so lock them out: outside the sign-in that just took the password, the password is asked."""
    clock = FixedClock()
    app = memory.in_memory(clock)
    workspace = app.operators.create_workspace("Pasal", None, {}, "tester")
    person, token = app.people.add_person(an_email(), "Asha", workspace.id, "developer", False, "tester")
    app.people.set_password(token, PASSWORD)
    secret = totp.new_secret()
    code = totp.hotp(secret, totp.step_of(clock.now()))
    for proof in ("", "wrong password!", code):
        with pytest.raises(InvalidInput, match="type your password too"):
            app.people.enroll_totp(person.id, secret, code, proof=proof, ip="192.0.2.11")
    assert app.people.person(person.id).totp_sealed is None
    app.people.enroll_totp(person.id, secret, code, proof=PASSWORD, ip="192.0.2.11")
    assert app.people.sealer.open(app.people.person(person.id).totp_sealed) == secret
