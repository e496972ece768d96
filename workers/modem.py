"""The AT dialogue with one GSM modem on one serial port (3GPP TS 27.005 PDU mode, TS 27.007).

The PDU codec is elsewhere (domain/pdu.py): this module only talks to the port.  One reader
thread per port reads every byte, answers the command in flight, recognises the `> ` prompt
(it has no newline) and hands unsolicited lines (`+CMTI`, the two-line `+CDS`, `RING`,
vendor noise) to a callback, even when they arrive between a command and its `OK`.
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

log = logging.getLogger("sandesh.modem")

CTRL_Z, ESC = b"\x1a", b"\x1b"
FINAL = re.compile(r"^(OK|ERROR|NO CARRIER|\+CME ERROR: ?(.+)|\+CMS ERROR: ?(.+))$")
UNSOLICITED = ("+CMTI:", "+CDS:", "+CDSI:", "+CMT:", "RING", "^", "+CBM:", "+CUSD:", "RDY", "SMS DONE")
# +CREG/+CEREG are left to answers: we never enable their unsolicited form (AT+CREG=0).
TWO_LINE = ("+CDS:", "+CMT:", "+CBM:")  # the PDU follows on the next line


@dataclass(frozen=True)
class Timeouts:
    command: float = 10.0
    prompt: float = 10.0
    submit: float = 120.0  # +CMGS waits for the network


class ModemError(Exception):
    """The modem answered ERROR, or the dialogue broke."""


class CommandTimeout(ModemError):
    pass


class PortGone(ModemError):
    """The device vanished (USB re-enumeration, unplugged)."""


class CmsError(ModemError):
    def __init__(self, code: int, command: str):
        super().__init__(f"+CMS ERROR: {code} after {command}")
        self.code = code


class CmeError(ModemError):
    def __init__(self, code: str, command: str):
        super().__init__(f"+CME ERROR: {code} after {command}")
        self.code = code


class NotSubmitted(ModemError):
    """AT+CMGS failed before the PDU was written (the port closed, no `> ` prompt): the network
    cannot have the part, so another SIM may send it."""


class PromptTimeout(CommandTimeout, NotSubmitted):
    pass


class GoneBeforeSubmit(PortGone, NotSubmitted):
    pass


class SimNotReady(ModemError):
    """AT+CPIN? did not answer READY: the SIM must be quarantined."""


@dataclass(frozen=True)
class Unsolicited:
    line: str
    pdu: str | None = None  # the second line of +CDS / +CMT


@dataclass(frozen=True)
class Identity:
    iccid: str | None
    imsi: str | None


@dataclass(frozen=True)
class Health:
    registered: bool
    registration: int | None
    signal_dbm: int | None


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
        self._prompt = threading.Event()
        self._lock = threading.Lock()
        self._reader: threading.Thread | None = None
        self._stop = threading.Event()
        self.gone = False

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
                elif line.startswith(UNSOLICITED):
                    self._unsolicited(Unsolicited(line))
                else:
                    self._lines.put(line)

    def _unsolicited(self, event: Unsolicited) -> None:
        try:
            self.on_unsolicited(event)
        except Exception:
            log.exception("handling %r from %s failed", event.line, self.port_url)

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

    def command(self, text: str, timeout: float | None = None) -> list[str]:
        """Send one command; return the information lines before OK, or raise."""
        with self._lock:
            self._drain_queue()
            self._write(text.encode() + b"\r")
            return self._final(text, timeout or self.timeouts.command)

    def _final(self, command: str, timeout: float) -> list[str]:
        deadline = time.monotonic() + timeout
        lines: list[str] = []
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise CommandTimeout(f"no answer to {command} within {timeout:.0f} s") from None
            if line == "\x00GONE":
                raise PortGone(f"{self.port_url} vanished during {command}")
            if line == command:  # echo, before ATE0 takes effect
                continue
            match = FINAL.match(line)
            if not match:
                lines.append(line)
                continue
            if match.group(1) == "OK":
                return lines
            if match.group(3) is not None:
                raise CmsError(int(match.group(3)) if match.group(3).strip().isdigit() else -1, command)
            if match.group(2) is not None:
                raise CmeError(match.group(2).strip(), command)
            raise ModemError(f"{line} after {command}")

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

    def init(self) -> Identity:
        """Bring the modem to the state the dispatcher needs (docs/design.md, "Decisions: SIMs, modems and replies")."""
        self.sync()
        self.command("ATE0")
        self.command("AT+CMEE=1")
        pin = " ".join(self.command("AT+CPIN?"))
        if "READY" not in pin:
            raise SimNotReady(pin or "no answer to AT+CPIN?")
        self.command("AT+CMGF=0")
        self.command('AT+CPMS="SM","SM","SM"')
        smsc = " ".join(self.command("AT+CSCA?"))
        if not re.search(r'\+CSCA: ?"\+?\d{3,}"', smsc):
            raise ModemError(f"no SMS service centre is set on the SIM ({smsc or 'empty'})")
        self.command("AT+CNMI=2,1,0,1,0")  # inbound stored (+CMTI), status reports direct (+CDS)
        return self.identity()

    def identity(self) -> Identity:
        iccid = imsi = None
        try:
            iccid = _digits(" ".join(self.command("AT+CCID")))
        except ModemError:
            pass
        try:
            imsi = _digits(" ".join(self.command("AT+CIMI")))
        except ModemError:
            pass
        return Identity(iccid=iccid, imsi=imsi)

    def health(self) -> Health:
        stat = None
        for command, prefix in (("AT+CREG?", "+CREG:"), ("AT+CEREG?", "+CEREG:")):
            try:
                for line in self.command(command):
                    if line.startswith(prefix):
                        value = int(line.split(":", 1)[1].split(",")[1])
                        stat = value if stat is None or registered(value) else stat
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
            log.debug("%s: ignored %r while waiting for the prompt", self.port_url, line)
        return False

    def stored(self) -> list[tuple[int, str]]:
        """Every message in the SIM store: (index, PDU hex)."""
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
                log.warning("%s: recovery step %s failed: %s", self.port_url, step, error)
        return False


def _digits(text: str) -> str | None:
    match = re.search(r"\d{6,}", text)
    return match.group(0) if match else None
