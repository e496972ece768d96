"""The AT dialogue with one GSM modem on one serial port (3GPP TS 27.005 PDU mode, TS 27.007).

The PDU codec is elsewhere (domain/pdu.py), and so is what a device supports and which modes
Sandesh picks for it (workers/device.py): this module only talks to the port.  One reader
thread per port reads every byte, answers the command in flight, recognises the `> ` prompt
(it has no newline) and hands unsolicited lines (`+CMTI`, the two-line `+CDS`, `RING`,
vendor noise) to a callback, even when they arrive between a command and its `OK`.

Any final result a real device uses ends a command at once (docs/operations.md, "Modems"):
besides `OK`, `ERROR` and the `+CME`/`+CMS ERROR` of TS 27.007 §9.2, Huawei answers `COMMAND
NOT SUPPORT` and `TOO MANY PARAMETERS`, and V.250 defines `NO CARRIER`, `BUSY`, `NO ANSWER`
and `NO DIALTONE`.  A device that omits the final result after an information response (old
Wavecom firmware after `+CPIN:`) completes such a command with the response itself.
"""
from __future__ import annotations

import logging
import queue
import re
import threading
import time
from dataclasses import dataclass
from typing import Callable

import serial

from sandesh.domain.cms import registered, signal_dbm

logger = logging.getLogger("sandesh.modem")

CTRL_Z, ESC = b"\x1a", b"\x1b"
FINAL = re.compile(r"^(OK|ERROR|NO CARRIER|BUSY|NO ANSWER|NO DIALTONE|COMMAND NOT SUPPORT|TOO MANY PARAMETERS"
                   r"|\+CME ERROR: ?(.+)|\+CMS ERROR: ?(.+))$")
REFUSALS = ("ERROR", "COMMAND NOT SUPPORT", "TOO MANY PARAMETERS")  # the device does not take the command
# Lines a device sends by itself: TS 27.005/27.007 indications, and what vendors print at boot
# or while idle (Huawei ^RSSI/^BOOT/^MODE/^SRVST, Quectel +QIND/+QUSIM, SIMCom "Call Ready"/"SMS Ready",
# Cinterion ^SYSSTART, Wavecom +WIND, ZTE +ZPASR/+ZUSIMR/+ZDONR, Telit #QSS).
UNSOLICITED = ("+CMTI:", "+CDS:", "+CDSI:", "+CMT:", "RING", "^", "+CBM:", "+CUSD:", "RDY", "SMS DONE",
               "+QIND:", "+QUSIM:", "Call Ready", "SMS Ready", "+PBREADY", "+WIND:", "+ZPASR:", "+ZUSIMR:",
               "+ZDONR:", "#QSS:", "+CIEV:", "+STIN:")
# +CREG/+CEREG are left to answers: we never enable their unsolicited form (AT+CREG=0).
TWO_LINE = ("+CDS:", "+CMT:", "+CBM:")  # the PDU follows on the next line


@dataclass(frozen=True)
class Timeouts:
    command: float = 10.0
    prompt: float = 10.0
    submit: float = 120.0  # +CMGS waits for the network
    ussd: float = 30.0     # the network's answer to AT+CUSD
    no_final: float = 0.5  # after an information response, how long a final result may still take


class ModemError(Exception):
    """The modem answered with an error, or the dialogue broke."""

    def __init__(self, message: str, answer: list[str] | None = None):
        super().__init__(message)
        self.answer = answer or []  # the device's lines, for `sandesh sim probe`


class CommandTimeout(ModemError):
    pass


class PortGone(ModemError):
    """The device vanished (USB re-enumeration, unplugged)."""


class Refused(ModemError):
    """ERROR, or a vendor's word for it (COMMAND NOT SUPPORT, TOO MANY PARAMETERS): the device
    does not take this command, or not with these values."""

    def __init__(self, word: str, command: str, answer: list[str] | None = None):
        super().__init__(f"{word} after {command}", answer)
        self.word = word


class CmsError(ModemError):
    def __init__(self, code: int, command: str, answer: list[str] | None = None):
        super().__init__(f"+CMS ERROR: {code} after {command}", answer)
        self.code = code


class CmeError(ModemError):
    def __init__(self, code: str, command: str, answer: list[str] | None = None):
        super().__init__(f"+CME ERROR: {code} after {command}", answer)
        self.code = code

    @property
    def number(self) -> int | None:
        return int(self.code) if self.code.isdigit() else None


