"""A SIM in a Huawei HiLink device (a stick in network mode, a B310/B525 router), spoken to over
its web API through the `huawei-lte-api` package (docs/design.md, "The SIM pool").

Its port is `hilink://[USER:PASSWORD@]HOST[:PORT]`: a stick at 192.168.8.1 needs no login, a
router does.  What the devices do, and what this driver does about it:

- A request token or login the device forgot (`125002`, `125003`; `100003` once a login timed
  out): the device refused the request, so it is made again once after a new session and login.
  A send is never made again after an answer that could mean it went (a timeout, a dropped
  connection): its outcome is unknown, as a modem's silence after AT+CMGS is.
- `113004`: a send while the last one is still going out.  Sends are one at a time: each waits
  on `sms/send-status` until the last is done; should the device still refuse, it is asked again
  after SEND_BACKOFF, up to BUSY_SECONDS.
- `100005`: a request the device cannot read.  Requests go unindented, and inbox messages are
  deleted one index at a time.
- "Max sessions": a router keeps each login until it logs out or times out, so `close` logs out.
- The inbox fills and then takes nothing more: it is drained at every look, each message deleted
  only after the caller has recorded it, so a crash loses none and the next look finds it again.

Delivery reports are the inbox's SmsType 7 (delivered) and 8 (failed) messages from the
recipient's number, one for each part, when the device's `UseSReport` is on; they name no part,
so the dispatcher gives each to the oldest part sent to that number without a report
(workers/links.py).  Without them a message stays `sent`.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator
from urllib.parse import unquote

import requests
from huawei_lte_api.Client import Client
from huawei_lte_api.Connection import Connection
from huawei_lte_api.enums.sms import BoxTypeEnum, TextModeEnum
from huawei_lte_api.exceptions import (
    LoginErrorInvalidCredentialsException,
    ResponseErrorException,
    ResponseErrorLoginCsrfException,
    ResponseErrorLoginRequiredException,
    ResponseErrorWrongSessionToken,
)

from . import device_urls
from .device_urls import BadPort
from .modem import CommandTimeout, Health, ModemError, NotSubmitted, PortGone

SCHEME = "hilink"
DEFAULT_HOST = "192.168.8.1"
TIMEOUT = 10.0          # seconds for one request
SEND_BACKOFF = 1.0      # after a 113004
BUSY_SECONDS = 30.0     # a send waits at most this long for the last to go out
SENT_WITHIN = 120.0     # a send not confirmed within this long is of unknown outcome
USSD_WITHIN = 30.0
SESSION_ERRORS = (ResponseErrorLoginCsrfException, ResponseErrorWrongSessionToken, ResponseErrorLoginRequiredException)
SENDING_TOO_FAST = 113004
DELIVERED, FAILED = 7, 8  # SmsType of a delivery report in the inbox


@dataclass(frozen=True)
class HilinkPort:
    host: str
    port: int | None
    username: str | None
    password: str | None

    @classmethod
    def parse(cls, url: str) -> HilinkPort:
        parts, port, _ = device_urls.read(url, SCHEME, "hilink://[USER:PASSWORD@]HOST[:PORT]")
        if (parts.username is None) != (parts.password is None):
            raise BadPort("give both a user and a password (hilink://USER:PASSWORD@HOST), or neither")
        return cls(parts.hostname, port, unquote(parts.username) if parts.username else None,
                   unquote(parts.password) if parts.password else None)

    @property
    def http_url(self) -> str:
        """The device's address; its user and password go beside it, never in it."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}{f':{self.port}' if self.port else ''}/"

    def shown(self) -> str:
        """The port as lists and logs show it: never its password."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        login = f"{self.username}:***@" if self.username else ""
        return f"{SCHEME}://{login}{host}{f':{self.port}' if self.port else ''}"


@dataclass(frozen=True)
class Identity:
    manufacturer: str
    model: str | None
    firmware: str | None
    imei: str | None
    imsi: str | None
    iccid: str | None


@dataclass(frozen=True)
class Inbound:
    """A message in the device's inbox: a reply, or a delivery report (`report` True/False)."""
    index: int
    sender: str
    text: str
    received: str          # the device's clock, "YYYY-MM-DD HH:MM:SS"
    report: bool | None    # None: a reply; True: delivered; False: failed


