"""A SIM's link: what a SIM's thread asks of the device that holds its SIM, whatever the device
is (docs/design.md, "The SIM pool").  The port's scheme chooses the link:

- a serial port (`/dev/ttyUSB0`, `/dev/serial/by-id/…`, or any pyserial URL): `SerialLink`, the
  AT dialogue of workers/modem.py and the negotiation of workers/device.py;
- `hilink://HOST[:PORT]`: `HilinkLink`, a Huawei HiLink stick or router's web API
  (workers/hilink.py);
- `android://USER:PASSWORD@HOST[:PORT]`: `AndroidLink`, a phone running SMS Gateway for
  Android in local server mode (workers/android.py).

The SIM's thread and the dispatcher speak only to `Link`; nothing else in them depends on what
the device is.  A link raises the errors of workers/modem.py: `SimNotReady` (an operator must
act), `NotSubmitted` or `CmsError` (the device proved the message did not go), `CommandTimeout`
(it may have gone: never sent again), `PortGone` (the device is not there).
"""
from __future__ import annotations

import itertools
import logging
import random
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Protocol
from urllib.parse import urlsplit

from sandesh.domain.pdu import encode_submit

from .device import Device, negotiate
from .android import SCHEME as ANDROID, Android, AndroidPort, message_key
from .device_urls import BadPort
from .hilink import SCHEME as HILINK, Hilink, HilinkPort, Inbound
from .modem import Health, Modem, ModemError, Unsolicited

logger = logging.getLogger("sandesh.dispatcher")


@dataclass(frozen=True)
class Attached:
    """What a link found when it opened: the SIM's identity and what the log keeps of the device."""
    iccid: str | None
    imsi: str | None
    learned: dict[str, str | None]


class Arrivals(Protocol):
    """Where a link hands what came in (workers/dispatcher.py's Arrivals, for one SIM).  A link
    deletes a message from its device only once the call that took it returned."""

    def pdu(self, pdu: str) -> None: ...
    def reply(self, sender: str, text: str, key: str | None = None) -> None:
        """A whole reply; one with a `key` the SIM recorded before is not recorded again."""
        ...
    def report(self, recipient: str, delivered: bool) -> None: ...
    def message_report(self, message_id: str, delivered: bool) -> None: ...
    def awaiting(self, limit: int, after: tuple[float, str] | None = None) -> list[tuple[float, str]]:
        """The messages sent through this SIM that await their reports, as (sent at, id), oldest
        first from just `after` one of them."""
        ...
    def cursor(self) -> str | None:
        """How far the device's inbox was read, as the link wrote it last (kept across restarts)."""
        ...
    def advance(self, cursor: str) -> None: ...


class Link(Protocol):
    """A SIM's device, as its thread uses it; `gone` once a request found it not there."""

    gone: bool

    def open(self, pin: str | None, pin_refused: bool) -> Attached: ...
    def close(self) -> None: ...
    def health(self) -> Health: ...
    def submit(self, message_id: str, to: str, text: str, parts: int, validity_minutes: int | None) -> Iterator[int]:
        """Sends the message; yields each part's reference as the network takes it."""
        ...
    def recover(self) -> bool: ...
    def ussd(self, code: str) -> str: ...
    def collect(self, arrivals: Arrivals, everything: bool = False) -> None:
        """What came in that nothing announced: asked at each heartbeat; `everything`, as the
        port opens, for what came while nobody listened."""
        ...
    def announced(self, index: int, store: str | None, arrivals: Arrivals) -> None:
        """What the device announced it stored at `index` of `store`."""
        ...


# pyserial's own URL handlers (serial.serial_for_url): ports as a serial modem's
SERIAL_URLS = {"loop", "socket", "rfc2217", "spy", "alt", "hwgrep", "cp2110"}


def scheme_of(port: str) -> str:
    return port.partition("://")[0] if "://" in port else "serial"


def link_for(port: str, baud: int, *, on_unsolicited: Callable[[Unsolicited], None] | None = None,
             on_gone: Callable[[], None] | None = None, callbacks: str | None = None) -> Link:
    """`callbacks`: where a device that posts what it receives should post it (its SIM's URL
    under SANDESH_PUBLIC_URL), when it may."""
    if scheme_of(port) == HILINK:
        return HilinkLink(port)
    if scheme_of(port) == ANDROID:
        return AndroidLink(port, callbacks)
    return SerialLink(port, baud, on_unsolicited=on_unsolicited, on_gone=on_gone)


