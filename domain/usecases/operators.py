"""The operators' use cases for workspaces, API clients and their keys, the SMS switch and
opt-outs (`sandesh workspace|client|switch|optout`, the dashboard).  Each change is an event
of the aggregate it changes, with its actor: the audit log reads them back (history.py)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, TypeVar

from eventsourcing.application import AggregateNotFoundError

from .. import phone
from ..client import (BRAND_REQUESTS_FROM, DEFAULT_GRACE_HOURS, DEFAULT_RATE_LIMIT, SERVICES_FROM, Client,
                      brand_problem, check_brand, check_compat_type, check_default_reply, check_rate_limit,
                      check_webhook_url)
from ..clock import Clock
from ..credentials import new_api_key, new_webhook_secret, sha256_hex, shown_prefix
from ..errors import InvalidInput, InvalidTransition
from ..optout import OptOut, optout_id
from ..otp import OTP_MESSAGE_FROM, check_fits, check_template, check_web_domain
from ..ports import Sealer, Texts
from ..promo_hours import parse as parse_promo_hours
from ..said import _
from ..sim import SMS_SWITCH_ID, SmsSwitch
from ..steps import Steps, retried, run
from ..types import MESSAGE_TYPES, default_rates
from ..workspace import BALANCE_ALERT_FROM, REPLIES_FROM, Workspace, balance_alert, check_help_text
from .log import Log

T = TypeVar("T", Workspace, Client, SmsSwitch)


@dataclass(frozen=True)
class Services:
    """A client's drop-in settings to change (None or empty: left as they are)."""
    compat_type: str | None = None
    keywords: tuple[str, ...] = ()      # to add
    no_keywords: tuple[str, ...] = ()   # to take back
    reply_url: str | None = None        # '' removes it
    default_reply: str | None = None    # '' removes it

    @property
    def given(self) -> bool:
        return bool(self.keywords or self.no_keywords) or any(
            v is not None for v in (self.compat_type, self.reply_url, self.default_reply))


