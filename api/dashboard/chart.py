"""The Overview's chart of the last 24 hours (docs/dashboard.md, "Overview"): messages per hour
by outcome, stacked bars drawn as SVG by the template (no script), and the delivery rate by
recipient operator, from the counts `projections.messages.last_day` reads."""
from __future__ import annotations

from typing import Any

from sandesh.domain import operators
from sandesh.domain.message import DELIVERED, FAILED, SENT, UNDELIVERED

from .i18n import _

OUTCOMES = (DELIVERED, SENT, FAILED, UNDELIVERED)
OTHER = "other"  # waiting (scheduled, queued, submitted) or ended otherwise (rejected, canceled)
# The outcomes' names, as the Overview shows them (`said(outcome)`)
SHOWN = (_("delivered"), _("sent"), _("failed"), _("undelivered"), _("other"))
HOURS, HEIGHT, BAR_WIDTH = 24, 120, 20


def hourly(counted: list[dict[str, Any]]) -> dict[str, Any]:
    """Each hour's bar, oldest first: its segments bottom up (outcome, count, y, height), scaled
    to the busiest hour; and the totals of each outcome."""
    hours = [dict.fromkeys((*OUTCOMES, OTHER), 0) for _ in range(HOURS)]
    for row in counted:
        hours[row["hour"]][row["status"] if row["status"] in OUTCOMES else OTHER] += row["n"]
    top = max(sum(hour.values()) for hour in hours) or 1
    bars = []
    for i, hour in enumerate(hours):
        y, segments = HEIGHT, []
        for outcome, count in hour.items():
            height = count * HEIGHT / top
            y -= height
            if count:
                segments.append({"outcome": outcome, "count": count, "y": round(y, 2), "height": round(height, 2)})
        bars.append({"x": i * BAR_WIDTH, "ago": HOURS - i, "segments": segments})
    totals = {outcome: sum(hour[outcome] for hour in hours) for outcome in (*OUTCOMES, OTHER)}
    return {"bars": bars, "totals": totals, "width": HOURS * BAR_WIDTH, "all": sum(totals.values())}


def delivery_rates(counted: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per recipient operator with messages of an outcome in the last 24 hours, busiest first:
    how many, how many delivered, and the rate (delivered of those)."""
    found: dict[str, list[int]] = {}
    for row in counted:
        if row["status"] in OUTCOMES:
            name = operators.NAMES.get(operators.of_number(row["prefix"]) or "", _("Other numbers"))
            tally = found.setdefault(name, [0, 0])
            tally[0] += row["n"]
            tally[1] += row["n"] if row["status"] == DELIVERED else 0
    return [{"operator": name, "messages": total, "delivered": delivered, "rate": delivered / total}
            for name, (total, delivered) in sorted(found.items(), key=lambda item: (-item[1][0], item[0]))]
