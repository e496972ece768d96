"""The audit log page of a workspace (docs/dashboard.md, "Audit log"): the changes made to it
and its clients and people, newest first, 50 a page, filtered by action, client, person and
dates; the lines are those `sandesh audit --workspace` lists (the same use case,
History.audit).  Every person of the workspace may read it."""
from __future__ import annotations

from typing import Any

import falcon.asgi

from sandesh.domain.audit import ACTIONS
from sandesh.domain.clock import parse_iso
from sandesh.domain.person import actor_of
from sandesh.projections import people, registry

from .pages import Page
from .paging import PAGE, Paged, choices, client_choices, day_range, requested

FIELDS = ("action", "client", "person", "from", "to")


class AuditLog(Page):
    """GET /dashboard/w/{workspace_id}/audit?action=&client=&person=&from=&to=, and before= or
    after= a line's number for the next or previous page."""

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, workspace_id: str) -> None:
        person = await self.member(req, resp, workspace_id)
        if person is None:
            return
        typed = {name: (req.get_param(name) or "").strip() for name in FIELDS}
        since, until, errors = day_range(typed)
        lines = await self.blocking(self.app.history.audit, workspace_id)
        page = requested(req)
        found = Paged(one_page(lines, matching(typed, since, until), page), page, lambda line: str(line["n"]))
        clients, persons = await self.blocking(self._choices, workspace_id)
        self.web.page(req, resp, "audit.html", status=400 if errors else 200, title="Audit log", person=person,
                      workspace_id=workspace_id, typed=typed, errors=errors, lines=[readable(l) for l in found.rows],
                      pages=found.links(f"/dashboard/w/{workspace_id}/audit", typed),
                      options={"action": choices(sorted(ACTIONS.values())), "client": client_choices(clients),
                               "person": choices(p["email"] for p in persons)})

    def _choices(self, workspace_id: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        with self.connection() as conn:
            return registry.clients(conn, workspace_id), people.listed(conn, workspace_id)


def matching(typed: dict[str, str], since: float | None, until: float | None) -> Any:
    """Whether a line passes the filters: its action, its client, the person who made the
    change or whom it changed (`person.*`), and its time in [since, until)."""
    def passes(line: dict[str, Any]) -> bool:
        at = parse_iso(line["at"])
        email = typed["person"]
        return ((not typed["action"] or line["action"] == typed["action"])
                and (not typed["client"] or line["clientId"] == typed["client"])
                and (not email or line["actor"] == actor_of(email) or line["details"].get("email") == email)
                and (since is None or at >= since) and (until is None or at < until))
    return passes


def one_page(lines: list[dict[str, Any]], passes: Any, page: tuple[str, str] | None) -> list[dict[str, Any]]:
    """PAGE + 1 lines that pass, newest first, numbered by their place in the whole log (oldest
    1), which stays as later changes are added: before or after the line `page` names."""
    numbered = [{**line, "n": n} for n, line in enumerate(lines, 1)]
    try:
        side, at = (page[0], max(int(page[1]), 0)) if page else ("before", len(numbered) + 1)
    except ValueError:
        side, at = "before", len(numbered) + 1
    if side == "after":
        return [line for line in numbered[at:] if passes(line)][:PAGE + 1][::-1]
    return [line for line in reversed(numbered[:max(at - 1, 0)]) if passes(line)][:PAGE + 1]


def readable(line: dict[str, Any]) -> dict[str, Any]:
    """An audit line with its details as `name: value` text."""
    details = ", ".join(f"{name}: {value}" for name, value in line["details"].items())
    subject = line["clientId"] or ""
    return {**line, "details": details, "subject": subject}
