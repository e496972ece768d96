"""What a modem is and which modes Sandesh uses with it, learned when its port opens
(docs/operations.md, "Modems").

Real devices differ from 3GPP TS 27.005/27.007, so the driver asks rather than assumes:

- who made it (AT+CGMI, AT+CGMM, AT+CGMR), for what is known of its family (FAMILIES);
- whether the SIM is ready, entering its PIN when it asks for one, but never a PIN it refused
  before (three wrong tries lock a SIM);
- which message stores it has (AT+CPMS=?) and which indications it can give (AT+CNMI=?). It
  picks status reports delivered directly (`+CDS`) where it can, else stored and announced
  (`+CDSI`, read with AT+CMGR); replies stored and announced (`+CMTI`), else stored and found by
  polling the store (AT+CMGL) every heartbeat.

Busy answers right after power-up (SIM busy, "init in progress") are waited out with backoff;
they are not failures.  Every other failure names the step, the command and the device's answer,
which `sandesh sim probe` prints.
"""
from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass, field
from typing import Callable, Iterable, Iterator, TypeVar

from sandesh.domain.pdu import pack_gsm7, unpack_gsm7
from sandesh.domain.sim import PIN, SIM_FAULT

from .modem import CmeError, CmsError, CommandTimeout, Modem, ModemError, PortGone, Refused

DIRECT, STORED, NONE = "direct", "stored", "none"   # how status reports reach us
INDICATED, POLLED = "indicated", "polled"           # how we learn that a reply was stored

T = TypeVar("T")

BUSY_FOR = 30.0  # seconds of busy answers waited out per command after power-up
# TS 27.007 §9.2: CME 14 SIM busy; TS 27.005 §3.2.5: CMS 314 SIM busy; 512 and 515 are the
# manufacturer codes for "not ready yet" / "please wait, init in progress" (Quectel, SIMCom, Cinterion).
BUSY_CME, BUSY_CMS = {"14", "515", "SIM busy"}, {314, 512, 515}
WRONG_PIN_CME = {"16", "incorrect password"}          # TS 27.007 §9.2.1



@dataclass(frozen=True)
class Family:
    """What is known of a family of devices, by the manufacturer it names in AT+CGMI."""
    name: str
    iccid: str = "AT+CCID"           # the command that reads the ICCID, before the standard AT+CRSM
    cpin_omits_ok: bool = False      # gammu's F_CPIN_NO_OK: no final result after +CPIN:
    encoded_ussd: bool = False       # gammu's F_ENCODED_USSD: USSD strings packed 7-bit, in hex


# Sources: gammu's libgammu/gsmphones.c and include/gammu-info.h (feature flags per model), and
# each vendor's AT command manual for its ICCID command.
FAMILIES = (
    Family("huawei", iccid="AT^ICCID?", encoded_ussd=True),
    Family("wavecom", cpin_omits_ok=True),
    Family("sierra", cpin_omits_ok=True),
    Family("quectel", iccid="AT+QCCID"),
    Family("simcom"),
    Family("cinterion", iccid="AT^SCID"),
    Family("siemens", iccid="AT^SCID"),
    Family("telit", iccid="AT#CCID"),
    Family("zte", iccid="AT+ZGETICCID"),
)
GENERIC = Family("generic")


def family_of(manufacturer: str | None) -> Family:
    name = (manufacturer or "").lower()
    return next((f for f in FAMILIES if f.name in name), GENERIC)


