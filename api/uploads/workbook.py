"""The first sheet of an XLSX workbook as rows of text, read within the limits of a list
(limits.py, Table), each cell as openpyxl reads it with `data_only`: a formula's last value, a
date in a date format as a date.

openpyxl builds a row whole before it can be stopped, so a row of millions of empty `<c/>` costs
seconds and gigabytes whatever `max_col` says.  Here the parts are streamed through expat as
they inflate: the sizes the zip declares are checked first, the bytes inflated are counted, and
every cell is counted as it begins.  openpyxl lends only its rules of which number formats are
dates.  A workbook has no DTD: one with a DOCTYPE is refused, so no entity ever expands."""
from __future__ import annotations

import io
import posixpath
import zipfile
import zlib
from typing import Any
from xml.parsers import expat

from openpyxl.styles.numbers import BUILTIN_FORMATS, is_date_format, is_timedelta_format
from openpyxl.utils.datetime import CALENDAR_MAC_1904, WINDOWS_EPOCH, from_excel, from_ISO8601

from sandesh.domain.said import _

from .limits import CELLS, MAX_CELLS, MAX_FIELD, MAX_UNZIPPED, NOT_XLSX, UNZIPPED, Table, Unread, too_long

CHUNK = 2**20  # fed to expat at a time: expat 2.5 scans an unfinished token again at each feed
MAX_RELATIONSHIPS = 10_000  # of a part
MAX_FORMAT = 255  # characters of a number format, as Excel's
OFFICE = "/officeDocument"  # the relationship type that leads to the workbook part
NO_SHEET = _("The workbook has no sheet: add one with the list, or upload a CSV.")


def first_sheet(data: bytes, table: Table) -> list[list[str]]:
    try:
        return _Workbook(zipfile.ZipFile(io.BytesIO(data))).first_sheet(table)
    except Unread:
        raise
    except (zipfile.BadZipFile, zipfile.LargeZipFile, KeyError, IndexError, ValueError, TypeError, OverflowError,
            EOFError, NotImplementedError, RuntimeError, zlib.error, expat.ExpatError):
        raise Unread(NOT_XLSX) from None


class _Workbook:
    def __init__(self, archive: zipfile.ZipFile):
        self.archive = archive
        self.unzipped = 0
        if sum(info.file_size for info in archive.infolist()) > MAX_UNZIPPED:
            raise Unread(UNZIPPED)

    def first_sheet(self, table: Table) -> list[list[str]]:
        workbook = next((to for kind, to in self._relations("", "_rels/.rels").values() if kind.endswith(OFFICE)),
                        "xl/workbook.xml")
        folder = posixpath.dirname(workbook)
        relations = self._relations(folder, posixpath.join(folder, "_rels", posixpath.basename(workbook) + ".rels"))
        book = _Book()
        self._parse(workbook, book)
        sheets = [relations[rel] for rel in book.sheets if rel in relations]
        sheet = next((to for kind, to in sheets if kind.endswith("/worksheet")), None)
        if sheet is None:
            raise Unread(NO_SHEET)
        shared: list[str] = []
        styles = _Styles()
        for kind, to in relations.values():
            if to not in self.archive.NameToInfo:
                continue  # as openpyxl, which finds these parts by their content types
            if kind.endswith("/sharedStrings"):
                self._parse(to, _Strings(shared))
            elif kind.endswith("/styles"):
                self._parse(to, styles)
        cells = _Cells(table, shared, styles.dates(), CALENDAR_MAC_1904 if book.date1904 else WINDOWS_EPOCH)
        self._parse(sheet, cells)
        return table.rows

    def _relations(self, folder: str, path: str) -> dict[str, tuple[str, str]]:
        """Id -> (type, the part's path in the archive) of a part's relationships."""
        relations = _Relations(folder)
        if path in self.archive.NameToInfo:
            self._parse(path, relations)
        return relations.found

    def _parse(self, name: str, part: Any) -> None:
        """Streams a part through expat to `part`'s start(name, attrs), end(name) and text(data)."""
        parser = expat.ParserCreate()
        parser.buffer_text = True
        parser.StartElementHandler = part.start
        parser.EndElementHandler = getattr(part, "end", None)
        parser.CharacterDataHandler = getattr(part, "text", None)
        parser.StartDoctypeDeclHandler = _no_doctype
        with self.archive.open(name) as stream:
            while chunk := stream.read(CHUNK):
                self.unzipped += len(chunk)
                if self.unzipped > MAX_UNZIPPED:
                    raise Unread(UNZIPPED)
                parser.Parse(chunk, False)
        parser.Parse(b"", True)


