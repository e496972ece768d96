"""The rules of signing in to the dashboard and of its sessions (docs/dashboard.md), pure
functions of what was recorded and the service clock.

Tries are throttled so that no one is locked out (the OWASP authentication cheat sheet): an
address (IPv6 by its /64) that failed 5 times for an account in 15 minutes waits before it may
try that account again, and one that failed 20 times for any accounts waits before any try; a
right password from another address is not refused for them.  An account that failed 5 times
within the hour is paced instead, whatever the addresses: its tries are checked one every
PACE seconds, each waiting its turn (the page answers later, holding no thread) or, when its
turn is more than LONGEST_WAIT away, told when to come back.  So at most 100 guesses an hour
reach an account, from any number of addresses.  Each try is recorded before its password is
checked (a reservation, not a count after the check), so concurrent tries count one by one.
Nothing locks for good: every wait ends.  A session ends 30 minutes after it was last used or
12 hours after it began, whichever comes first."""
from __future__ import annotations

import ipaddress
import math
from dataclasses import dataclass
from typing import Mapping, Sequence

from .errors import DomainError

FAILURE_WINDOW = 15 * 60  # seconds
TRIES_PER_ACCOUNT_ADDRESS = 5   # failures of one account from one address, in the window
TRIES_PER_ADDRESS = 20          # failures from one address, any accounts, in the window
ACCOUNT_WINDOW = 3600
ACCOUNT_PACED_AFTER = 5         # an account's failures in the hour before its tries are paced
GUESSES_PER_HOUR = 100          # at most, against one account, from any number of addresses
PACE = ACCOUNT_WINDOW / (GUESSES_PER_HOUR - ACCOUNT_PACED_AFTER)  # seconds between paced tries
LONGEST_WAIT = 30.0             # a paced try waits its turn this long at most

SESSION_IDLE = 30 * 60
SESSION_ABSOLUTE = 12 * 3600


def address_group(ip: str) -> str:
    """The address as the throttle counts it: an IPv6 address by its /64 (one customer's
    network holds 2^64 of them), an IPv4 address alone."""
    try:
        address = ipaddress.ip_address(ip.split("%", 1)[0])
    except ValueError:
        return ip
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.ip_network(f"{address}/64", strict=False))
    return str(address)


def address_network(ip: str) -> str:
    """The network an address is counted with before any try is recorded: an IPv4 address by its
    /24, an IPv6 one by its /48 (a site's allocation)."""
    group = address_group(ip)
    try:
        network = ipaddress.ip_network(group, strict=False)
    except ValueError:
        return group
    return str(network.supernet(new_prefix=24 if network.version == 4 else 48))


# What a process lets an address, and its network, post to the sign-in forms before anything of
# the try is read or recorded (api/dashboard/gate.py): posts, right or wrong, so three times what
# an address may fail, for an office behind one address; a flood is refused from memory.
ADDRESS_POSTS, ADDRESS_WINDOW = 3 * TRIES_PER_ADDRESS, FAILURE_WINDOW
NETWORK_POSTS, NETWORK_WINDOW = 15 * TRIES_PER_ADDRESS, FAILURE_WINDOW


def gcra(theoretical: float | None, now: float, allowed: int, window: float) -> tuple[float, float]:
    """The generic cell rate algorithm: `allowed` posts in any `window`, a burst of as many.
    Given the key's theoretical arrival time (None: never seen), the one after this post and
    the seconds to wait first (0: the post is let through, and counted)."""
    interval = window / allowed
    tat = max(theoretical or now, now)
    wait = tat - (allowed - 1) * interval - now
    return (tat, wait) if wait > 0 else (tat + interval, 0.0)


@dataclass(frozen=True)
class TryKeys:
    """What one try is counted under.  A try from a trusted device (a browser holding the device
    cookie it was given when it signed in to this account: OWASP's "device cookies") is counted
    under that device alone: it keeps its own allowance while the account is paced, so whoever
    guesses from elsewhere cannot keep the person out."""
    pair: str      # this account from this address (a trusted device: the device)
    address: str   # this address, any account
    account: str   # this account, any address
    trusted: bool = False

    @classmethod
    def of(cls, email: str, ip: str, device: str | None = None) -> TryKeys:
        if device:
            key = f"device:{email}|{device}"
            return cls(pair=key, address=key, account=key, trusted=True)
        group = address_group(ip)
        return cls(pair=f"pair:{email}|{group}", address=f"ip:{group}", account=f"account:{email}")

    def all(self) -> list[str]:
        return list(dict.fromkeys((self.pair, self.address, self.account)))


def wait_after(failures: Sequence[float], limit: int, now: float, window: float = FAILURE_WINDOW) -> int:
    """Whole seconds (rounded up) before another try, given the failure times of one key; 0 when
    fewer than `limit` failures are in the window.  A time after `now` counts: a concurrent try
    that read the clock a moment later was recorded first."""
    recent = sorted(at for at in failures if now - window < at)
    if len(recent) < limit:
        return 0
    return max(1, math.ceil(recent[-limit] + window - now))


@dataclass(frozen=True)
class Turn:
    """When a try may be checked, and whether it took a turn of its account's pace."""
    at: float
    paced: bool


def turn_of(keys: TryKeys, tries: Mapping[str, Sequence[float]], next_turn: float | None, now: float) -> Turn:
    """When this try may be checked, given the times of the tries recorded under each key (those
    in flight and those that failed) and the account's next free turn; SignInRefused(wait) when
    it is not taken at all."""
    wait = wait_after(tries.get(keys.pair, ()), TRIES_PER_ACCOUNT_ADDRESS, now)
    if not keys.trusted:
        wait = max(wait, wait_after(tries.get(keys.address, ()), TRIES_PER_ADDRESS, now))
    if wait:
        raise SignInRefused(wait)
    if keys.trusted:  # its own 5 failures in 15 minutes; the account's pace is not its
        return Turn(now, paced=False)
    failed = sum(1 for at in tries.get(keys.account, ()) if now - ACCOUNT_WINDOW < at)
    if failed < ACCOUNT_PACED_AFTER:
        return Turn(now, paced=False)
    at = max(now, next_turn or now)
    if at - now > LONGEST_WAIT:
        raise SignInRefused(max(1, math.ceil(at - now - LONGEST_WAIT)))
    return Turn(at, paced=True)


class SignInRefused(DomainError):
    """Email and password did not match a person who may sign in (the same answer whether the
    email exists or not), or `wait` seconds must pass first."""

    def __init__(self, wait: int = 0):
        super().__init__("throttled" if wait else "refused")
        self.wait = wait


def session_alive(created: float, last_seen: float, now: float) -> bool:
    return now - last_seen < SESSION_IDLE and now - created < SESSION_ABSOLUTE