@dataclass(frozen=True)
class Device:
    """The device behind a port and the modes chosen for it."""
    manufacturer: str | None
    model: str | None
    firmware: str | None
    iccid: str | None
    imsi: str | None
    store: str           # the message store read, written and received into (AT+CPMS)
    cnmi: str            # the AT+CNMI values the device took, e.g. "2,1,0,1,0"
    reports: str         # DIRECT, STORED or NONE
    inbound: str         # INDICATED or POLLED
    family: Family = field(default=GENERIC, compare=False)

    @property
    def polls(self) -> bool:
        """Whether the store must be read every heartbeat: no announcement comes for what lands there."""
        return self.inbound == POLLED or self.reports == STORED

    def ussd_request(self, code: str) -> str:
        """A USSD code as this device takes it: packed 7-bit in hex for a family that packs."""
        return pack_gsm7(code) if self.family.encoded_ussd else code

    def ussd_text(self, raw: str, dcs: int | None) -> str:
        """The text of a USSD answer: UCS-2 in hex (DCS 72, or a device that says 15 but sends it:
        Quectel M35 in gammu's tests), packed 7-bit in hex where the family packs, else as it is."""
        if re.fullmatch(r"(?:[0-9A-Fa-f]{2}){4,}", raw):
            if dcs == 72 or (len(raw) % 4 == 0 and raw[:2] == "00"):
                return bytes.fromhex(raw).decode("utf-16-be", "replace")
            if self.family.encoded_ussd:
                return unpack_gsm7(raw)
        return raw

    def learned(self) -> dict[str, str | None]:
        """What the log keeps of it (the identity of the SIM is kept apart: Sim.identify)."""
        kept = asdict(self)
        for name in ("iccid", "imsi", "family"):
            kept.pop(name)
        return kept


class StepFailed(ModemError):
    """Initialisation stopped at `step`: the command and the device's answer say why."""

    def __init__(self, step: str, command: str, cause: str, answer: list[str] | None = None):
        super().__init__(f"{step}: {cause}", answer)
        self.step, self.command = step, command


class SimNotReady(ModemError):
    """The SIM cannot be used until an operator acts: no SIM, a PIN needed or refused, a PUK.
    `kind` is the quarantine it gets: PIN for a PIN needed or refused (a new PIN ends it),
    SIM_FAULT for the rest."""

    def __init__(self, kind: str, reason: str, answer: list[str] | None = None):
        super().__init__(reason, answer)
        self.kind = kind


def busy(error: ModemError) -> bool:
    if isinstance(error, CmeError):
        return error.code in BUSY_CME
    return isinstance(error, CmsError) and error.code in BUSY_CMS


class Dialogue:
    """The modem's commands, each with busy answers waited out and failures named by step."""

    def __init__(self, modem: Modem, busy_for: float = BUSY_FOR, sleep: Callable[[float], None] = time.sleep):
        self.modem, self.busy_for, self.sleep = modem, busy_for, sleep

    def ask(self, command: str, *, refusal_is_busy: bool = False, **options: object) -> list[str]:
        """The answer; busy answers (and plain refusals, with `refusal_is_busy`) are asked again
        with backoff for up to `busy_for` seconds."""
        deadline, delay = time.monotonic() + self.busy_for, 0.25
        while True:
            try:
                return self.modem.command(command, **options)
            except (CmeError, CmsError, Refused) as error:
                waiting = busy(error) or (refusal_is_busy and isinstance(error, Refused))
                if not waiting or time.monotonic() + delay > deadline:
                    raise
            self.sleep(delay)
            delay = min(delay * 2, 4.0)

    def must(self, step: str, command: str, **options: object) -> list[str]:
        try:
            return self.ask(command, **options)  # type: ignore[arg-type]
        except PortGone:
            raise
        except ModemError as error:
            raise StepFailed(step, command, str(error), error.answer) from error

    def maybe(self, command: str, **options: object) -> list[str] | None:
        """The answer, or None when the device does not take the command."""
        try:
            return self.ask(command, **options)
        except (Refused, CmeError, CmsError):
            return None


