"""The rules of the dashboard's people, links, sign-in throttle and sessions (domain/person.py,
domain/signin.py), and how their changes read in the audit trail.  No database."""
import base64

import pytest

from sandesh.domain.audit import ACTIONS, audit_line
from sandesh.domain.errors import InvalidInput, InvalidTransition
from sandesh.domain.person import (LINK_HOURS, OWNER, Person, may_manage_clients, new_link_token, normalise_email,
                                   password_problem, person_id, person_of_token)
from sandesh.domain.credentials import sha256_hex
from sandesh.domain.totp import hotp, matching_step, new_secret, provisioning_uri, step_of
from sandesh.domain.signin import (FAILURE_WINDOW, SESSION_ABSOLUTE, SESSION_IDLE, session_alive, wait_after)

NOW = 1_800_000_000.0


def a_person(at: float = NOW) -> tuple[Person, str]:
    token = new_link_token(person_id("asha@example.com"))
    person = Person(email="asha@example.com", name="Asha", workspace_id="ws_1", role=OWNER,
                    token_hash=sha256_hex(token), token_expires=at + LINK_HOURS * 3600, actor="tester", at=at)
    return person, token


def test_an_email_is_kept_trimmed_and_in_lower_case():
    assert normalise_email("  Asha@Example.COM ") == "asha@example.com"


@pytest.mark.parametrize("text", ["", "asha", "asha@", "@example.com", "asha@example", "a b@example.com"])
def test_what_is_not_an_email_is_refused(text):
    with pytest.raises(InvalidInput):
        normalise_email(text)


def test_one_email_is_one_person():
    assert person_id("asha@example.com") == person_id("asha@example.com") != person_id("ram@example.com")


def test_a_password_has_at_least_12_characters():
    assert password_problem("x" * 11) == "Use at least 12 characters."
    assert password_problem("x" * 12) is None


def test_a_link_finds_its_person_and_is_valid_for_24_hours():
    person, token = a_person()
    assert person_of_token(token) == person.id
    assert person.link_valid(token, NOW + LINK_HOURS * 3600 - 1)
    assert not person.link_valid(token, NOW + LINK_HOURS * 3600)
    assert not person.link_valid(token + "x", NOW)


def test_a_link_sets_the_password_once():
    person, token = a_person()
    person.set_password(token, "hash", at=NOW + 60)
    assert person.password_hash == "hash"
    with pytest.raises(InvalidTransition):
        person.set_password(token, "other", at=NOW + 120)


def test_a_new_link_replaces_the_old_one():
    person, token = a_person()
    newer = new_link_token(person.id)
    person.issue_link(newer, actor="tester", at=NOW + 60)
    assert not person.link_valid(token, NOW + 61) and person.link_valid(newer, NOW + 61)


def test_a_disabled_persons_link_is_not_valid():
    person, token = a_person()
    person.disable(actor="tester", at=NOW)
    assert not person.link_valid(token, NOW + 1)


def test_failures_under_the_limit_cost_no_wait():
    assert wait_after([NOW - 10] * 4, 5, NOW) == 0


def test_past_the_limit_the_next_try_waits_for_the_oldest_failure_to_leave_the_window():
    failures = [NOW - 100, NOW - 50, NOW - 40, NOW - 30, NOW - 20]
    assert wait_after(failures, 5, NOW) == FAILURE_WINDOW - 100
    assert wait_after(failures, 5, NOW - 100 + FAILURE_WINDOW) == 0  # no lock for good


def test_failures_older_than_the_window_do_not_count():
    assert wait_after([NOW - FAILURE_WINDOW - 1] * 10, 5, NOW) == 0


def test_a_session_ends_after_30_idle_minutes_or_12_hours():
    assert session_alive(NOW, NOW, NOW + SESSION_IDLE - 1)
    assert not session_alive(NOW, NOW, NOW + SESSION_IDLE)
    assert session_alive(NOW, NOW + SESSION_ABSOLUTE - 60, NOW + SESSION_ABSOLUTE - 1)
    assert not session_alive(NOW, NOW + SESSION_ABSOLUTE - 60, NOW + SESSION_ABSOLUTE)


def test_a_persons_changes_are_audit_lines_of_their_workspace_without_secrets():
    person, token = a_person()
    person.set_password(token, "argon2-hash", at=NOW + 60)
    added, password_set = person.collect_events()
    line = audit_line(added, {}.get)
    assert (line["action"], line["actor"], line["workspaceId"]) == ("person.added", "tester", "ws_1")
    assert line["details"] == {"email": "asha@example.com", "name": "Asha", "role": "owner"}
    line = audit_line(password_set, {}.get)
    assert (line["action"], line["actor"]) == ("person.password_set", "user:asha@example.com")
    assert line["details"] == {"email": "asha@example.com"}
    assert all(cls in ACTIONS for cls in (Person.Added, Person.LinkIssued, Person.PasswordSet, Person.Disabled,
                                          Person.Enabled))


