"""SIM: one modem port in the pool (docs/design.md, "The SIM pool"), and the global SMS switch.

A SIM's state is what an operator decided (enabled or disabled) and what the dispatcher found
(quarantined, with a reason), both as events, so a restart keeps them and `sandesh audit`
shows them (docs/design.md, "The SIM pool").  Whether its modem answers right now
(`unreachable`) is not history: the dispatcher reports it with every heartbeat.
"""
from __future__ import annotations

from eventsourcing.domain import event

from .aggregate import Aggregate

from .credentials import new_id
from .errors import InvalidInput, InvalidTransition
from .operators import of_imsi

SMS_SWITCH_ID = "sms_switch"

# Why a SIM is quarantined.  A quarantine for the network lifts itself when the modem is
# registered again (`Recovered`); the others wait for an operator (`sandesh sim release`).
NETWORK, FAILURES, SIM_FAULT = "network", "failures", "sim"
SELF_HEALING = (NETWORK,)


def check_sim_name(name: str) -> str:
    name = name.strip()
    if not name or len(name) > 64 or name.startswith("sim_"):
        raise InvalidInput("SIM name must be 1 to 64 characters and must not start with 'sim_'")
    return name


class Sim(Aggregate):
    @staticmethod
    def create_id(**_: object) -> str:
        return new_id("sim")

    @event("Added")
    def __init__(self, name: str, port: str, baud: int, host: str | None, actor: str, at: float):
        if baud <= 0:
            raise InvalidInput("baud must be a positive whole number")
        self.name = name
        self.port = port
        self.baud = baud
        self.host = host
        self.enabled = True
        self.iccid: str | None = None
        self.imsi: str | None = None
        self.quarantine: str | None = None  # NETWORK, FAILURES or SIM_FAULT while quarantined

    @property
    def operator(self) -> str | None:
        return of_imsi(self.imsi)

    def identify(self, iccid: str | None, imsi: str | None, at: float) -> None:
        """What the modem says the SIM is (AT+CCID, AT+CIMI): the SIM's identity, which
        outlives port names that change when USB re-enumerates."""
        if (iccid, imsi) != (self.iccid, self.imsi):
            self._identified(iccid=iccid, imsi=imsi, at=at)

    @event("Identified")
    def _identified(self, iccid: str | None, imsi: str | None, at: float) -> None:
        self.iccid = iccid
        self.imsi = imsi

    def disable(self, actor: str, at: float) -> None:
        if not self.enabled:
            raise InvalidTransition("SIM is already disabled")
        self._disabled(actor=actor, at=at)

    def enable(self, actor: str, at: float) -> None:
        if self.enabled:
            raise InvalidTransition("SIM is already enabled")
        self._enabled(actor=actor, at=at)

    def move(self, port: str, actor: str, at: float) -> None:
        """The same SIM on another port (USB re-enumeration, a restarted emulator)."""
        if not port.strip():
            raise InvalidInput("--port must name a serial device or pyserial URL")
        if port != self.port:
            self._port_changed(port=port, actor=actor, at=at)

    @event("PortChanged")
    def _port_changed(self, port: str, actor: str, at: float) -> None:
        self.port = port

    def update(self, changes: dict[str, object], actor: str, at: float) -> None:
        """A new baud rate or host (the port has its own event, `move`)."""
        if "baud" in changes and (not isinstance(changes["baud"], int) or changes["baud"] <= 0):
            raise InvalidInput("baud must be a positive whole number")
        changed = {k: v for k, v in changes.items() if getattr(self, k) != v}
        if not changed:
            raise InvalidInput("nothing to change: give --port, --baud or --host with a new value")
        self._updated(changes=changed, actor=actor, at=at)

    @event("Updated")
    def _updated(self, changes: dict[str, object], actor: str, at: float) -> None:
        for name, value in changes.items():
            setattr(self, name, value)

    def quarantine_for(self, kind: str, reason: str, actor: str, at: float) -> bool:
        """Take the SIM out of the pool; False when it is out already."""
        if self.quarantine is not None:
            return False
        self._quarantined(kind=kind, reason=reason, actor=actor, at=at)
        return True

    @event("Quarantined")
    def _quarantined(self, kind: str, reason: str, actor: str, at: float) -> None:
        self.quarantine = kind

    def recover(self, reason: str, actor: str, at: float) -> bool:
        """The dispatcher found the cause gone (the modem is registered again)."""
        if self.quarantine not in SELF_HEALING:
            return False
        self._recovered(reason=reason, actor=actor, at=at)
        return True

    @event("Recovered")
    def _recovered(self, reason: str, actor: str, at: float) -> None:
        self.quarantine = None

    def release(self, actor: str, at: float) -> None:
        """An operator lifts a quarantine of any kind."""
        if self.quarantine is None:
            raise InvalidTransition("SIM is not quarantined")
        self._released(actor=actor, at=at)

    @event("Released")
    def _released(self, actor: str, at: float) -> None:
        self.quarantine = None

    @event("Disabled")
    def _disabled(self, actor: str, at: float) -> None:
        self.enabled = False

    @event("Enabled")
    def _enabled(self, actor: str, at: float) -> None:
        self.enabled = True


class SmsSwitch(Aggregate):
    """The global switch: when off, sends answer `503 sms_disabled` (docs/api.md, "Order of checks")."""

    @staticmethod
    def create_id(**_: object) -> str:
        return SMS_SWITCH_ID

    @event("Installed")
    def __init__(self) -> None:
        self.enabled = True
        self.reason: str | None = None

    @event("Disabled")
    def disable(self, reason: str | None, actor: str, at: float) -> None:
        self.enabled = False
        self.reason = reason

    @event("Enabled")
    def enable(self, actor: str, at: float) -> None:
        self.enabled = True
        self.reason = None
