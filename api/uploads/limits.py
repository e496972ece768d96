"""The limits of a list (docs/dashboard.md, "Limits of a list"), each with the sentence that
refuses a file past it, and the table of rows built within them."""
from __future__ import annotations

from sandesh.domain.recipients import MAX_FIELD, MAX_ROWS
from sandesh.domain.said import Said, _

MAX_UPLOAD = 5 * 2**20  # bytes of one file
MAX_UNZIPPED = 50 * 2**20  # bytes of a workbook's parts, unzipped
MAX_TEXT = 5 * 2**20  # bytes of text in a list's cells (UTF-8), as much as a CSV file of MAX_UPLOAD holds
MAX_COLUMNS = 50
MAX_CELLS = 250_000  # every cell read, empty ones too

# Said in the page's language (domain/said.py), here and in the child that reads the file
TOO_LARGE = _("The file is larger than %(mb)s MB.", mb=MAX_UPLOAD // 2**20)
UNZIPPED = _("The workbook is larger than %(mb)s MB unzipped: save its first sheet alone, or as CSV.",
             mb=MAX_UNZIPPED // 2**20)
TEXT = _("The list holds more than %(mb)s MB of text.", mb=MAX_TEXT // 2**20)
COLUMNS = _("The list has more than %(count)s columns.", count=MAX_COLUMNS)
CELLS = _("The list has more than %(count)s cells, empty ones counted.", count=format(MAX_CELLS, ","))
ROWS = _("The list has more than %(count)s rows; at most %(count)s are sent at once.", count=format(MAX_ROWS, ","))
NOT_XLSX = _("The file is not a readable XLSX workbook: open it in Excel and save it again, or upload a CSV.")


class Unread(ValueError):
    """A file refused: the sentence says why (a limit passed, or a file that is not a list)."""


class Table:
    """Rows of text, the header first, built one cell at a time within the limits: Unread with
    the sentence of the first limit passed.  Rows and columns count from 1, as a spreadsheet's
    do; a row left out is empty."""

    def __init__(self) -> None:
        self.rows: list[list[str]] = []
        self.cells = 0
        self.text = 0

    def count(self) -> None:
        """A cell begins, empty or not."""
        self.cells += 1
        if self.cells > MAX_CELLS:
            raise Unread(CELLS)

    def put(self, row: int, column: int, text: str) -> None:
        """A cell that holds something."""
        if column > MAX_COLUMNS:
            raise Unread(COLUMNS)
        if row > MAX_ROWS + 1:
            raise Unread(ROWS)
        if len(text) > MAX_FIELD:
            raise Unread(too_long(row))
        self.text += len(text) if text.isascii() else len(text.encode())
        if self.text > MAX_TEXT:
            raise Unread(TEXT)
        while len(self.rows) < row:
            self.rows.append([])
        cells = self.rows[row - 1]
        while len(cells) < column:
            cells.append("")
        cells[column - 1] = text


def too_long(row: int) -> Said:
    return _("Row %(row)s has a cell longer than %(most)s characters.", row=format(row, ","), most=MAX_FIELD)
