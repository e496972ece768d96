"""The dashboard in Nepali and English (api/dashboard/i18n.py): every string a person reads on a
workspace's pages is marked for translation, and the Nepali catalog translates every one.  The
operator console (templates/ops) is English and not checked."""
from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from scripts.devtools import catalog

TEMPLATES = sorted((catalog.DASHBOARD / "templates").glob("*.html"))
# Words that are the same in both languages: the product's name, the currency's code, ids' prefixes
KEPT = {"Sandesh", "NPR", "API", "msg_…", "ws_…", "cl_…", "https://", "GSM-7", "UCS-2", "CSV", "XLSX", "OTP"}
READ_ATTRIBUTES = {"placeholder", "title", "aria-label", "alt"}


class Visible(HTMLParser):
    """The text and the read attributes of a template with its Jinja2 parts taken out."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []
        self.skipping = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "style"):
            self.skipping += 1
        for name, value in attrs:
            if name in READ_ATTRIBUTES and value:
                self.keep(value)
            if name == "value" and tag in ("button",) and value:
                self.keep(value)

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style"):
            self.skipping -= 1

    def handle_data(self, data: str) -> None:
        if not self.skipping:
            self.keep(data)

    def keep(self, text: str) -> None:
        words = [w for w in re.findall(r"[A-Za-z][A-Za-z'’-]+", text) if w not in KEPT]
        if words and not all(w in KEPT for w in text.split()):
            self.found.append(" ".join(text.split()))


def unmarked(source: str) -> list[str]:
    """What a template shows that no trans block or _() holds."""
    source = re.sub(r"\{#.*?#\}", "", source, flags=re.S)
    source = re.sub(r"\{%-?\s*trans\b.*?\{%-?\s*endtrans\s*-?%\}", " ", source, flags=re.S)
    source = re.sub(r"\{\{.*?\}\}", " ", source, flags=re.S)
    source = re.sub(r"\{%.*?%\}", " ", source, flags=re.S)
    parser = Visible()
    parser.feed(source)
    return parser.found


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda p: p.name)
def test_every_string_a_workspace_page_shows_is_marked_for_translation(template: Path):
    assert unmarked(template.read_text()) == []


def test_an_unmarked_string_is_found():
    assert unmarked('<p>Sign in <b>{{ name }}</b></p><input placeholder="Your email">'
                    '{% trans %}Kept{% endtrans %}{{ _("Also kept") }}') == ["Sign in", "Your email"]


def test_the_nepali_catalog_translates_every_marked_string():
    assert catalog.missing(catalog.extracted(), catalog.nepali()) == []


def test_each_nepali_string_keeps_the_placeholders_of_its_english():
    for message in catalog.nepali():
        if not message.id:
            continue
        english = {tuple(sorted(re.findall(r"%\(\w+\)s", text))) for text in
                   (message.id if isinstance(message.id, tuple) else (message.id,))}
        for nepali in message.string if isinstance(message.string, tuple) else (message.string,):
            assert tuple(sorted(re.findall(r"%\(\w+\)s", nepali))) in english, message.id


def test_the_send_pages_hint_is_said_in_the_pages_language():
    from types import SimpleNamespace

    from sandesh.api.dashboard.send import hint_said

    found = SimpleNamespace(segmentation=SimpleNamespace(segments=2, encoding="UCS-2"), cost=200, sendable=True,
                            characters=[SimpleNamespace(character="’", replacement="'")],
                            gsm7=SimpleNamespace(segments=1))
    assert hint_said(found, "en") == "2 segments · UCS-2 · NPR 2.00 a recipient · “’” → “'” would make it GSM-7 (1 segment)"
    assert hint_said(found, "ne") == "2 भाग · UCS-2 · प्रति प्राप्तकर्ता नेरू 2.00 · “’” → “'” राखे GSM-7 हुन्छ (1 भाग)"