class NotSubmitted(ModemError):
    """AT+CMGS failed before the PDU was written (the port closed, no `> ` prompt): the network
    cannot have the part, so another SIM may send it."""


class PromptTimeout(CommandTimeout, NotSubmitted):
    pass


class GoneBeforeSubmit(PortGone, NotSubmitted):
    pass


@dataclass(frozen=True)
class Unsolicited:
    line: str
    pdu: str | None = None  # the second line of +CDS / +CMT


@dataclass(frozen=True)
class Health:
    registered: bool
    registration: int | None
    signal_dbm: int | None


@dataclass(frozen=True)
class Exchange:
    """One command as `sandesh sim probe` shows it: what was sent (a PIN masked) and the answer."""
    command: str
    answer: list[str]
    final: str


_SECRET = re.compile(r'^(AT\+CPIN=)"?[^"]*"?', re.IGNORECASE)


def shown(command: str) -> str:
    """The command as logs, errors and transcripts may show it: never a PIN."""
    return _SECRET.sub(r'\1"****"', command)


def answer_prefix(command: str) -> str | None:
    """The prefix of the information response an extended command gets ("AT^ICCID?" -> "^ICCID:"),
    so that a vendor's answer is not taken for one of its unsolicited lines."""
    match = re.match(r"^AT([+^#$%][A-Z0-9]+)", command, re.IGNORECASE)
    return f"{match.group(1).upper()}:" if match else None


