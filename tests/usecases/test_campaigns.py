"""Sending from the dashboard, as use cases (domain/usecases/campaigns.py; docs/dashboard.md,
"Sending"): the Send page's Preview and "Send N messages", and a campaign's cancel."""
from __future__ import annotations

from datetime import datetime

import pytest

from sandesh.domain.campaign_plan import SendForm
from sandesh.domain.client import Client
from sandesh.domain.clock import NEPAL, SystemClock
from sandesh.domain.message import QUEUED, SCHEDULED
from sandesh.domain.recipients import BAD_NUMBER, OPTED_OUT, Listed, Recipient, Refusal
from sandesh.domain.release import OLDEST_PEER, VERSION
from sandesh.domain.usecases.campaigns import NotSent, Sent, dashboard_client_id

from tests import memory

from .conftest import Store, a_number
from .test_promo_hours import closed_now

OWNER, ACTOR = "person-owner", "user:owner@pasal.example"


def shop(store: Store, amount: int = 10_000, types: list[str] | None = None, hours: str = "off") -> str:
    """An active workspace with `amount` paisa, promotional hours `hours`, and a SIM that is a route."""
    workspace = store.workspace(amount, types)
    store.sandesh.operators.set_promo_hours(workspace, hours, "tester")
    store.route()
    return workspace


def local(number: str) -> str:
    return number[3:]  # the ten digits people type


def nepal_input(moment: float) -> str:
    return datetime.fromtimestamp(moment, NEPAL).strftime("%Y-%m-%dT%H:%M")


def sent(store: Store, workspace: str, form: SendForm, person: str = OWNER) -> Sent:
    preview = store.sandesh.campaigns.preview(workspace, person, form)
    assert preview.token is not None, preview.errors
    done = store.sandesh.campaigns.send(workspace, person, preview.token, ACTOR)
    assert isinstance(done, Sent), done
    return done


def test_a_preview_plans_each_message_as_it_leaves_and_refuses_lines_with_their_reasons(store: Store):
    workspace = shop(store)
    a, b = a_number(), a_number()
    typed = f"+977 {local(a)[:3]}-{local(a)[3:6]}-{local(a)[6:]}\n977 {local(b)}\n12345\n{local(a)}"
    preview = store.sandesh.campaigns.preview(workspace, OWNER, SendForm(typed, "x" * 161, "transactional"))
    assert preview.errors == {} and preview.token
    plan = preview.plan
    assert [(m.line, m.to, m.segments, m.encoding, m.cost) for m in plan.messages] == [
        (1, a, 2, "GSM-7", 200), (2, b, 2, "GSM-7", 200)]
    assert plan.refused == (Refusal(3, "12345", BAD_NUMBER), Refusal(4, a, "a duplicate of line 1"))
    assert (plan.total, plan.balance, plan.send_at) == (400, 10_000, None)
    assert preview.source == "the numbers typed"
    assert store.balance(workspace) == 10_000  # a preview charges nothing


def test_placeholders_are_filled_from_each_recipients_columns_and_an_empty_one_is_refused(store: Store):
    workspace = shop(store)
    ram, sita = a_number(), a_number()
    file = Listed([Recipient(2, ram, {"नाम": "राम"}), Recipient(3, sita, {"नाम": ""})], columns=["नाम", "mobile"],
                  source="parents.csv: numbers in the column 'mobile'")
    preview = store.sandesh.campaigns.preview(workspace, OWNER, SendForm(text="नमस्ते {नाम}", message_type="transactional",
                                                                          file=file))
    assert [(m.to, m.text, m.encoding) for m in preview.plan.messages] == [(ram, "नमस्ते राम", "UCS-2")]
    assert preview.plan.refused == (Refusal(3, sita, "empty placeholder {नाम}"),)
    unknown = store.sandesh.campaigns.preview(workspace, OWNER, SendForm(text="Hi {class}",
                                                                          message_type="transactional", file=file))
    assert unknown.errors == {"text": "The list has no column {class}: the columns are नाम, mobile."}
    assert unknown.token is None


@pytest.mark.parametrize("form, errors", [
    (SendForm("9812345678", "Hi", "transactional", list_id="cls_1"),
     {"recipients": "Send to one of the numbers typed, a contact list, not to 2 at once."}),
    (SendForm("", "Hi", "transactional"),
     {"recipients": "Type or paste the numbers, upload a list, or choose a contact list."}),
    (SendForm("9812345678", " ", "otp"), {"type": "Choose transactional or promotional.", "text": "Type the message."}),
    (SendForm("9812345678", "Hi", "transactional", send_at="tomorrow"), {"send_at": "A date and time, Nepal time."}),
    (SendForm("9812345678", "Hi", "transactional", send_at="2099-01-01T09:30"),
     {"send_at": "A time from now to 30 days ahead, Nepal time."}),
    (SendForm("9812345678", "Hi", "transactional", template_id="tpl_gone"),
     {"template": "That template is gone: choose another."}),
    (SendForm("", "Hi", "transactional", list_id="cls_gone"),
     {"list": "That contact list is gone: choose another."}),
], ids=["two sources", "no source", "type and text", "not a time", "past 30 days", "no template", "no list"])
def test_a_form_with_a_problem_is_answered_by_field_and_nothing_is_kept(store: Store, form, errors):
    preview = store.sandesh.campaigns.preview(shop(store), OWNER, form)
    assert (preview.errors, preview.plan, preview.token) == (errors, None, None)


