"""The repository explains itself: code, tests, scripts and docs cite sections of `docs/`, never a
document outside the repository, and every section they cite exists (docs/design.md, "Layers")."""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SKIPPED_DIRS = {".venv", "var", ".git", "__pycache__", ".pytest_cache", "build", "dist"}
SUFFIXES = {".py", ".md", ".sh", ".toml"}

# Written in two pieces so that this file does not match itself.
OUTSIDE = ["decisions" + " §", "interface" + " §", "decisions" + ".md", "interface" + ".md"]

DOC_PATH = re.compile(r"docs/([A-Za-z0-9_-]+\.md)")
# `(docs/design.md, "Health")`, also `docs/design.md "Packaging"` and a title on the next line;
# in a Python string the quotes may be escaped (`\"`).
DOC_SECTION = re.compile(r"docs/([A-Za-z0-9_-]+\.md)(?:,\s*|\s+)\\?\"([^\"\\\n]+)\\?\"")
UNCLOSED = re.compile(r"docs/[A-Za-z0-9_-]+\.md(?:,\s*|\s+)\\?\"[^\"\\\n]*$", re.M)
FENCED = re.compile(r"^```.*?^```", re.M | re.S)
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)


def _files() -> list[Path]:
    found = []
    for path in ROOT.rglob("*"):
        relative = path.relative_to(ROOT)
        if any(part in SKIPPED_DIRS or part.endswith(".egg-info") for part in relative.parts):
            continue
        if path.is_file() and path.suffix in SUFFIXES:
            found.append(path)
    return sorted(found)


FILES = _files()


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def _headings(name: str) -> set[str]:
    """The titles of a doc's headings; a `#` comment in a fenced code block is not one."""
    text = FENCED.sub("", _text(ROOT / "docs" / name))
    return {m.group(1).strip() for m in HEADING.finditer(text)}


def test_the_files_are_found():
    names = {p.relative_to(ROOT).as_posix() for p in FILES}
    assert {"README.md", "docs/design.md", "domain/application.py", "pyproject.toml",
            "scripts/up.sh"} <= names


@pytest.mark.parametrize("words", OUTSIDE)
def test_nothing_cites_a_document_outside_the_repository(words):
    """Point at `docs/` instead, e.g. (docs/api.md, "Idempotency") or (docs/design.md, "Decisions: OTP")."""
    citing = [f"{p.relative_to(ROOT)}:{n}" for p in FILES
              for n, line in enumerate(_text(p).splitlines(), 1) if words in line]
    assert not citing, f"{words!r} cites a document outside the repository: {citing}"


def test_every_cited_doc_exists():
    missing = sorted({f"{p.relative_to(ROOT)}: docs/{name}" for p in FILES
                      for name in DOC_PATH.findall(_text(p)) if not (ROOT / "docs" / name).is_file()})
    assert not missing, missing


def test_every_cited_section_is_a_heading_of_its_doc():
    unclosed = [f"{p.relative_to(ROOT)}: {m.group(0)}" for p in FILES for m in UNCLOSED.finditer(_text(p))]
    assert not unclosed, "keep a cited title on one line:\n" + "\n".join(unclosed)
    missing = []
    for path in FILES:
        for name, title in DOC_SECTION.findall(_text(path)):
            if (ROOT / "docs" / name).is_file() and title.strip() not in _headings(name):
                missing.append(f'{path.relative_to(ROOT)}: (docs/{name}, "{title}")')
    assert not missing, "no heading with this title:\n" + "\n".join(sorted(set(missing)))
