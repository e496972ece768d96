"""A SIM's page (docs/dashboard.md, "SIM pool"): its port, device, plan and credit, whether a
PIN is set (never the PIN), and its forms: Update SIM (port, baud, host, caps, pace, balance
query, minimum credit) and Set PIN / Clear PIN, the use case of `sandesh sim update`; and Add
SIM on the pool's page, the use case of `sandesh sim add`."""
from __future__ import annotations

from typing import Any

import falcon.asgi

from sandesh.domain.errors import DomainError, NameTaken
from sandesh.projections import registry

from .page import OpsPage
from .sim_form import changed_settings, shown_settings, typed_settings, typed_sim
from .sims import ROOT, SimPool


class AddSim(SimPool):
    """GET /dashboard/ops/sims: the pool; POST: Add SIM, then its page opens."""

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        posted = await self.operator_change(req, resp)
        if posted is None:
            return
        form, person = posted.fields, posted.person
        sim, errors = typed_sim(form)
        if not errors:
            settings = {k: v for k, v in sim["settings"].items() if k not in ("baud", "host")}
            try:
                added = await self.blocking(self.sandesh.sims.add_sim, sim["name"], sim["port"],
                                            sim["settings"]["baud"], sim["settings"]["host"], self.actor(person),
                                            settings)
                return self.web.redirect(resp, f"{ROOT}/{added.id}")
            except NameTaken as problem:
                errors["name"] = str(problem)
            except DomainError as problem:
                errors["add"] = str(problem)
        await self.show(req, resp, person, "ops/sims.html", status=400, errors=errors, typed=form)


class SimPage(OpsPage):
    """GET /dashboard/ops/sims/{sim_id}."""

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, sim_id: str) -> None:
        person = await self.operator(req, resp)
        if person is not None:
            await self.show(req, resp, person, sim_id)

    async def show(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, person: dict[str, Any], sim_id: str,
                   *, status: int = 200, errors: dict[str, str] | None = None,
                   typed: dict[str, str] | None = None) -> None:
        sim = await self.blocking(self._sim, sim_id)
        if sim is None:
            return self.web.not_found(req, resp, person)
        shown = {"port": sim["port"], **shown_settings(sim)}
        self.web.page(req, resp, "ops/sim.html", status=status, title=f"SIM {sim['name']}", person=person,
                      sim=registry.sim_view(sim), typed={**shown, **(typed or {})}, errors=errors or {})

    def _sim(self, sim_id: str) -> dict[str, Any] | None:
        with self.connection() as conn:
            return registry.find_sim(conn, "id", sim_id)


class SimSettings(SimPage):
    """POST /dashboard/ops/sims/{sim_id}/settings: Update SIM; a field emptied removes its setting
    (`sandesh sim update --daily-cap off`)."""

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, sim_id: str) -> None:
        posted = await self.operator_change(req, resp)
        if posted is None:
            return
        form, person = posted.fields, posted.person
        sim = await self.blocking(self._sim, sim_id)
        if sim is None:
            return self.web.not_found(req, resp, person)
        settings, errors = typed_settings(form)
        port = form.get("port", "").strip()
        if not port:
            errors["port"] = "name a serial device (/dev/serial/by-id/…) or a pyserial URL"
        changes = changed_settings(settings, sim)
        if not errors and not changes and port == sim["port"]:
            errors["sim"] = "nothing to change: type a new value in a field"
        if not errors:
            try:
                await self.blocking(self.sandesh.sims.update_sim, sim_id, port if port != sim["port"] else None,
                                    self.actor(person), changes)
                return self.web.redirect(resp, f"{ROOT}/{sim_id}")
            except DomainError as problem:
                errors["sim"] = str(problem)
        await self.show(req, resp, person, sim_id, status=400, errors=errors, typed=form)


class SimPin(SimPage):
    """POST /dashboard/ops/sims/{sim_id}/pin: Set PIN (4 to 8 digits, kept sealed, never shown
    back; it ends a quarantine for a refused PIN), or Clear PIN (`clear` on)."""

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, sim_id: str) -> None:
        posted = await self.operator_change(req, resp)
        if posted is None:
            return
        form, person = posted.fields, posted.person
        if await self.blocking(self._sim, sim_id) is None:
            return self.web.not_found(req, resp, person)
        clear = form.get("clear") == "on"
        try:
            await self.blocking(self.sandesh.sims.update_sim, sim_id, None, self.actor(person), None,
                                None if clear else form.get("pin", "").strip(), clear)
        except DomainError as problem:
            return await self.show(req, resp, person, sim_id, status=400, errors={"pin": str(problem)})
        self.web.redirect(resp, f"{ROOT}/{sim_id}")