def test_a_workspace_that_may_not_send_is_told_why_before_a_plan(store: Store):
    allowed = shop(store, types=["transactional"])
    refused = store.sandesh.campaigns.preview(allowed, OWNER, SendForm("9812345678", "Sale", "promotional"))
    assert refused.errors == {"recipients": "This workspace may not send promotional messages: ask the operators."}
    pending = store.sandesh.operators.create_workspace("Pending", None, {}, "tester").id
    refused = store.sandesh.campaigns.preview(pending, OWNER, SendForm("9812345678", "Hi", "transactional"))
    assert refused.errors == {"recipients": "The workspace is pending: it sends once the operators activate it."}


def test_a_preview_posted_twice_sends_one_campaign_charged_once(store: Store):
    workspace = shop(store)
    numbers = [a_number() for _ in range(3)]
    preview = store.sandesh.campaigns.preview(workspace, OWNER, SendForm("\n".join(numbers), "Holiday tomorrow",
                                                                          "transactional"))
    first = store.sandesh.campaigns.send(workspace, OWNER, preview.token, ACTOR)
    again = store.sandesh.campaigns.send(workspace, OWNER, preview.token, ACTOR)
    assert isinstance(first, Sent) and again == first
    assert store.balance(workspace) == 10_000 - 300
    campaign = store.sandesh.campaigns.find(workspace, first.campaign_id)
    assert (campaign.actor, campaign.cost, campaign.refused, len(campaign.message_ids)) == (ACTOR, 300, 0, 3)
    messages = [store.sandesh.history.message(m) for m in campaign.message_ids]
    assert sorted(m.to for m in messages) == sorted(numbers)
    assert {(m.status, m.client_id) for m in messages} == {(QUEUED, dashboard_client_id(workspace))}


def test_a_draft_is_the_persons_own_and_sends_nothing_for_another(store: Store):
    workspace = shop(store)
    preview = store.sandesh.campaigns.preview(workspace, OWNER, SendForm(local(a_number()), "Hi", "transactional"))
    other = store.sandesh.campaigns.send(workspace, "person-other", preview.token, ACTOR)
    assert other == NotSent("This preview is older than an hour: preview again.")
    assert store.balance(workspace) == 10_000


def test_a_campaign_the_balance_cannot_pay_sends_nothing_and_says_by_how_much(store: Store):
    """Its messages, its record, their charge and the workspace's Dashboard client are one append:
    all or nothing."""
    workspace = shop(store, amount=250)
    preview = store.sandesh.campaigns.preview(workspace, OWNER, SendForm(
        "\n".join(a_number() for _ in range(3)), "Too many", "transactional"))
    short = store.sandesh.campaigns.send(workspace, OWNER, preview.token, ACTOR)
    assert short == NotSent("The balance is short of the campaign's cost by NPR 0.50; nothing was sent.", preview.plan)
    assert store.balance(workspace) == 250
    assert store.sandesh.log.find(dashboard_client_id(workspace), Client) is None
    store.sandesh.operators.credit_workspace(workspace, 50, None, "tester")
    assert isinstance(store.sandesh.campaigns.send(workspace, OWNER, preview.token, ACTOR), Sent)  # the same form
    assert store.balance(workspace) == 0


def test_a_promotion_skips_the_numbers_that_opted_out_and_a_transactional_text_does_not(store: Store):
    workspace = shop(store)
    stays, stopped = a_number(), a_number()
    store.sandesh.operators.opt_out(workspace, stopped, "operator", "tester")
    typed = f"{local(stays)}\n{local(stopped)}"
    promoted = store.sandesh.campaigns.preview(workspace, OWNER, SendForm(typed, "Dashain offer", "promotional"))
    assert [m.to for m in promoted.plan.messages] == [stays]
    assert promoted.plan.refused == (Refusal(2, stopped, OPTED_OUT),)
    told = store.sandesh.campaigns.preview(workspace, OWNER, SendForm(typed, "The shop opens at 10", "transactional"))
    assert [m.to for m in told.plan.messages] == [stays, stopped]


def test_an_opt_out_between_the_preview_and_the_send_is_honoured(store: Store):
    """"Send N messages" plans the draft again on the workspace as it is then."""
    workspace = shop(store)
    stays, stops = a_number(), a_number()
    preview = store.sandesh.campaigns.preview(workspace, OWNER, SendForm(f"{local(stays)} {local(stops)}", "Offer",
                                                                          "promotional"))
    assert len(preview.plan.messages) == 2
    store.sandesh.operators.opt_out(workspace, stops, "operator", "tester")
    done = store.sandesh.campaigns.send(workspace, OWNER, preview.token, ACTOR)
    campaign = store.sandesh.campaigns.find(workspace, done.campaign_id)
    assert ([store.sandesh.history.message(m).to for m in campaign.message_ids], campaign.refused) == ([stays], 1)
    assert store.balance(workspace) == 10_000 - 100