class _Local(dict):
    """A tag's name without its namespace prefix (`x:c` -> `c`): LOCAL[name], the first names
    met kept (a workbook has a few dozen; a file made of others costs no memory)."""

    def __missing__(self, name: str) -> str:
        local = name.rpartition(":")[2]
        if len(self) < 1000:
            self[name] = local
        return local


LOCAL = _Local()


def _no_doctype(*_: Any) -> None:
    raise Unread(NOT_XLSX)


class _Relations:
    """A part's relationships: id -> (type, the related part's path in the archive)."""

    def __init__(self, folder: str):
        self.folder = folder
        self.found: dict[str, tuple[str, str]] = {}

    def start(self, name: str, attrs: dict[str, str]) -> None:
        if LOCAL[name] == "Relationship" and attrs.get("TargetMode") != "External":
            target = attrs["Target"]
            to = target[1:] if target.startswith("/") else posixpath.normpath(posixpath.join(self.folder, target))
            self.found[attrs["Id"]] = (attrs.get("Type", ""), to)
            if len(self.found) > MAX_RELATIONSHIPS:
                raise Unread(NOT_XLSX)


class _Book:
    """workbook.xml: the sheets' relationship ids in order, and the date system."""

    def __init__(self) -> None:
        self.sheets: list[str] = []
        self.date1904 = False

    def start(self, name: str, attrs: dict[str, str]) -> None:
        tag = LOCAL[name]
        if tag == "sheet":
            self.sheets += [value for key, value in attrs.items() if ":" in key and key.rpartition(":")[2] == "id"]
        elif tag == "workbookPr":
            self.date1904 = attrs.get("date1904", "").lower() in ("1", "true")


class _Strings:
    """sharedStrings.xml: each `<si>`'s text, cut at a cell's limit plus one (longer is refused
    when a cell uses it), at most as many as a list has cells."""

    def __init__(self, shared: list[str]):
        self.shared = shared
        self.parts: list[str] = []
        self.length = 0
        self.inside_t = False
        self.phonetic = 0

    def start(self, name: str, attrs: dict[str, str]) -> None:
        tag = LOCAL[name]
        if tag == "si":
            self.parts, self.length = [], 0
        elif tag == "t" and not self.phonetic:
            self.inside_t = True
        elif tag == "rPh":
            self.phonetic += 1

    def end(self, name: str) -> None:
        tag = LOCAL[name]
        if tag == "si":
            if len(self.shared) == MAX_CELLS:
                raise Unread(CELLS)
            self.shared.append("".join(self.parts)[:MAX_FIELD + 1])
        elif tag == "t":
            self.inside_t = False
        elif tag == "rPh":
            self.phonetic -= 1

    def text(self, data: str) -> None:
        if self.inside_t and self.length <= MAX_FIELD:
            self.parts.append(data)
            self.length += len(data)


