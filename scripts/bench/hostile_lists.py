"""Lists made to exhaust a reader of uploads, and the raw workbooks to make them (docs/dashboard.md,
"Limits of a list"): for the tests of those limits and for scripts.bench.upload_pressure.

`xlsx` writes a workbook part by part, as openpyxl finds its parts (by their content types), so
that a list made here reaches the reading of its sheet in openpyxl too."""
from __future__ import annotations

import io
import zipfile

MAIN = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
RELATIONSHIPS = "http://schemas.openxmlformats.org/package/2006/relationships"
OFFICE = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"

SPREADSHEET = "application/vnd.openxmlformats-officedocument.spreadsheetml"


def content_types(shared: bool) -> bytes:
    """[Content_Types].xml: openpyxl finds a workbook's parts by their types."""
    return ('<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
            '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
            '<Default Extension="xml" ContentType="application/xml"/>'
            f'<Override PartName="/xl/workbook.xml" ContentType="{SPREADSHEET}.sheet.main+xml"/>'
            f'<Override PartName="/xl/worksheets/sheet1.xml" ContentType="{SPREADSHEET}.worksheet+xml"/>'
            + (f'<Override PartName="/xl/sharedStrings.xml" ContentType="{SPREADSHEET}.sharedStrings+xml"/>'
               if shared else "") + "</Types>").encode()


def xlsx(sheet_data: bytes, shared: list[str] | None = None, *, sheets: bool = True, prologue: bytes = b"",
         parts: dict[str, bytes] | None = None, sizes: dict[str, int] | None = None) -> bytes:
    """A workbook of one sheet whose <sheetData> is `sheet_data`, with `shared` strings;
    without `sheets`, a workbook that names none.  `prologue` goes before the sheet's root (a
    DOCTYPE); `parts` replace the parts of those names; `sizes` overwrite what the zip declares
    of a part's size, unzipped."""
    written = {
        "[Content_Types].xml": content_types(shared is not None),
        "_rels/.rels": f'<Relationships xmlns="{RELATIONSHIPS}"><Relationship Id="rId1" Type="{OFFICE}/officeDocument" '
                       f'Target="xl/workbook.xml"/></Relationships>'.encode(),
        "xl/workbook.xml": (f'<workbook xmlns="{MAIN}" xmlns:r="{OFFICE}"><sheets>'
                            + ('<sheet name="List" sheetId="1" r:id="rId1"/>' if sheets else "")
                            + "</sheets></workbook>").encode(),
        "xl/_rels/workbook.xml.rels": (f'<Relationships xmlns="{RELATIONSHIPS}"><Relationship Id="rId1" '
                                       f'Type="{OFFICE}/worksheet" Target="worksheets/sheet1.xml"/>'
                                       + (f'<Relationship Id="rId2" Type="{OFFICE}/sharedStrings" '
                                          f'Target="sharedStrings.xml"/>' if shared is not None else "")
                                       + "</Relationships>").encode(),
        "xl/worksheets/sheet1.xml": prologue + f'<worksheet xmlns="{MAIN}"><sheetData>'.encode() + sheet_data
                                    + b"</sheetData></worksheet>",
    }
    if shared is not None:
        items = "".join(f"<si><t>{text}</t></si>" for text in shared)
        written["xl/sharedStrings.xml"] = f'<sst xmlns="{MAIN}" count="{len(shared)}">{items}</sst>'.encode()
    written.update(parts or {})
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        for name, data in written.items():
            archive.writestr(name, data)
    return _declared(out.getvalue(), sizes) if sizes else out.getvalue()


def _declared(data: bytes, sizes: dict[str, int]) -> bytes:
    """The zip with the unzipped size its headers (local and central) declare of each part named."""
    data = bytearray(data)
    with zipfile.ZipFile(io.BytesIO(bytes(data))) as archive:
        infos = archive.infolist()
    for info in infos:
        if info.filename in sizes:
            size = sizes[info.filename].to_bytes(4, "little")
            data[info.header_offset + 22:info.header_offset + 26] = size
            at = _central_entry(data, info.filename)
            data[at + 24:at + 28] = size
    return bytes(data)


def _central_entry(data: bytearray, name: str) -> int:
    at = 0
    while True:
        at = data.index(b"PK\x01\x02", at)
        length = int.from_bytes(data[at + 28:at + 30], "little")
        if data[at + 46:at + 46 + length] == name.encode():
            return at
        at += 4


def cell(text: str) -> bytes:
    return f'<c t="inlineStr"><is><t>{text}</t></is></c>'.encode()


def empty_cells(n: int) -> bytes:
    """A workbook whose one row is a header `phone` and `n` empty cells."""
    return xlsx(b"<row>" + cell("phone") + b"<c/>" * n + b"</row>")


def wide_csv(columns: int, rows: int) -> bytes:
    """A CSV whose header names `columns` columns (the first `phone`), over `rows` rows of a
    number alone: every row would be as wide as its header."""
    header = ",".join(["phone"] + [f"c{i}" for i in range(1, columns)])
    return (header + "\n" + "9812345678\n" * rows).encode()


def one_string_everywhere(rows: int, columns: int, length: int) -> bytes:
    """A workbook of a header and `rows` rows of `columns` cells: a number, then cells that each
    name the same shared string of `length` characters."""
    header = b"<row>" + cell("phone") + b"".join(cell(f"c{i}") for i in range(1, columns)) + b"</row>"
    row = b"<row>" + cell("9812345678") + b'<c t="s"><v>0</v></c>' * (columns - 1) + b"</row>"
    return xlsx(header + row * rows, ["x" * length])


# What scripts.bench.upload_pressure uploads, by file name.
HOSTILE = {
    "20 million empty cells.xlsx": lambda: empty_cells(20_000_000),
    "12 million empty cells.xlsx": lambda: empty_cells(12_000_000),
    "5,000 columns.csv": lambda: wide_csv(5_000, 2_000),
    "one shared string everywhere.xlsx": lambda: one_string_everywhere(10_000, 25, 400),
}
