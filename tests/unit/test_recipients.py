"""Recipients as people type them and as spreadsheets list them (domain/recipients.py), and the
files the Send page reads them from (api/uploads/files.py; their limits: test_uploads.py)."""
import io

import openpyxl
import pytest

from sandesh.api.uploads.files import rows_of
from sandesh.api.uploads.limits import MAX_UPLOAD
from sandesh.domain.recipients import (BAD_NUMBER, MAX_ROWS, Recipient, local_number, pasted, placeholders, render,
                                       table, without_duplicates)


@pytest.mark.parametrize("typed", ["+977 981-234-5678", "977 9812345678", "9812345678", "(981) 234.5678",
                                   "+9779812345678", " 9812345678 "])
def test_numbers_are_read_as_people_write_them(typed):
    assert local_number(typed) == "9779812345678"


@pytest.mark.parametrize("typed", ["12345", "+1 415 555 0100", "0981234567", "98123456789", "१९८१२३४५६७८",
                                   "981234567x", "", "+", "977 98123"])
def test_anything_else_is_not_a_number(typed):
    assert local_number(typed) is None


def test_pasted_numbers_one_per_line_or_separated_by_commas_or_spaces_keep_their_lines():
    found, refused = pasted("+977 981-234-5678\n9812345679, 977 9812345680\n\n9812345681 9812345682; abc")
    assert [(r.line, r.number) for r in found] == [
        (1, "9779812345678"), (2, "9779812345679"), (2, "9779812345680"), (4, "9779812345681"), (4, "9779812345682")]
    assert [(r.line, r.given, r.reason) for r in refused] == [(4, "abc", BAD_NUMBER)]


def test_a_later_duplicate_names_the_line_of_the_first():
    kept, refused = without_duplicates([Recipient(1, "9779812345678"), Recipient(2, "9779812345679"),
                                        Recipient(5, "9779812345678")])
    assert [r.line for r in kept] == [1, 2]
    assert [(r.line, r.reason) for r in refused] == [(5, "a duplicate of line 1")]


def test_a_table_finds_its_number_column_by_name_in_english_or_nepali_and_keeps_the_other_columns():
    found, refused, columns, column = table([["नाम", "मोबाइल", "class"], ["राम", "9812345678", "5"],
                                             ["", "", ""], ["सीता", "98-123", "6"]])
    assert (columns, column) == (["नाम", "मोबाइल", "class"], "मोबाइल")
    assert found == [Recipient(2, "9779812345678", {"नाम": "राम", "class": "5"})]
    assert [(r.line, r.given) for r in refused] == [(4, "98-123")]  # the header is row 1; empty rows are skipped


def test_a_table_says_what_is_wrong_with_it_as_a_whole():
    with pytest.raises(ValueError, match="empty"):
        table([])
    with pytest.raises(ValueError, match="choose the number column"):
        table([["name", "whatsapp"], ["a", "9812345678"]])
    assert table([["name", "whatsapp"], ["a", "9812345678"]], "whatsapp")[3] == "whatsapp"
    with pytest.raises(ValueError, match="No column 'phone2'"):
        table([["name", "phone"]], "phone2")
    with pytest.raises(ValueError, match="same name"):
        table([["phone", "phone"]])
    with pytest.raises(ValueError, match="at most 10,000"):
        table([["phone"]] + [["9812345678"]] * (MAX_ROWS + 1))


def test_placeholders_are_filled_from_the_row_and_an_empty_one_is_named():
    assert placeholders("Hi {नाम}, class { class } at {time}, {नाम}") == ["नाम", "class", "time"]
    assert render("Hi {name}, {class}", {"name": "Ram", "class": "5"}) == ("Hi Ram, 5", [])
    assert render("Hi {name}, {class}", {"name": "Ram"}) == ("Hi Ram, ", ["class"])


def test_a_csv_file_with_or_without_excels_bom_and_with_semicolons():
    assert rows_of("a.csv", "\ufeffनाम,phone\nराम,9812345678\n".encode()) == [["नाम", "phone"], ["राम", "9812345678"]]
    assert rows_of("a.csv", b"name;phone\nRam;9812345678\n") == [["name", "phone"], ["Ram", "9812345678"]]


def test_an_xlsx_workbook_is_read_with_numbers_as_people_see_them():
    book = openpyxl.Workbook()
    book.active.append(["name", "mobile"])
    book.active.append(["Ram", 9812345678])
    book.active.append(["Sita", None])
    data = io.BytesIO()
    book.save(data)
    assert rows_of("parents.xlsx", data.getvalue()) == [["name", "mobile"], ["Ram", "9812345678"], ["Sita"]]


@pytest.mark.parametrize("name, data, said", [
    ("a.xlsx", b"PK\x03\x04 not really a zip", "not a readable XLSX"),
    ("a.csv", "नाम,phone\n".encode("utf-16"), "not UTF-8"),
    ("a.csv", b"\x00\x01\x02", "not a CSV"),
    ("a.csv", b"x" * (MAX_UPLOAD + 1), "larger than 5 MB"),
])
def test_a_file_that_cannot_be_read_is_a_sentence_that_says_so(name, data, said):
    with pytest.raises(ValueError, match=said):
        rows_of(name, data)
