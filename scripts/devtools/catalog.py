"""The dashboard's message catalog (api/dashboard/i18n.py): `python -m scripts.devtools.catalog`
extracts every marked string of the workspace's pages (their templates, `_()` in the dashboard's
Python, and `_()` in the domain's, whose refusals the pages show: domain/said.py; the operator
console's are English and not extracted) into
api/dashboard/locale/messages.pot, and merges it into the Nepali catalog, keeping what is
translated.  `--check` changes nothing and lists the strings the Nepali catalog lacks; `--list
FILE…` prints the strings of some files as JSON; `--fill FILE.json` writes Nepali strings
({English: Nepali}) into the catalog."""
from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

from babel.messages.catalog import Catalog
from babel.messages.extract import extract_from_file
from babel.messages.pofile import read_po, write_po
from jinja2.ext import babel_extract

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "api" / "dashboard"
DOMAIN = ROOT / "domain"
LOCALE = DASHBOARD / "locale"
POT = LOCALE / "messages.pot"
NEPALI = LOCALE / "ne" / "LC_MESSAGES" / "messages.po"
STAMP = datetime(2026, 11, 29, tzinfo=timezone.utc)  # a fixed date: a catalog changes only when its strings do
KEYWORDS = {"_": None, "gettext": None, "ngettext": (1, 2), "pgettext": ((1, "c"), 2)}
JINJA = {"extensions": "jinja2.ext.i18n", "newstyle_gettext": "true", "trimmed": "true"}


def sources() -> Iterator[tuple[Path, str]]:
    """The workspace pages' templates and Python modules (not the console's: templates/ops, ops/),
    and the domain's and the upload reader's modules, whose marked refusals the pages show."""
    for path in sorted((DASHBOARD / "templates").glob("*.html")):
        yield path, "jinja2"
    for path in (*sorted(DASHBOARD.glob("*.py")), *sorted(DOMAIN.glob("*.py")), *sorted(DOMAIN.glob("usecases/*.py")),
                 *sorted((ROOT / "api" / "uploads").glob("*.py"))):
        yield path, "python"


def extracted(only: list[Path] | None = None) -> Catalog:
    catalog = Catalog(project="Sandesh", msgid_bugs_address="", fuzzy=False, creation_date=STAMP,
                      revision_date=STAMP, language_team="Sandesh", last_translator="Sandesh")
    for path, kind in sources():
        if only is not None and path.resolve() not in only:
            continue
        method = babel_extract if kind == "jinja2" else "python"
        options = JINJA if kind == "jinja2" else {}
        for line, message, comments, context in extract_from_file(method, str(path), keywords=KEYWORDS,
                                                                  options=options, strip_comment_tags=True):
            catalog.add(message, None, [(str(path.relative_to(ROOT)), line)], auto_comments=comments, context=context)
    return catalog


def nepali() -> Catalog:
    if not NEPALI.is_file():
        return Catalog(locale="ne", project="Sandesh", creation_date=STAMP, revision_date=STAMP,
                       language_team="Sandesh", last_translator="Sandesh", fuzzy=False)
    with NEPALI.open("rb") as po:
        return read_po(po, locale="ne")


def missing(template: Catalog, translated: Catalog) -> list[str]:
    """The template's strings the Nepali catalog does not translate (or marks fuzzy)."""
    lacking = []
    for message in template:
        if not message.id:
            continue
        found = translated.get(message.id, message.context)
        strings = found.string if found is not None else None
        if found is None or found.fuzzy or not strings or (isinstance(strings, tuple) and not all(strings)):
            lacking.append(message.id if isinstance(message.id, str) else message.id[0])
    return lacking


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; list the strings Nepali lacks")
    parser.add_argument("--list", nargs="+", type=Path, metavar="FILE", help="print these files' strings as JSON")
    parser.add_argument("--fill", type=Path, metavar="FILE.json", help="write these Nepali strings into the catalog")
    args = parser.parse_args()
    if args.list:
        strings = [m.id for m in extracted([p.resolve() for p in args.list]) if m.id]
        print(json.dumps(strings, ensure_ascii=False, indent=1))
        return 0
    template, translated = extracted(), nepali()
    if args.fill:
        for english, text in json.loads(args.fill.read_text()).items():
            if template.get(english) is None:
                print(f"not a string of the pages: {english!r}", file=sys.stderr)
                continue
            found = translated.get(english)
            if found is None:
                translated.add(english, text)
            else:
                found.string, found.flags = text, set()
    lacking = missing(template, translated)
    if args.check:
        for text in lacking:
            print(text)
        return 1 if lacking else 0
    LOCALE.mkdir(exist_ok=True)
    with POT.open("wb") as pot:
        write_po(pot, template, width=100, omit_header=True, sort_output=True)
    translated.update(template, no_fuzzy_matching=True)
    NEPALI.parent.mkdir(parents=True, exist_ok=True)
    with NEPALI.open("wb") as po:
        write_po(po, translated, width=100, omit_header=False, sort_output=True, ignore_obsolete=True,
                 include_previous=False)
    print(f"{len(template)} strings; {len(lacking)} without Nepali yet", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
