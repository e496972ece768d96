"""SIM: one modem port in the pool (decisions §3), and the global SMS switch."""
from __future__ import annotations

from eventsourcing.domain import event

from .aggregate import Aggregate

from .credentials import new_id
from .errors import InvalidInput, InvalidTransition

SMS_SWITCH_ID = "sms_switch"


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

    @event("Disabled")
    def _disabled(self, actor: str, at: float) -> None:
        self.enabled = False

    @event("Enabled")
    def _enabled(self, actor: str, at: float) -> None:
        self.enabled = True


class SmsSwitch(Aggregate):
    """The global switch: when off, sends answer `503 sms_disabled` (interface §POST /sms/send 6)."""

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
