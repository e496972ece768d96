"""Virtual GSM modems on pseudo-terminals, for tests and for running Sandesh without hardware.

Each `VirtualModem` answers the AT dialogue of 3GPP TS 27.007 / 27.005 (PDU mode) on a
/dev/pts/N device that the production driver opens exactly like /dev/ttyUSB0, or plays a real
device family's differences from it (a profile of scripts/service/emulator_profiles.py). A shared
`Network` reassembles what the modems submit and records what the phones received.

    sandesh emulator --sims 4 --phones-log var/phones.jsonl --profile huawei,quectel

prints one JSON object per modem and runs until SIGINT/SIGTERM. Lines of JSON on stdin
control the modems, e.g. {"sim": "emu-1", "inbound": {"from": "+9779812345678", "text": "hi"}},
{"sim": "emu-2", "pin": "SIM PIN"}, {"sim": "emu-1", "credit": 8.5, "part_price": 1.0}.
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import errno
import fcntl
import functools
import json
import os
import random
import re
import select
import signal
import sys
import threading
import time
import tty
from datetime import datetime, timedelta
from typing import Any, Callable, Iterable, Sequence

from sandesh.domain.clock import NEPAL
from sandesh.scripts.service.emulator_profiles import PROFILES, Profile

DEFAULT_SMSC = "9779800000000"
_MNCS = ("01", "02", "04", "03")
CTRL_Z, ESC = 0x1A, 0x1B
BOOT_SECONDS = 0.5
NOISE_EVERY = 1.0  # seconds between a profile's idle unsolicited lines
# Commands that a real modem refuses while the SMS stack boots (+CMS ERROR: 512) or without a PIN.
SMS_COMMANDS = ("+CMGF", "+CPMS", "+CSCA", "+CNMI", "+CSMS", "+CNMA", "+CMGL", "+CMGR", "+CMGD", "+CMGS", "+CUSD")
# Commands that read the SIM: a SIM still starting answers them busy.
SIM_COMMANDS = ("+CPIN", "+CIMI", "+CCID", "^ICCID", "+QCCID", "^SCID", "#CCID", "+CRSM")


def _luhn_digit(digits: str) -> str:
    total = 0
    for i, d in enumerate(reversed(digits)):
        n = int(d) * (2 if i % 2 == 0 else 1)
        total += n - 9 if n > 9 else n
    return str((10 - total % 10) % 10)


def tpdu_length(pdu_hex: str) -> int:
    """The <length> of +CMGS/+CMGL/+CMGR/+CDS: octets after the SMSC part."""
    return len(pdu_hex) // 2 - (int(pdu_hex[:2], 16) + 1)


def _command_key(cmd: str) -> str:
    """The key in VirtualModem.COMMANDS of a command in capitals without "AT":
    "+CMEE=1" -> "+CMEE=…", "+CMEE?" -> "+CMEE?", "+CFUN=" -> "+CFUN=", "+CNMA=0" -> "+CNMA…"."""
    if cmd.startswith("+CNMA"):
        return "+CNMA…"
    name, _, args = cmd.partition("=")
    return f"{name}=…" if args else cmd


def _now() -> datetime:
    return datetime.now(NEPAL)


def _groups(test_answer: str, expand: bool = False) -> list[list[str]]:
    """A test command's answer in groups: `+CPMS: ("SM","ME"),("SM")` -> [["SM","ME"], ["SM"]];
    expanded, `+CNMI: (0-2),(1)` -> [["0","1","2"], ["1"]]."""
    groups = []
    for inner in re.findall(r"\(([^()]*)\)", test_answer.split(":", 1)[1]):
        items = [item.strip().strip('"') for item in inner.split(",") if item.strip()]
        if expand:
            items = [str(n) for item in items
                     for n in range(int(item.split("-")[0]), int(item.split("-")[-1]) + 1)]
        groups.append(items)
    return groups


class Network:
    """The other side of the air interface: reassembles submitted parts into phone messages."""

    def __init__(self, phones_log: str | None = None):
        self.phones_log = phones_log
        self.received: list[dict[str, Any]] = []
        self._partial: dict[tuple, dict[int, str]] = {}
        self._lock = threading.Lock()

    def submit(self, sim: str, submit: Any) -> dict[str, Any] | None:
        """Takes one decoded SMS-SUBMIT part; returns the phone message once it is complete."""
        total = submit.total or 1
        with self._lock:
            if submit.reference is None or total <= 1:
                texts = [submit.text]
            else:
                key = (sim, submit.to, submit.reference, total)
                parts = self._partial.setdefault(key, {})
                parts[submit.sequence] = submit.text  # a resent part replaces the earlier copy
                if len(parts) < total:
                    return None
                del self._partial[key]
                texts = [parts[seq] for seq in sorted(parts)]
            message = {"at": _now().isoformat(timespec="milliseconds"), "sim": sim, "to": submit.to,
                       "text": "".join(texts), "parts": len(texts), "encoding": submit.encoding}
            self.received.append(message)
            if self.phones_log:
                with open(self.phones_log, "a", encoding="utf-8") as log:
                    log.write(json.dumps(message, ensure_ascii=False) + "\n")
            return message


class VirtualModem:
    """One modem with one SIM, served on the master side of a pseudo-terminal by a thread."""

    def __init__(self, name: str = "emu-1", index: int = 1, *, network: Network | None = None,
                 smsc: str = DEFAULT_SMSC, store_capacity: int = 20, first_index: int | None = None,
                 report_delay: float = 0.2, reports_enabled: bool = True, signal_rssi: int = 20,
                 seed: int | None = None, mnc: str | None = None, profile: str | Profile = "3gpp",
                 cmgs_seconds: float | None = None, busy_seconds: float | None = None):
        self.profile = PROFILES[profile] if isinstance(profile, str) else profile
        self.cmgs_seconds = self.profile.cmgs_seconds if cmgs_seconds is None else cmgs_seconds
        self.busy_seconds = self.profile.busy_seconds if busy_seconds is None else busy_seconds
        self.name = name
        self.index = index
        self.network = network if network is not None else Network()
        self.smsc = smsc.lstrip("+")
        self.iccid = (lambda body: body + _luhn_digit(body))(f"8997701{index:011d}")
        # Operators in turn (MNC 01 Nepal Telecom, 02 Ncell, 04 Smart, 03 UTL), so that a pool of
        # emulated modems shows on-net routing (domain/operators.py).
        self.imsi = f"429{mnc or _MNCS[(index - 1) % len(_MNCS)]}{index:010d}"
        self.imei = (lambda body: body + _luhn_digit(body))(f"86{index:012d}")
        self.store_capacity = store_capacity
        self.first_index = self.profile.first_index if first_index is None else first_index
        self.report_delay = report_delay
        self.reports_enabled = reports_enabled
        self.rssi = signal_rssi
        self.registration = 1
        self.pin_state = "READY"
        self.pin = "1234"             # what AT+CPIN="…" must give while the SIM asks for its PIN
        self.pin_tries = 3            # wrong PINs left before the SIM asks for its PUK
        self.credit = 500.0           # NPR, what the balance USSD answers
        self.part_price = 0.0         # NPR taken from the credit per part sent; none left: +CMS ERROR: 50
        self.ussd_delay = 0.2
        self.echo_sticky = False      # ATE0 answers OK and echo stays on
        self.random = random.Random(seed if seed is not None else index)

        # The SIM store and TP-MR survive a reboot; everything in _reset() does not.
        self.store: dict[int, tuple[int, str]] = {}  # index -> (stat, pdu hex)
        self.status_store: dict[int, tuple[int, str]] = {}  # "SR": stored status reports, when the profile has it
        self.memory_full = False
        self.refused_inbound: list[str] = []  # PDUs the SMSC keeps retrying while the store is full
        self.next_mr = 0
        self.sent: list[dict[str, Any]] = []
        self.reports: list[dict[str, Any]] = []

        self._report_script: collections.deque = collections.deque()
        self._report_probabilities: dict[int, float] | None = None
        self._failures: list[tuple[str, str]] = []
        self._interleave: list[str] = []
        self._silent_until: float | None = None
        self._hang_prompt = False
        self._hang_after_pdu = False
        self._hang_deliver = True
        self._scheduled: list[tuple[float, Callable[[], None]]] = []

        self._lock = threading.RLock()
        self._reset()
        self._booting_until = 0.0
        self._busy_until = 0.0
        self._noise_at = 0.0
        self.master_fd, self.slave_fd = os.openpty()
        # Raw mode: the line discipline must pass Ctrl-Z and ESC through and must not echo.
        tty.setraw(self.slave_fd)
        tty.setraw(self.master_fd)
        fcntl.fcntl(self.master_fd, fcntl.F_SETFL, fcntl.fcntl(self.master_fd, fcntl.F_GETFL) | os.O_NONBLOCK)
        self.device = os.ttyname(self.slave_fd)
        self.vanished = False
        self._running = False
        self._thread: threading.Thread | None = None

    # --- lifecycle ------------------------------------------------------------------

    def _reset(self) -> None:
        self.echo = True
        self.cmee = 0
        self.cmgf = 0
        self.cnmi = (0, 0, 0, 0, 0)
        self.csms = 0
        self.storages = ["SM", "SM", "SM"]
        self._mode = "command"  # or "pdu" after the prompt, "hung-prompt" until ESC
        self._buffer = bytearray()
        self._pdu_length = 0
        self._cmgs_line = "AT+CMGS"
        self._hang_prompt = False
        self._hang_after_pdu = False

    def start(self) -> "VirtualModem":
        self._power_up()
        self._running = True
        self._thread = threading.Thread(target=self._serve, name=f"modem-{self.name}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._running = False
        if self._thread and self._thread is not threading.current_thread():
            self._thread.join(timeout=2)
        if not self.vanished:
            self.vanished = True
            for fd in (self.master_fd, self.slave_fd):
                try:
                    os.close(fd)
                except OSError:
                    pass

    def vanish(self) -> None:
        """The USB device disappears: the pty closes, the driver's reads and writes fail."""
        self.stop()

    def __enter__(self) -> "VirtualModem":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def _serve(self) -> None:
        while self._running:
            try:
                ready, _, _ = select.select([self.master_fd], [], [], 0.01)
                data = os.read(self.master_fd, 4096) if ready else b""
            except OSError as error:
                if error.errno in (errno.EAGAIN, errno.EINTR):
                    continue
                if error.errno == errno.EIO:  # no one has the slave open right now
                    time.sleep(0.01)
                    continue
                return
            with self._lock:
                self._run_due()
                self._idle_noise()
                if data:
                    self._feed(data)

    def _schedule(self, delay: float, action: Callable[[], None]) -> None:
        with self._lock:
            self._scheduled.append((time.monotonic() + delay, action))

    def _run_due(self) -> None:
        now = time.monotonic()
        due = [item for item in self._scheduled if item[0] <= now]
        if due:
            self._scheduled = [item for item in self._scheduled if item[0] > now]
            for _, action in sorted(due, key=lambda item: item[0]):
                action()

    # --- output ---------------------------------------------------------------------

    def _write(self, data: str | bytes) -> None:
        if self.vanished or self._silent():
            return
        raw = data.encode("ascii") if isinstance(data, str) else data
        try:
            os.write(self.master_fd, raw)
        except OSError:
            pass  # buffer full with nobody reading: a real modem drops output too

    def _silent(self) -> bool:
        if self._silent_until is None:
            return False
        if self._silent_until > time.monotonic():
            return True
        self._silent_until = None
        return False

    def _respond(self, lines: Sequence[str] = (), final: str = "OK") -> None:
        out = "\r\n" + "\r\n".join(lines) + "\r\n" if lines else ""
        out += "".join(f"\r\n{line}\r\n" for line in self._interleave)
        self._interleave = []
        self._write(out + f"\r\n{final}\r\n")

    def _cme(self, code: int) -> str:
        return f"+CME ERROR: {code}" if self.cmee else "ERROR"

    def emit(self, *lines: str) -> None:
        """Unsolicited result lines now, e.g. emit("RING") or emit("^RSSI: 20")."""
        with self._lock:
            self._write("".join(f"\r\n{line}\r\n" for line in lines))

    def interleave(self, *lines: str) -> None:
        """Unsolicited lines to put between the next command's answer and its final result."""
        with self._lock:
            self._interleave.extend(lines)

    # --- misbehaviour ---------------------------------------------------------------

    def fail_next(self, command_prefix: str, response: str) -> None:
        """The next command starting with the prefix gets `response` as its final result.
        For AT+CMGS it comes after the PDU, as a network rejection does."""
        with self._lock:
            self._failures.append((command_prefix.upper(), response))

    def silence(self, seconds: float | None = None) -> None:
        """Answer nothing (input is dropped) for `seconds`, or until silence(0)."""
        with self._lock:
            if seconds == 0:
                self._silent_until = None
            else:
                self._silent_until = float("inf") if seconds is None else time.monotonic() + seconds

    def hang_prompt(self) -> None:
        """The next AT+CMGS= never gets its "> " prompt; only ESC brings the modem back."""
        with self._lock:
            self._hang_prompt = True

    def hang_after_pdu(self, deliver: bool = True) -> None:
        """The next PDU is accepted (and, if `deliver`, sent) but +CMGS is never answered."""
        with self._lock:
            self._hang_after_pdu, self._hang_deliver = True, deliver

    def fill_store(self) -> None:
        """Fill the SIM store with inbound messages; the next inbound finds memory full."""
        from sandesh.domain.pdu import encode_deliver

        with self._lock:
            free = self._free_indexes()
            for i, index in enumerate(free):
                self.store[index] = (1, encode_deliver("+9779800000001", f"filler {i}", _now(), smsc=self.smsc))

    def set_signal(self, rssi: int) -> None:
        self.rssi = rssi

    def set_registration(self, stat: int) -> None:
        self.registration = stat

    def set_pin_state(self, state: str) -> None:
        self.pin_state = state

    def script_reports(self, *outcomes: int | None | Sequence[int]) -> None:
        """Status-report outcomes for the next submitted parts, one entry per part: a TP-ST
        (0x00 delivered, 0x45/0x46 failed), None for no report, or a sequence such as
        (0x20, 0x00) for "still trying" followed by the final report."""
        with self._lock:
            self._report_script.extend(outcomes)

    def set_report_probabilities(self, probabilities: dict[int, float] | None) -> None:
        """TP-ST -> weight, drawn per part when no scripted outcome is left. A temporary
        status (0x20-0x3F) is followed by a final 0x00."""
        with self._lock:
            self._report_probabilities = probabilities

    # --- inbound --------------------------------------------------------------------

    def inject_inbound(self, sender: str, text: str, *, parts_order: list[int] | None = None,
                       duplicate: list[int] | None = None, reference: int | None = None) -> list[int]:
        """An SMS from a phone. `parts_order` and `duplicate` hold 1-based part numbers; a
        duplicated part is stored again right after itself. A reference above 255 uses the
        16-bit concatenation header. Returns the store indexes used (none for a refused part)."""
        from sandesh.domain.pdu import encode_deliver
        from sandesh.domain.segments import PART_CAPACITY_16BIT, encoding_of, split

        sixteen = reference is not None and reference > 255
        texts = split(text, part_capacity=PART_CAPACITY_16BIT[encoding_of(text)]) if sixteen else split(text)
        total = len(texts)
        if total > 1 and reference is None:
            reference = self.random.randrange(256)
        order = parts_order or list(range(1, total + 1))
        stamp = _now()
        pdus = []
        for seq in order:
            for _ in range(1 + (duplicate or []).count(seq)):
                if total > 1:
                    pdus.append(encode_deliver(sender, texts[seq - 1], stamp, reference=reference, total=total,
                                               sequence=seq, reference_bits=16 if sixteen else 8,
                                               smsc=self.smsc))
                else:
                    pdus.append(encode_deliver(sender, texts[seq - 1], stamp, smsc=self.smsc))
        with self._lock:
            return [i for i in (self._deliver_inbound(pdu) for pdu in pdus) if i is not None]

    def _free_indexes(self) -> list[int]:
        return [i for i in range(self.first_index, self.first_index + self.store_capacity) if i not in self.store]

    def _deliver_inbound(self, pdu: str) -> int | None:
        if self.cnmi[1] in (2, 3):
            self._write(f"\r\n+CMT: ,{tpdu_length(pdu)}\r\n{pdu}\r\n")
            return None
        free = self._free_indexes()
        if not free:
            self.memory_full = True
            self.refused_inbound.append(pdu)
            return None
        self.store[free[0]] = (0, pdu)
        if self.cnmi[1] == 1:
            self._write(f'\r\n+CMTI: "{self.storages[2]}",{free[0]}\r\n')
        return free[0]

    def _space_freed(self) -> None:
        # The SMSC retries what it could not deliver while the store was full.
        waiting, self.refused_inbound = self.refused_inbound, []
        self.memory_full = False
        for pdu in waiting:
            self._deliver_inbound(pdu)

    # --- input ----------------------------------------------------------------------

    def _feed(self, data: bytes) -> None:
        if self._silent():
            return
        for byte in data:
            if self._mode == "command":
                if byte == ESC:  # cancels a half-typed line, as modems do outside the prompt
                    self._buffer.clear()
                    continue
                if self.echo:
                    self._write(bytes([byte]))
                if byte == 0x0D:
                    line = self._buffer.decode("ascii", "replace").strip()
                    self._buffer.clear()
                    if line:
                        self._command(line)
                elif byte != 0x0A:
                    self._buffer.append(byte)
            elif self._mode == "waiting":  # for the network's answer to a submit
                continue
            elif self._mode == "hung-prompt":
                if byte == ESC:
                    self._mode = "command"
                    self._respond()
            else:  # reading a PDU after the prompt
                if byte == ESC:
                    self._mode = "command"
                    self._buffer.clear()
                    self._respond()
                elif byte == CTRL_Z:
                    self._mode = "command"
                    pdu = self._buffer.decode("ascii", "replace").strip().replace("\r", "").replace("\n", "")
                    self._buffer.clear()
                    self._submit(pdu)
                else:
                    if self.echo:
                        self._write(bytes([byte]))
                    self._buffer.append(byte)

    def _take_failure(self, upper: str) -> str | None:
        for i, (prefix, response) in enumerate(self._failures):
            if upper.startswith(prefix):
                del self._failures[i]
                return response
        return None

    def _command(self, line: str) -> None:
        upper = line.upper()
        if not upper.startswith("AT"):
            return  # a real modem ignores line noise
        if not upper.startswith("AT+CMGS"):
            failure = self._take_failure(upper)
            if failure is not None:
                self._respond((), failure)
                return
        cmd = upper[2:]
        busy = time.monotonic() < self._busy_until
        if cmd.startswith(SMS_COMMANDS):
            if time.monotonic() < self._booting_until:
                self._respond((), "+CMS ERROR: 512")
                return
            if busy:
                self._respond((), "ERROR" if self.profile.sms_refused_while_busy else self.profile.busy_answer)
                return
            if self.pin_state != "READY":
                self._respond((), "+CMS ERROR: 311")
                return
        if busy and cmd.startswith(SIM_COMMANDS) and not self.profile.sms_refused_while_busy:
            self._respond((), self.profile.busy_answer)
            return
        try:
            self._dispatch(cmd)
        except (ValueError, IndexError):
            self._respond((), self.profile.refusal)

    def _dispatch(self, cmd: str) -> None:
        """One command (in capitals, without "AT") to its handler in COMMANDS; the profile's refusal
        (ERROR, or a vendor's word) if none, or if the profile lacks it."""
        key = _command_key(cmd)
        handler = self.COMMANDS.get(key)
        if handler is None or key in self.profile.unsupported:
            self._respond((), self.profile.refusal)
        else:
            handler(self, cmd.partition("=")[2])

    # --- AT command handlers (see COMMANDS): each gets the text after "=", or "" -------

    def _ok(self, args: str) -> None:
        self._respond()

    def _echo_off(self, args: str) -> None:
        self.echo = self.echo_sticky
        self._respond()

    def _echo_on(self, args: str) -> None:
        self.echo = True
        self._respond()

    def _identify(self, args: str) -> None:
        self._respond([self.profile.manufacturer, self.profile.model, f"Revision: {self.profile.firmware}"])

    def _manufacturer(self, args: str) -> None:
        self._respond([self.profile.manufacturer])

    def _model(self, args: str) -> None:
        self._respond([self.profile.model])

    def _revision(self, args: str) -> None:
        if self.profile.firmware is None:
            self._respond((), self.profile.refusal)
        else:
            self._respond([self.profile.firmware])

    def _serial_number(self, args: str) -> None:
        self._respond([self.imei])

    def _set_cmee(self, args: str) -> None:
        self.cmee = int(args)
        self._respond()

    def _read_cmee(self, args: str) -> None:
        self._respond([f"+CMEE: {self.cmee}"])

    def _read_pin(self, args: str) -> None:
        if self.pin_state == "NOT INSERTED":
            self._respond((), self._cme(10))
        elif self.profile.cpin_no_ok:  # the answer, and no final result after it
            self._write(f"\r\n+CPIN: {self.pin_state}\r\n")
        else:
            self._respond([f"+CPIN: {self.pin_state}"])

    def _enter_pin(self, args: str) -> None:
        """AT+CPIN="<pin>": right, the SIM is ready (busy for a moment); wrong, one try fewer;
        none left, it asks for its PUK (TS 27.007 §8.3)."""
        if self.pin_state != "SIM PIN":
            self._respond((), self._cme(3))
            return
        if args.split(",")[0].strip().strip('"') == self.pin:
            self.pin_state, self.pin_tries = "READY", 3
            self._busy_until = time.monotonic() + min(self.busy_seconds, 0.5)
            self._respond()
            return
        self.pin_tries -= 1
        if self.pin_tries <= 0:
            self.pin_state = "SIM PUK"
        self._respond((), self._cme(16))

    def _read_iccid(self, args: str) -> None:
        answer = self.profile.iccid_answer if self.profile.iccid == "+CCID" else "+CCID: {iccid}"
        self._respond([answer.format(iccid=self.iccid)])

    def _read_vendor_iccid(self, args: str, key: str) -> None:
        if key != self.profile.iccid:
            self._respond((), self.profile.refusal)
        else:
            self._respond([self.profile.iccid_answer.format(iccid=self.iccid)])

    def _restricted_sim_access(self, args: str) -> None:
        """AT+CRSM=176,12258,0,0,10 reads EF_ICCID (TS 27.007 §8.18, TS 31.102): digits in swapped pairs."""
        if args.replace(" ", "") != "176,12258,0,0,10":
            self._respond((), self._cme(4))
            return
        padded = self.iccid + "F" * (20 - len(self.iccid))
        swapped = "".join(padded[i + 1] + padded[i] for i in range(0, 20, 2))
        self._respond([f'+CRSM: 144,0,"{swapped}"'])

    def _read_imsi(self, args: str) -> None:
        if self.pin_state != "READY":
            self._respond((), self._cme(11))
        else:
            self._respond([self.imsi])

    def _signal_quality(self, args: str) -> None:
        self._respond([f"+CSQ: {self.rssi},99"])

    def _read_registration(self, args: str, name: str) -> None:
        self._respond([f"{name}: 0,{self.registration}"])

    def _read_cfun(self, args: str) -> None:
        self._respond(["+CFUN: 1"])

    def _cfun(self, args: str) -> None:
        self._respond()
        if args.replace(" ", "") == "1,1":
            self._reboot()

    def _set_cmgf(self, args: str) -> None:
        if args.strip() != "0":
            self._respond((), "+CMS ERROR: 303")  # text mode is not emulated
        else:
            self.cmgf = 0
            self._respond()

    def _read_cmgf(self, args: str) -> None:
        self._respond([f"+CMGF: {self.cmgf}"])

    def _set_cpms(self, args: str) -> None:
        if args == "?":
            self._respond([self.profile.cpms_test])
            return
        names = [a.strip().strip('"') for a in args.split(",")]
        groups = _groups(self.profile.cpms_test)
        if len(names) > self.profile.cpms_params:
            self._respond((), self.profile.refusal)
            return
        if not all(i < len(groups) and n in groups[i] for i, n in enumerate(names)):
            self._respond((), "+CMS ERROR: 302")
            return
        self.storages[:len(names)] = names[:3]
        used, cap = len(self.store), self.store_capacity
        self._respond([f"+CPMS: {used},{cap},{used},{cap},{used},{cap}"])

    def _read_cpms(self, args: str) -> None:
        used, cap = len(self.store), self.store_capacity
        self._respond(["+CPMS: " + ",".join(f'"{s}",{used},{cap}' for s in self.storages)])

    def _set_csca(self, args: str) -> None:
        self.smsc = args.split(",")[0].strip().strip('"').lstrip("+")
        self._respond()

    def _read_csca(self, args: str) -> None:
        self._respond([f'+CSCA: "+{self.smsc}",145'])

    def _set_cnmi(self, args: str) -> None:
        if args == "?":
            self._respond([self.profile.cnmi_test])
            return
        values = (([int(v) if v.strip() else 0 for v in args.split(",")]) + [0] * 5)[:5]
        ranges = [{int(x) for x in group} for group in _groups(self.profile.cnmi_test, expand=True)]
        if (any(i < len(ranges) and v not in ranges[i] for i, v in enumerate(values))
                or values[3] in self.profile.cnmi_refused_ds):
            self._respond((), self.profile.cnmi_refusal)
            return
        self.cnmi = tuple(values)
        self._respond()

    def _read_cnmi(self, args: str) -> None:
        self._respond(["+CNMI: " + ",".join(map(str, self.cnmi))])

    def _set_csms(self, args: str) -> None:
        self.csms = int(args)
        self._respond(["+CSMS: 1,1,1"])

    def _read_csms(self, args: str) -> None:
        self._respond([f"+CSMS: {self.csms},1,1,1"])

    def _reboot(self) -> None:
        self._reset()
        self._booting_until = time.monotonic() + BOOT_SECONDS
        if self.profile.boot_lines:
            self._power_up(BOOT_SECONDS)
        else:
            self._schedule(0.05, lambda: self._write("\r\nRDY\r\n"))
            self._schedule(BOOT_SECONDS, lambda: self._write("\r\n+CPIN: READY\r\n\r\nSMS DONE\r\n"))

    def _power_up(self, after: float = 0.0) -> None:
        """The profile's start: busy for its busy seconds, then its power-up lines."""
        busy = max(after, self.busy_seconds)
        self._busy_until = time.monotonic() + busy
        if self.profile.boot_lines:
            self._schedule(busy, lambda: self.emit(*self.profile.boot_lines))

    def _idle_noise(self) -> None:
        if self.profile.noise and time.monotonic() >= self._noise_at and self._mode == "command":
            self._noise_at = time.monotonic() + NOISE_EVERY
            self._write(f"\r\n{self.random.choice(self.profile.noise)}\r\n")

    def _noise_line(self) -> list[str]:
        return [self.random.choice(self.profile.noise)] if self.profile.noise else []

    # --- USSD (TS 27.007 §7.15) ----------------------------------------------------

    def _ussd(self, args: str) -> None:
        """AT+CUSD=1,"<code>",15: OK now, the network's +CUSD later.  A balance code answers the
        credit; a device that packs USSD (Huawei) wants the code packed and answers packed."""
        from sandesh.domain.pdu import pack_gsm7, unpack_gsm7

        fields = [f.strip() for f in args.split(",")]
        if args.strip() == "?":
            self._respond(["+CUSD: (0-2)"])
            return
        if fields[0] == "2" or len(fields) < 2:
            self._respond()
            return
        request = fields[1].strip('"')
        if self.profile.ussd_packed:
            try:
                request = unpack_gsm7(request)
            except ValueError:
                request = ""
        self._respond()
        if not request.startswith("*") or not request.endswith("#"):
            self._schedule(self.ussd_delay, lambda: self.emit("+CUSD: 4"))
            return
        # The wording is ours: no capture of a Nepali operator's balance answer is public.
        text = f"Your balance is Rs. {self.credit:.2f}. Valid till 2027-12-31."
        answer = pack_gsm7(text) if self.profile.ussd_packed else text
        self._schedule(self.ussd_delay, lambda: self.emit(f'+CUSD: 0,"{answer}",15'))

    # --- the message store ----------------------------------------------------------

    def _memory(self, name: str) -> dict[int, tuple[int, str]]:
        """A store by name: "SR" holds status reports where the profile has it; the others share
        the one store a modem with one SIM has."""
        return self.status_store if name == "SR" else self.store

    def _list(self, args: str) -> None:
        stat = int(args or 4)
        if stat not in (0, 1, 2, 3, 4):
            self._respond((), "+CMS ERROR: 302")
            return
        lines = []
        memory = self._memory(self.storages[0])
        for index in sorted(memory):
            current, pdu = memory[index]
            if stat == 4 or stat == current:
                lines += [f"+CMGL: {index},{current},,{tpdu_length(pdu)}", pdu]
                if current == 0:
                    memory[index] = (1, pdu)  # listing marks unread messages read, as modems do
        self._respond(lines)

    def _read(self, args: str) -> None:
        index = int(args)
        memory = self._memory(self.storages[0])
        if index not in memory:
            self._respond((), "+CMS ERROR: 321")
            return
        current, pdu = memory[index]
        memory[index] = (1, pdu)
        self._respond([f"+CMGR: {current},,{tpdu_length(pdu)}", pdu])

    def _delete(self, args: str) -> None:
        index, _, flag = args.partition(",")
        flag_value = int(flag) if flag.strip() else 0
        memory = self._memory(self.storages[0])
        if flag_value == 0:
            i = int(index)
            if not self.first_index <= i < self.first_index + self.store_capacity:
                self._respond((), "+CMS ERROR: 321")
                return
            memory.pop(i, None)
        elif flag_value in (1, 2, 3, 4):
            for i in [i for i, entry in memory.items() if flag_value == 4 or entry[0] != 0]:
                del memory[i]
        else:
            self._respond((), "+CMS ERROR: 302")
            return
        self._respond()
        if self.refused_inbound and self._free_indexes():
            self._space_freed()

    # --- sending --------------------------------------------------------------------

    def _start_submit(self, args: str) -> None:
        length = int(args)
        self._cmgs_at = time.monotonic()  # when AT+CMGS arrived (benchmarks time OTPs to it)
        self._pdu_length = length
        self._cmgs_line = "AT+CMGS=" + args
        self._buffer.clear()
        if self._hang_prompt:
            self._hang_prompt = False
            self._mode = "hung-prompt"
            return
        self._mode = "pdu"
        self._write("\r\n> ")
        for line in self._noise_line():  # vendors' lines come between the prompt and +CMGS: too
            self._write(f"\r\n{line}\r\n")

    def _submit(self, pdu: str) -> None:
        from sandesh.domain.pdu import decode_submit

        failure = self._take_failure(self._cmgs_line)
        if failure is not None:
            self._respond((), failure)
            return
        try:
            bytes.fromhex(pdu)
            if len(pdu) % 2 or tpdu_length(pdu) != self._pdu_length:
                raise ValueError("length")
            submit = decode_submit(pdu)
        except Exception:  # noqa: BLE001 - whatever the codec rejects is an invalid PDU to the modem
            self._respond((), "+CMS ERROR: 304")
            return
        if self.registration not in (1, 5):
            self._respond((), "+CMS ERROR: 331")
            return
        if self.memory_full:
            self._respond((), "+CMS ERROR: 322")
            return
        if self.part_price and self.credit < self.part_price:
            self._respond((), "+CMS ERROR: 50")  # TS 24.011 cause 50: not subscribed, as no credit reads
            return
        self.credit -= self.part_price
        mr = self.next_mr
        self.next_mr = (self.next_mr + 1) % 256
        hang = self._hang_after_pdu
        self._hang_after_pdu = False
        if hang and not self._hang_deliver:
            return
        self.sent.append({"mr": mr, "to": submit.to, "text": submit.text, "reference": submit.reference,
                          "total": submit.total, "sequence": submit.sequence, "encoding": submit.encoding,
                          "status_report": submit.status_report, "pdu": pdu, "cmgs_at": self._cmgs_at})
        self.network.submit(self.name, submit)
        if not hang:
            self._interleave.extend(self._noise_line())
            if self.cmgs_seconds:  # the network takes its time; the modem answers nothing meanwhile
                self._mode = "waiting"
                self._schedule(self.cmgs_seconds, lambda: self._answer_submit(mr))
            else:
                self._respond([f"+CMGS: {mr}"])
        if submit.status_report and self.reports_enabled:
            for i, status in enumerate(self._outcome()):
                self._schedule(self.cmgs_seconds + self.report_delay * (i + 1),
                               lambda status=status: self._send_report(mr, submit.to, status))

    def _answer_submit(self, mr: int) -> None:
        self._mode = "command"
        self._respond([f"+CMGS: {mr}"])

    def _outcome(self) -> list[int]:
        if self._report_script:
            entry = self._report_script.popleft()
            if entry is None:
                return []
            return [entry] if isinstance(entry, int) else list(entry)
        if self._report_probabilities:
            statuses = list(self._report_probabilities)
            status = self.random.choices(statuses, weights=[self._report_probabilities[s] for s in statuses])[0]
            return [status, 0x00] if 0x20 <= status <= 0x3F else [status]
        return [0x00]

    def _send_report(self, mr: int, recipient: str, status: int) -> None:
        from sandesh.domain.pdu import encode_status_report

        now = _now()
        pdu = encode_status_report(mr, recipient, status, now - timedelta(seconds=self.report_delay), now,
                                   smsc=self.smsc)
        self.reports.append({"mr": mr, "to": recipient, "status": status, "pdu": pdu,
                             "emitted": self.cnmi[3] in (1, 2)})
        if self.cnmi[3] == 1:  # +CDS only when AT+CNMI asked for direct reports
            self._write(f"\r\n+CDS: {tpdu_length(pdu)}\r\n{pdu}\r\n")
        elif self.cnmi[3] == 2:  # stored, and announced with +CDSI (TS 27.005 §3.4.1)
            name = self.profile.report_store
            memory = self._memory(name)
            free = [i for i in range(self.first_index, self.first_index + self.store_capacity) if i not in memory]
            if free:
                memory[free[0]] = (0, pdu)
                if self.cnmi[0]:
                    self._write(f'\r\n+CDSI: "{name}",{free[0]}\r\n')

    # --- the table of AT commands ---------------------------------------------------

    COMMANDS: dict[str, Callable[[VirtualModem, str], None]] = {
        # ITU-T V.250 (basic syntax, which TS 27.007 takes over)
        "": _ok, "Z": _ok, "E": _echo_off, "E0": _echo_off, "E1": _echo_on, "I": _identify,
        "+GSN": _serial_number,
        # 3GPP TS 27.007: identification, errors, SIM, signal, registration, functionality
        "+CGMI": _manufacturer, "+CGMM": _model, "+CGMR": _revision, "+CGSN": _serial_number,
        "+CMEE=…": _set_cmee, "+CMEE?": _read_cmee,
        "+CPIN?": _read_pin, "+CPIN=…": _enter_pin, "+CRSM=…": _restricted_sim_access,
        "+CIMI": _read_imsi,
        "+CSQ": _signal_quality,
        "+CREG?": functools.partial(_read_registration, name="+CREG"), "+CREG=…": _ok,
        "+CGREG?": functools.partial(_read_registration, name="+CGREG"), "+CGREG=…": _ok,
        "+CEREG?": functools.partial(_read_registration, name="+CEREG"), "+CEREG=…": _ok,
        "+CFUN?": _read_cfun, "+CFUN": _cfun, "+CFUN=": _cfun, "+CFUN=…": _cfun,
        "+CUSD=…": _ussd,
        # vendor commands
        "+CCID": _read_iccid,
        "^ICCID?": functools.partial(_read_vendor_iccid, key="^ICCID?"),
        "+QCCID": functools.partial(_read_vendor_iccid, key="+QCCID"),
        "^SCID": functools.partial(_read_vendor_iccid, key="^SCID"),
        "#CCID": functools.partial(_read_vendor_iccid, key="#CCID"),
        "^CURC=…": _ok,
        # 3GPP TS 27.005, PDU mode
        "+CSMS=…": _set_csms, "+CSMS?": _read_csms,
        "+CPMS=…": _set_cpms, "+CPMS?": _read_cpms,
        "+CMGF=…": _set_cmgf, "+CMGF?": _read_cmgf,
        "+CSCA=…": _set_csca, "+CSCA?": _read_csca,
        "+CNMI=…": _set_cnmi, "+CNMI?": _read_cnmi,
        "+CNMA…": _ok,
        "+CMGL": _list, "+CMGL=": _list, "+CMGL=…": _list,
        "+CMGR=…": _read,
        "+CMGD=…": _delete,
        "+CMGS=…": _start_submit,
    }
    """The AT commands the modem answers, keyed by what follows "AT", in capitals (_command_key):
    "+CSQ" or "+CMEE?" is exactly that line; "+CMEE=…" is the command with something after
    "=" (so "AT+CMEE=?" reaches the handler, and a bare "AT+CMEE=" is an ERROR unless "+CMEE="
    is a key too); "+CNMA…" is any line that starts with +CNMA. Any other line answers ERROR.

    Where they are specified:
      ITU-T V.250, which 3GPP TS 27.007 refers to: ATZ, ATE, ATI, AT+GSN;
      3GPP TS 27.007: +CGMI, +CGMM, +CGSN, +CMEE, +CPIN, +CIMI, +CSQ, +CREG, +CGREG, +CEREG, +CFUN;
      3GPP TS 27.005 (SMS in PDU mode): +CSMS, +CPMS, +CMGF, +CSCA, +CNMI, +CNMA, +CMGL, +CMGR,
        +CMGD, +CMGS;
      vendor commands, no 3GPP definition: +CCID (the SIM's ICCID), ^CURC (Huawei's switch for
        unsolicited reports)."""


