"""The campaigns of a workspace (docs/dashboard.md, "Sending"): the list, and each one's page with
who sent it and when, its text, its counts as they change (the page's script asks for them
every few seconds; a reload shows them too), its messages by status, "Cancel what has not
left", and its results as a CSV file."""
from __future__ import annotations

import csv
import io
from typing import Any

import falcon.asgi

from sandesh.domain.bs import bs_iso
from sandesh.domain.clock import iso
from sandesh.domain.errors import InvalidTransition, NotFound
from sandesh.domain.person import actor_of, may_send
from sandesh.projections import campaigns

from .pages import Page
from .shown import npr
from .i18n import _

SHOWN_MESSAGES = 500
FILTERS = {name: statuses for name, statuses in campaigns.COUNTED.items()}
# The statuses' names, as the pages show them (`said(status)`): the filters' and the messages'
STATUS_NAMES = (_("waiting"), _("scheduled"), _("queued"), _("submitted"), _("sent"), _("delivered"),
                _("undelivered"), _("failed"), _("rejected"), _("canceled"))


class CampaignsPage(Page):
    section = "campaigns"

    def _campaign(self, workspace_id: str, campaign_id: str) -> tuple[dict[str, Any], dict[str, int]] | None:
        """The campaign and its counts; one just sent, which the read model has yet to follow,
        from the log, all of it waiting."""
        with self.connection() as conn:
            found = campaigns.one(conn, workspace_id, campaign_id)
            if found is not None:
                return found, campaigns.counts(conn, found)
        logged = self.sandesh.campaigns.find(workspace_id, campaign_id)
        if logged is None:
            return None
        found = {"id": logged.id, "workspace_id": workspace_id, "client_id": logged.client_id, "by": logged.actor,
                 "message_type": logged.message_type, "text": logged.text, "template": logged.template, "send_at": logged.send_at,
                 "recipients": len(logged.message_ids), "refused": logged.refused, "cost": logged.cost,
                 "canceled": logged.canceled, "refunded": 0, "created_at": logged.created_at}
        return found, {name: len(logged.message_ids) if name == "waiting" else 0 for name in campaigns.COUNTED}


class Campaigns(CampaignsPage):
    """GET /dashboard/w/{workspace_id}/campaigns: the newest first."""

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, workspace_id: str) -> None:
        person = await self.member(req, resp, workspace_id)
        if person is None:
            return
        found = await self.blocking(self._list, workspace_id)
        self.web.page(req, resp, "campaigns.html", title=_("Campaigns"), person=person, workspace_id=workspace_id,
                      campaigns=found, npr=npr, may_send=may_send(person["role"]))

    def _list(self, workspace_id: str) -> list[dict[str, Any]]:
        with self.connection() as conn:
            return campaigns.of_workspace(conn, workspace_id)


class CampaignPage(CampaignsPage):
    """GET /dashboard/w/{workspace_id}/campaigns/{campaign_id}?status=: the campaign."""

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, workspace_id: str,
                     campaign_id: str) -> None:
        person = await self.member(req, resp, workspace_id)
        if person is None:
            return
        chosen = req.get_param("status") or ""
        found = await self.blocking(self._page, workspace_id, campaign_id, chosen)
        if found is None:
            return self.web.not_found(req, resp, person)
        campaign, counts, listed, text = found
        self.web.page(req, resp, "campaign.html", title=_("Campaign"), person=person, workspace_id=workspace_id,
                      campaign=campaign, counts=counts, messages=listed, text=text, chosen=chosen,
                      filters=list(FILTERS), npr=npr, shown_at_most=SHOWN_MESSAGES,
                      may_cancel=may_send(person["role"]) and counts["waiting"] > 0,
                      canceled=req.get_param("canceled"))

    def _page(self, workspace_id: str, campaign_id: str,
              status: str) -> tuple[dict[str, Any], dict[str, int], list[dict[str, Any]], str | None] | None:
        found = self._campaign(workspace_id, campaign_id)
        if found is None:
            return None
        campaign, counts = found
        with self.connection() as conn:
            listed = campaigns.messages(conn, campaign_id, FILTERS.get(status), SHOWN_MESSAGES)
        return campaign, counts, listed, self.sandesh.texts.open(campaign["text"])


class CampaignAction(CampaignsPage):
    """GET .../campaigns/{campaign_id}/counts (the page's script: JSON), GET .../results.csv, and
    POST .../cancel."""

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, workspace_id: str,
                     campaign_id: str, action: str) -> None:
        person = await self.member(req, resp, workspace_id, used=action != "counts")  # a refresh is no use
        if person is None:
            return
        if action == "counts":  # the page's refresh (live.js): the counts' fragment
            found = await self.blocking(self._campaign, workspace_id, campaign_id)
            if found is None:
                return self.web.not_found(req, resp, person)
            campaign, counts = found
            self.web.page(req, resp, "campaign_counts.html", person=person, campaign=campaign, counts=counts, npr=npr)
        elif action == "results.csv":
            body = await self.blocking(self._csv, workspace_id, campaign_id)
            if body is None:
                return self.web.not_found(req, resp, person)
            resp.content_type = "text/csv; charset=utf-8"
            resp.set_header("Content-Disposition", f'attachment; filename="{campaign_id}.csv"')
            resp.data = body
        else:
            self.web.not_found(req, resp, person)

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, workspace_id: str,
                      campaign_id: str, action: str) -> None:
        posted = await self.change(req, resp, workspace_id, may_send,
                                   _("Owners, developers and senders cancel; viewers read only."))
        if posted is None:
            return
        if action != "cancel":
            return self.web.not_found(req, resp, posted.person)
        try:
            canceled = await self.blocking(self.sandesh.campaigns.cancel, workspace_id, campaign_id,
                                           actor_of(posted.person["email"]))
        except (NotFound, InvalidTransition):
            return self.web.not_found(req, resp, posted.person)
        self.web.redirect(resp, f"/dashboard/w/{workspace_id}/campaigns/{campaign_id}?canceled={canceled.count}")

    def _csv(self, workspace_id: str, campaign_id: str) -> bytes | None:
        if self._campaign(workspace_id, campaign_id) is None:
            return None
        with self.connection() as conn:
            rows = campaigns.messages(conn, campaign_id, None, None)
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(["number", "message id", "status", "error", "cost (NPR)", "created (UTC)",
                         "created (BS, Nepal day)"])
        for row in rows:
            writer.writerow([row["to"], row["id"], row["status"], row["error"] or "", f"{row['cost'] / 100:.2f}",
                             iso(row["created_at"]), bs_iso(row["created_at"])])
        return ("\ufeff" + out.getvalue()).encode()  # Excel opens UTF-8 with its BOM
