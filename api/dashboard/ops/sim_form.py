"""A SIM's form fields (docs/dashboard.md, "SIM pool"): the options of `sandesh sim add` and
`sandesh sim update` (port, baud, host, and the plan's limits and balance query), read from a
posted form and checked field by field with the domain's own rules, so a problem is said
beside the field it is about."""
from __future__ import annotations

from typing import Any

from sandesh.domain.errors import InvalidInput
from sandesh.domain.sim import CLEAR, SETTINGS, check_settings, check_sim_name
from sandesh.domain.types import parse_npr

NUMBERS = ("baud", "daily_cap", "monthly_cap", "pace", "balance_every")


def typed_settings(form: dict[str, str]) -> tuple[dict[str, object], dict[str, str]]:
    """Every setting of the form (an empty field is None: the SIM has none), and the problem of
    each field that is not one, keyed by the field's name."""
    settings: dict[str, object] = {}
    errors: dict[str, str] = {}
    for name in SETTINGS:
        text = form.get(name, "").strip()
        try:
            settings[name] = _value(name, text)
            check_settings({name: settings[name]})
        except InvalidInput as problem:
            errors[name] = str(problem)
    return settings, errors


def _value(name: str, text: str) -> object:
    if not text:
        return None
    if name == "min_credit":
        return parse_npr(text)
    if name in NUMBERS:
        if not text.isdigit():
            raise InvalidInput(f"{text!r} is not a whole number")
        return int(text)
    return text


def typed_sim(form: dict[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    """A new SIM's name, port and settings (`sandesh sim add`), and the problem of each field."""
    settings, errors = typed_settings(form)
    try:
        name = check_sim_name(form.get("name", ""))
    except InvalidInput as problem:
        name, errors["name"] = "", str(problem)
    port = form.get("port", "").strip()
    if not port:
        errors["port"] = "name a serial device (/dev/serial/by-id/…) or a pyserial URL"
    return {"name": name, "port": port, "settings": settings}, errors


def changed_settings(settings: dict[str, object], sim: dict[str, Any]) -> dict[str, object]:
    """The settings that differ from the SIM's (a field emptied removes its setting: CLEAR), for
    `Sims.update_sim`, which records only what changes."""
    return {name: (CLEAR if value is None else value) for name, value in settings.items() if value != sim[name]}


def shown_settings(sim: dict[str, Any]) -> dict[str, str]:
    """The SIM's settings as its form shows them (minimum credit in NPR)."""
    shown = {name: "" if sim[name] is None else str(sim[name]) for name in SETTINGS}
    if sim["min_credit"] is not None:
        shown["min_credit"] = f"{sim['min_credit'] / 100:.2f}"
    return shown
