"""SMS encoding choice and splitting into concatenated parts.

Alphabet: 3GPP TS 23.038 section 6.2.1 (default alphabet and default extension
table). Part sizes: 3GPP TS 23.040 section 9.2.3.24.1 - a concatenation UDH of
6 octets (8-bit reference) or 7 octets (16-bit reference) leaves 153/152
septets or 67/66 UCS-2 units of the 140-octet user data.
"""

from __future__ import annotations

from dataclasses import dataclass

GSM7 = "GSM-7"
UCS2 = "UCS-2"
MAX_SEGMENTS = 6

SINGLE_PART_CAPACITY = {GSM7: 160, UCS2: 70}
PART_CAPACITY = {GSM7: 153, UCS2: 67}  # 8-bit concatenation reference
PART_CAPACITY_16BIT = {GSM7: 152, UCS2: 66}  # 16-bit concatenation reference

# Index = septet value. 0x1B is ESC (the escape to the extension table), not a
# character: it is kept as "\x1b" only so that positions stay right.
GSM7_BASIC: str = (
    "@£$¥èéùìòÇ\nØø\rÅå"
    "Δ_ΦΓΛΩΠΨΣΘΞ\x1bÆæßÉ"
    " !\"#¤%&'()*+,-./"
    "0123456789:;<=>?"
    "¡ABCDEFGHIJKLMNO"
    "PQRSTUVWXYZÄÖÑÜ§"
    "¿abcdefghijklmno"
    "pqrstuvwxyzäöñüà"
)
ESC = 0x1B
assert len(GSM7_BASIC) == 128

# Each is sent as ESC + code, i.e. two septets.
GSM7_EXTENSION: dict[str, int] = {
    "\x0c": 0x0A, "^": 0x14, "{": 0x28, "}": 0x29, "\\": 0x2F,
    "[": 0x3C, "~": 0x3D, "]": 0x3E, "|": 0x40, "€": 0x65,
}

_BASIC = frozenset(GSM7_BASIC) - {chr(ESC)}
_GSM7 = _BASIC | frozenset(GSM7_EXTENSION)
_EXTENSION = frozenset(GSM7_EXTENSION)


def septet_length(char: str) -> int:
    if char in _BASIC:
        return 1
    if char in GSM7_EXTENSION:
        return 2
    raise ValueError(f"{char!r} is not in the GSM 7-bit default alphabet")


def _utf16_length(char: str) -> int:
    return 2 if ord(char) > 0xFFFF else 1  # surrogate pair outside the BMP


def encoding_of(text: str) -> str:
    return GSM7 if _GSM7.issuperset(text) else UCS2


def _units(text: str, encoding: str) -> int:
    """Septets (extension characters count two) or UTF-16 code units, without a loop in Python."""
    if encoding == GSM7:
        return len(text) + sum(text.count(c) for c in _EXTENSION.intersection(text))
    return len(text.encode("utf-16-le")) // 2


def _cost_function(encoding: str):
    if encoding == GSM7:
        return septet_length
    if encoding == UCS2:
        return _utf16_length
    raise ValueError(f"unknown encoding {encoding!r}")


def split(text: str, *, encoding: str | None = None,
          part_capacity: int | None = None) -> list[str]:
    encoding = encoding_of(text) if encoding is None else encoding
    cost = _cost_function(encoding)
    capacity = PART_CAPACITY[encoding] if part_capacity is None else part_capacity
    if capacity < 2:
        raise ValueError("part_capacity must leave room for a 2-unit character")
    if encoding == GSM7 and not _GSM7.issuperset(text):
        raise ValueError("text has characters outside the GSM 7-bit default alphabet")
    if _units(text, encoding) <= SINGLE_PART_CAPACITY[encoding]:
        return [text]
    costs = [cost(c) for c in text]
    # Greedy over whole code points: an escape pair or a surrogate pair is one
    # Python character here, so it can never straddle two parts.
    parts, start, used = [], 0, 0
    for i, n in enumerate(costs):
        if used + n > capacity:
            parts.append(text[start:i])
            start, used = i, 0
        used += n
    parts.append(text[start:])
    return parts


@dataclass(frozen=True)
class Segmentation:
    encoding: str
    parts: tuple[str, ...]
    units: int  # septets for GSM-7, UTF-16 code units for UCS-2

    @property
    def segments(self) -> int:
        return len(self.parts)


def segment(text: str) -> Segmentation:
    encoding = encoding_of(text)
    return Segmentation(encoding=encoding, parts=tuple(split(text, encoding=encoding)),
                        units=_units(text, encoding))
