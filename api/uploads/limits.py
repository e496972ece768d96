"""The limits of a list (docs/dashboard.md, "Limits of a list"), each with the sentence that
refuses a file past it, and the table of rows built within them."""
from __future__ import annotations

from sandesh.domain.recipients import MAX_FIELD, MAX_ROWS

MAX_UPLOAD = 5 * 2**20  # bytes of one file
MAX_UNZIPPED = 50 * 2**20  # bytes of a workbook's parts, unzipped
MAX_TEXT = 5 * 2**20  # bytes of text in a list's cells (UTF-8), as much as a CSV file of MAX_UPLOAD holds
MAX_COLUMNS = 50
MAX_CELLS = 250_000  # every cell read, empty ones too

TOO_LARGE = f"The file is larger than {MAX_UPLOAD // 2**20} MB."
UNZIPPED = (f"The workbook is larger than {MAX_UNZIPPED // 2**20} MB unzipped: save its first sheet alone, "
            "or as CSV.")
TEXT = f"The list holds more than {MAX_TEXT // 2**20} MB of text."
COLUMNS = f"The list has more than {MAX_COLUMNS} columns."
CELLS = f"The list has more than {MAX_CELLS:,} cells, empty ones counted."
ROWS = f"The list has more than {MAX_ROWS:,} rows; at most {MAX_ROWS:,} are sent at once."
NOT_XLSX = "The file is not a readable XLSX workbook: open it in Excel and save it again, or upload a CSV."


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


def too_long(row: int) -> str:
    return f"Row {row:,} has a cell longer than {MAX_FIELD} characters."
