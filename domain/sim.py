"""SIM: one modem port in the pool (docs/design.md, "The SIM pool"), and the global SMS switch.

A SIM's state is what an operator decided (enabled or disabled) and what the dispatcher found
(quarantined, with a reason), both as events, so a restart keeps them and `sandesh audit`
shows them (docs/design.md, "The SIM pool").  Whether its modem answers right now
(`unreachable`) is not history: the dispatcher reports it with every heartbeat.
"""
from __future__ import annotations

import json

import re

from eventsourcing.domain import event

from .aggregate import Aggregate, Switched

from .credentials import new_id
from .errors import InvalidInput, InvalidTransition
from .operators import of_imsi
from .pacing import PARTS_PER_WINDOW

SMS_SWITCH_ID = "sms_switch"

# Why a SIM is quarantined.  A quarantine for the network lifts itself when the modem is
# registered again, one for credit when a later balance query finds enough (`Recovered`); the
# others wait for an operator (`sandesh sim release`), and one for a refused PIN for a new PIN.
NETWORK, FAILURES, SIM_FAULT, PIN, CREDIT = "network", "failures", "sim", "pin", "credit"
SELF_HEALING = (NETWORK, CREDIT)

# What `sandesh sim add|update` may change besides the port (docs/operations.md, "Modems").
SETTINGS = ("baud", "host", "daily_cap", "monthly_cap", "pace", "balance_ussd", "min_credit", "balance_every")


def check_sim_name(name: str) -> str:
    name = name.strip()
    if not name or len(name) > 64 or name.startswith("sim_"):
        raise InvalidInput("SIM name must be 1 to 64 characters and must not start with 'sim_'")
    return name


def discovered_name(operator: str | None, iccid: str, taken: set[str], prefix: str | None = None) -> str:
    """The name `sandesh sim discover --apply` gives a SIM it registers, none of `taken`: with a
    prefix the first free of PREFIX1, PREFIX2, ...; else the operator and the ICCID's last four
    digits (`ntc-4821`, `sim-4821` when the operator is not known), more digits when taken."""
    if prefix is not None:
        number = 1
        while f"{prefix}{number}" in taken:
            number += 1
        return check_sim_name(f"{prefix}{number}")
    base = operator or "sim"
    for digits in (4, 6, len(iccid)):
        if (name := f"{base}-{iccid[-digits:]}") not in taken:
            return name
    number = 2
    while f"{base}-{iccid}-{number}" in taken:
        number += 1
    return f"{base}-{iccid}-{number}"


def check_settings(changes: dict[str, object]) -> dict[str, object]:
    """A SIM's settings, checked: a cap, pace or interval is a positive whole number or None
    (none), the pace at most the interface's 30 parts per window."""
    for name, value in changes.items():
        if name not in SETTINGS:
            raise InvalidInput(f"{name} is not a SIM setting")
        if name in ("baud", "daily_cap", "monthly_cap", "pace", "balance_every", "min_credit"):
            if value is None and name != "baud":
                continue
            if not isinstance(value, int) or isinstance(value, bool) or value < (0 if name == "min_credit" else 1):
                raise InvalidInput(f"{name.replace('_', '-')} must be a positive whole number")
        if name == "pace" and value is not None and value > PARTS_PER_WINDOW:
            raise InvalidInput(f"pace is at most {PARTS_PER_WINDOW} parts per 30 minutes (the interface's limit)")
        if name == "balance_ussd" and value is not None and not USSD.match(str(value)):
            raise InvalidInput("balance-ussd must be a USSD code such as *400# (digits, * and #, ending in #)")
    return changes


CLEAR = object()  # a setting's value that removes it (`sandesh sim update --daily-cap off`)
PIN_DIGITS = re.compile(r"^[0-9]{4,8}$")  # TS 31.102: a PIN is 4 to 8 digits


def check_pin(pin: str | None) -> str:
    if pin is None or not PIN_DIGITS.match(pin):
        raise InvalidInput("a SIM PIN is 4 to 8 digits")
    return pin


DEFAULT_MIN_CREDIT = 1000  # paisa: NPR 10, a few SMS of credit
USSD = re.compile(r"^[*#][0-9*#]{1,30}#$")


