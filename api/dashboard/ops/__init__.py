"""The operator team's console under /dashboard/ops: workspaces, the SIM pool, traffic and
health, replies, and finding a message (docs/dashboard.md, "The operator team's console").
Every change calls the same use case as the `sandesh` command, audited with the person as the
actor."""
from __future__ import annotations

from typing import Any

import falcon.asgi

from ...health import Ready
from .audit import ServiceAudit
from .lookup import FindMessage
from .people import Team, TeamAction
from .replies import Replies
from .sim import AddSim, SimPage, SimPin, SimSettings
from .sims import SimAction, SimRows
from .traffic import SmsSwitch, Traffic
from .workspaces import BrandRequest, ClientRateLimit, WorkspaceAction, WorkspaceDetail, Workspaces


def add_ops(app: falcon.asgi.App, parts: tuple[Any, ...], ready: Ready) -> None:
    app.add_route("/dashboard/ops", Workspaces(*parts), suffix="home")
    app.add_route("/dashboard/ops/workspaces", Workspaces(*parts))
    app.add_route("/dashboard/ops/workspaces/{workspace_id}", WorkspaceDetail(*parts))
    app.add_route("/dashboard/ops/workspaces/{workspace_id}/{action}", WorkspaceAction(*parts))
    app.add_route("/dashboard/ops/workspaces/{workspace_id}/clients/{client_id}/rate-limit", ClientRateLimit(*parts))
    app.add_route("/dashboard/ops/workspaces/{workspace_id}/clients/{client_id}/brand", BrandRequest(*parts))
    app.add_route("/dashboard/ops/sims", AddSim(*parts, route_window=ready.route_window))
    app.add_route("/dashboard/ops/sims/rows", SimRows(*parts, route_window=ready.route_window))
    app.add_route("/dashboard/ops/sims/{sim_id}", SimPage(*parts))
    app.add_route("/dashboard/ops/sims/{sim_id}/settings", SimSettings(*parts))
    app.add_route("/dashboard/ops/sims/{sim_id}/pin", SimPin(*parts))
    app.add_route("/dashboard/ops/sims/{sim_id}/{action}", SimAction(*parts, route_window=ready.route_window))
    app.add_route("/dashboard/ops/traffic", Traffic(*parts, ready=ready))
    app.add_route("/dashboard/ops/sms/{action}", SmsSwitch(*parts, ready=ready))
    app.add_route("/dashboard/ops/messages", FindMessage(*parts))
    app.add_route("/dashboard/ops/replies", Replies(*parts))
    app.add_route("/dashboard/ops/audit", ServiceAudit(*parts))
    app.add_route("/dashboard/ops/people", Team(*parts))
    app.add_route("/dashboard/ops/people/{person_id}/{action}", TeamAction(*parts))