def test_a_promotion_outside_the_promotional_hours_waits_for_their_opening(store: Store):
    hours, opening = closed_now(store.sandesh.clock.now())
    workspace = shop(store, hours=str(hours))
    form = SendForm(local(a_number()), "Tihar sale", "promotional")
    preview = store.sandesh.campaigns.preview(workspace, OWNER, form)
    assert preview.plan.send_at == pytest.approx(opening, abs=1)
    campaign = store.sandesh.campaigns.find(workspace, sent(store, workspace, form).campaign_id)
    message = store.sandesh.history.message(campaign.message_ids[0])
    assert (campaign.send_at, message.status) == (pytest.approx(opening, abs=1), SCHEDULED)
    transactional = store.sandesh.campaigns.preview(workspace, OWNER, SendForm(local(a_number()), "Hi", "transactional"))
    assert transactional.plan.send_at is None


def test_a_contact_list_and_a_template_fill_the_preview_and_the_campaign_names_the_template(store: Store):
    workspace = shop(store)
    ram, sita = a_number(), a_number()
    made = store.sandesh.contacts.create_list(workspace, "Class 5 parents", [
        Recipient(1, ram, {"name": "Ram"}), Recipient(2, sita, {"name": "Sita"})], ACTOR)
    template = store.sandesh.contacts.save_template(workspace, "Meeting", "Namaste {name}, the meeting is on Sunday.",
                                                    ACTOR)
    form = SendForm(message_type="transactional", list_id=made.id, template_id=template.id)
    preview = store.sandesh.campaigns.preview(workspace, OWNER, form)
    assert preview.text == "Namaste {name}, the meeting is on Sunday."
    assert preview.columns == ["name"] and preview.source == "the contact list 'Class 5 parents'"
    assert [(m.to, m.text) for m in preview.plan.messages] == [
        (ram, "Namaste Ram, the meeting is on Sunday."), (sita, "Namaste Sita, the meeting is on Sunday.")]
    done = store.sandesh.campaigns.send(workspace, OWNER, preview.token, ACTOR)
    assert store.sandesh.campaigns.find(workspace, done.campaign_id).template == "Meeting"
    changed = store.sandesh.campaigns.preview(workspace, OWNER, SendForm(
        message_type="transactional", list_id=made.id, template_id=template.id, text="Hi {name}"))
    changed_done = store.sandesh.campaigns.send(workspace, OWNER, changed.token, ACTOR)
    assert store.sandesh.campaigns.find(workspace, changed_done.campaign_id).template is None  # no longer the template


def test_what_has_not_left_is_canceled_and_refunded_once(store: Store):
    workspace = shop(store)
    later = nepal_input(store.sandesh.clock.now() + 86_400)
    done = sent(store, workspace, SendForm(" ".join(local(a_number()) for _ in range(3)), "Meeting on Sunday",
                                           "transactional", send_at=later))
    assert store.balance(workspace) == 10_000 - 300
    canceled = store.sandesh.campaigns.cancel(workspace, done.campaign_id, ACTOR)
    assert (canceled.count, canceled.refunded) == (3, 300)
    assert store.balance(workspace) == 10_000
    again = store.sandesh.campaigns.cancel(workspace, done.campaign_id, ACTOR)
    assert (again.count, again.refunded) == (0, 0)
    assert store.sandesh.campaigns.find(workspace, done.campaign_id).canceled == 3


def test_the_hints_are_a_preview_of_the_text_at_the_workspaces_rates(store: Store):
    workspace = shop(store)
    store.sandesh.operators.set_rates(workspace, {"promotional": 40}, "tester")
    hints = store.sandesh.campaigns.hints(workspace, "नमस्ते", "promotional")
    assert (hints.segmentation.segments, hints.segmentation.encoding, hints.cost) == (1, "UCS-2", 40)
    assert store.sandesh.campaigns.hints(workspace, "Hi", "otp").cost == 100  # the page sends no OTP: transactional


def test_sending_waits_for_the_upgrade_to_be_finalized():
    """Over memory alone: a PostgreSQL process reads the gate from its database."""
    app = memory.in_memory(SystemClock())
    store = Store(app, lambda workspace_id: memory.balance(app, workspace_id), lambda sim_id: memory.heartbeat(app, sim_id))
    workspace = shop(store)
    preview = app.campaigns.preview(workspace, OWNER, SendForm(local(a_number()), "Hi", "transactional"))
    app.log.mapper.finalized = OLDEST_PEER
    assert app.campaigns.send(workspace, OWNER, preview.token, ACTOR) == NotSent(
        "Sending from the dashboard starts once the upgrade to this release is finalized (`sandesh upgrade finalize`).")
    app.log.mapper.finalized = VERSION
    assert isinstance(app.campaigns.send(workspace, OWNER, preview.token, ACTOR), Sent)