class _Styles:
    """styles.xml: which cell formats (`cellXfs`) show a number as a date, or as a duration."""

    def __init__(self) -> None:
        self.codes: dict[int, str] = {}  # of <numFmts>, not of the conditional formats' <dxfs>
        self.formats: list[int] = []
        self.inside = ""

    def start(self, name: str, attrs: dict[str, str]) -> None:
        tag = LOCAL[name]
        if tag in ("numFmts", "cellXfs"):
            self.inside = tag
        elif tag == "numFmt" and self.inside == "numFmts":
            if len(self.codes) == MAX_CELLS:
                raise Unread(CELLS)
            self.codes[int(attrs.get("numFmtId", -1))] = attrs.get("formatCode", "")
        elif tag == "xf" and self.inside == "cellXfs":
            if len(self.formats) == MAX_CELLS:
                raise Unread(CELLS)
            self.formats.append(int(attrs.get("numFmtId", 0)))

    def end(self, name: str) -> None:
        if LOCAL[name] in ("numFmts", "cellXfs"):
            self.inside = ""

    def dates(self) -> dict[int, bool]:
        """Style index -> whether it is a duration, for the styles that are dates."""
        kinds: dict[int, bool | None] = {}  # number format -> a duration?, None when no date
        found = {}
        for index, number_format in enumerate(self.formats):
            if number_format not in kinds:
                code = self.codes.get(number_format, BUILTIN_FORMATS.get(number_format))
                dated = code is not None and len(code) <= MAX_FORMAT and is_date_format(code)
                kinds[number_format] = is_timedelta_format(code) if dated else None
            if kinds[number_format] is not None:
                found[index] = bool(kinds[number_format])
        return found


class _Cells:
    """A worksheet's `<sheetData>`: every `<c>` counted as it begins, each cell's text put
    into the table as it ends."""

    def __init__(self, table: Table, shared: list[str], dates: dict[int, bool], epoch: Any):
        self.table, self.shared, self.dates, self.epoch = table, shared, dates, epoch
        self.row = self.column = 0
        self.kind, self.style = "n", 0
        self.parts: list[str] = []
        self.inside = False  # a <c>
        self.taking = False  # inside a <v> of it, or a <t> of its inline string outside <rPh>
        self.phonetic = 0
        self.length = 0

    def start(self, name: str, attrs: dict[str, str]) -> None:
        tag = LOCAL[name]
        if tag == "c":
            self.table.count()
            if self.row < 1:
                raise Unread(NOT_XLSX)
            reference = attrs.get("r")
            self.column = _column(reference) if reference else self.column + 1
            self.kind, self.style = attrs.get("t", "n"), int(attrs.get("s") or 0)
            self.parts, self.length, self.inside = [], 0, True
        elif self.inside and (tag == "v" or (tag == "t" and not self.phonetic)):
            self.taking = True
        elif tag == "row":
            self.row = int(attrs["r"]) if attrs.get("r") else self.row + 1
            self.column = 0
        elif tag == "rPh":
            self.phonetic += 1

    def text(self, data: str) -> None:
        if self.taking:
            self.length += len(data)
            if self.length > MAX_FIELD:
                raise Unread(too_long(self.row))
            self.parts.append(data)

    def end(self, name: str) -> None:
        tag = LOCAL[name]
        if tag == "c":
            self.inside = self.taking = False
            value = self._value("".join(self.parts))
            if value:
                self.table.put(self.row, self.column, value)
        elif tag in ("v", "t"):
            self.taking = False
        elif tag == "rPh":
            self.phonetic -= 1

    def _value(self, given: str) -> str:
        """The cell as people read it (9812345678.0 reads 9812345678)."""
        if not given:
            return ""
        if self.kind == "s":
            index = int(given)
            if not 0 <= index < len(self.shared):
                raise Unread(NOT_XLSX)
            return self.shared[index].strip()
        if self.kind in ("inlineStr", "str", "e"):
            return given.strip()
        if self.kind == "b":
            return str(bool(int(given)))
        if self.kind == "d":
            return str(from_ISO8601(given))
        number = float(given) if any(c in given for c in ".eE") else int(given)
        if self.style in self.dates:
            try:
                return str(from_excel(number, self.epoch, timedelta=self.dates[self.style]))
            except (OverflowError, ValueError):
                return "#VALUE!"
        if isinstance(number, float) and number.is_integer():
            return str(int(number))
        return str(number)


def _column(reference: str) -> int:
    """B7 -> 2."""
    number = 0
    for letter in reference[:4].upper():  # XFD, the last column
        if not "A" <= letter <= "Z":
            break
        number = number * 26 + ord(letter) - 64
    if not 1 <= number <= 16384:
        raise Unread(NOT_XLSX)
    return number