class Modem:
    def __init__(self, port: str, baud: int = 115200, *, timeouts: Timeouts = Timeouts(),
                 on_unsolicited: Callable[[Unsolicited], None] | None = None,
                 on_gone: Callable[[], None] | None = None):
        self.port_url = port
        self.baud = baud
        self.timeouts = timeouts
        self.on_unsolicited = on_unsolicited or (lambda u: None)
        self.on_gone = on_gone or (lambda: None)  # told by the reader when the device vanishes
        self._port: serial.SerialBase | None = None
        self._lines: queue.Queue[str] = queue.Queue()
        self._ussd: queue.Queue[str] = queue.Queue()
        self._prompt = threading.Event()
        self._lock = threading.Lock()
        self._reader: threading.Thread | None = None
        self._stop = threading.Event()
        self._answer_prefix: str | None = None
        self.gone = False
        # What the device taught us about itself (workers/device.py fills `omits_final`):
        self.omits_final: set[str] = set()  # commands it answers without OK ("AT+CPIN?")
        self.refused: set[str] = set()      # commands it does not take, not to be asked again
        self.transcript: list[Exchange] | None = None  # every exchange, when set to a list

    # The port and its reader

    def open(self) -> None:
        try:
            # exclusive: a second process cannot drive the same modem behind our back
            self._port = serial.serial_for_url(self.port_url, baudrate=self.baud, timeout=0.05, write_timeout=5,
                                               exclusive=True)
        except (serial.SerialException, OSError) as error:
            raise PortGone(f"cannot open {self.port_url}: {error}") from error
        self.gone = False
        self._stop.clear()
        self._reader = threading.Thread(target=self._read_loop, name=f"modem-reader {self.port_url}", daemon=True)
        self._reader.start()

    def close(self) -> None:
        self._stop.set()
        if self._reader is not None:
            self._reader.join(timeout=2)
        if self._port is not None:
            try:
                self._port.close()
            except (serial.SerialException, OSError):
                pass
        self._port = None

    def reopen(self) -> None:
        self.close()
        self._drain_queue()
        self.open()

    def _read_loop(self) -> None:
        buffer = b""
        pending_two_line: str | None = None
        while not self._stop.is_set():
            try:
                chunk = self._port.read(self._port.in_waiting or 1) if self._port else b""
            except (serial.SerialException, OSError, TypeError, AttributeError):
                self.gone = True
                self._lines.put("\x00GONE")
                if not self._stop.is_set():
                    self.on_gone()
                return
            if not chunk:
                continue
            buffer += chunk
            while True:
                if buffer.lstrip(b"\r\n").startswith(b"> "):  # the prompt has no newline
                    buffer = buffer.lstrip(b"\r\n")[2:]
                    self._prompt.set()
                    continue
                cut = buffer.find(b"\n")
                if cut < 0:
                    break
                line, buffer = buffer[:cut].strip().decode("ascii", "replace"), buffer[cut + 1:]
                if not line:
                    continue
                if pending_two_line is not None:
                    self._unsolicited(Unsolicited(pending_two_line, line))
                    pending_two_line = None
                elif line.startswith(TWO_LINE):
                    pending_two_line = line
                elif line.startswith("+CUSD:"):  # the network's answer to AT+CUSD, before or after its OK
                    self._ussd.put(line)
                elif line.startswith(UNSOLICITED) and not (self._answer_prefix and line.startswith(self._answer_prefix)):
                    self._unsolicited(Unsolicited(line))
                else:
                    self._lines.put(line)

    def _unsolicited(self, event: Unsolicited) -> None:
        try:
            self.on_unsolicited(event)
        except Exception:
            logger.exception("handling %r from %s failed", event.line, self.port_url)

    def _drain_queue(self) -> None:
        while not self._lines.empty():
            self._lines.get_nowait()
        self._prompt.clear()

    def _write(self, data: bytes) -> None:
        if self._port is None or self.gone:
            raise PortGone(f"{self.port_url} is not open")
        try:
            self._port.write(data)
            self._port.flush()
        except (serial.SerialException, OSError) as error:
            self.gone = True
            raise PortGone(f"{self.port_url}: {error}") from error

    # Commands

    def command(self, text: str, timeout: float | None = None, *, complete_on: str | None = None) -> list[str]:
        """Send one command; return the information lines before OK, or raise.  With
        `complete_on`, an information line with that prefix completes the command when no final
        result follows it (a device known to omit it answers at once)."""
        with self._lock:
            self._drain_queue()
            self._answer_prefix = answer_prefix(text)
            try:
                self._write(text.encode() + b"\r")
                lines = self._final(text, timeout or self.timeouts.command, complete_on)
            except ModemError as error:
                if isinstance(error, Refused):
                    self.refused.add(text)
                self._record(text, error.answer, str(error).split(" after ")[0])
                raise
            finally:
                self._answer_prefix = None
            self._record(text, lines, "OK" if text not in self.omits_final else "(none)")
            return lines

    def _record(self, command: str, answer: list[str], final: str) -> None:
        if self.transcript is not None:
            self.transcript.append(Exchange(shown(command), list(answer), final))

    def _final(self, command: str, timeout: float, complete_on: str | None = None) -> list[str]:
        said = shown(command)
        deadline = time.monotonic() + timeout
        lines: list[str] = []
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                if complete_on and any(line.startswith(complete_on) for line in lines):
                    self.omits_final.add(command)  # learned: it answers, then says nothing more
                    return lines
                raise CommandTimeout(f"no answer to {said} within {timeout:.0f} s", lines) from None
            if line == "\x00GONE":
                raise PortGone(f"{self.port_url} vanished during {said}", lines)
            if line == command:  # echo, before ATE0 takes effect (or a device that keeps it on)
                continue
            match = FINAL.match(line)
            if not match:
                lines.append(line)
                if complete_on and line.startswith(complete_on):
                    if command in self.omits_final:
                        return lines
                    deadline = min(deadline, time.monotonic() + self.timeouts.no_final)
                continue
            if match.group(1) == "OK":
                return lines
            if match.group(3) is not None:
                code = match.group(3).strip()
                raise CmsError(int(code) if code.isdigit() else -1, said, lines)
            if match.group(2) is not None:
                raise CmeError(match.group(2).strip(), said, lines)
            if match.group(1) in REFUSALS:
                raise Refused(match.group(1), said, lines)
            raise ModemError(f"{line} after {said}", lines)

    def sync(self, attempts: int = 3) -> None:
        """ESC closes a `> ` prompt left open; then AT until the modem answers OK."""
        for attempt in range(attempts):
            with self._lock:
                self._write(ESC)
                time.sleep(0.05)
                self._drain_queue()
            try:
                self.command("AT", timeout=min(2.0, self.timeouts.command))
                return
            except CommandTimeout:
                if attempt == attempts - 1:
                    raise
            except ModemError:
                continue

    def health(self) -> Health:
        """Registration (AT+CREG?, and AT+CEREG? where the device takes it) and signal (AT+CSQ)."""
        stat = None
        for command, prefix in (("AT+CREG?", "+CREG:"), ("AT+CEREG?", "+CEREG:")):
            if command in self.refused:
                continue
            try:
                for line in self.command(command):
                    if line.startswith(prefix):
                        value = int(line.split(":", 1)[1].split(",")[1])
                        stat = value if stat is None or registered(value) else stat
            except CommandTimeout:
                raise  # a modem that does not answer, not one that does not take the command
            except (ModemError, ValueError, IndexError):
                continue
        rssi = None
        for line in self.command("AT+CSQ"):
            if line.startswith("+CSQ:"):
                rssi = int(line.split(":", 1)[1].split(",")[0])
        return Health(registered=stat is not None and registered(stat), registration=stat,
                      signal_dbm=signal_dbm(rssi) if rssi is not None else None)

    def send_part(self, pdu: str, length: int) -> int:
        """AT+CMGS in PDU mode: wait for `> `, send the PDU and Ctrl-Z, return TP-MR."""
        command = f"AT+CMGS={length}"
        with self._lock:
            self._drain_queue()
            try:
                self._write(command.encode() + b"\r")
                prompted = self._await_prompt(command)
            except PortGone as error:
                raise GoneBeforeSubmit(str(error)) from error
            if not prompted:
                self._write(ESC)  # abort the half-open prompt
                raise PromptTimeout(f"no '> ' prompt after {command} within {self.timeouts.prompt:.0f} s")
            self._write(pdu.encode() + CTRL_Z)
            for line in self._final(command, self.timeouts.submit):
                if line.startswith("+CMGS:"):
                    return int(line.split(":", 1)[1].strip().split(",")[0])
        raise ModemError(f"{command} answered OK without +CMGS")

    def _await_prompt(self, command: str) -> bool:
        """Wait for `> `; an error answer instead of the prompt raises it."""
        deadline = time.monotonic() + self.timeouts.prompt
        while time.monotonic() < deadline:
            if self._prompt.wait(timeout=0.05):
                return True
            try:
                line = self._lines.get_nowait()
            except queue.Empty:
                continue
            if line == "\x00GONE":
                raise PortGone(f"{self.port_url} vanished during {command}")
            if FINAL.match(line):
                self._lines.put(line)
                self._final(command, 0.1)
            logger.debug("%s: ignored %r while waiting for the prompt", self.port_url, line)
        return False

    # The message store

    def stored(self) -> list[tuple[int, str]]:
        """Every message in the store: (index, PDU hex), replies and status reports alike."""
        lines = self.command("AT+CMGL=4")
        found, index = [], None
        for line in lines:
            if line.startswith("+CMGL:"):
                index = int(line.split(":", 1)[1].split(",")[0])
            elif index is not None:
                found.append((index, line))
                index = None
        return found

    def read_stored(self, index: int) -> str | None:
        lines = self.command(f"AT+CMGR={index}")
        return lines[1] if len(lines) > 1 and lines[0].startswith("+CMGR:") else None

    def delete_stored(self, index: int) -> None:
        self.command(f"AT+CMGD={index}")

    # USSD (3GPP TS 27.007 §7.15)

    def ussd(self, request: str) -> tuple[int, str, int | None]:
        """Send a USSD string as given (packed already where the device wants it packed) and
        wait for the network's `+CUSD: <m>,"<str>",<dcs>`; returns (m, str, dcs).  A session the
        network leaves open (m = 1) is closed with AT+CUSD=2."""
        while not self._ussd.empty():
            self._ussd.get_nowait()
        self.command(f'AT+CUSD=1,"{request}",15', timeout=self.timeouts.ussd)
        try:
            line = self._ussd.get(timeout=self.timeouts.ussd)
        except queue.Empty:
            raise CommandTimeout(f"no USSD answer within {self.timeouts.ussd:.0f} s") from None
        match = re.match(r'^\+CUSD: ?(\d)(?:,"(.*)"(?:,(\d+))?)?', line)
        if not match:
            raise ModemError(f"unreadable USSD answer {line!r}", [line])
        mode, text, dcs = int(match.group(1)), match.group(2) or "", match.group(3)
        if mode == 1:
            try:
                self.command("AT+CUSD=2")
            except ModemError:
                pass
        return mode, text, int(dcs) if dcs is not None else None

    def recover(self) -> bool:
        """After a timeout: drain with ESC + AT; if that fails, reopen the port; then reset
        the modem (AT+CFUN=1,1).  True when the modem answers again."""
        for step in ("sync", "reopen", "reset"):
            try:
                if step == "reopen":
                    self.reopen()
                elif step == "reset":
                    self.command("AT+CFUN=1,1", timeout=self.timeouts.command)
                    time.sleep(1.0)
                self.sync()
                return True
            except ModemError as error:
                logger.warning("%s: recovery step %s failed: %s", self.port_url, step, error)
        return False
