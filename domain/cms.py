"""What a `+CMS ERROR: <n>` means for the message and the SIM (docs/design.md, "Failures of a send";
3GPP TS 27.005 §3.2.5 and TS 24.011 cause values)."""
from __future__ import annotations

from enum import Enum


class Action(str, Enum):
    REJECT = "reject"                    # the number is refused for good: the message ends `rejected`
    QUARANTINE = "quarantine"            # the SIM cannot send (barred, no credit, SIM failure)
    RETRY_ELSEWHERE = "retry_elsewhere"  # the part was not sent: back off, requeue for another SIM
    ALERT = "alert"                      # our PDU is invalid: a bug, no retry
    CLEAR_STORE = "clear_store"          # memory full: delete stored messages, then retry
    RETRY = "retry"                      # unknown: retry, quarantine the SIM after repeats


_ACTIONS: dict[int, Action] = {
    **{code: Action.REJECT for code in (1, 28, 30, 0xC3)},
    **{code: Action.QUARANTINE for code in (8, 10, 29, 50, 0xC1, 0xC4, *range(310, 319))},
    **{code: Action.RETRY_ELSEWHERE for code in (38, 41, 42, 47, 0xC0, 330, 331, 332)},
    304: Action.ALERT,
    **{code: Action.CLEAR_STORE for code in (320, 321, 322)},
}

REPEATS_BEFORE_QUARANTINE = 3  # of code 500 (or any unknown code) in a row on one SIM


def classify(code: int) -> Action:
    return _ACTIONS.get(code, Action.RETRY)


def signal_dbm(rssi: int) -> int | None:
    """AT+CSQ <rssi> (TS 27.007 §8.5): 0 is -113 dBm or less, 31 is -51 dBm or more, 99 unknown."""
    if not 0 <= rssi <= 31:
        return None
    return -113 + 2 * rssi


def registered(stat: int) -> bool:
    """+CREG/+CEREG <stat>: 1 home network, 5 roaming."""
    return stat in (1, 5)
