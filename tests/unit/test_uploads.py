"""The limits of a list (docs/dashboard.md, "Limits of a list"): a file is read within them
(api/uploads/limits.py, files.py, workbook.py) or refused with a sentence that names the limit passed, and
a malformed file is a sentence too; a workbook reads as openpyxl reads it."""
from __future__ import annotations

import datetime
import io
import time

import openpyxl
import pytest
from openpyxl.utils.datetime import CALENDAR_MAC_1904

from sandesh.api.uploads.files import rows_of
from sandesh.api.uploads.limits import CELLS, COLUMNS, MAX_CELLS, NOT_XLSX, ROWS, TEXT, UNZIPPED
from sandesh.api.uploads.workbook import NO_SHEET
from sandesh.domain.recipients import MAX_FIELD, MAX_ROWS, pasted
from scripts.bench.hostile_lists import (OFFICE, RELATIONSHIPS, cell, empty_cells, one_string_everywhere,
                                          wide_csv, xlsx)


def refusal(name: str, data: bytes) -> str:
    with pytest.raises(ValueError) as refused:
        rows_of(name, data)
    return str(refused.value)


def as_openpyxl_reads(data: bytes) -> list[list[str]]:
    """The first sheet's rows as the reader of openpyxl gives them, each cell as people read it."""
    def text(value: object) -> str:
        if value is None:
            return ""
        if isinstance(value, float) and value.is_integer():
            return str(int(value))
        return str(value).strip()

    book = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    rows = []
    for values in book.worksheets[0].iter_rows(values_only=True):
        cells = [text(v) for v in values]
        while cells and not cells[-1]:
            cells.pop()
        rows.append(cells)
    while rows and not rows[-1]:
        rows.pop()
    return rows


@pytest.mark.parametrize("epoch", [None, CALENDAR_MAC_1904])
def test_a_workbook_reads_as_openpyxl_reads_it(epoch):
    book = openpyxl.Workbook()
    if epoch is not None:
        book.epoch = epoch
    sheet = book.active
    sheet.append(["name", " mobile ", "joined", "at", "paid", "share", "note"])
    sheet.append(["राम", 9812345678, datetime.date(2026, 11, 28), datetime.time(9, 30), True, 0.25, "  spaced  "])
    sheet.append([None, "977 9812345679", datetime.datetime(2026, 1, 2, 3, 4, 5), None, False, 1e20])
    sheet["E6"] = "after a gap"
    sheet["AX7"] = "the 50th column"
    sheet["B8"] = 9812345680.0
    sheet["C8"].value, sheet["C8"].number_format = 45999, "dd/mm/yyyy"
    sheet["D8"].value, sheet["D8"].number_format = 1.5, "[h]:mm"
    data = io.BytesIO()
    book.save(data)
    assert rows_of("people.xlsx", data.getvalue()) == as_openpyxl_reads(data.getvalue())


def test_a_file_over_5_mb_is_refused():
    assert refusal("a.csv", b"x" * (5 * 2**20 + 1)) == "The file is larger than 5 MB."


def test_a_workbook_that_declares_more_than_50_mb_unzipped_is_refused_before_it_is_inflated():
    started = time.process_time()
    assert refusal("a.xlsx", empty_cells(15_000_000)) == UNZIPPED  # 60 MB of sheet, 60 KB zipped
    assert time.process_time() - started < 1


def test_a_workbook_that_understates_its_sizes_is_not_inflated_past_them():
    sheet = b"<row>" + cell("phone") + b"</row><!--" + b"x" * 60 * 2**20 + b"-->"
    assert refusal("a.xlsx", xlsx(sheet, sizes={"xl/worksheets/sheet1.xml": 1000})) == NOT_XLSX


def test_the_bytes_inflated_count_over_every_part_read():
    """A part that the relationships name twice is inflated twice: 2 x 26 MB."""
    sheet = b"<row>" + cell("phone") + b"</row><!--" + b"x" * 26 * 2**20 + b"-->"
    twice = f'<Relationships xmlns="{RELATIONSHIPS}"><Relationship Id="rId1" Type="{OFFICE}/worksheet" ' \
            f'Target="worksheets/sheet1.xml"/><Relationship Id="rId2" Type="{OFFICE}/styles" ' \
            f'Target="worksheets/sheet1.xml"/></Relationships>'
    assert refusal("a.xlsx", xlsx(sheet, parts={"xl/_rels/workbook.xml.rels": twice.encode()})) == UNZIPPED


def test_a_row_of_millions_of_empty_cells_is_refused_as_its_cells_pass_theirs():
    """openpyxl builds the row whole whatever `max_col`: 1,000,000 empty cells took seconds
    and 331 MiB there."""
    started = time.process_time()
    assert refusal("a.xlsx", empty_cells(1_000_000)) == CELLS
    assert CELLS == "The list has more than 250,000 cells, empty ones counted."
    assert time.process_time() - started < 5


def test_empty_cells_of_a_csv_count_too():
    assert refusal("a.csv", b"phone" + b"," * MAX_CELLS + b"\n") == CELLS