def negotiate(modem: Modem, pin: str | None = None, *, pin_refused: bool = False,
              busy_for: float = BUSY_FOR) -> Device:
    """Bring the modem to the state the dispatcher needs and say what it is."""
    talk = Dialogue(modem, busy_for)
    try:
        modem.sync()
    except CommandTimeout as error:
        raise StepFailed("the modem answers", "AT", "no answer to AT: wrong port or baud rate, or the device hangs",
                         error.answer) from error
    talk.maybe("ATE0")
    talk.maybe("AT+CMEE=1")
    made = maker(talk, firmware=True)
    family = made.family
    if family.cpin_omits_ok:
        modem.omits_final.add("AT+CPIN?")
    unlock(talk, pin, pin_refused)
    # SIMCom answers SMS commands ERROR until it prints "SMS Ready" (emulator profile "simcom").
    talk.must("PDU mode", "AT+CMGF=0", refusal_is_busy=True)
    store = _choose_store(talk)
    acks = _needs_acks(talk)
    smsc = " ".join(talk.must("service centre", "AT+CSCA?"))
    if not re.search(r'\+CSCA: ?"\+?\d{3,}"', smsc):
        raise StepFailed("service centre", "AT+CSCA?", f"no SMS service centre is set on the SIM ({smsc or 'empty'})",
                         [smsc])
    values = _choose_indications(talk, acks)
    mode, mt, _, ds, _ = values
    reports = DIRECT if ds == 1 and mode else STORED if ds == 2 else NONE
    inbound = INDICATED if mt == 1 and mode else POLLED
    return Device(manufacturer=made.manufacturer, model=made.model, firmware=made.firmware,
                  iccid=sim_iccid(talk, family), imsi=sim_imsi(talk), store=store,
                  cnmi=",".join(map(str, values)), reports=reports, inbound=inbound, family=family)


# The SIM and its PIN

def unlock(talk: Dialogue, pin: str | None, pin_refused: bool) -> None:
    """Until AT+CPIN? answers READY; the PIN is entered once, and never one the SIM refused."""
    state = pin_state(talk)
    if state == "SIM PIN":
        if pin is None:
            raise SimNotReady(PIN, "the SIM asks for its PIN: set it with `sandesh sim update SIM --pin NNNN`")
        if pin_refused:
            raise SimNotReady(PIN, "the SIM refused the PIN set for it, which is not tried again (3 wrong tries lock "
                                   "a SIM): set the right one with `sandesh sim update SIM --pin NNNN`")
        try:
            talk.ask(f'AT+CPIN="{pin}"')
        except (CmeError, Refused) as error:
            if isinstance(error, CmeError) and error.code not in WRONG_PIN_CME:
                raise StepFailed("SIM PIN", 'AT+CPIN="****"', str(error), error.answer) from error
            raise SimNotReady(PIN, "the SIM refused its PIN (not tried again: 3 wrong tries lock a SIM); set the "
                                   "right one with `sandesh sim update SIM --pin NNNN`", error.answer) from error
        deadline = time.monotonic() + talk.busy_for
        while (state := pin_state(talk)) != "READY" and time.monotonic() < deadline:
            talk.sleep(0.5)
    if state == "READY":
        return
    if "PUK" in state:
        raise SimNotReady(SIM_FAULT, f"the SIM is locked ({state}) after wrong PINs: unlock it in a phone with its PUK")
    raise SimNotReady(SIM_FAULT, f"SIM not ready: {state}")


def pin_state(talk: Dialogue) -> str:
    """READY, SIM PIN, SIM PUK, ..., or what the error says ("no SIM" for CME 10)."""
    try:
        lines = talk.ask("AT+CPIN?", complete_on="+CPIN:")
    except CmeError as error:
        if error.code in ("10", "SIM not inserted"):
            return "no SIM in the modem (+CME ERROR: 10)"
        return str(error)
    except (Refused, CmsError) as error:
        return str(error)
    answer = next((line for line in lines if line.startswith("+CPIN:")), None)
    return answer.split(":", 1)[1].strip() if answer else f"no +CPIN: in the answer ({' '.join(lines) or 'empty'})"


# Stores and indications

STORE_PREFERENCE = ("SM", "ME", "MT")


