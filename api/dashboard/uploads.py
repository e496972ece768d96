"""Lists uploaded on the Send and Contacts pages (docs/dashboard.md, "Sending"): a CSV file
(UTF-8, with or without Excel's BOM; commas, semicolons or tabs) or an XLSX workbook (its first
sheet, by openpyxl), read into rows of text; and the recipients of a form, typed or uploaded.
A file that is neither is a sentence that says so, never a 500.  Bounded: MAX_UPLOAD bytes,
and the rows a campaign takes (domain/recipients.py)."""
from __future__ import annotations

import csv
import io
import zipfile
from dataclasses import dataclass, field

from sandesh.domain.recipients import MAX_ROWS, Recipient, Refusal, pasted, table

MAX_UPLOAD = 5 * 2**20  # bytes of one file
MAX_COLUMNS = 50  # read of a workbook's sheet, whatever width it claims


def rows_of(filename: str, data: bytes) -> list[list[str]]:
    """The file's rows, its first the header, each cell as text."""
    if len(data) > MAX_UPLOAD:
        raise ValueError(f"The file is larger than {MAX_UPLOAD // 2**20} MB.")
    if data[:4] == b"PK\x03\x04" or filename.lower().endswith((".xlsx", ".xlsm")):
        return _workbook(data)
    return _csv(data)


def _csv(data: bytes) -> list[list[str]]:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ValueError("The file is not UTF-8 text: in Excel, save it as \"CSV UTF-8\", or upload the XLSX.") from None
    if "\x00" in text:
        raise ValueError("The file is not a CSV file: upload a CSV or an XLSX workbook.")
    try:
        dialect = csv.Sniffer().sniff(text[:8192], delimiters=",;\t")
    except csv.Error:
        dialect = csv.excel
    rows = []
    for row in csv.reader(io.StringIO(text), dialect):
        rows.append(row)
        if len(rows) > MAX_ROWS + 1:
            break
    return rows


def _workbook(data: bytes) -> list[list[str]]:
    import openpyxl  # read only when a workbook comes

    try:
        workbook = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    except (zipfile.BadZipFile, KeyError, OSError, ValueError, TypeError):
        raise ValueError("The file is not a readable XLSX workbook: open it in Excel and save it again, or "
                         "upload a CSV.") from None
    try:
        sheet = workbook.worksheets[0]
        rows = []
        for values in sheet.iter_rows(values_only=True, max_col=MAX_COLUMNS):
            cells = [_cell(v) for v in values]
            while cells and not cells[-1]:  # the sheet's width, padded
                cells.pop()
            rows.append(cells)
            if len(rows) > MAX_ROWS + 1:
                break
        return rows
    finally:
        workbook.close()


def _cell(value: object) -> str:
    """A cell as people read it: a number kept by Excel as 9812345678.0 reads 9812345678."""
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


@dataclass
class Read:
    """Recipients as a form gave them (the numbers typed, or a file), or why they could not be."""
    recipients: list[Recipient] = field(default_factory=list)
    refused: list[Refusal] = field(default_factory=list)
    columns: list[str] = field(default_factory=list)
    source: str = ""
    errors: dict[str, str] = field(default_factory=dict)


def read_recipients(typed: str, upload: tuple[str, bytes] | None, number_column: str) -> Read:
    """The numbers of a form: those of an uploaded file (the number column chosen, or found by
    its name), else those typed; errors under the field they belong to ("file", "recipients")."""
    found = Read()
    if upload is not None and upload[1]:
        try:
            rows = rows_of(upload[0], upload[1])
        except ValueError as problem:
            found.errors["file"] = str(problem)
            return found
        try:
            found.recipients, found.refused, found.columns, column = table(rows, number_column.strip() or None)
            found.source = f"{upload[0]}: numbers in the column {column!r}"
        except ValueError as problem:
            found.errors["file"] = str(problem)
            found.columns = [c.strip() for c in rows[0]] if rows else []
    elif typed.strip():
        found.recipients, found.refused = pasted(typed)
        found.source = "the numbers typed"
    return found
