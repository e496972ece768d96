"""The dashboard under /dashboard (docs/dashboard.md): server-rendered pages in the same app
as the API, every form working without JavaScript.  People sign in with email and password;
the pages call the same use cases as the `sandesh` command."""
from __future__ import annotations

from typing import Any, Callable, ContextManager

import falcon.asgi

from sandesh.domain.application import Sandesh

from ..health import Ready
from ..uploads.children import Readers
from ..waiting import Blocking, Hashing
from .audit import AuditLog
from .campaigns import CampaignAction, CampaignPage, Campaigns
from .contacts import ContactListPage, Contacts, Templates
from .clients import ClientAction, Clients
from .messages import Messages, MessagesCsv, Timeline
from .ops import add_ops
from .optouts import OptOuts
from .overview import Overview, WorkspaceHome
from .pages import Home, Language, SetPassword, SignIn, SignOut, Static
from .people import People, PersonAction
from .send import Hints, Send, SendConfirm
from .totp import Code, Enroll, Requirement
from .webhooks import Delivery, Outage, Redeliver, Webhooks
from .web import Web


def add_dashboard(app: falcon.asgi.App, sandesh: Sandesh, connection: Callable[[], ContextManager[Any]],
                  blocking: Blocking, *, csrf_keys: Callable[[], tuple[bytes, ...]], trusted_proxies: tuple[str, ...], ready: Ready,
                  public_url: str, hashing: Hashing | None = None) -> None:
    web = Web(csrf_keys, trusted_proxies, public_url, sandesh.clock)
    parts = (sandesh, connection, blocking, web, hashing or Hashing())
    readers = Readers()  # uploaded lists, read on a child process of this one
    app.add_route("/dashboard", Home(*parts))
    app.add_route("/dashboard/sign-in", SignIn(*parts))
    app.add_route("/dashboard/sign-in/code", Code(*parts))
    app.add_route("/dashboard/sign-in/enroll", Enroll(*parts, signing_in=True))
    app.add_route("/dashboard/authenticator", Enroll(*parts, signing_in=False))
    app.add_route("/dashboard/language", Language(*parts))
    app.add_route("/dashboard/sign-out", SignOut(*parts))
    app.add_route("/dashboard/sign-out-everywhere", SignOut(*parts, everywhere=True))
    app.add_route("/dashboard/set-password/{token}", SetPassword(*parts))
    for home in ("/dashboard/w/{workspace_id}", "/dashboard/w/{workspace_id}/"):
        app.add_route(home, WorkspaceHome(*parts))
    app.add_route("/dashboard/w/{workspace_id}/overview", Overview(*parts))
    app.add_route("/dashboard/w/{workspace_id}/clients", Clients(*parts))
    app.add_route("/dashboard/w/{workspace_id}/clients/{client_id}/{action}", ClientAction(*parts))
    app.add_route("/dashboard/w/{workspace_id}/authentication-codes", Requirement(*parts))
    app.add_route("/dashboard/w/{workspace_id}/people", People(*parts))
    app.add_route("/dashboard/w/{workspace_id}/people/{person_id}/{action}", PersonAction(*parts))
    app.add_route("/dashboard/w/{workspace_id}/messages", Messages(*parts))
    app.add_route("/dashboard/w/{workspace_id}/messages.csv", MessagesCsv(*parts))
    app.add_route("/dashboard/w/{workspace_id}/messages/{message_id}", Timeline(*parts))
    app.add_route("/dashboard/w/{workspace_id}/webhooks", Webhooks(*parts))
    app.add_route("/dashboard/w/{workspace_id}/webhooks/outage", Outage(*parts))
    app.add_route("/dashboard/w/{workspace_id}/webhooks/{delivery_id}", Delivery(*parts))
    app.add_route("/dashboard/w/{workspace_id}/webhooks/{delivery_id}/redeliver", Redeliver(*parts))
    app.add_route("/dashboard/w/{workspace_id}/opt-outs", OptOuts(*parts))
    app.add_route("/dashboard/w/{workspace_id}/audit", AuditLog(*parts))
    app.add_route("/dashboard/w/{workspace_id}/send", Send(*parts, readers=readers))
    app.add_route("/dashboard/w/{workspace_id}/send/confirm", SendConfirm(*parts))
    app.add_route("/dashboard/w/{workspace_id}/send/hints", Hints(*parts))
    app.add_route("/dashboard/w/{workspace_id}/campaigns", Campaigns(*parts))
    app.add_route("/dashboard/w/{workspace_id}/campaigns/{campaign_id}", CampaignPage(*parts))
    app.add_route("/dashboard/w/{workspace_id}/campaigns/{campaign_id}/{action}", CampaignAction(*parts))
    app.add_route("/dashboard/w/{workspace_id}/contacts", Contacts(*parts, readers=readers))
    contact_list = ContactListPage(*parts, readers=readers)
    app.add_route("/dashboard/w/{workspace_id}/contacts/{list_id}", contact_list)
    app.add_route("/dashboard/w/{workspace_id}/contacts/{list_id}/{action}", contact_list)
    templates = Templates(*parts)
    app.add_route("/dashboard/w/{workspace_id}/templates", templates)
    app.add_route("/dashboard/w/{workspace_id}/templates/{template_id}/delete", templates)
    app.add_route("/dashboard/static/{name}", Static())
    add_ops(app, parts, ready)
