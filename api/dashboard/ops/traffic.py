"""The Traffic page (docs/dashboard.md, "Traffic"): the queue's depth by message type and its
oldest waiting message's age, the messages accepted and sent per minute over the last hours,
the projections' lag, the readiness checks of GET /v1/ready, and the SMS switch with Switch
off (with a reason) and Switch on, the use case of `sandesh sms disable|enable`."""
from __future__ import annotations

from typing import Any

import falcon.asgi

from sandesh.domain.errors import DomainError
from sandesh.domain.sim import SMS_SWITCH_ID
from sandesh.projections import console, dispatch, registry

from ...health import Ready
from .page import OpsPage

MINUTES = 180  # the chart's window: the last three hours
QUEUE_CAP = 100_000  # waiting messages are counted up to this (a bounded count, as GET /metrics does)
CHART_HEIGHT, STEP = 100, 4  # pixels: the chart's height, and the width of one minute


class TrafficPage(OpsPage):
    def __init__(self, *parts: Any, ready: Ready):
        super().__init__(*parts)
        self.ready = ready

    async def show(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, person: dict[str, Any], *,
                   status: int = 200, errors: dict[str, str] | None = None) -> None:
        readiness = await self.blocking(self.ready.checks)
        now, queue, (accepted, sent), switch = await self.blocking(self._read)
        self.web.page(req, resp, "ops/traffic.html", status=status, title="Traffic", person=person, now=now,
                      queue=queue, chart=chart(accepted, sent), readiness=readiness, switch=switch,
                      errors=errors or {}, hours=MINUTES // 60)

    def _read(self) -> tuple[float, dict[str, Any], tuple[list[int], list[int]], dict[str, Any] | None]:
        now = self.sandesh.clock.now()
        with self.connection() as conn:
            return (now, dispatch.waiting(conn, QUEUE_CAP), console.per_minute(conn, now, MINUTES),
                    registry.fetch_one(conn, "sms_switch", "id", SMS_SWITCH_ID))


def chart(accepted: list[int], sent: list[int]) -> dict[str, Any]:
    """The two lines of the per-minute chart as SVG points, scaled to the busiest minute."""
    top = max(accepted + sent) or 1

    def points(counts: list[int]) -> str:
        return " ".join(f"{i * STEP},{CHART_HEIGHT - round(n * CHART_HEIGHT / top)}" for i, n in enumerate(counts))

    return {"accepted": points(accepted), "sent": points(sent), "top": top, "width": len(accepted) * STEP,
            "height": CHART_HEIGHT, "total_accepted": sum(accepted), "total_sent": sum(sent)}


class Traffic(TrafficPage):
    """GET /dashboard/ops/traffic."""

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        person = await self.operator(req, resp)
        if person is not None:
            await self.show(req, resp, person)


class SmsSwitch(TrafficPage):
    """POST /dashboard/ops/sms/off (with a reason) and /dashboard/ops/sms/on."""

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, action: str) -> None:
        posted = await self.operator_change(req, resp)
        if posted is None:
            return
        form, person = posted.fields, posted.person
        if action not in ("on", "off"):
            return self.web.not_found(req, resp, person)
        reason = form.get("reason", "").strip()
        if action == "off" and not reason:
            return await self.show(req, resp, person, status=400,
                                   errors={"reason": "say why, for the audit and for whoever switches it on"})
        try:
            await self.blocking(self.sandesh.operators.set_sms_switch, action == "on", reason or None, self.actor(person))
        except DomainError as problem:
            return await self.show(req, resp, person, status=400, errors={"switch": str(problem)})
        self.web.redirect(resp, "/dashboard/ops/traffic")
