"""The sign-in throttle on PostgreSQL under concurrency (docs/dashboard.md, "Signing in"): each
try is recorded before its password is checked, under a lock per key, so 50 tries at once count
one by one as 50 in a row would.  Checking the counts first and recording a failure after the
0.3 s of argon2 let every concurrent try through."""
from __future__ import annotations

import itertools
from concurrent.futures import ThreadPoolExecutor

from sandesh.domain.signin import ACCOUNT_PACED_AFTER, TRIES_PER_ACCOUNT_ADDRESS, SignInRefused
from tests.helpers import funded_workspace

PASSWORD = "correct horse battery staple"
_people = itertools.count()


def a_person(runtime) -> str:
    workspace = funded_workspace(runtime.sandesh, "Throttle", 0, "t")
    person, token = runtime.sandesh.people.add_person(f"throttled{next(_people)}@example.com", "T", workspace, "owner",
                                                  False, "t")
    runtime.sandesh.people.set_password(token, PASSWORD)
    return person.email


def fifty_at_once(runtime, email: str, addresses: list[str]) -> list[int]:
    """The wait each of 50 concurrent wrong tries was answered with (0: its password was checked)."""
    def attempt(ip: str) -> int:
        try:
            runtime.sandesh.people.sign_in(email, "not the password", ip)
        except SignInRefused as refused:
            return refused.wait
        raise AssertionError("a wrong password signed in")

    with ThreadPoolExecutor(max_workers=50) as pool:
        return list(pool.map(attempt, addresses))


def test_fifty_concurrent_wrong_tries_from_one_address_count_one_by_one(runtime):
    email = a_person(runtime)
    waits = fifty_at_once(runtime, email, ["198.51.100.7"] * 50)
    assert waits.count(0) == TRIES_PER_ACCOUNT_ADDRESS, "five passwords checked, as five tries in a row would"
    assert all(wait > 0 for wait in waits if wait), "the others were told to wait"
    assert runtime.sandesh.people.sign_in(email, PASSWORD, "198.51.100.8").email == email  # another address


def test_fifty_concurrent_wrong_tries_from_fifty_addresses_are_paced(runtime):
    """Past 5 failures an account's tries take turns, whatever their addresses: one is checked
    now, the next only in 38 s, more than a page waits (they are told to come back)."""
    email = a_person(runtime)
    waits = fifty_at_once(runtime, email, [f"198.51.100.{n}" for n in range(10, 60)])
    assert waits.count(0) == ACCOUNT_PACED_AFTER + 1
    with runtime.connection() as conn:
        recorded = conn.execute("SELECT count(*) AS n FROM sign_in_failures WHERE key = %s",
                                (f"account:{email}",)).fetchone()["n"]
    assert recorded == ACCOUNT_PACED_AFTER + 1, "a try told to come back is no guess"


def test_failures_and_paces_past_the_longest_window_are_purged_by_later_tries(runtime):
    """A spray of unique emails or addresses, each never tried again, leaves rows that no try
    would touch again: every try deletes a batch of those older than the hour, whatever their keys."""
    from sandesh.domain.signin import ACCOUNT_WINDOW
    from sandesh.projections.storage.sessions import PURGE_BATCH

    now = runtime.clock.now()
    sprayed = [f"account:sprayed{n}@example.com" for n in range(PURGE_BATCH + 100)]
    with runtime.connection() as conn:
        conn.execute("INSERT INTO sign_in_failures (key, at) SELECT unnest(%s::text[]), %s",
                     (sprayed, now - ACCOUNT_WINDOW - 60))
        conn.execute("INSERT INTO sign_in_failures (key, at) VALUES ('account:recent@example.com', %s)", (now - 60,))
        conn.execute("INSERT INTO sign_in_pace (account, next_turn) SELECT unnest(%s::text[]), %s",
                     (sprayed, now - ACCOUNT_WINDOW - 60))

    def old(table: str) -> int:
        with runtime.connection() as conn:
            return conn.execute(f"SELECT count(*) AS n FROM {table} WHERE key LIKE 'account:sprayed%%'"
                                if table == "sign_in_failures" else
                                f"SELECT count(*) AS n FROM {table} WHERE account LIKE 'account:sprayed%%'").fetchone()["n"]

    email = a_person(runtime)
    runtime.sandesh.people.sign_in(email, PASSWORD, "198.51.100.90")
    assert old("sign_in_failures") == 100 and old("sign_in_pace") == 100, "one batch per try"
    runtime.sandesh.people.sign_in(email, PASSWORD, "198.51.100.90")
    assert old("sign_in_failures") == 0 and old("sign_in_pace") == 0
    with runtime.connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM sign_in_failures WHERE key = 'account:recent@example.com'"
                            ).fetchone()["n"] == 1, "a failure within the hour stays"