class Sim(Switched, Aggregate):
    noun = "SIM"
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
        self.quarantine: str | None = None  # NETWORK, FAILURES, SIM_FAULT, PIN or CREDIT while quarantined
        self.pin_sealed: str | None = None   # the SIM's PIN, sealed with the server key
        self.pin_refused = False             # the SIM refused that PIN (or asked for one, none set): not entered again
        self.port_secret_sealed: str | None = None  # the password and signing key its port URL had, sealed
        self.device: dict[str, str | None] = {}
        self.daily_cap: int | None = None
        self.monthly_cap: int | None = None
        self.pace: int | None = None         # parts per pacing window, when slower than the interface's 30
        self.balance_ussd: str | None = None
        self.min_credit: int | None = None   # paisa
        self.balance_every: int | None = None

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

    def learn(self, device: dict[str, str | None], at: float) -> None:
        """What the modem is and the modes the dispatcher chose for it (workers/device.py)."""
        if device != self.device:
            self._device_learned(device=device, at=at)

    @event("DeviceLearned")
    def _device_learned(self, device: dict[str, str | None], at: float) -> None:
        self.device = device

    def set_pin(self, pin_sealed: str | None, actor: str, at: float) -> None:
        """A new PIN (or none): entered the next time the SIM asks; a quarantine for a refused
        PIN ends with it."""
        self._pin_set(pin_sealed=pin_sealed, actor=actor, at=at)
        if self.quarantine == PIN:
            self._released(actor=actor, at=at)

    @event("PinSet")
    def _pin_set(self, pin_sealed: str | None, actor: str, at: float) -> None:
        self.pin_sealed = pin_sealed
        self.pin_refused = False

    def set_port_secret(self, secret_sealed: str | None, actor: str, at: float) -> None:
        """The secrets a device's port URL carried (split_secret), sealed; None: it has none."""
        if secret_sealed != self.port_secret_sealed:
            self._port_secret_set(secret_sealed=secret_sealed, actor=actor, at=at)

    @event("PortSecretSet")
    def _port_secret_set(self, secret_sealed: str | None, actor: str, at: float) -> None:
        self.port_secret_sealed = secret_sealed

    class PinResealed(Aggregate.Event):
        """The PIN, the same one, sealed again by 0.3.0's key rotation.  Read in logs of 0.3.0;
        nothing writes it now (docs/design.md, "Keys")."""
        written_from = "0.3.0"

        pin_sealed: str
        at: float

    @event(PinResealed)
    def _pin_resealed(self, pin_sealed: str, at: float) -> None:
        self.pin_sealed = pin_sealed

    def credit_checked(self, amount: int | None, reply: str, actor: str, at: float) -> None:
        """A balance query's answer: below the SIM's minimum it is quarantined before its sends fail;
        a quarantine for credit ends when a later answer shows enough."""
        self._credit_checked(amount=amount, reply=reply, at=at)
        if amount is None:
            return
        if amount < self.minimum_credit:
            self.quarantine_for(CREDIT, f"credit NPR {amount / 100:.2f} is below the minimum NPR "
                                        f"{self.minimum_credit / 100:.2f} ({self.balance_ussd})", actor, at)
        else:
            self.recover(CREDIT, f"credit NPR {amount / 100:.2f} again", actor, at)

    @property
    def minimum_credit(self) -> int:
        return self.min_credit if self.min_credit is not None else DEFAULT_MIN_CREDIT

    @event("CreditChecked")
    def _credit_checked(self, amount: int | None, reply: str, at: float) -> None:
        pass

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
        """New settings (SETTINGS, checked by check_settings); the port has its own event, `move`."""
        changed = {k: v for k, v in check_settings(changes).items() if getattr(self, k) != v}
        if not changed:
            raise InvalidInput("nothing to change: give a setting with a new value (see `sandesh sim update --help`)")
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

    def quarantine_for_pin(self, tried: str | None, reason: str, actor: str, at: float) -> bool:
        """The SIM asked for a PIN or refused `tried`, the sealed PIN the dispatcher read before it
        opened the port; False when a new PIN was set since (the next opening enters that one) or
        the SIM is out already."""
        if tried != self.pin_sealed:
            return False
        return self.quarantine_for(PIN, reason, actor, at)

    @event("Quarantined")
    def _quarantined(self, kind: str, reason: str, actor: str, at: float) -> None:
        self.quarantine = kind
        self.pin_refused = self.pin_refused or kind == PIN

    def recover(self, kind: str, reason: str, actor: str, at: float) -> bool:
        """The dispatcher found the cause of a self-healing quarantine of this kind gone (the modem
        is registered again, the credit is back)."""
        if self.quarantine != kind or kind not in SELF_HEALING:
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


# The port schemes whose URL may carry secrets: a password before the host, a signing key after.
SECRET_SCHEMES = ("hilink", "android")

# Where a device that posts what it receives posts it, under SANDESH_PUBLIC_URL (api/devices.py).
DEVICE_EVENTS = "/devices/{sim_id}/events"


def signing_key(secret: str | None) -> str | None:
    """The signing key among a port's secrets (split_secret), if it has one."""
    return json.loads(secret).get("signing_key") if secret else None


def split_secret(port: str) -> tuple[str, str | None]:
    """A device's port URL without its password and `signing_key` (what the log and the lists
    show), and those as JSON (what is sealed), or None when it has neither."""
    scheme, sep, rest = port.partition("://")
    if not sep or scheme not in SECRET_SCHEMES:
        return port, None
    # The query begins at "?signing_key=" (the one a device URL takes), else at the first "?"
    # after the login; the login ends at the last "@" before it.  So a password written without
    # its URL escapes ("pa/ss", "a?b") is still taken out whole, never left in what is shown.
    start = rest.find("?signing_key=")
    if start < 0:
        start = rest.find("?", rest.rfind("@") + 1)
    rest, query = (rest[:start], rest[start + 1:]) if start >= 0 else (rest, "")
    userinfo, at, rest = rest.rpartition("@")
    host, slash, path = rest.partition("/")
    user, colon, password = userinfo.partition(":")
    pairs = [p for p in query.split("&") if p]
    keys = [p.partition("=")[2] for p in pairs if p.startswith("signing_key=")]
    kept = [p for p in pairs if not p.startswith("signing_key=")]
    secret = {k: v for k, v in (("password", password if colon else None),
                                ("signing_key", keys[-1] if keys else None)) if v is not None}
    public = f"{scheme}://{user + '@' if at else ''}{host}{slash}{path}{'?' + '&'.join(kept) if kept else ''}"
    return public, (json.dumps(secret, sort_keys=True) if secret else None)


def join_secret(public: str, secret: str | None) -> str:
    """The port URL a device is opened with: `public` with the secrets split_secret took out."""
    if not secret:
        return public
    found = json.loads(secret)
    scheme, _, rest = public.partition("://")
    rest, _, query = rest.partition("?")
    authority, slash, path = rest.partition("/")
    user, _, host = authority.rpartition("@")
    if "password" in found:
        authority = f"{user}:{found['password']}@{host}"
    if "signing_key" in found:
        query = "&".join([p for p in query.split("&") if p] + [f"signing_key={found['signing_key']}"])
    return f"{scheme}://{authority}{slash}{path}{'?' + query if query else ''}"
