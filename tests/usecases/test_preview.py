"""A preview is what a send of the same text is charged (domain/preview.py, Sending.preview), for any text."""
from __future__ import annotations

import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sandesh.domain.preview import REPLACEMENTS, preview
from sandesh.domain.segments import GSM7, GSM7_BASIC, GSM7_EXTENSION, MAX_SEGMENTS, encoding_of
from sandesh.domain.sending import parse_preview, parse_send
from sandesh.domain.types import MESSAGE_TYPES

from .conftest import Store, a_number

# Texts near the segment boundaries: GSM-7 basic and extension characters, the characters with a
# stand-in, a few that have none (Devanagari, an emoji outside the BMP).
ALPHABET = st.sampled_from([c for c in GSM7_BASIC if c != "\x1b"] + list(GSM7_EXTENSION) + list(REPLACEMENTS)
                           + ["न", "म", "😀", "ñ"])
TEXTS = st.text(ALPHABET, min_size=1, max_size=1000).filter(str.strip)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=TEXTS, message_type=st.sampled_from(MESSAGE_TYPES))
def test_a_previews_segments_encoding_and_cost_are_what_a_send_is_charged(store: Store, text, message_type):
    caller = store.caller(store.workspace(1_000_000))
    previewed, problems = parse_preview({"text": text, "messageType": message_type}, time.time())
    assert not problems
    shown = store.sandesh.sending.preview(caller, previewed)
    request, problems = parse_send({"to": a_number(), "text": text, "messageType": message_type}, time.time())
    assert shown.sendable == (request is not None)
    if request is None:
        assert shown.segmentation.segments > MAX_SEGMENTS and problems[0].code == "too_long"
        return
    message = store.sandesh.sending.send_sms(caller, request).message
    assert (shown.segmentation.segments, shown.segmentation.encoding, shown.cost) == (
        message.segments, message.encoding, message.cost)


@given(text=TEXTS)
def test_the_replaced_text_is_gsm7_and_priced_as_its_own_preview(text):
    rates = {"transactional": 7, "otp": 11, "promotional": 13}
    shown = preview(text, rates, "promotional")
    if shown.gsm7_text is None:
        return
    assert encoding_of(shown.gsm7_text) == GSM7 and shown.gsm7.encoding == GSM7
    again = preview(shown.gsm7_text, rates, "promotional")
    assert (again.segmentation.segments, again.cost) == (shown.gsm7.segments, shown.gsm7_cost)
    assert all(text[c.position] == c.character and c.replacement is not None for c in shown.characters)
