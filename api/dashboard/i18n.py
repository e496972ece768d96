"""The dashboard in Nepali and English (docs/dashboard.md, "Languages"): gettext catalogs read
with Babel, one Jinja2 environment per language with Jinja2's i18n extension, and the language
a request is answered in.

A page's strings are marked in its template (`{% trans %}`, `_()`) or in Python (`_()`, a Said
translated when the page draws it; the domain marks its refusals the same way, domain/said.py);
`python -m scripts.devtools.catalog` extracts them into locale/messages.pot and merges them into
locale/ne/LC_MESSAGES/messages.po, where the Nepali is written.  The .po file is read as it is
when the process starts: no compiled .mo file is kept.

The language: the one the signed-in person chose (kept with them: Person.LanguageChosen), else
the browser's cookie of the switch, else its Accept-Language, else English.  The operator
console is English: an operator's pages are always drawn in English."""
from __future__ import annotations

import io
from pathlib import Path
from typing import Any, Callable

from babel.core import negotiate_locale
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po
from babel.numbers import format_currency
from babel.support import NullTranslations, Translations
from markupsafe import Markup, escape

from sandesh.domain.person import LANGUAGES, OPERATOR
from sandesh.domain.said import Said, _, told  # noqa: F401 (told: the pages' import)

ENGLISH, NEPALI = "en", "ne"
LOCALE = Path(__file__).resolve().parent / "locale"
LANGUAGE_COOKIE = "sandesh_language"
# The name of each language in itself: the switch offers the other one
NAMES = {ENGLISH: "English", NEPALI: "नेपाली"}
BABEL_LOCALE = {ENGLISH: "en_IN", NEPALI: "ne_NP"}  # Indian grouping (1,23,456) for both
MONEY = "¤ #,##,##0.00"


def catalog(language: str) -> NullTranslations:
    """The language's translations, from its .po file (English: the strings themselves)."""
    path = LOCALE / language / "LC_MESSAGES" / "messages.po"
    if language == ENGLISH or not path.is_file():
        return NullTranslations()
    with path.open("rb") as po:
        read = read_po(po, locale=language)
    compiled = io.BytesIO()
    write_mo(compiled, read)
    compiled.seek(0)
    return Translations(compiled)


CATALOGS = {language: catalog(language) for language in LANGUAGES}


def npr(paisa: int, language: str = ENGLISH) -> str:
    """`NPR 1,23,456.78` (English) or `नेरू 1,23,456.78` (Nepali) for 12345678 paisa: digits 0-9
    in both (docs/dashboard.md, "Languages")."""
    return format_currency(paisa / 100, "NPR", format=MONEY, locale=BABEL_LOCALE[language],
                           currency_digits=False).replace("\xa0", " ")


def from_header(accept_language: str | None) -> str | None:
    """The language of ours the browser prefers most (Accept-Language, with its q-values), or None."""
    if not accept_language:
        return None
    ranked = []
    for position, part in enumerate(accept_language.split(",")):
        tag, _, params = part.strip().partition(";")
        quality = 1.0
        if params.strip().startswith("q="):
            try:
                quality = float(params.strip()[2:])
            except ValueError:
                continue
        if tag and quality > 0:
            ranked.append((-quality, position, tag.strip().replace("_", "-")))
    preferred = [tag for _, _, tag in sorted(ranked)]
    return negotiate_locale(preferred, list(LANGUAGES), sep="-")


def language_of(person: dict[str, Any] | None, cookie: str | None, accept_language: str | None) -> str:
    if person and person.get("role") == OPERATOR:
        return ENGLISH
    for choice in ((person or {}).get("language"), cookie):
        if choice in LANGUAGES:
            return choice
    return from_header(accept_language) or ENGLISH


def spoken(value: Said, language: str | None) -> str:
    """A sentence in `language` as plain text (an e-mail), its values that are sentences said
    too; English for a language we do not write."""
    translations = CATALOGS.get(language or ENGLISH, CATALOGS[ENGLISH])
    values = {name: spoken(v, language) if isinstance(v, Said) else v for name, v in value.values.items()}
    return translations.gettext(value.english) % values if values else translations.gettext(value.english)


def sayer(translations: NullTranslations) -> Callable[[Any], Any]:
    """The templates' `said(value)`: a Said in the page's language, its values escaped (a value
    that is a Said said too); any other string translated when the catalog has it (a title, a
    domain's fixed sentence)."""
    def said(value: Any) -> Any:
        if isinstance(value, Said):
            if not value.values:
                return translations.gettext(value.english)
            values = {name: said(v) if isinstance(v, Said) else v for name, v in value.values.items()}
            return Markup(escape(translations.gettext(value.english))) % values
        if isinstance(value, str) and value:
            return translations.gettext(value)
        return value
    return said


# The roles' names, as a page shows them (`said(person.role)`)
ROLES = (_("owner"), _("developer"), _("viewer"), _("sender"))
