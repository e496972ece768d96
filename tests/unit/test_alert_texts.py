"""What an alert and the daily digest say, within one SMS (domain/alerts.py)."""
from __future__ import annotations

from sandesh.domain.alerts import digest_text, one_sms
from sandesh.domain.segments import segment


def test_a_text_that_fits_one_sms_is_kept_whole():
    assert one_sms("Sandesh: no usable SIM in the pool: messages wait") == \
        "Sandesh: no usable SIM in the pool: messages wait"


def test_a_long_english_text_is_cut_to_160_gsm_characters_not_to_70():
    cut = one_sms("Sandesh: SIM ntc-1 quarantined, " + "the modem answered ERROR " * 10)
    assert len(cut) == 160 and cut.endswith("...") and segment(cut).encoding == "GSM-7"
    assert segment(cut).segments == 1


def test_a_long_nepali_text_is_cut_to_70_characters():
    cut = one_sms("सन्देश " * 30)
    assert len(cut) == 70 and cut.endswith("…") and segment(cut).segments == 1


def test_the_digest_names_its_day_in_both_calendars_in_one_sms():
    counts = {"accepted": 123_456, "delivered": 120_000, "undelivered": 1_234, "failed": 2_222, "alerts": 12,
              "usable": 10, "enabled": 12, "waiting": 99_999}
    text = digest_text("2026-04-14", counts)  # Baisakh 1 of 2083 (tests/unit/test_bs.py)
    assert text.startswith("Sandesh 2026-04-14 (1 Baishakh 2083): 123456 accepted, 120000 delivered")
    assert text.endswith("99999 waiting") and segment(text).segments == 1