def test_more_than_50_columns_are_refused():
    assert refusal("a.csv", wide_csv(5_000, 2_000)) == COLUMNS == "The list has more than 50 columns."
    assert refusal("a.xlsx", xlsx(b"<row>" + cell("phone") + b'<c r="AY1" t="inlineStr"><is><t>x</t></is></c>'
                                  b"</row>")) == COLUMNS


def test_empty_cells_past_the_50th_column_are_left_out():
    assert rows_of("a.xlsx", xlsx(b"<row>" + cell("phone") + b'<c r="AY1" s="1"/><c r="ZZ1"/></row>')) == [["phone"]]
    assert rows_of("a.csv", b"phone" + b"," * 60 + b"\n9812345678\n") == [["phone"], ["9812345678"]]


@pytest.mark.parametrize("name, data", [
    ("a.csv", b"phone,note\n9812345678," + b"x" * (MAX_FIELD + 1) + b"\n"),
    ("a.csv", b"phone,note\n9812345678," + b"x" * (128 * 1024 + 1) + b"\n"),  # past csv's own limit
    ("a.xlsx", xlsx(b"<row>" + cell("phone") + b"</row><row>" + cell("x" * (MAX_FIELD + 1)) + b"</row>")),
    ("a.xlsx", xlsx(b"<row>" + cell("phone") + b'</row><row><c t="s"><v>0</v></c></row>', ["x" * (MAX_FIELD + 1)])),
])
def test_a_cell_longer_than_500_characters_is_refused_with_its_row(name, data):
    assert refusal(name, data) == "Row 2 has a cell longer than 500 characters."


def test_more_than_10000_rows_are_refused():
    csv = b"phone\n" + b"9812345678\n" * (MAX_ROWS + 1)
    assert refusal("a.csv", csv) == ROWS == "The list has more than 10,000 rows; at most 10,000 are sent at once."
    assert rows_of("a.csv", csv[:-len(b"9812345678\n")])[-1] == ["9812345678"]
    far = xlsx(b"<row>" + cell("phone") + b'</row><row r="10002">' + cell("9812345678") + b"</row>")
    assert refusal("a.xlsx", far) == ROWS


def test_more_than_10000_pasted_numbers_are_refused():
    with pytest.raises(ValueError, match="More than 10,000 numbers: at most 10,000 are sent at once."):
        pasted("9812345678\n" * MAX_ROWS + "12345")
    assert len(pasted("9812345678\n" * MAX_ROWS)[0]) == MAX_ROWS


def test_one_shared_string_in_every_cell_is_refused_past_5_mb_of_text():
    """A workbook of 24 KB whose cells name one string of 400 characters: 100 MB of text."""
    assert refusal("a.xlsx", one_string_everywhere(10_000, 25, 400)) == TEXT == "The list holds more than 5 MB of text."


def test_more_shared_strings_than_a_list_has_cells_are_refused():
    assert refusal("a.xlsx", xlsx(b"<row>" + cell("phone") + b"</row>", [""] * (MAX_CELLS + 1))) == CELLS


@pytest.mark.parametrize("data, said", [
    (xlsx(b"<row>" + cell("phone") + b"</row><row><c><v>981"), NOT_XLSX),  # the sheet cut short
    (xlsx(b'<row><c t="s"><v>7</v></c></row>', ["phone"]), NOT_XLSX),  # no 8th shared string
    (xlsx(b'<row><c t="s"><v>-1</v></c></row>', ["phone"]), NOT_XLSX),
    (xlsx(b"", sheets=False), NO_SHEET),
    (xlsx(b"<row>" + cell("&a;") + b"</row>", prologue=b'<!DOCTYPE x [<!ENTITY a "' + b"x" * 100 + b'">]>'), NOT_XLSX),
    (b"PK\x03\x04 not really a zip", NOT_XLSX),
    (xlsx(b'<row r="x">' + cell("phone") + b"</row>"), NOT_XLSX),
])
def test_a_malformed_workbook_is_a_sentence(data, said):
    assert refusal("a.xlsx", data) == said


def test_a_workbook_refuses_at_its_limits_whatever_its_namespace_prefix():
    data = xlsx(b"<x:row xmlns:x='urn:x'>" + b"<x:c/>" * (MAX_CELLS + 1) + b"</x:row>")
    assert refusal("a.xlsx", data) == CELLS



def test_a_sentence_with_any_value_crosses_to_the_api_as_json_and_reads_the_same():
    """The reading child hands its refusals over as JSON (domain/said.py packed): a value JSON
    cannot hold, such as the csv module's error, goes as its text."""
    import csv

    import orjson

    from sandesh.domain.said import Said, packed, unpacked

    said = Said("Row %(row)s of the file is not CSV: %(error)s.", row="1", error=csv.Error("new-line seen"))
    crossed = unpacked(orjson.loads(orjson.dumps(packed(said))))
    assert str(crossed) == str(said) == "Row 1 of the file is not CSV: new-line seen."
