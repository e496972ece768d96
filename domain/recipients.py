"""Recipients as people type them and as spreadsheets list them, for the dashboard's Send page
(docs/dashboard.md, "Sending").  Pure: the page decodes a CSV or an XLSX file into rows of
text; here those rows, or pasted text, become numbers, fields and reasons of refusal, each with
its line or row number.

The API takes only `977` and ten digits (docs/api.md, "Numbers").  People write numbers as they
say them: on this page `+977 981-234-5678`, `977 9812345678` and the local `9812345678` are
read as `9779812345678`: spaces, dashes, dots and parentheses are dropped, and a bare ten-digit
mobile number gets Nepal's code.  Anything else is refused, with why."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from .phone import normalise
from .said import _

# Headers that name the number column, compared without case and spaces around.
NUMBER_HEADERS = ("phone", "mobile", "number", "phone number", "mobile number", "contact", "फोन", "मोबाइल",
                  "नम्बर", "नंबर", "फोन नम्बर", "मोबाइल नम्बर")
MAX_ROWS = 10_000
MAX_FIELD = 500  # characters of one cell
PLACEHOLDER = re.compile(r"\{([^{}\n]{1,64})\}")
_SEPARATORS = re.compile(r"[\s\-.()\u00a0]")

BAD_NUMBER, OPTED_OUT = _("not a Nepal mobile number"), _("opted out of promotional messages")


def local_number(text: str) -> str | None:
    """`9779812345678` for a Nepal mobile number written as people write it, else None."""
    digits = _SEPARATORS.sub("", text)
    if digits.startswith("+"):
        digits = digits[1:] if digits.startswith("+977") else "x"
    if not (digits.isascii() and digits.isdigit()):
        return None
    if len(digits) == 10:
        digits = "977" + digits
    return normalise(digits)


@dataclass(frozen=True)
class Recipient:
    line: int                 # the line of the pasted text, or the spreadsheet's row (its header is row 1)
    number: str               # 977 and ten digits
    fields: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Refusal:
    line: int
    given: str
    reason: str


@dataclass
class Listed:
    """Recipients as a form gave them (the numbers typed, a file, a contact list), or why they
    could not be read: `errors` by the form's field (`recipients`, `file`, `list`)."""
    recipients: list[Recipient] = field(default_factory=list)
    refused: list[Refusal] = field(default_factory=list)
    columns: list[str] = field(default_factory=list)
    source: str = ""  # said beside the count of recipients: "the numbers typed", the file and its column, the list
    errors: dict[str, str] = field(default_factory=dict)


def pasted(text: str) -> tuple[list[Recipient], list[Refusal]]:
    """Numbers one per line, or separated by commas, semicolons or spaces; at most MAX_ROWS of
    them, read or refused (ValueError past it), as of a list."""
    found: list[Recipient] = []
    refused: list[Refusal] = []
    for n, line in enumerate(text.splitlines(), start=1):
        for part in _parts(line):
            if len(found) + len(refused) == MAX_ROWS:
                raise ValueError(_("More than %(most)s numbers: at most %(most)s are sent at once.",
                                   most=format(MAX_ROWS, ",")))
            number = local_number(part)
            if number is None:
                refused.append(Refusal(n, part, BAD_NUMBER))
            else:
                found.append(Recipient(n, number))
    return found, refused


def read_typed(typed: str) -> Listed:
    """The numbers typed in a form, or why not, under "recipients"."""
    found = Listed(source=_("the numbers typed"))
    try:
        found.recipients, found.refused = pasted(typed)
    except ValueError as problem:
        found.errors["recipients"] = problem.args[0]
    return found


def _parts(line: str) -> list[str]:
    """A whole line is one number when it reads as one (`+977 981-234-5678`); else its pieces
    between commas or semicolons, each whole or split on spaces."""
    line = line.strip()
    if not line:
        return []
    if local_number(line):
        return [line]
    parts = []
    for piece in re.split(r"[,;]", line):
        piece = piece.strip()
        if not piece:
            continue
        parts.extend([piece] if local_number(piece) else piece.split())
    return parts


def number_column(header: list[str], chosen: str | None = None) -> str | None:
    """The column that holds numbers: the one chosen, else the first whose name says so."""
    names = [h.strip() for h in header]
    if chosen:
        return chosen if chosen in names else None
    return next((h for h in names if h.lower() in NUMBER_HEADERS), None)


def table(rows: list[list[str]], chosen: str | None = None) -> tuple[list[Recipient], list[Refusal], list[str], str]:
    """A spreadsheet's rows, its first the header: the recipients with their fields (every
    column but the number's), the refused rows, the columns, and the number column.
    ValueError says what is wrong with the table as a whole."""
    if not rows or not any(cell.strip() for cell in rows[0]):
        raise ValueError(_("The file is empty: its first row must name the columns."))
    header = [h.strip() for h in rows[0]]
    if len(set(h for h in header if h)) < len([h for h in header if h]):
        raise ValueError(_("Two columns have the same name: rename one."))
    column = number_column(header, chosen)
    if column is None:
        raise ValueError(_("No column %(name)s.", name=repr(chosen)) if chosen else
                         _("No column is named phone, mobile or number: choose the number column."))
    if len(rows) - 1 > MAX_ROWS:
        raise ValueError(_("The list has %(rows)s rows; at most %(most)s are sent at once.",
                           rows=format(len(rows) - 1, ","), most=format(MAX_ROWS, ",")))
    at = header.index(column)
    found: list[Recipient] = []
    refused: list[Refusal] = []
    for n, row in enumerate(rows[1:], start=2):
        cells = [(row[i] if i < len(row) else "").strip()[:MAX_FIELD] for i in range(len(header))]
        if not any(cells):
            continue
        number = local_number(cells[at])
        if number is None:
            refused.append(Refusal(n, cells[at], BAD_NUMBER))
            continue
        found.append(Recipient(n, number, {h: c for i, (h, c) in enumerate(zip(header, cells)) if i != at and h}))
    return found, refused, header, column


def without_duplicates(recipients: list[Recipient]) -> tuple[list[Recipient], list[Refusal]]:
    """The first of each number kept; the later ones refused as duplicates of it."""
    first: dict[str, int] = {}
    kept: list[Recipient] = []
    refused: list[Refusal] = []
    for recipient in recipients:
        if recipient.number in first:
            refused.append(Refusal(recipient.line, recipient.number,
                                   _("a duplicate of line %(line)s", line=first[recipient.number])))
        else:
            first[recipient.number] = recipient.line
            kept.append(recipient)
    return kept, refused


def placeholders(text: str) -> list[str]:
    return list(dict.fromkeys(name.strip() for name in PLACEHOLDER.findall(text)))


def render(text: str, fields: dict[str, str]) -> tuple[str, list[str]]:
    """The text with each `{column}` filled from `fields`; and the placeholders left empty."""
    empty: list[str] = []

    def fill(match: re.Match[str]) -> str:
        name = match.group(1).strip()
        value = fields.get(name, "")
        if not value:
            empty.append(name)
        return value

    return PLACEHOLDER.sub(fill, text), empty
