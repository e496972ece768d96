"""What a send would be charged, without sending it (docs/api.md, "POST /v1/sms/preview"): the
segments and encoding come from the very `segment` a send is counted with (domain/segments.py)
and the cost from the same `cost` (domain/sending.py), so a preview cannot disagree with a send.

When a text is UCS-2 only because of a few characters, each is shown with its position and the
GSM-7 text that can stand in for it, so that the caller can send a third of the segments."""
from __future__ import annotations

from dataclasses import dataclass

from .segments import GSM7, MAX_SEGMENTS, PART_CAPACITY, SINGLE_PART_CAPACITY, UCS2, Segmentation, encoding_of, segment
from .sending import cost

# Characters that word processors and phones put in for plain ones; each has a GSM-7 stand-in.
REPLACEMENTS: dict[str, str] = {
    "\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'", "\u2032": "'",           # ‘ ’ ‚ ‛ ′
    "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u201f": '"', "\u2033": '"',           # “ ” „ ‟ ″
    "\u00ab": '"', "\u00bb": '"',                                                        # « »
    "\u2010": "-", "\u2011": "-", "\u2012": "-", "\u2013": "-", "\u2014": "-", "\u2015": "-",  # hyphens, dashes
    "\u2212": "-",                                                                       # minus sign
    "\u2026": "...",                                                                     # …
    "\u00a0": " ", "\u2002": " ", "\u2003": " ", "\u2009": " ", "\u202f": " ",           # no-break and thin spaces
    "\u2022": "-",                                                                       # •
}
FEW = 10  # up to this many characters outside GSM-7 are listed even when some have no stand-in


@dataclass(frozen=True)
class Ucs2Character:
    position: int             # index in the text, in Unicode code points from 0
    character: str
    replacement: str | None   # its GSM-7 stand-in, when one exists


@dataclass(frozen=True)
class Preview:
    segmentation: Segmentation
    cost: int
    characters: tuple[Ucs2Character, ...]  # empty unless the text is UCS-2 only because of a few characters
    gsm7: Segmentation | None = None       # the text with every one of them replaced, when each has a stand-in
    gsm7_text: str | None = None
    gsm7_cost: int | None = None

    @property
    def sendable(self) -> bool:
        return self.segmentation.segments <= MAX_SEGMENTS

    @property
    def characters_per_segment(self) -> int:
        """What one segment holds in this encoding: a single part more than each part of a split one."""
        capacity = SINGLE_PART_CAPACITY if self.segmentation.segments == 1 else PART_CAPACITY
        return capacity[self.segmentation.encoding]


def ucs2_characters(text: str) -> tuple[Ucs2Character, ...]:
    """The characters that make `text` UCS-2, when they are few (at most FEW) or each has a
    stand-in; otherwise none (a text in Devanagari is UCS-2 by nature, not by accident)."""
    if encoding_of(text) != UCS2:
        return ()
    found = [Ucs2Character(i, c, REPLACEMENTS.get(c)) for i, c in enumerate(text) if encoding_of(c) != GSM7]
    if len(found) <= FEW or all(c.replacement is not None for c in found):
        return tuple(found)
    return ()


def preview(text: str, rates: dict[str, int], message_type: str) -> Preview:
    """`rates`: the caller's workspace rates, per segment of each message type."""
    segmentation = segment(text)
    charged = cost(rates, message_type, segmentation.segments)
    characters = ucs2_characters(text)
    if not characters or any(c.replacement is None for c in characters):
        return Preview(segmentation, charged, characters)
    replaced = "".join(REPLACEMENTS.get(c, c) for c in text)
    gsm7 = segment(replaced)
    return Preview(segmentation, charged, characters, gsm7, replaced, cost(rates, message_type, gsm7.segments))