class Emulator:
    """N virtual modems sharing one network."""

    def __init__(self, sims: int, phones_log: str | None = None, report_delay: float = 0.2, *,
                 store_capacity: int = 20, smsc: str = DEFAULT_SMSC, reports_enabled: bool = True,
                 seed: int | None = None, first: int = 1, profiles: Sequence[str] = ("3gpp",),
                 cmgs_seconds: float | None = None, busy_seconds: float | None = None):
        """`profiles` are given to the modems in turn (scripts/service/emulator_profiles.py)."""
        self.network = Network(phones_log)
        self.modems = [VirtualModem(f"emu-{i}", i, network=self.network, smsc=smsc, store_capacity=store_capacity,
                                    report_delay=report_delay, reports_enabled=reports_enabled,
                                    seed=None if seed is None else seed + i,
                                    profile=profiles[(i - first) % len(profiles)], cmgs_seconds=cmgs_seconds,
                                    busy_seconds=busy_seconds)
                       for i in range(first, first + sims)]

    @property
    def received(self) -> list[dict[str, Any]]:
        return self.network.received

    def modem(self, name: str) -> VirtualModem:
        for modem in self.modems:
            if name in (modem.name, modem.iccid, modem.device):
                return modem
        raise KeyError(name)

    def devices(self) -> list[tuple[str, str]]:
        return [(modem.name, modem.device) for modem in self.modems]

    def start(self) -> "Emulator":
        for modem in self.modems:
            modem.start()
        return self

    def stop(self) -> None:
        for modem in self.modems:
            modem.stop()

    def __enter__(self) -> "Emulator":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def control(emulator: Emulator, command: dict[str, Any]) -> dict[str, Any]:
    """One human control command (a JSON object from stdin) applied to one modem."""
    try:
        modem = emulator.modem(command["sim"])
        if "inbound" in command:
            inbound = command["inbound"]
            indexes = modem.inject_inbound(inbound["from"], inbound["text"], parts_order=inbound.get("parts_order"),
                                           duplicate=inbound.get("duplicate"))
            return {"ok": True, "stored": indexes}
        if "emit" in command:
            lines = command["emit"]
            modem.emit(*([lines] if isinstance(lines, str) else lines))
        if "signal" in command:
            modem.set_signal(int(command["signal"]))
        if "registration" in command:
            modem.set_registration(int(command["registration"]))
        if "pin" in command:
            modem.set_pin_state(command["pin"])
        if "credit" in command:
            modem.credit = float(command["credit"])
        if "part_price" in command:
            modem.part_price = float(command["part_price"])
        if "fail_next" in command:
            modem.fail_next(*command["fail_next"])
        if "silence" in command:
            modem.silence(command["silence"])
        if "reports" in command:
            modem.script_reports(*command["reports"])
        for flag in ("hang_prompt", "hang_after_pdu", "fill_store", "vanish"):
            if command.get(flag):
                getattr(modem, flag)()
        return {"ok": True}
    except Exception as error:  # noqa: BLE001 - reported back to the human, the emulator keeps running
        return {"ok": False, "error": f"{type(error).__name__}: {error}"}


