"""A sentence a person of a workspace may read on the dashboard (docs/dashboard.md, "Languages"):
a refusal the domain raises, kept with its English template and its values, so that a page can
say it in the person's language (api/dashboard/i18n.py, `said`) while the API, the `sandesh`
command and the logs read the English as before.

`python -m scripts.devtools.catalog` finds every `_()` call of the domain's modules and puts its
template in the dashboard's catalog, where the Nepali is written."""
from __future__ import annotations

from typing import Any


class Said(str):
    """The English sentence as a str, with the template (`english`) and the `values` of its
    %(name)s places.  A value that is itself a Said (a role, a message type) is said in the
    page's language too."""
    english: str
    values: dict[str, Any]

    def __new__(cls, english: str, **values: Any) -> "Said":
        made = super().__new__(cls, english % values if values else english)
        made.english, made.values = english, values
        return made


def _(english: str, **values: Any) -> Said:
    """Mark a sentence for the dashboard's catalog; `values` fill its %(name)s places."""
    return Said(english, **values)


def told(problem: Exception) -> str:
    """What a refusal says: the sentence it was raised with, as marked (a page shows it in its
    language), else its English."""
    sentence = problem.args[0] if problem.args else None
    return sentence if isinstance(sentence, Said) else str(problem)


def packed(value: Any) -> Any:
    """A Said as JSON keeps it ({"said": template, "values": …}), for a process that hands it to
    another (the upload reader's child); anything else as it is."""
    if isinstance(value, Said):
        return {"said": value.english, "values": {name: _packed_value(v) for name, v in value.values.items()}}
    return value


def _packed_value(value: Any) -> Any:
    """A sentence's value as JSON holds it: a number or a string as it is, any other (an
    exception, say) as the text it is shown as."""
    if isinstance(value, Said):
        return packed(value)
    return value if value is None or isinstance(value, (str, int, float)) else str(value)


def unpacked(value: Any) -> Any:
    """The Said that `packed` kept, made again; anything else as it is."""
    if isinstance(value, dict) and "said" in value:
        return Said(value["said"], **{name: unpacked(v) for name, v in value["values"].items()})
    return value
