"""What a client's brand and OTP template may not hold
(docs/api.md, "OTP messages that apps fill in").  Both go out in every code's message, which
skips opt-outs and promotional hours: with a link, a line of its own or text that reads in
another order than it is sent, a workspace allowed only `otp` would have a channel for phishing."""
from __future__ import annotations

import re
import unicodedata

from .said import Said, _

# Unicode's bidirectional controls (UAX #9): they make text read in another order than it is sent.
DIRECTION_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")
# The zero-width non-joiner and joiner: Devanagari writes half forms with them.
JOINERS = frozenset("\u200c\u200d")
LINE_BREAKS = frozenset("\n\r\x0b\x0c\x85\u2028\u2029")

# A scheme, `www.`, or a dot between a letter or digit and two letters: what a phone makes a link
# of.  The dots are those IDNA reads as dots; a domain in any script (पसल.नेपाल) counts.
_ADDRESS = re.compile(r"[a-z][a-z0-9+.-]*://|\bwww[.。．｡]|[^\W_][.。．｡][^\W\d_]{2}", re.IGNORECASE)


def problem(text: str, what: Said, masked: str | None = None) -> Said | None:
    """Why `text` may not go out as `what` ("the brand", "the OTP template"), or None.  `masked`:
    the text with each placeholder as letters of its length, so that `{brand}.com` is a domain."""
    for char in text:
        if char in LINE_BREAKS:
            return _("%(what)s must be one line: it holds a line break", what=what)
        if char in DIRECTION_CONTROLS:
            return _("%(what)s holds a direction control (%(code)s): it would make the message read in another "
                     "order than it is sent", what=what, code=code_point(char))
        category = unicodedata.category(char)
        if category == "Cc":
            return _("%(what)s holds a control character (%(code)s)", what=what, code=code_point(char))
        if category in ("Cf", "Co", "Cs") and char not in JOINERS:
            return _("%(what)s holds an invisible character (%(code)s)", what=what, code=code_point(char))
    address = web_address(text, masked)
    if address:
        return _("%(what)s holds a web address or domain name (%(address)s): links are how phishing works",
                 what=what, address=repr(address))
    return None


def code_point(char: str) -> str:
    """A character as Unicode names it: U+202E."""
    return f"U+{ord(char):04X}"


def web_address(text: str, masked: str | None = None) -> str | None:
    """The word of `text` that holds a web address or a domain name (found in `masked`, the same
    length, when given), as written; None if none does.  Combining marks and joiners are passed
    over, so that a Devanagari label is one word."""
    kept = [(i, c) for i, c in enumerate(masked or text)
            if c not in JOINERS and not unicodedata.category(c).startswith("M")]
    found = _ADDRESS.search("".join(c for _, c in kept))
    if found is None:
        return None
    start, end = kept[found.start()][0], kept[found.end() - 1][0] + 1
    while start > 0 and not text[start - 1].isspace():
        start -= 1
    while end < len(text) and not text[end].isspace():
        end += 1
    return text[start:end].strip(".,:;!?'\"()[]<>।")