def _hilink() -> Any:
    from .hilink_emulator import HilinkDevice

    return HilinkDevice(name="emu-hilink")


def _android() -> Any:
    from .android_emulator import AndroidPhone

    return AndroidPhone(name="emu-android")


# `--network`: a HiLink stick and an Android phone, as HTTP servers on 127.0.0.1 (their modules)
NETWORK_DEVICES: dict[str, Callable[[], Any]] = {"hilink": _hilink, "android": _android}


def main(argv: Sequence[str] | None = None, *,
         register: Callable[[list[tuple[str, str]]], None] | None = None) -> int:
    """`sandesh emulator`. Registration of the modems with Sandesh needs the project's database
    code, so the caller wires it: it passes `register`, called with Emulator.devices() when
    --register is given."""
    p = argparse.ArgumentParser(prog="sandesh emulator", description="Virtual GSM modems on pseudo-terminals.")
    p.add_argument("--sims", type=int, default=1)
    p.add_argument("--register", action="store_true", help="register the modems with Sandesh")
    p.add_argument("--phones-log", help="append what the phones received, as JSON lines")
    p.add_argument("--report-delay", type=float, default=0.2, help="seconds before a status report")
    p.add_argument("--store-capacity", type=int, default=20)
    p.add_argument("--seed", type=int)
    p.add_argument("--profile", default="3gpp", help="device families, in turn: " + ", ".join(PROFILES))
    p.add_argument("--cmgs-seconds", type=float, help="the network's time to accept a part (default: the profile's)")
    p.add_argument("--network", default="", help="devices on the network beside the modems: hilink, android")
    args = p.parse_args(argv)
    profiles = args.profile.split(",")
    unknown = [name for name in profiles if name not in PROFILES]
    if unknown:
        p.error(f"no profile {', '.join(unknown)}: choose from {', '.join(PROFILES)}")

    stopping = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stopping.set())
    network = [name for name in args.network.split(",") if name]
    if set(network) - set(NETWORK_DEVICES):
        p.error(f"--network: choose from {', '.join(NETWORK_DEVICES)}")
    with Emulator(args.sims, args.phones_log, args.report_delay, store_capacity=args.store_capacity,
                  seed=args.seed, profiles=profiles, cmgs_seconds=args.cmgs_seconds) as emulator, \
            contextlib.ExitStack() as devices:
        on_network = [(f"emu-{name}", devices.enter_context(NETWORK_DEVICES[name]())) for name in network]
        if args.register:  # before the devices are printed, so a reader of them finds the SIMs
            if register is None:
                print("--register: no registration hook wired; modems not registered", file=sys.stderr)
            else:
                register(emulator.devices() + [(name, device.port_url()) for name, device in on_network])
        for modem in emulator.modems:
            print(json.dumps({"name": modem.name, "device": modem.device, "iccid": modem.iccid,
                              "imsi": modem.imsi, "profile": modem.profile.name}), flush=True)
        for name, device in on_network:
            print(json.dumps({"name": name, "device": device.url, "kind": name.removeprefix("emu-")}), flush=True)

        def read_commands(lines: Iterable[str]) -> None:
            for line in lines:
                if line.strip():
                    try:
                        reply = control(emulator, json.loads(line))
                    except json.JSONDecodeError as error:
                        reply = {"ok": False, "error": f"not JSON: {error}"}
                    print(json.dumps(reply, ensure_ascii=False), flush=True)

        threading.Thread(target=read_commands, args=(sys.stdin,), daemon=True).start()
        while not stopping.wait(0.5):
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