class Operators:
    def __init__(self, log: Log, clock: Clock, sealer: Sealer, texts: Texts, webhook_guard: Callable[[str], None]):
        self.log, self.clock, self.sealer, self.texts = log, clock, sealer, texts
        self.webhook_guard = webhook_guard  # refuses a webhook URL that points inside the network

    # Workspaces
    def create_workspace(self, name: str, types: list[str] | None, rates: dict[str, int], actor: str) -> Workspace:
        if not name.strip():
            raise InvalidInput("workspace name must not be empty")
        workspace = Workspace(name=name.strip(), types=types or list(MESSAGE_TYPES),
                              rates={**default_rates(), **rates}, actor=actor, at=self.clock.now())
        self.log.save(workspace)
        return workspace

    def activate_workspace(self, workspace_id: str, actor: str) -> Workspace:
        workspace = self._workspace(workspace_id)
        workspace.activate(actor=actor, at=self.clock.now())
        return self._saved(workspace)

    def suspend_workspace(self, workspace_id: str, actor: str) -> Workspace:
        workspace = self._workspace(workspace_id)
        workspace.suspend(actor=actor, at=self.clock.now())
        return self._saved(workspace)

    def reinstate_workspace(self, workspace_id: str, actor: str) -> Workspace:
        workspace = self._workspace(workspace_id)
        workspace.reinstate(actor=actor, at=self.clock.now())
        return self._saved(workspace)

    def credit_workspace(self, workspace_id: str, amount: int, note: str | None, actor: str) -> Workspace:
        workspace = self._workspace(workspace_id)
        workspace.credit(amount=amount, note=note, actor=actor, at=self.clock.now())
        return self._saved(workspace)

    def set_rates(self, workspace_id: str, rates: dict[str, int], actor: str) -> Workspace:
        workspace = self._workspace(workspace_id)
        workspace.set_rates(rates=rates, actor=actor, at=self.clock.now())
        return self._saved(workspace)

    def set_types(self, workspace_id: str, types: list[str], actor: str) -> Workspace:
        workspace = self._workspace(workspace_id)
        workspace.set_types(types=types, actor=actor, at=self.clock.now())
        return self._saved(workspace)

    def set_promo_hours(self, workspace_id: str, hours: str, actor: str) -> Workspace:
        """`sandesh workspace set-promo-hours WS 08:00-20:00|off` (docs/api.md, "Promotional hours")."""
        workspace = self._workspace(workspace_id)
        workspace.set_promo_hours(parse_promo_hours(hours), actor=actor, at=self.clock.now())
        return self._saved(workspace)

    def set_replies(self, workspace_id: str, help_text: str | None, confirmations: bool | None,
                    actor: str) -> Workspace:
        """What the workspace answers a recipient's words with (domain/optout.py): its help text
        ('' for none) and whether opt-outs are confirmed; None leaves either as it is."""
        if not self.log.writes(Workspace.RepliesSet):
            raise InvalidTransition(_("A workspace's replies can be set once the upgrade to %(release)s is finalized "
                                      "(`sandesh upgrade finalize`).", release=REPLIES_FROM))
        workspace = self._workspace(workspace_id)
        workspace.set_replies(check_help_text(help_text) if help_text is not None else workspace.help_text,
                              confirmations if confirmations is not None else workspace.confirmations,
                              actor=actor, at=self.clock.now())
        return self._saved(workspace)

    def set_balance_alert(self, workspace_id: str, npr: str, actor: str) -> Workspace:
        """`sandesh workspace set-balance-alert WS NPR|off`, or an owner on the Overview: below
        it, the owners are told by e-mail, and the Overview says so."""
        if not self.log.writes(Workspace.BalanceAlertSet):
            raise InvalidTransition(_("A balance alert can be set once the upgrade to %(release)s is finalized "
                                      "(`sandesh upgrade finalize`).", release=BALANCE_ALERT_FROM))
        threshold = balance_alert(npr)
        workspace = self._workspace(workspace_id)
        workspace.set_balance_alert(threshold, actor=actor, at=self.clock.now())
        return self._saved(workspace)

    def require_totp(self, workspace_id: str, required: bool, actor: str) -> Workspace:
        """Owners of the workspace sign in with an authenticator app's code too (or no longer)."""
        workspace = self._workspace(workspace_id)
        workspace.require_totp(required, actor=actor, at=self.clock.now())
        return self._saved(workspace)

    def shred_texts(self, workspace_id: str, actor: str) -> int:
        """`sandesh workspace shred-texts`: destroy the keys of the workspace's texts (audited as
        workspace.texts_shredded); counts, costs and statuses stay.  Its next send gets a new key."""
        workspace = self._workspace(workspace_id)
        keys = self.texts.shred(workspace_id)
        workspace.shred_texts(keys=keys, actor=actor, at=self.clock.now())
        self.log.save(workspace)
        return keys

    # API clients
    def create_client(self, workspace_id: str, brand: str | None, webhook_url: str | None, rate_limit: int | None,
                      actor: str) -> tuple[Client, str, str]:
        """A new client of the workspace; returns it with its API key and webhook secret, shown once.
        Without a brand (the dashboard's, where the brand is asked for) it has the workspace's name."""
        workspace = self._workspace(workspace_id)
        if brand is None:
            brand = workspace.name
            if problem := brand_problem(brand.strip()):
                raise InvalidTransition(_("the workspace's name cannot be a brand (%(problem)s): the operator team "
                                          "creates this workspace's clients", problem=problem))
        key, secret = new_api_key(), new_webhook_secret()
        client = Client(
            workspace_id=workspace_id, brand=check_brand(brand), webhook_url=self._webhook_url(webhook_url),
            rate_limit=check_rate_limit(rate_limit or DEFAULT_RATE_LIMIT),
            key_hash=sha256_hex(key), key_prefix=shown_prefix(key),
            secret_sealed=self.sealer.seal(secret), secret_hash=sha256_hex(secret),
            actor=actor, at=self.clock.now(),
        )
        self.log.save(client)
        return client, key, secret

    def rotate_key(self, client_id: str, actor: str) -> tuple[Client, str]:
        key = new_api_key()
        client = self._client(client_id)
        client.rotate_key(key_hash=sha256_hex(key), key_prefix=shown_prefix(key), actor=actor, at=self.clock.now())
        return self._saved(client), key

    def rotate_secret(self, client_id: str, grace_hours: float | None, actor: str) -> tuple[Client, str]:
        """A new webhook secret; the previous one still signs for `grace_hours` (default 24)."""
        secret = new_webhook_secret()
        client = self._client(client_id)
        client.rotate_secret(sealed=self.sealer.seal(secret), secret_hash=sha256_hex(secret),
                             grace_hours=DEFAULT_GRACE_HOURS if grace_hours is None else grace_hours,
                             actor=actor, at=self.clock.now())
        return self._saved(client), secret

    def enable_client(self, client_id: str, actor: str) -> Client:
        client = self._client(client_id)
        client.enable(actor=actor, at=self.clock.now())
        return self._saved(client)

    def disable_client(self, client_id: str, actor: str) -> Client:
        client = self._client(client_id)
        client.disable(actor=actor, at=self.clock.now())
        return self._saved(client)

    def update_client(self, client_id: str, brand: str | None, webhook_url: str | None,
                      rate_limit: int | None, actor: str, otp_template: str | None = None,
                      otp_web_domain: str | None = None, services: Services | None = None) -> Client:
        """Change what is given (None leaves it as it is; an empty OTP template or web domain
        restores the default).  The OTP message must still fit with the brand it will have.
        `services`: the drop-in's settings (docs/api.md, "Moving from Sparrow or Aakash")."""
        services = services or Services()
        changes: dict[str, object] = {}
        if brand is not None:
            changes["brand"] = check_brand(brand)
        if webhook_url is not None:
            changes["webhook_url"] = self._webhook_url(webhook_url)
        if rate_limit is not None:
            changes["rate_limit"] = check_rate_limit(rate_limit)
        client = self._client(client_id)
        if (otp_template is not None or otp_web_domain is not None) and not self.log.finalized_at(OTP_MESSAGE_FROM):
            raise InvalidTransition(_("A client's OTP message can be set once the upgrade to %(release)s is finalized "
                                      "(`sandesh upgrade finalize`): earlier releases do not know it.",
                                      release=OTP_MESSAGE_FROM))
        if services.given and not self.log.finalized_at(SERVICES_FROM):
            raise InvalidTransition(_("A client's compat type, keywords, reply URL and default reply can be set once "
                                      "the upgrade to %(release)s is finalized (`sandesh upgrade finalize`).",
                                      release=SERVICES_FROM))
        brand_then, domain_then, template_then = str(changes.get("brand", client.brand)), client.otp_web_domain, \
            client.otp_template
        if otp_web_domain is not None:
            domain_then = changes["otp_web_domain"] = check_web_domain(otp_web_domain) if otp_web_domain.strip() \
                else None
        if otp_template is not None:
            template_then = changes["otp_template"] = check_template(otp_template, brand_then, domain_then) \
                if otp_template.strip() else None
        if {"brand", "otp_web_domain"} & changes.keys():
            check_fits(template_then, brand_then, domain_then)
        if services.compat_type is not None:
            changes["compat_type"] = check_compat_type(services.compat_type)
        if services.reply_url is not None:
            changes["reply_url"] = self._webhook_url(services.reply_url, reply=True)
        if services.default_reply is not None:
            changes["default_reply"] = check_default_reply(services.default_reply)
        now = self.clock.now()
        if services.keywords or services.no_keywords:
            client.change_keywords(list(services.keywords), list(services.no_keywords), actor=actor, at=now)
        if changes or not client.pending_events:
            client.update(changes=changes, actor=actor, at=now)
        return self._saved(client)

    # A client's brand is the operator team's (domain/client.py): the workspace asks for one
    def request_brand(self, client_id: str, brand: str, actor: str) -> Client:
        """The workspace asks the operator team for a brand (docs/dashboard.md, "API clients")."""
        if not self.log.writes(Client.BrandRequested):
            raise InvalidTransition(_("Asking for a brand starts once the upgrade to %(release)s is finalized "
                                      "(`sandesh upgrade finalize`).", release=BRAND_REQUESTS_FROM))
        client = self._client(client_id)
        client.request_brand(check_brand(brand), actor=actor, at=self.clock.now())
        return self._saved(client)

    def grant_brand(self, client_id: str, brand: str, actor: str) -> Client:
        """The operator team sets the brand asked for (`brand`: the one the operator saw)."""
        client = self._client(client_id)
        check_fits(client.otp_template, check_brand(brand), client.otp_web_domain)
        client.grant_brand(brand, actor=actor, at=self.clock.now())
        return self._saved(client)

    def dismiss_brand_request(self, client_id: str, brand: str, actor: str) -> Client:
        client = self._client(client_id)
        client.dismiss_brand_request(brand, actor=actor, at=self.clock.now())
        return self._saved(client)

    def _webhook_url(self, url: str | None, reply: bool = False) -> str | None:
        checked = check_webhook_url(url, reply)
        if checked is not None:
            self.webhook_guard(checked)
        return checked

    # The SMS switch
    def set_sms_switch(self, on: bool, reason: str | None, actor: str) -> SmsSwitch:
        try:
            switch = self.log.repository.get(SMS_SWITCH_ID)
        except AggregateNotFoundError:
            switch = SmsSwitch()
        if on:
            switch.enable(actor=actor, at=self.clock.now())
        else:
            switch.disable(reason=reason, actor=actor, at=self.clock.now())
        return self._saved(switch)

    # Opt-outs of promotional messages (domain/optout.py)
    def opt_out(self, workspace_id: str, number: str, source: str, actor: str) -> bool:
        """The number gets no more promotional messages of the workspace.  False, and nothing
        appended, when it had opted out already."""
        return self._change_opt_out(workspace_id, number, True, source, actor)

    def opt_in(self, workspace_id: str, number: str, source: str, actor: str) -> bool:
        """The number gets the workspace's promotional messages again; False when it had not opted out."""
        return self._change_opt_out(workspace_id, number, False, source, actor)

    def _change_opt_out(self, workspace_id: str, number: str, opted_out: bool, source: str, actor: str) -> bool:
        self._workspace(workspace_id)
        normalised = phone.normalise(number.strip())
        if normalised is None:
            raise InvalidInput(_("%(typed)s is not a Nepal mobile number: 977 and 10 digits starting 96, 97 or 98, "
                                 "e.g. 9779812345678", typed=repr(number)))

        def attempt() -> Steps[tuple[tuple[OptOut, ...], bool]]:
            optout = (self.log.find(optout_id(workspace_id, normalised), OptOut)
                      or OptOut(workspace_id=workspace_id, number=normalised))
            changed = optout.change(opted_out, source, actor, None, at=self.clock.now())
            return ((optout,) if changed else ()), changed
            yield  # a generator: its reads are plain calls (the `sandesh` command only)

        return run(retried(attempt, f"the opt-out of {normalised}"), self.log.save)

    def _workspace(self, workspace_id: str) -> Workspace:
        return self.log.get(workspace_id, Workspace, "workspace")

    def _client(self, client_id: str) -> Client:
        return self.log.get(client_id, Client, "client")

    def _saved(self, aggregate: T) -> T:
        self.log.save(aggregate)
        return aggregate
