"""How the dashboard writes times and money for its people
(docs/dashboard.md, "Times and money"): a time in Nepal time with its UTC instant on hover and
its Bikram Sambat date beside it, an
amount of paisa in NPR, a date or time typed in a form read as Nepal time, and a long id.  The
templates use `npr`, `nepal` and `long_id` as filters (web.py); the read models and the API keep
UTC and paisa."""
from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from typing import Any

from markupsafe import Markup, escape

from sandesh.domain.bs import bs_text, nepal_day as nepal_date
from sandesh.domain.clock import NEPAL, iso, parse_iso


# The names under which a message's timeline and an audit line's details carry paisa, and times.
MONEY = {"amount", "cost", "refund", "min_credit", "rates"}
TIMES = {"expiresAt", "sendAt", "notBefore", "since", "until", "previous_until"}


def npr(paisa: int, language: str = "en") -> str:
    """`NPR 1,234.56` for 123456 paisa, `NPR 1,23,456.78` for 12345678 (Indian grouping, Babel's:
    i18n.py); `नेरू 1,234.56` in Nepali; a debit as `NPR -1.00`."""
    from .i18n import npr as formatted
    shown = formatted(abs(paisa), language)
    return shown.replace(" ", " -", 1) if paisa < 0 else shown


def nepal(moment: float | str, language: str = "en") -> Markup:
    """A time (epoch seconds, or ISO 8601 as the read models give it) in Nepal time, to the second,
    in a <time> element whose title is the same instant in UTC, and its day in Bikram Sambat
    beside it: after it in English, first in Nepali."""
    at = moment if isinstance(moment, (int, float)) else parse_iso(moment)
    local = datetime.fromtimestamp(at, NEPAL)
    utc = datetime.fromtimestamp(at, timezone.utc)
    shown = Markup('<time datetime="{}" title="{} UTC">{}</time>').format(
        iso(at), utc.strftime("%Y-%m-%d %H:%M:%S"), local.strftime("%Y-%m-%d %H:%M:%S"))
    bs = Markup('<span class="bs">{}</span>').format(bs_text(at, language))
    return bs + Markup(" ") + shown if language == "ne" else shown + Markup(" ") + bs


def nepal_day(at: float, language: str = "en") -> Markup:
    """The Nepal day of an instant, in AD and in Bikram Sambat (first in Nepali)."""
    ad = Markup('<span class="day">{}</span>').format(nepal_date(at).isoformat())
    bs = Markup('<span class="bs">{}</span>').format(bs_text(at, language))
    return bs + Markup(" ") + ad if language == "ne" else ad + Markup(" ") + bs


def long_id(text: str) -> Markup:
    """An id as a page shows it: whole on a wide screen; on a phone its prefix and first 8
    characters with an ellipsis (docs/dashboard.md, "On a phone"), the whole id in its title and on
    the page the link leads to."""
    prefix, _, rest = text.partition("_")
    short = f"{prefix}_{rest[:8]}…" if rest and len(rest) > 12 else text
    return Markup('<span class="id-full">{}</span><span class="id-short" title="{}">{}</span>').format(text, text, short)


def day_start(day: date) -> float:
    """The instant a Nepal calendar day begins (18:15 UTC the day before)."""
    return datetime(day.year, day.month, day.day, tzinfo=NEPAL).timestamp()


def next_day_start(day: date) -> float:
    return day_start(day + timedelta(days=1))


def typed_moment(text: str) -> float:
    """A time typed in a `datetime-local` field (YYYY-MM-DDTHH:MM), read as Nepal time unless it
    carries an offset; ValueError when it is not a time."""
    typed = datetime.fromisoformat(text)
    return (typed if typed.tzinfo else typed.replace(tzinfo=NEPAL)).timestamp()


def details(fields: dict[str, Any]) -> Markup:
    """`name: value` pairs of a timeline entry or an audit line, with paisa in NPR and times in
    Nepal time."""
    return Markup(", ").join(Markup("{}: {}").format(name, _value(name, value))
                             for name, value in fields.items() if value is not None)


def _value(name: str, value: Any) -> Any:
    if isinstance(value, dict):
        inner = {key: _value(name if name == "rates" else key, item) for key, item in value.items()}
        return Markup("{") + Markup(", ").join(Markup("{}: {}").format(k, v) for k, v in inner.items()) + Markup("}")
    if name in MONEY and isinstance(value, int) and not isinstance(value, bool):
        return npr(value)
    if name in TIMES and isinstance(value, (str, int, float)) and not isinstance(value, bool):
        try:
            return nepal(value)
        except (ValueError, OverflowError):
            return escape(value)
    return value
