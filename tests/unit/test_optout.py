"""Opt-outs of promotional messages, the pure rules (docs/api.md, "Opt-out"; docs/design.md,
"Opt-outs"): stop words, the aggregate's idempotent changes, which types are held back, and
how the audit reads them. No database."""
import pytest

from sandesh.domain.audit import audit_line, operator_change
from sandesh.domain.optout import (OPERATOR, RECIPIENT, REPLY, START, STOP, OptOut, held_back, optout_id,
                                   stop_word)


@pytest.mark.parametrize("text", ["STOP", "stop", "  Stop  ", "\nSTOP\r\n", "UNSUBSCRIBE", "Unsubscribe", "रोक",
                                  " रोक "])
def test_a_reply_that_is_only_a_stop_word_in_any_case_is_stop(text):
    assert stop_word(text) == STOP


@pytest.mark.parametrize("text", ["START", "start", " Start "])
def test_start_in_any_case_is_start(text):
    assert stop_word(text) == START


@pytest.mark.parametrize("text", ["", "stop please", "STOP.", "don't stop", "ST OP", "STOPP", "Thank you!",
                                  "starting"])
def test_any_other_reply_is_no_stop_word(text):
    assert stop_word(text) is None


def test_only_promotional_messages_are_held_back():
    assert held_back("promotional")
    assert not held_back("transactional") and not held_back("otp")


def test_the_id_is_one_per_workspace_and_number():
    assert optout_id("ws_a", "9779812345678") == optout_id("ws_a", "9779812345678")
    assert optout_id("ws_a", "9779812345678") != optout_id("ws_b", "9779812345678")
    assert OptOut(workspace_id="ws_a", number="9779812345678").id == optout_id("ws_a", "9779812345678")


def test_opting_out_twice_records_one_event_and_start_records_one_more():
    optout = OptOut(workspace_id="ws_a", number="9779812345678")
    assert optout.change(True, REPLY, RECIPIENT, "in_1", at=10.0)
    assert not optout.change(True, OPERATOR, "asha", None, at=11.0)
    assert optout.change(False, REPLY, RECIPIENT, "in_2", at=12.0)
    assert not optout.change(False, REPLY, RECIPIENT, "in_3", at=13.0)
    events = optout.collect_events()
    assert [type(e).__name__ for e in events] == ["Opened", "OptedOut", "OptedIn"]
    assert (events[1].source, events[1].reply_id, events[1].number) == (REPLY, "in_1", "9779812345678")


def test_opting_in_a_number_never_opted_out_records_nothing():
    optout = OptOut(workspace_id="ws_a", number="9779812345678")
    assert not optout.change(False, OPERATOR, "asha", None, at=10.0)
    assert not optout.opted_out


def test_an_operators_change_is_an_audit_line_of_its_workspace_and_a_recipients_is_not():
    optout = OptOut(workspace_id="ws_a", number="9779812345678")
    optout.change(True, OPERATOR, "asha", None, at=10.0)
    optout.change(False, REPLY, RECIPIENT, "in_9", at=11.0)
    _, added, removed = optout.collect_events()
    assert operator_change(added) and not operator_change(removed)
    line = audit_line(added, {}.get)
    assert (line["action"], line["actor"], line["workspaceId"]) == ("optout.added", "asha", "ws_a")
    assert line["details"]["number"] == "9779812345678"
