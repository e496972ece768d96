"""What a campaign would send, as pure functions (domain/campaign_plan.py); the use cases around
them are tests/usecases/test_campaigns.py."""
from __future__ import annotations

import orjson
import pytest

from sandesh.domain.campaign_plan import Draft, SendForm, plan
from sandesh.domain.errors import Refused
from sandesh.domain.ports import SendingState
from sandesh.domain.recipients import Recipient, Refusal

NOW = 1_800_000_000.0
STATE = SendingState("ws_1", "active", 10_000, {"transactional": 100, "otp": 100, "promotional": 40},
                     ["transactional", "promotional"], None, True, NOW + 60)


def test_a_message_over_6_segments_is_refused_for_its_recipient_alone():
    """A placeholder can make one recipient's text longer than another's."""
    recipients = [Recipient(2, "9779812345678", {"note": "short"}), Recipient(3, "9779812345679", {"note": "x" * 1000})]
    planned = plan(STATE, recipients, [], "Hi {note}", "transactional", None, set(), NOW)
    assert [m.to for m in planned.messages] == ["9779812345678"]
    assert planned.refused == (Refusal(3, "9779812345679", "over 6 segments (7)"),)


@pytest.mark.parametrize("state, code", [
    (SendingState("ws_1", "active", 0, {}, ["transactional"], None, True, NOW + 60), "forbidden"),
    (SendingState("ws_1", "active", 0, {}, ["promotional"], None, False, NOW + 60), "sms_disabled"),
    (SendingState("ws_1", "active", 0, {}, ["promotional"], None, True, NOW - 1), "unavailable"),
    (SendingState("ws_1", "active", 0, {}, ["promotional"], None, True, None), "unavailable"),
], ids=["type", "switch", "route gone", "never a route"])
def test_a_plan_is_refused_in_a_sends_order_of_checks(state, code):
    with pytest.raises(Refused) as refused:
        plan(state, [Recipient(1, "9779812345678")], [], "Sale", "promotional", None, set(), NOW)
    assert refused.value.code == code


def test_a_draft_kept_by_the_release_before_is_read_and_kept_in_the_same_shape():
    """A draft lives an hour: one a process of the release before kept is sent by this one, and
    the other way round during an upgrade."""
    kept = {"recipients": [[1, "9779812345678", {"name": "Ram"}]], "refused": [[2, "12345", "not a Nepal mobile number"]],
            "text": "Namaste {name}", "type": "promotional", "sendAt": NOW + 3600, "source": "the numbers typed",
            "template": "Greeting"}
    draft = Draft.loads(orjson.dumps(kept).decode())
    assert draft == Draft([Recipient(1, "9779812345678", {"name": "Ram"})], [Refusal(2, "12345", "not a Nepal mobile number")],
                          "Namaste {name}", "promotional", NOW + 3600, "the numbers typed", "Greeting")
    assert orjson.loads(draft.dumps()) == kept


def test_a_forms_sources_are_where_its_recipients_come_from():
    assert SendForm(" 9812345678 ").sources == ["the numbers typed"]
    assert SendForm(" ", uploaded=True, list_id="cls_1").sources == ["a file", "a contact list"]
    assert SendForm().sources == []