class SerialLink:
    """A modem on a serial port: AT commands, PDU mode."""

    def __init__(self, port: str, baud: int, *, on_unsolicited: Callable[[Unsolicited], None] | None = None,
                 on_gone: Callable[[], None] | None = None):
        self.modem = Modem(port, baud, on_unsolicited=on_unsolicited, on_gone=on_gone)
        self.device: Device | None = None   # what the modem is and the modes chosen for it

    @property
    def gone(self) -> bool:
        return self.modem.gone

    def open(self, pin: str | None = None, pin_refused: bool = False) -> Attached:
        self.modem.open()
        try:
            self.device = negotiate(self.modem, pin, pin_refused=pin_refused)
        except BaseException:
            self.modem.close()
            raise
        return Attached(self.device.iccid, self.device.imsi, self.device.learned())

    def close(self) -> None:
        self.modem.close()

    def health(self) -> Health:
        return self.modem.health()

    def submit(self, message_id: str, to: str, text: str, parts: int, validity_minutes: int | None) -> Iterator[int]:
        for part in encode_submit(to, text, reference=random.randrange(256), validity_minutes=validity_minutes):
            yield self.modem.send_part(part.pdu, part.length)

    def recover(self) -> bool:
        return self.modem.recover()

    def ussd(self, code: str) -> str:
        assert self.device is not None
        return self.device.ussd_text(*self.modem.ussd(self.device.ussd_request(code))[1:])

    def collect(self, arrivals: Arrivals, everything: bool = False) -> None:
        if everything or (self.device is not None and self.device.polls):  # nothing announces what lands there
            for index, pdu in self.modem.stored():
                arrivals.pdu(pdu)
                self.modem.delete_stored(index)

    def announced(self, index: int, store: str | None, arrivals: Arrivals) -> None:
        """A reply (`+CMTI`) or a status report (`+CDSI`): a store other than the one negotiated
        (Huawei and ZTE keep reports in "SR") is chosen for the read and the delete, then the
        usual one again."""
        usual = self.device.store if self.device is not None else None
        other = store if store and usual and store != usual else None
        try:
            if other:
                self.modem.command(f'AT+CPMS="{other}"')
            try:
                pdu = self.modem.read_stored(index)
                if pdu is not None:
                    arrivals.pdu(pdu)
                    self.modem.delete_stored(index)
            finally:
                if other:
                    self.modem.command(f'AT+CPMS="{usual}"')
        except ModemError as error:
            logger.warning("%s: reading stored message %d failed: %s", self.modem.port_url, index, error)


class _NetworkLink:
    """A device on the network that splits a message into parts and sends them itself, and
    tells no reference for them: its reports name the recipient or the message."""

    device: Hilink | Android

    def __init__(self) -> None:
        self._references = itertools.count(1)

    @property
    def gone(self) -> bool:
        return self.device.gone

    def close(self) -> None:
        self.device.close()

    def health(self) -> Health:
        return self.device.health()

    def references(self, parts: int) -> Iterator[int]:
        for _ in range(parts):
            yield next(self._references) % 256

    def recover(self) -> bool:
        try:
            self.device.health()
        except ModemError:
            return False
        return True

    def collect(self, arrivals: Arrivals, everything: bool = False) -> None:
        raise NotImplementedError

    def announced(self, index: int, store: str | None, arrivals: Arrivals) -> None:
        self.collect(arrivals)


class HilinkLink(_NetworkLink):
    """A HiLink stick or router."""

    LEARNED = {"reports": "inbox", "inbound": "polled", "cnmi": None, "message_store": "inbox"}

    def __init__(self, port: str):
        super().__init__()
        self.device = Hilink(port)

    def open(self, pin: str | None = None, pin_refused: bool = False) -> Attached:
        found = self.device.open()  # the device enters its SIM's PIN itself, as its web page set it
        return Attached(found.iccid, found.imsi, {"manufacturer": found.manufacturer, "model": found.model,
                                                  "firmware": found.firmware, **self.LEARNED})

    def submit(self, message_id: str, to: str, text: str, parts: int, validity_minutes: int | None) -> Iterator[int]:
        self.device.send(to, text)  # run at the first next(): the SIM's thread handles what it raises
        yield from self.references(parts)  # its reports are matched on the recipient

    def ussd(self, code: str) -> str:
        return self.device.ussd(code)

    def collect(self, arrivals: Arrivals, everything: bool = False) -> None:
        def take(message: Inbound) -> None:
            sender = international(message.sender)
            if message.report is None:  # named by its index and time: read again before its delete, the same reply
                arrivals.reply(sender, message.text, key=f"{message.index} {message.received}")
            else:
                arrivals.report(sender, message.report)

        while self.device.inbox(take):  # drained: a full inbox takes nothing more
            pass