def parse_lists(lines: list[str] | None, prefix: str) -> list[list[str]] | None:
    """`+CPMS: ("SM","ME"),("SM","ME"),("SM")` -> [["SM","ME"], ["SM","ME"], ["SM"]]; Wavecom's
    `+CPMS: (("SM","BM","SR"),("SM"))` -> [["SM","BM","SR"], ["SM"]]."""
    line = next((l for l in lines or [] if l.startswith(prefix)), None)
    if line is None:
        return None
    body = line[len(prefix):].strip()
    groups = re.findall(r"\(([^()]*)\)", body) or body.split(",")
    return [[item.strip().strip('"') for item in group.split(",") if item.strip()] for group in groups]


def parse_ranges(lines: list[str] | None, prefix: str) -> list[set[int]] | None:
    """`+CNMI: (0-2),(0-3),(0,2),(0-2),(0,1)` -> [{0,1,2}, {0,1,2,3}, {0,2}, {0,1,2}, {0,1}]."""
    lists = parse_lists(lines, prefix)
    if lists is None:
        return None
    ranges = []
    for group in lists:
        values: set[int] = set()
        for item in group:
            low, _, high = item.partition("-")
            if low.strip().isdigit() and (not high or high.strip().isdigit()):
                values.update(range(int(low), int(high or low) + 1))
        ranges.append(values)
    return ranges


def store_candidates(options: list[list[str]] | None) -> list[str]:
    """The stores to try, best first: one the device lists for reading, writing and receiving."""
    if not options:
        return list(STORE_PREFERENCE)
    usable = [s for s in STORE_PREFERENCE if all(s in group for group in options[:3])]
    return usable or [s for s in STORE_PREFERENCE if s in options[0]] or list(options[0][:1])


def _first_taken(talk: Dialogue, step: str, name: str, tries: Iterable[tuple[str, T]]) -> T:
    """The value of the first (command, value) the device takes; else the step fails with every answer."""
    tried: list[str] = []
    for command, value in tries:
        try:
            talk.ask(command)
            return value
        except (Refused, CmeError, CmsError) as error:
            tried.append(f"{command}: {error}")
    raise StepFailed(step, name, f"the device took no {name} setting Sandesh can use ({'; '.join(tried)})")


def _choose_store(talk: Dialogue) -> str:
    options = parse_lists(talk.maybe("AT+CPMS=?"), "+CPMS:")
    given = min(3, len(options)) if options else 3  # as many stores as the device lists groups (Wavecom: 2)

    def tries() -> Iterator[tuple[str, str]]:
        for store in store_candidates(options):
            quoted = f'"{store}"'
            for command in dict.fromkeys(("AT+CPMS=" + ",".join([quoted] * given), f"AT+CPMS={quoted}")):
                yield command, store

    return _first_taken(talk, "message store", "AT+CPMS", tries())


def _needs_acks(talk: Dialogue) -> bool:
    """Whether direct indications must be acknowledged (AT+CSMS service 1 that cannot be set to 0)."""
    answer = " ".join(talk.maybe("AT+CSMS?") or [])
    match = re.search(r"\+CSMS: ?(\d)", answer)
    if not match or match.group(1) == "0":
        return False
    return talk.maybe("AT+CSMS=0") is None


# (mt, ds) best first: replies announced, reports direct; then stored reports; then polling.
INDICATION_PREFERENCE = ((1, 1), (1, 2), (0, 1), (0, 2), (1, 0), (0, 0))


def cnmi_candidates(supported: list[set[int]] | None, direct_reports: bool = True) -> list[tuple[int, ...]]:
    """AT+CNMI=<mode>,<mt>,<bm>,<ds>,<bfr> settings to try, best first, within what the device
    says it supports (everything, when it does not say).  Replies are never delivered directly
    (mt 2/3 would lose them in a crash); with direct reports forbidden (acknowledgements needed),
    ds 1 is left out."""
    def allowed(position: int, value: int) -> bool:
        return supported is None or len(supported) <= position or not supported[position] or value in supported[position]

    def lowest(position: int, preferred: int) -> int:
        if allowed(position, preferred):
            return preferred
        return min(supported[position])  # type: ignore[index]

    bm, bfr = lowest(2, 0), lowest(4, 0)
    found: list[tuple[int, ...]] = []
    for mt, ds in INDICATION_PREFERENCE:
        if (ds == 1 and not direct_reports) or not (allowed(1, mt) and allowed(3, ds)):
            continue
        found += [(mode, mt, bm, ds, bfr) for mode in (2, 1, 3) if allowed(0, mode)]
    if allowed(0, 0) and allowed(1, 0):  # no indications at all: the store is polled, reports stored if it can
        found += [(0, 0, bm, ds, bfr) for ds in (2, 0) if allowed(3, ds)]
    return found


