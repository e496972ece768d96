"""Lists uploaded on the Send and Contacts pages (docs/dashboard.md, "Sending"): a CSV file
(UTF-8, with or without Excel's BOM; commas, semicolons or tabs) or an XLSX workbook (its first
sheet: workbook.py), read into rows of text within the limits of a list (limits.py), and into
the recipients of the form (domain/recipients.py, `Listed`).

Every limit is checked as the file is read, before the rows it would build: a file past one is
refused with a sentence that names it, and so is a file that is neither, never a 500.  Files are
read on a child process of their own (children.py), never on the API's."""
from __future__ import annotations

import csv
import io
from sandesh.domain.recipients import MAX_FIELD, Listed, table
from sandesh.domain.said import _, told

from .limits import MAX_UPLOAD, TOO_LARGE, Table, Unread, too_long

# What csv.Sniffer reads to find the separator: its regular expressions take seconds on 8 KiB made to slow them.
SNIFFED = 4096


def rows_of(filename: str, data: bytes) -> list[list[str]]:
    """The file's rows, its first the header, each cell as text."""
    if len(data) > MAX_UPLOAD:
        raise Unread(TOO_LARGE)
    if data[:4] == b"PK\x03\x04" or filename.lower().endswith((".xlsx", ".xlsm")):
        from .workbook import first_sheet  # only where a workbook is read

        return first_sheet(data, Table())
    return _csv(data, Table())


def _csv(data: bytes, found: Table) -> list[list[str]]:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise Unread(_("The file is not UTF-8 text: in Excel, save it as \"CSV UTF-8\", or upload the XLSX.")) from None
    if "\x00" in text:
        raise Unread(_("The file is not a CSV file: upload a CSV or an XLSX workbook."))
    try:
        dialect = csv.Sniffer().sniff(text[:SNIFFED], delimiters=",;\t")
    except csv.Error:
        dialect = csv.excel
    records = csv.reader(io.StringIO(text), dialect)
    row = 0
    previous = csv.field_size_limit(MAX_FIELD)  # the whole process's: given back below
    try:
        for row, cells in enumerate(records, start=1):
            for column, cell in enumerate(cells, start=1):
                found.count()
                if cell:
                    found.put(row, column, cell)
    except csv.Error as error:
        if "field larger than field limit" in str(error):
            raise Unread(too_long(row + 1)) from None
        raise Unread(_("Row %(row)s of the file is not CSV: %(error)s.", row=format(row + 1, ","), error=error)) from None
    finally:
        csv.field_size_limit(previous)
    return found.rows


def read_file(filename: str, data: bytes, number_column: str) -> Listed:
    """The numbers of an uploaded file (the number column chosen, or found by its name), or
    why not, under "file"."""
    found = Listed()
    try:
        rows = rows_of(filename, data)
    except ValueError as problem:
        found.errors["file"] = told(problem)
        return found
    try:
        found.recipients, found.refused, found.columns, column = table(rows, number_column.strip() or None)
        found.source = _("%(file)s: numbers in the column %(column)s", file=filename, column=repr(column))
    except ValueError as problem:
        found.errors["file"] = told(problem)
        found.columns = [c.strip() for c in rows[0]] if rows else []
    return found

