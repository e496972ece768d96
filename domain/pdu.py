"""SMS PDU codec: SMS-SUBMIT, SMS-DELIVER and SMS-STATUS-REPORT in PDU mode.

Layouts: 3GPP TS 23.040 section 9.2.2; alphabets and packing: 3GPP TS 23.038;
`AT+CMGS=<n>`: 3GPP TS 27.005 section 3.5.1. Every PDU string here starts with
the SMSC address (a single "00" octet means the SIM's default SMSC).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from sandesh.domain.segments import (GSM7, GSM7_BASIC, GSM7_EXTENSION, PART_CAPACITY,
                             PART_CAPACITY_16BIT, UCS2, encoding_of, split)

DATA8 = "8-bit"
ESC = 0x1B
_SEPTET = {c: i for i, c in enumerate(GSM7_BASIC) if i != ESC}
_EXTENSION_CHAR = {code: c for c, code in GSM7_EXTENSION.items()}
_MTI_DELIVER, _MTI_SUBMIT, _MTI_STATUS_REPORT = 0b00, 0b01, 0b10
_INTERNATIONAL, _UNKNOWN, _ALPHANUMERIC = 0x91, 0x81, 0xD0
_SEMI_OCTETS = str.maketrans("abcde", "*#abc")


class PduError(ValueError):
    """A PDU that is malformed, truncated or of a kind this codec does not handle."""


@dataclass(frozen=True)
class SubmitPart:
    pdu: str
    length: int  # the <n> of AT+CMGS=<n>: TPDU octets, the SMSC octet excluded
    text: str


@dataclass(frozen=True)
class Submit:
    to: str  # as given to encode_submit: digits without '+'
    text: str
    encoding: str
    status_report: bool
    message_reference: int
    reference: int | None  # concatenation reference; None, total 1, sequence 1 when single
    total: int
    sequence: int
    validity_minutes: int | None  # None unless the VP is relative


@dataclass(frozen=True)
class Deliver:
    sender: str
    text: str
    encoding: str
    timestamp: datetime
    reference: int | None
    total: int
    sequence: int
    smsc: str | None


@dataclass(frozen=True)
class StatusReport:
    message_reference: int
    recipient: str
    status: int
    outcome: str
    final: bool
    service_centre_time: datetime
    discharge_time: datetime
    smsc: str | None


# --- GSM 7-bit alphabet and packing (TS 23.038 sections 6.1.2.1 and 6.2.1) ---

def _septets(text: str) -> list[int]:
    out: list[int] = []
    for char in text:
        if char in GSM7_EXTENSION:
            out += (ESC, GSM7_EXTENSION[char])
        elif char in _SEPTET:
            out.append(_SEPTET[char])
        else:
            raise ValueError(f"{char!r} is not in the GSM 7-bit default alphabet")
    return out


def _text_of_septets(septets: list[int]) -> str:
    chars, escaped = [], False
    for s in septets:
        if escaped:
            # 23.038 6.2.1.1: a code missing from the extension table shows the basic character.
            chars.append(_EXTENSION_CHAR.get(s, " " if s == ESC else GSM7_BASIC[s]))
            escaped = False
        elif s == ESC:
            escaped = True
        else:
            chars.append(GSM7_BASIC[s])
    return "".join(chars)


def _pack(septets: list[int], fill_bits: int = 0) -> bytes:
    bits = sum(s << (fill_bits + 7 * i) for i, s in enumerate(septets))
    return bits.to_bytes((fill_bits + 7 * len(septets) + 7) // 8, "little")


def _unpack(data: bytes, count: int, fill_bits: int = 0) -> list[int]:
    bits = int.from_bytes(data, "little") >> fill_bits
    return [(bits >> (7 * i)) & 0x7F for i in range(count)]


def pack_gsm7(text: str) -> str:
    """Text as packed GSM 7-bit septets in hex, as devices that pack USSD strings send and answer
    them (gammu's F_ENCODED_USSD).  Seven spare bits at the end are a CR, not an `@`
    (TS 23.038 §6.1.2.3.1)."""
    septets = _septets(text)
    if len(septets) % 8 == 7:
        septets.append(0x0D)
    return _pack(septets).hex().upper()


def unpack_gsm7(packed: str) -> str:
    """The text of packed GSM 7-bit septets in hex; ValueError when it is not hex."""
    data = bytes.fromhex(packed)
    septets = _unpack(data, len(data) * 8 // 7)
    if septets and len(septets) % 8 == 0 and septets[-1] in (0x0D, 0x00):
        septets.pop()  # the padding of the last octet's seven spare bits
    return _text_of_septets(septets)


# --- Reading ---

class _Reader:
    def __init__(self, pdu: str):
        try:
            self.data = bytes.fromhex(pdu.strip())
        except (ValueError, AttributeError) as error:
            raise PduError(f"PDU is not a hex string: {pdu!r}") from error
        self.pos = 0

    def take(self, n: int, what: str) -> bytes:
        if self.pos + n > len(self.data):
            raise PduError(f"PDU truncated: {what} needs {n} octet(s) at octet {self.pos}, "
                           f"only {len(self.data) - self.pos} left")
        self.pos += n
        return self.data[self.pos - n:self.pos]

    def octet(self, what: str) -> int:
        return self.take(1, what)[0]


def _digits(data: bytes, count: int) -> str:
    swapped = "".join(f"{b & 0x0F:x}{b >> 4:x}" for b in data)[:count].rstrip("f")
    return swapped.translate(_SEMI_OCTETS)  # 23.040 9.1.2.3: 1010 '*', 1011 '#', then a-c


def _smsc(reader: _Reader) -> str | None:
    size = reader.octet("SMSC length")  # in octets, the type-of-address octet included
    if size == 0:
        return None
    data = reader.take(size, "SMSC address")
    return _digits(data[1:], 2 * (size - 1))


def _address(reader: _Reader, what: str) -> tuple[int, str]:
    semi_octets = reader.octet(f"{what} length")  # 23.040 9.1.2.5: useful semi-octets
    toa = reader.octet(f"{what} type")
    data = reader.take((semi_octets + 1) // 2, what)
    if toa & 0x70 == _ALPHANUMERIC & 0x70:
        return toa, _text_of_septets(_unpack(data, semi_octets * 4 // 7))
    return toa, _digits(data, semi_octets)


def _bcd(value: int) -> int:
    return (value % 10) << 4 | value // 10


def _timestamp(reader: _Reader, what: str) -> datetime:
    raw = reader.take(7, what)  # 23.040 9.2.3.11: swapped BCD, zone in quarter hours
    if any(b & 0x0F > 9 or b >> 4 > 9 for b in raw[:6]) or raw[6] >> 4 > 9:
        raise PduError(f"{what} is not BCD: {raw.hex().upper()}")
    year, month, day, hour, minute, second = ((b & 0x0F) * 10 + (b >> 4) for b in raw[:6])
    quarters = (raw[6] & 0x07) * 10 + (raw[6] >> 4)
    zone = timedelta(minutes=15 * quarters) * (-1 if raw[6] & 0x08 else 1)
    try:
        return datetime(2000 + year, month, day, hour, minute, second, tzinfo=timezone(zone))
    except ValueError as error:
        raise PduError(f"{what} is not a valid time: {raw.hex().upper()}") from error


def _alphabet(dcs: int) -> str:
    group = dcs >> 4  # 23.038 section 4
    if group <= 0x7:
        if dcs & 0x20:
            raise PduError(f"compressed user data (DCS {dcs:02X}) is not supported")
        return (GSM7, DATA8, UCS2, GSM7)[(dcs >> 2) & 0x3]
    if group == 0xE:
        return UCS2
    if group == 0xF:
        return DATA8 if dcs & 0x04 else GSM7
    return GSM7  # 0xC, 0xD, and reserved groups, which "shall be assumed" GSM 7-bit


def _user_data(reader: _Reader, udhi: bool, encoding: str) -> tuple[str, int | None, int, int]:
    udl = reader.octet("user data length")
    size = (udl * 7 + 7) // 8 if encoding == GSM7 else udl
    data = reader.take(size, "user data")
    reference, total, sequence, header_octets = None, 1, 1, 0
    if udhi:
        header_octets = 1 + data[0] if data else 1
        if header_octets > size:
            raise PduError("user data header longer than the user data")
        reference, total, sequence = _concatenation(data[1:header_octets])
    if encoding == GSM7:
        fill_bits = -8 * header_octets % 7  # 23.040 9.2.3.24: text starts on a septet boundary
        count = udl - (8 * header_octets + fill_bits) // 7
        if count < 0:
            raise PduError("user data length shorter than its header")
        text = _text_of_septets(_unpack(data[header_octets:], count, fill_bits))
    else:
        body = data[header_octets:]
        if encoding == UCS2 and len(body) % 2:
            raise PduError("UCS-2 user data has an odd number of octets")
        # "replace": a sender that splits a surrogate pair across parts must not make text unstorable
        text = body.decode("utf-16-be", "replace") if encoding == UCS2 else body.decode("latin-1")
    return text, reference, total, sequence


def _concatenation(header: bytes) -> tuple[int | None, int, int]:
    found, i = (None, 1, 1), 0
    while i < len(header):
        if i + 2 > len(header) or i + 2 + header[i + 1] > len(header):
            raise PduError(f"malformed user data header: {header.hex().upper()}")
        iei, body = header[i], header[i + 2:i + 2 + header[i + 1]]
        i += 2 + len(body)
        # 23.040 9.2.3.24.1: an IE whose sequence is 0 or above the total is ignored
        if iei == 0x00 and len(body) == 3 and 1 <= body[2] <= body[1]:
            found = (body[0], body[1], body[2])
        elif iei == 0x08 and len(body) == 4 and 1 <= body[3] <= body[2]:
            found = (body[0] << 8 | body[1], body[2], body[3])
    return found


def _start(pdu: str, mti: int, kind: str) -> tuple[_Reader, str | None, int]:
    reader = _Reader(pdu)
    smsc = _smsc(reader)
    first = reader.octet("first octet")
    if first & 0x03 != mti:
        raise PduError(f"not an {kind}: message type indicator {first & 0x03:02b}")
    return reader, smsc, first


def decode_submit(pdu: str) -> Submit:
    reader, _, first = _start(pdu, _MTI_SUBMIT, "SMS-SUBMIT")
    message_reference = reader.octet("message reference")
    _, to = _address(reader, "destination address")
    reader.octet("protocol identifier")
    encoding = _alphabet(reader.octet("data coding scheme"))
    vpf = (first >> 3) & 0x3  # 23.040 9.2.3.3: 00 none, 10 relative, 01 enhanced, 11 absolute
    vp = reader.take((0, 7, 1, 7)[vpf], "validity period")
    text, reference, total, sequence = _user_data(reader, bool(first & 0x40), encoding)
    return Submit(to=to, text=text, encoding=encoding, status_report=bool(first & 0x20),
                  message_reference=message_reference, reference=reference, total=total,
                  sequence=sequence, validity_minutes=_vp_minutes(vp[0]) if vpf == 0b10 else None)


def decode_deliver(pdu: str) -> Deliver:
    reader, smsc, first = _start(pdu, _MTI_DELIVER, "SMS-DELIVER")
    toa, sender = _address(reader, "originating address")
    reader.octet("protocol identifier")
    encoding = _alphabet(reader.octet("data coding scheme"))
    timestamp = _timestamp(reader, "service centre time stamp")
    text, reference, total, sequence = _user_data(reader, bool(first & 0x40), encoding)
    if toa & 0x70 == _INTERNATIONAL & 0x70:
        sender = "+" + sender
    return Deliver(sender=sender, text=text, encoding=encoding, timestamp=timestamp,
                   reference=reference, total=total, sequence=sequence, smsc=smsc)


def outcome_of(status: int) -> str:
    if not 0 <= status <= 0xFF:
        raise ValueError(f"TP-Status must be one octet, not {status}")
    # 23.040 9.2.3.15; 0x80-0xFF are reserved: treated as a final failure
    return "delivered" if status < 0x20 else "trying" if status < 0x40 else "failed"


def decode_status_report(pdu: str) -> StatusReport:
    reader, smsc, _ = _start(pdu, _MTI_STATUS_REPORT, "SMS-STATUS-REPORT")
    message_reference = reader.octet("message reference")
    _, recipient = _address(reader, "recipient address")
    service_centre_time = _timestamp(reader, "service centre time stamp")
    discharge_time = _timestamp(reader, "discharge time")
    status = reader.octet("status")  # optional TP-PI, PID, DCS and UD after it are ignored
    outcome = outcome_of(status)
    return StatusReport(message_reference=message_reference, recipient=recipient, status=status,
                        outcome=outcome, final=outcome != "trying",
                        service_centre_time=service_centre_time, discharge_time=discharge_time,
                        smsc=smsc)


def decode(pdu: str, *, inbound: bool = True):
    reader = _Reader(pdu)
    _smsc(reader)
    mti = reader.octet("first octet") & 0x03
    decoders = ({_MTI_DELIVER: decode_deliver, _MTI_STATUS_REPORT: decode_status_report} if inbound
                else {_MTI_SUBMIT: decode_submit})
    if mti not in decoders:
        raise PduError(f"unsupported {'inbound' if inbound else 'outbound'} message type {mti:02b}")
    return decoders[mti](pdu)


# --- Writing ---

def _vp_minutes(vp: int) -> int:
    # 23.040 9.2.3.12.1, relative format
    if vp <= 143:
        return (vp + 1) * 5
    if vp <= 167:
        return 12 * 60 + (vp - 143) * 30
    if vp <= 196:
        return (vp - 166) * 24 * 60
    return (vp - 192) * 7 * 24 * 60


def _relative_vp(minutes: int) -> int:
    for vp in range(256):
        if _vp_minutes(vp) >= minutes:
            return vp
    raise ValueError(f"validity of {minutes} minutes exceeds the 63 weeks a relative VP can say")


def validity_minutes(seconds_left: float, *, at_most: bool) -> int:
    """A validity a relative TP-VP can say (its smallest step is 5 minutes): the longest one
    not above `seconds_left` when `at_most` (an OTP's code must not outlive it; 5 minutes when
    less is left), else the shortest one not below it."""
    minutes = seconds_left / 60
    steps = [_vp_minutes(vp) for vp in range(256)]
    if at_most:
        return max([m for m in steps if m <= minutes], default=steps[0])
    return next((m for m in steps if m >= minutes), steps[-1])


def _phone(number: str, what: str) -> str:
    digits = number.removeprefix("+")
    if not digits.isdigit() or not digits.isascii() or len(digits) > 20:
        raise ValueError(f"{what} must be up to 20 digits, not {number!r}")
    return digits


def _semi_octets(digits: str) -> bytes:
    padded = digits + "F" * (len(digits) % 2)
    return bytes.fromhex("".join(padded[i + 1] + padded[i] for i in range(0, len(padded), 2)))


def _encode_address(number: str) -> bytes:
    if any(c.isalpha() for c in number):
        septets = _septets(number)
        if len(septets) > 11:
            raise ValueError(f"an alphanumeric address holds 11 septets at most: {number!r}")
        return bytes([(7 * len(septets) + 3) // 4, _ALPHANUMERIC]) + _pack(septets)
    digits = _phone(number, "address")
    toa = _INTERNATIONAL if number.startswith("+") else _UNKNOWN
    return bytes([len(digits), toa]) + _semi_octets(digits)


def _encode_smsc(smsc: str) -> bytes:
    if not smsc:
        return b"\x00"
    data = _semi_octets(_phone(smsc, "smsc"))
    return bytes([1 + len(data), _INTERNATIONAL]) + data


def _encode_timestamp(moment: datetime) -> bytes:
    offset = moment.utcoffset()
    if offset is None:
        raise ValueError("timestamps must be timezone-aware")
    quarters, rest = divmod(abs(int(offset.total_seconds())), 15 * 60)
    if rest or quarters > 79 or not 2000 <= moment.year <= 2099:
        raise ValueError(f"{moment} cannot be a TP time stamp (years 2000-2099, zone in quarter hours)")
    fields = (moment.year % 100, moment.month, moment.day, moment.hour, moment.minute, moment.second)
    return bytes(map(_bcd, fields)) + bytes([_bcd(quarters) | (0x08 if offset < timedelta(0) else 0)])


def _concatenation_header(reference: int, total: int, sequence: int, bits: int) -> bytes:
    if bits not in (8, 16):
        raise ValueError(f"reference_bits must be 8 or 16, not {bits}")
    if not 0 <= reference < 1 << bits:
        raise ValueError(f"reference {reference} does not fit in {bits} bits")
    if not 1 <= sequence <= total <= 255:
        raise ValueError(f"part {sequence} of {total} is not a valid concatenation")
    if bits == 8:
        return bytes([0x05, 0x00, 0x03, reference, total, sequence])
    return bytes([0x06, 0x08, 0x04, reference >> 8, reference & 0xFF, total, sequence])


def _encode_user_data(text: str, encoding: str, header: bytes) -> bytes:
    """UDL followed by the user data: 23.040 9.2.3.16 and 9.2.3.24."""
    if encoding == UCS2:
        data = header + text.encode("utf-16-be")
        return bytes([len(data)]) + data
    septets = _septets(text)
    fill_bits = -8 * len(header) % 7
    return bytes([(8 * len(header) + fill_bits) // 7 + len(septets)]) + header + _pack(septets, fill_bits)


def encode_submit(to: str, text: str, *, reference: int | None = None, reference_bits: int = 8,
                  validity_minutes: int = 24 * 60, status_report: bool = True) -> list[SubmitPart]:
    if reference_bits not in (8, 16):
        raise ValueError(f"reference_bits must be 8 or 16, not {reference_bits}")
    address = bytes([len(_phone(to, "to")), _INTERNATIONAL]) + _semi_octets(_phone(to, "to"))
    encoding = encoding_of(text)
    capacity = (PART_CAPACITY if reference_bits == 8 else PART_CAPACITY_16BIT)[encoding]
    parts = split(text, encoding=encoding, part_capacity=capacity)
    if len(parts) > 1 and reference is None:
        raise ValueError("a multipart message needs a concatenation reference")
    first = 0x01 | 0x10 | (0x20 if status_report else 0) | (0x40 if len(parts) > 1 else 0)
    vp = _relative_vp(validity_minutes)
    out = []
    for sequence, part in enumerate(parts, 1):
        header = (_concatenation_header(reference, len(parts), sequence, reference_bits)
                  if len(parts) > 1 else b"")
        tpdu = (bytes([first, 0x00]) + address + bytes([0x00, 0x08 if encoding == UCS2 else 0x00, vp])
                + _encode_user_data(part, encoding, header))
        out.append(SubmitPart(pdu="00" + tpdu.hex().upper(), length=len(tpdu), text=part))
    return out


def encode_deliver(sender: str, text: str, timestamp: datetime, *, reference: int | None = None,
                   total: int = 1, sequence: int = 1, reference_bits: int = 8,
                   smsc: str = "9779800000000") -> str:
    header = b""
    if total > 1:
        if reference is None:
            raise ValueError("a concatenated part needs a reference")
        header = _concatenation_header(reference, total, sequence, reference_bits)
    encoding = encoding_of(text)
    user_data = _encode_user_data(text, encoding, header)
    if len(user_data) > 1 + 140:
        raise ValueError("text does not fit one part: 140 octets of user data at most")
    tpdu = (bytes([0x44 if header else 0x04]) + _encode_address(sender)
            + bytes([0x00, 0x08 if encoding == UCS2 else 0x00]) + _encode_timestamp(timestamp)
            + user_data)
    return (_encode_smsc(smsc) + tpdu).hex().upper()


def encode_status_report(message_reference: int, recipient: str, status: int,
                         service_centre_time: datetime, discharge_time: datetime, *,
                         smsc: str = "9779800000000") -> str:
    if not 0 <= message_reference <= 0xFF or not 0 <= status <= 0xFF:
        raise ValueError("message_reference and status are single octets")
    digits = _phone(recipient, "recipient")
    tpdu = (bytes([0x06, message_reference, len(digits), _INTERNATIONAL]) + _semi_octets(digits)
            + _encode_timestamp(service_centre_time) + _encode_timestamp(discharge_time)
            + bytes([status]))
    return (_encode_smsc(smsc) + tpdu).hex().upper()