class Hilink:
    def __init__(self, port_url: str, *, timeout: float = TIMEOUT, sleep: Callable[[float], None] = time.sleep):
        self.port = HilinkPort.parse(port_url)
        self.timeout, self.sleep = timeout, sleep
        self._connection: Connection | None = None
        self._client: Client | None = None
        self.gone = True

    # Life

    def open(self) -> Identity:
        self._connect()
        info = self._call(lambda c: c.device.information())
        return Identity("huawei", info.get("DeviceName"), info.get("SoftwareVersion"), info.get("Imei"),
                        info.get("Imsi"), info.get("Iccid"))

    def close(self) -> None:
        """Logs out: a router keeps each login it was not told of the end of, and refuses more."""
        connection, self._connection, self._client = self._connection, None, None
        self.gone = True
        if connection is not None:
            try:
                connection.close()
            except (ResponseErrorException, requests.RequestException):
                pass  # it forgets the session by itself

    def _connect(self) -> None:
        self.close()
        try:
            self._connection = Connection(self.port.http_url, self.port.username, self.port.password,
                                          timeout=self.timeout)
        except LoginErrorInvalidCredentialsException as error:
            raise ModemError(f"{self.port.shown()} refused the user and password ({error})") from None
        except ResponseErrorException as error:
            raise PortGone(f"{self.port.shown()} refused a session: {error}") from None
        except requests.RequestException as error:
            raise PortGone(f"{self.port.shown()} does not answer: {_reason(error)}") from None
        self._client = Client(self._connection)
        self.gone = False

    def _call(self, ask: Callable[[Client], Any], *, again: bool = True) -> Any:
        """One request; a session or token the device forgot is made anew and the request asked
        again once (the device refused it, so nothing was done)."""
        if self._client is None:
            self._connect()
        try:
            return ask(self._client)
        except SESSION_ERRORS:
            if not again:
                raise
            self._connect()
            return self._call(ask, again=False)
        except requests.RequestException as error:
            self.gone = True
            raise PortGone(f"{self.port.shown()} does not answer: {_reason(error)}") from None

    # Health

    def health(self) -> Health:
        status = self._call(lambda c: c.monitoring.status())
        signal = self._call(lambda c: c.device.signal())
        registered = str(status.get("ServiceStatus")) == "2"
        return Health(registered, 1 if registered else 0, _dbm(signal.get("rssi")))

    # Sending

    def send(self, to: str, text: str) -> None:
        """Sends one message, the device splitting it into parts; returns once the network took
        it.  NotSubmitted: the device proved it was not sent.  CommandTimeout or PortGone: it
        may have gone."""
        number = "+" + to.lstrip("+")
        self._wait_until_free()
        deadline = time.monotonic() + BUSY_SECONDS
        while True:
            try:
                self._call(lambda c: c.sms.send_sms([number], text, text_mode=TextModeEnum.SEVEN_BIT))
                break
            except PortGone as error:  # the request may have reached the device before the line broke
                raise CommandTimeout(f"outcome of the send unknown: {error}") from None
            except ResponseErrorException as error:
                if error.code == SENDING_TOO_FAST and time.monotonic() < deadline:
                    self.sleep(SEND_BACKOFF)
                    continue
                raise NotSubmitted(f"{self.port.shown()} refused the send ({error})") from None
        self._await_sent(number)

    def _wait_until_free(self) -> None:
        deadline = time.monotonic() + BUSY_SECONDS
        while not _done(self._call(lambda c: c.sms.send_status())) and time.monotonic() < deadline:
            self.sleep(0.2)

    def _await_sent(self, number: str) -> None:
        deadline = time.monotonic() + SENT_WITHIN
        pause = 0.02  # a send takes a second or so: asked often at first, then less
        while True:
            try:
                status = self._call(lambda c: c.sms.send_status())
            except PortGone as error:
                raise CommandTimeout(f"outcome of the send unknown: {error}") from None
            if _done(status):
                if number in str(status.get("FailPhone") or ""):
                    raise NotSubmitted(f"{self.port.shown()}: the network refused the message to {number}")
                return
            if time.monotonic() > deadline:
                raise CommandTimeout(f"{self.port.shown()} did not finish the send within {SENT_WITHIN:.0f} s")
            self.sleep(pause)
            pause = min(0.5, pause * 1.5)

    # What came in

    def inbox(self, take: Callable[[Inbound], None]) -> int:
        """Hands each message of the inbox to `take`, oldest first, and deletes it once `take`
        returned; an error of `take` leaves it there for the next look.  The number taken."""
        taken = 0
        for message in self._messages():
            take(message)
            self._call(lambda c, i=message.index: c.sms.delete_sms(i))
            taken += 1
        return taken

    def _messages(self) -> Iterator[Inbound]:
        listed = self._call(lambda c: c.sms.get_sms_list(1, BoxTypeEnum.LOCAL_INBOX, 50, ascending=True))
        found = (listed.get("Messages") or {}).get("Message") or []
        for row in found if isinstance(found, list) else [found]:
            kind = int(row.get("SmsType") or 1)
            yield Inbound(int(row["Index"]), row.get("Phone") or "", row.get("Content") or "", row.get("Date") or "",
                          True if kind == DELIVERED else False if kind == FAILED else None)

    # Credit

    def ussd(self, code: str) -> str:
        self._call(lambda c: c.ussd.send(code))
        deadline = time.monotonic() + USSD_WITHIN
        while time.monotonic() < deadline:
            self.sleep(0.2)
            try:
                return str(self._call(lambda c: c.ussd.get()).get("content") or "")
            except ResponseErrorException:
                continue  # no answer yet
        raise CommandTimeout(f"no answer to {code} within {USSD_WITHIN:.0f} s")


def _done(status: dict[str, Any]) -> bool:
    return int(status.get("CurIndex") or 0) >= int(status.get("TotalCount") or 0)


def _dbm(value: Any) -> int | None:
    digits = str(value or "").removesuffix("dBm").strip()
    try:
        return int(float(digits.lstrip(">=<")))
    except ValueError:
        return None


def _reason(error: requests.RequestException) -> str:
    return type(error).__name__ if not str(error) else str(error).split(":")[-1].strip()[:120] or type(error).__name__
