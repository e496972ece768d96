"""The SIM pool page (docs/dashboard.md, "SIM pool"): every SIM as `sandesh sim list` shows it,
grouped by host so a host whose SIMs went silent stands out, under the alerts that hold now
(docs/operations.md, "Alerts": what `sandesh alerts status` lists), refreshed in place every few
seconds by a script served from the package (static/live.js polls the table's fragment);
Disable, Enable and Release through the use cases of `sandesh sim` (Add SIM and a SIM's own
page: ops/sim.py)."""
from __future__ import annotations

from typing import Any

import falcon.asgi

from sandesh.domain.errors import DomainError
from sandesh.domain.pacing import PARTS_PER_WINDOW
from sandesh.domain.sim_plan import day_start
from sandesh.projections import alerts, console, registry, sim_health

from .page import OpsPage

ROOT = "/dashboard/ops/sims"
REFRESH_SECONDS = 3  # the page shows a change within this and one answer's time
ACTIONS = ("disable", "enable", "release")


class PoolPage(OpsPage):
    def __init__(self, *parts: Any, route_window: float):
        super().__init__(*parts)
        self.route_window = route_window

    async def show(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, person: dict[str, Any],
                   template: str, *, status: int = 200, errors: dict[str, str] | None = None,
                   typed: dict[str, str] | None = None) -> None:
        now, sims, holding = await self.blocking(self._pool)
        self.web.page(req, resp, template, status=status, title="SIM pool", person=person, sims=sims, alerts=holding,
                      hosts=hosts(sims), now=now, errors=errors or {}, typed=typed or {"baud": "115200"},
                      refresh=REFRESH_SECONDS, window=PARTS_PER_WINDOW)

    def _pool(self) -> tuple[float, list[dict[str, Any]], list[dict[str, Any]]]:
        now = self.sandesh.clock.now()
        with self.connection() as conn:
            rows = sim_health.pool(conn, now, self.route_window)
            today = console.sent_since(conn, day_start(now))
            holding = alerts.open_alerts(conn)
        for row in rows:
            row["today"] = today.get(row["id"], {"messages": 0, "parts": 0})
            row["actions"] = [("disable", "Disable") if row["enabled"] else ("enable", "Enable")]
            if row["state"] == "quarantined":
                row["actions"].append(("release", "Release"))
        return now, rows, holding


def hosts(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each host (the dispatcher's `--host`; "any" for SIMs without one) with its SIMs, how many
    of the enabled ones its dispatcher reported on within the route window, and when it last
    reported: `silent` when it drives enabled SIMs and reported on none of them."""
    found: dict[str, dict[str, Any]] = {}
    for row in rows:
        host = found.setdefault(row["host"] or "any", {"name": row["host"] or "any", "sims": 0, "enabled": 0,
                                                        "reporting": 0, "last": None})
        host["sims"] += 1
        host["enabled"] += bool(row["enabled"])
        host["reporting"] += bool(row["enabled"] and row["reported"])
        if row["heartbeat_at"] is not None:
            host["last"] = max(host["last"] or 0.0, row["heartbeat_at"])
    for host in found.values():
        host["silent"] = host["enabled"] > 0 and host["reporting"] == 0
    return list(found.values())


class SimPool(PoolPage):
    """GET /dashboard/ops/sims: the page."""

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        person = await self.operator(req, resp)
        if person is not None:
            await self.show(req, resp, person, "ops/sims.html")


class SimRows(PoolPage):
    """GET /dashboard/ops/sims/rows: the pool alone (hosts and SIMs), what the page's script
    puts in place of its own every few seconds; not a use of the session (docs/dashboard.md,
    "SIM pool")."""

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        person = await self.operator(req, resp, used=False)
        if person is not None:
            await self.show(req, resp, person, "ops/pool.html")


class SimAction(PoolPage):
    """POST /dashboard/ops/sims/{sim_id}/{action}: disable, enable, release (a quarantine)."""

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, sim_id: str, action: str) -> None:
        posted = await self.operator_change(req, resp)
        if posted is None:
            return
        person = posted.person
        if action not in ACTIONS or await self.blocking(self._sim, sim_id) is None:
            return self.web.not_found(req, resp, person)
        sims = self.sandesh.sims
        change = {"disable": sims.disable_sim, "enable": sims.enable_sim, "release": sims.release_sim}[action]
        try:
            await self.blocking(change, sim_id, self.actor(person))
        except DomainError as problem:
            return await self.show(req, resp, person, "ops/sims.html", status=400,
                                   errors={f"{sim_id}:{action}": str(problem)})
        self.web.redirect(resp, ROOT)

    def _sim(self, sim_id: str) -> dict[str, Any] | None:
        with self.connection() as conn:
            return registry.find_sim(conn, "id", sim_id)