class AndroidLink(_NetworkLink):
    """A phone running SMS Gateway for Android: it keeps what it received (read from a cursor),
    and tells each message's state by its id, Sandesh's own."""

    # Messages whose state is asked at each heartbeat: the next ones after those asked last, from
    # the oldest again once every one was asked, so a message whose report never comes holds no
    # other's place.
    AWAITING_PER_LOOK = 50

    def __init__(self, port: str, callbacks: str | None = None):
        super().__init__()
        self.asked_up_to: tuple[float, str] | None = None
        self.device = Android(port)
        self.callbacks = callbacks if self.device.port.signing_key else None  # unsigned posts are not taken

    def open(self, pin: str | None = None, pin_refused: bool = False) -> Attached:
        model = self.device.open()
        if self.callbacks:
            try:
                self.device.register_webhooks(self.callbacks, "sandesh")
            except ModemError as error:  # polling alone still hears everything
                logger.warning("%s; its states and replies are polled", error)
        return Attached(None, None, {"manufacturer": "android", "model": model, "firmware": None, "reports": "polled",
                                     "inbound": "polled", "cnmi": None, "message_store": "inbox"})

    def submit(self, message_id: str, to: str, text: str, parts: int, validity_minutes: int | None) -> Iterator[int]:
        self.device.send(message_id, to, text, validity_minutes * 60 if validity_minutes else None)
        yield from self.references(parts)

    def ussd(self, code: str) -> str:
        raise ModemError("SMS Gateway for Android offers no USSD: the balance is not asked on a phone")

    def collect(self, arrivals: Arrivals, everything: bool = False) -> None:
        awaiting = arrivals.awaiting(self.AWAITING_PER_LOOK, self.asked_up_to)
        for _, message_id in awaiting:
            state = self.device.state(message_id)
            if state is not None and state[0] in ("Delivered", "Failed"):
                arrivals.message_report(message_id, state[0] == "Delivered")
        self.asked_up_to = awaiting[-1] if len(awaiting) == self.AWAITING_PER_LOOK else None
        cursor = arrivals.cursor()
        at, _, seen = (cursor or "").partition(" ")
        if cursor is None:  # a phone new to Sandesh: what it received before is not a reply to us
            known = self.device.inbox(None)
            arrivals.advance(f"{known[-1].created_at} {known[-1].id}" if known else "0 ")
            return
        for message in self.device.inbox(at if at != "0" else None):
            if message.created_at < at or (message.created_at == at and message.id in seen.split(",")):
                continue
            arrivals.reply(international(message.sender), message.text, key=message_key(message.id))
            seen = f"{seen},{message.id}" if message.created_at == at else message.id
            at = message.created_at
            arrivals.advance(f"{at} {seen}")


def international(number: str) -> str:
    """A sender as the SIM's network wrote it, +977… where it is a Nepali mobile in national form."""
    digits = number.removeprefix("+")
    if number.startswith("+") or not digits.isdigit():
        return number
    if len(digits) == 10 and digits.startswith("9"):
        return "+977" + digits
    return "+" + digits if digits.startswith("977") else number


def port_problem(port: str, others: Iterable[str] = ()) -> str | None:
    """Why `port` cannot be a SIM's port, as a sentence, or None; `others` are the ports of the
    enabled SIMs, one of which it may not share a device with."""
    scheme = scheme_of(port)
    if scheme == HILINK:
        try:
            address = HilinkPort.parse(port)
        except BadPort as error:
            return str(error)
        for other in others:
            if scheme_of(other) == HILINK and _address(other) == (address.host, address.port):
                return f"{port} is the device of another SIM: one device is one SIM"
        return None
    if scheme == ANDROID:
        try:
            phone = AndroidPort.parse(port)
        except BadPort as error:
            return str(error)
        for other in others:
            if scheme_of(other) == ANDROID and _address(other) in ((phone.host, phone.port), (phone.host, None)):
                return f"{phone.shown()} is the phone of another SIM: one phone is one SIM"
        return None
    if scheme not in SERIAL_URLS | {"serial"}:
        return (f"{scheme}:// is no kind of port Sandesh drives: a serial port (/dev/ttyUSB0, "
                "/dev/serial/by-id/…), hilink://HOST[:PORT] or android://USER:PASSWORD@HOST[:PORT]")
    return None


def _address(port: str) -> tuple[str | None, int | None] | None:
    """The host and port of a device's URL, its secrets taken out or not."""
    try:
        parts = urlsplit(port)
        return parts.hostname, parts.port
    except ValueError:
        return None