@pytest.mark.parametrize("role, manages", [("owner", True), ("developer", True), ("viewer", False),
                                           ("operator", True)])
def test_owners_and_developers_manage_clients_and_viewers_only_read(role, manages):
    assert may_manage_clients(role) is manages


def test_a_role_changes_within_the_workspace_roles():
    person, _ = a_person()
    person.change_role("viewer", actor="user:boss@example.com", at=NOW)
    assert person.role == "viewer"
    with pytest.raises(InvalidTransition):
        person.change_role("viewer", actor="user:boss@example.com", at=NOW)
    with pytest.raises(InvalidInput):
        person.change_role("operator", actor="user:boss@example.com", at=NOW)


def test_a_removed_person_cannot_sign_in_and_may_be_added_again_with_a_new_link():
    person, token = a_person()
    person.set_password(token, "hash", at=NOW)
    person.remove(actor="tester", at=NOW + 1)
    assert not person.may_sign_in
    newer = new_link_token(person.id)
    person.rejoin("Asha", "ws_2", "viewer", newer, actor="tester", at=NOW + 2)
    assert (person.workspace_id, person.role, person.password_hash) == ("ws_2", "viewer", None)
    assert person.link_valid(newer, NOW + 3)


# RFC 6238, appendix B: the SHA-1 secret "12345678901234567890", 8-digit codes (we show 6: the last 6)
@pytest.mark.parametrize("at, code", [(59, "94287082"), (1111111109, "07081804"), (1111111111, "14050471"),
                                      (1234567890, "89005924"), (2000000000, "69279037")])
def test_codes_are_those_of_rfc_6238(at, code):
    secret = base64.b32encode(b"12345678901234567890").decode()
    assert hotp(secret, step_of(at)) == code[-6:]


def test_a_code_is_accepted_one_step_either_side_and_never_twice():
    secret = new_secret()
    now = 1_800_000_000.0
    assert matching_step(secret, hotp(secret, step_of(now) - 1), now, after=0) == step_of(now) - 1
    assert matching_step(secret, hotp(secret, step_of(now) - 2), now, after=0) is None
    used = matching_step(secret, hotp(secret, step_of(now)), now, after=0)
    assert matching_step(secret, hotp(secret, step_of(now)), now, after=used) is None
    assert matching_step(secret, "12345", now, after=0) is None


def test_the_qr_code_holds_an_otpauth_uri():
    assert provisioning_uri("ABC", "a@b.example") == (
        "otpauth://totp/Sandesh%3Aa%40b.example?secret=ABC&issuer=Sandesh&algorithm=SHA1&digits=6&period=30")


def test_an_attacker_with_1000_addresses_gets_at_most_100_guesses_an_hour_against_one_account():
    """docs/dashboard.md, "Signing in": the account is paced, whatever the addresses.  The
    attacker tries every second from the next of 1,000 addresses and waits for each turn given."""
    from sandesh.domain.signin import GUESSES_PER_HOUR, PACE, SignInRefused, TryKeys, turn_of

    tries: dict[str, list[float]] = {}
    next_turn, checked = None, 0
    for second in range(3600):
        now = NOW + second
        keys = TryKeys.of("victim@example.com", f"198.51.{second % 1000 // 250}.{second % 250}")
        try:
            turn = turn_of(keys, {key: tries.get(key, []) for key in keys.all()}, next_turn, now)
        except SignInRefused:
            continue
        for key in keys.all():
            tries.setdefault(key, []).append(now)
        if turn.paced:
            next_turn = turn.at + PACE
        checked += turn.at < NOW + 3600
    assert checked <= GUESSES_PER_HOUR
    assert checked >= GUESSES_PER_HOUR - 2  # and the pace is no stricter than it says


def test_an_ipv6_address_counts_by_its_64_an_ipv4_one_alone():
    from sandesh.domain.signin import address_group

    assert address_group("2001:db8:1:2:aaaa::1") == address_group("2001:db8:1:2::ffff") == "2001:db8:1:2::/64"
    assert address_group("198.51.100.7") == address_group("::ffff:198.51.100.7") == "198.51.100.7"
    assert address_group("198.51.100.7") != address_group("198.51.100.8")
