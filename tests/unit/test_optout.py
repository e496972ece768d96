"""Opt-outs of promotional messages, the pure rules (docs/api.md, "Opt-out"; docs/design.md,
"Opt-outs"): the reply words, the aggregate's idempotent changes, which types are held back, and
how the audit reads them. No database."""
import pytest

from sandesh.domain.audit import audit_line, operator_change
from sandesh.domain.optout import (HELP, OPERATOR, RECIPIENT, REPLY, START, STOP, OptOut, Word, confirmation,
                                   held_back, help_id, optout_id, reply_word)
from sandesh.domain.segments import segment


@pytest.mark.parametrize("text, word", [
    ("STOP", Word(STOP, "en")), ("stop", Word(STOP, "en")), ("  Stop  ", Word(STOP, "en")),
    ("\nSTOP\r\n", Word(STOP, "en")), ("UNSUBSCRIBE", Word(STOP, "en")), ("Unsubscribe", Word(STOP, "en")),
    ("Band", Word(STOP, "en")), ("RADDA", Word(STOP, "en")), ("रोक", Word(STOP, "ne")), (" रोक ", Word(STOP, "ne")),
    ("बन्द", Word(STOP, "ne")), ("रद्द", Word(STOP, "ne")),
    ("START", Word(START, "en")), (" suru ", Word(START, "en")), ("सुरु", Word(START, "ne")),
    ("help", Word(HELP, "en")), ("Sahayog", Word(HELP, "en")), ("सहयोग", Word(HELP, "ne")),
])
def test_a_reply_that_is_only_one_word_in_any_case_means_it_in_its_language(text, word):
    assert reply_word(text) == word


def test_a_devanagari_word_typed_decomposed_is_the_same_word():
    import unicodedata
    assert reply_word(unicodedata.normalize("NFD", "बन्द")) == Word(STOP, "ne")


@pytest.mark.parametrize("text", ["", "stop please", "STOP.", "don't stop", "ST OP", "STOPP", "Thank you!",
                                  "starting", "help me", "band baja"])
def test_any_other_reply_is_no_word(text):
    assert reply_word(text) is None


@pytest.mark.parametrize("meaning", [STOP, START])
@pytest.mark.parametrize("language", ["en", "ne"])
def test_a_confirmation_is_one_sms_in_the_words_language_and_names_the_workspace(meaning, language):
    text = confirmation(meaning, language, "Pasal")
    assert text.startswith("Pasal: ") and segment(text).segments == 1
    assert segment(confirmation(meaning, language, "Sagarmatha Kirana Pasal, Kathmandu")).segments == 1
    assert (segment(text).encoding == "UCS-2") == (language == "ne")
    assert ("START" if meaning == STOP else "STOP") in text


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


def test_a_help_answer_is_one_a_day_per_workspace_and_number():
    assert help_id("ws_1", "9779841000001", "2026-11-29") == help_id("ws_1", "9779841000001", "2026-11-29")
    assert len({help_id("ws_1", "9779841000001", "2026-11-29"), help_id("ws_1", "9779841000001", "2026-11-30"),
                help_id("ws_2", "9779841000001", "2026-11-29"), help_id("ws_1", "9779841000002", "2026-11-29")}) == 4