def _choose_indications(talk: Dialogue, acks: bool) -> tuple[int, ...]:
    supported = parse_ranges(talk.maybe("AT+CNMI=?"), "+CNMI:")
    candidates = cnmi_candidates(supported, direct_reports=not acks)[:8]
    return _first_taken(talk, "indications", "AT+CNMI",
                        (("AT+CNMI=" + ",".join(map(str, values)), values) for values in candidates))


# Identity: the one way every caller reads what a device and its SIM are (`negotiate`, a
# dispatcher; ports.py, a port's ICCID; sims.py, `sandesh sim discover`).

@dataclass(frozen=True)
class Maker:
    manufacturer: str | None
    model: str | None
    firmware: str | None
    family: Family


def maker(talk: Dialogue, firmware: bool = False) -> Maker:
    """Who made the device and which model it is (AT+CGMI, AT+CGMM; AT+CGMR too with
    `firmware`), and so the family whose quirks it has."""
    manufacturer = _info(talk.maybe("AT+CGMI"), "AT+CGMI")
    model = _info(talk.maybe("AT+CGMM"), "AT+CGMM")
    return Maker(manufacturer, model, _info(talk.maybe("AT+CGMR"), "AT+CGMR") if firmware else None,
                 family_of(manufacturer))


def sim_imsi(talk: Dialogue) -> str | None:
    """The SIM's IMSI (AT+CIMI); the SIM must be unlocked."""
    return _digits(" ".join(talk.maybe("AT+CIMI") or []))


def _info(lines: list[str] | None, command: str) -> str | None:
    """The text of AT+CGMI/CGMM/CGMR, without the prefix some devices put before it."""
    prefix = "+" + command[3:] + ":"
    kept = [re.sub(rf"^({re.escape(prefix)}|Manufacturer:|Model:|Revision:)\s*", "", l, flags=re.IGNORECASE)
            .strip().strip('"') for l in lines or [] if not l.startswith("+") or l.upper().startswith(prefix)]
    text = " ".join(k for k in kept if k)
    return text[:64] or None


def sim_iccid(talk: Dialogue, family: Family) -> str | None:
    """The SIM's ICCID: the vendor's command first, then the standard read of EF_ICCID (TS 27.007
    §8.18 AT+CRSM, file 2FE2), whose digits come nibble-swapped as stored on the SIM."""
    for command in dict.fromkeys((family.iccid, "AT+CCID")):
        found = iccid_of(" ".join(talk.maybe(command) or []))
        if found:
            return found
    answer = " ".join(talk.maybe("AT+CRSM=176,12258,0,0,10") or [])
    match = re.search(r'\+CRSM: ?(\d+),\d+,"?([0-9A-Fa-f]{20})', answer)
    return iccid_of(match.group(2)) if match and match.group(1) == "144" else None


def iccid_of(text: str) -> str | None:
    """An ICCID from an answer.  Every ICCID starts 89 (ITU-T E.118); read as stored on the SIM
    (AT+CRSM, some vendors' commands) its digits come in swapped pairs, starting 98."""
    match = re.search(r"[0-9]{6,}[0-9Ff]*", text)
    if not match:
        return None
    digits = match.group(0)
    if digits.startswith("98") and len(digits) % 2 == 0:
        digits = "".join(digits[i + 1] + digits[i] for i in range(0, len(digits), 2))
    return digits.rstrip("Ff") or None


def _digits(text: str) -> str | None:
    match = re.search(r"\d{6,}", text)
    return match.group(0) if match else None
