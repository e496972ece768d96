"""The console's SIM form without a browser (docs/dashboard.md, "SIM pool"): each field of
`sandesh sim add|update` read and checked on its own, so a problem is said beside its field, and
an update records only what changed."""
from __future__ import annotations

from sandesh.api.dashboard.ops.sim_form import changed_settings, shown_settings, typed_settings, typed_sim
from sandesh.domain.sim import CLEAR

SIM = {"baud": 115200, "host": None, "daily_cap": 500, "monthly_cap": None, "pace": None, "balance_ussd": "*400#",
       "min_credit": 2500, "balance_every": None}


def test_each_bad_field_is_said_under_its_own_name_and_an_empty_one_is_no_setting():
    settings, errors = typed_settings({"baud": "", "pace": "31", "daily_cap": "ten", "balance_ussd": "400",
                                       "min_credit": "12.345", "host": " modems-1 "})
    assert set(errors) == {"baud", "pace", "daily_cap", "balance_ussd", "min_credit"}
    assert "at most 30" in errors["pace"] and "not a whole number" in errors["daily_cap"]
    assert (settings["host"], settings["monthly_cap"], settings["balance_every"]) == ("modems-1", None, None)


def test_a_new_sims_name_and_port_are_checked_with_its_settings():
    sim, errors = typed_sim({"name": "sim_1", "port": " ", "baud": "9600", "min_credit": "25"})
    assert set(errors) == {"name", "port"}
    sim, errors = typed_sim({"name": " ntc-1 ", "port": "/dev/ttyUSB0", "baud": "9600", "min_credit": "25"})
    assert errors == {}
    assert (sim["name"], sim["port"], sim["settings"]["baud"], sim["settings"]["min_credit"]) == (
        "ntc-1", "/dev/ttyUSB0", 9600, 2500)


def test_an_update_carries_only_what_differs_and_an_emptied_field_clears_its_setting():
    settings, errors = typed_settings({**shown_settings(SIM), "daily_cap": "", "pace": "20"})
    assert errors == {}
    assert changed_settings(settings, SIM) == {"daily_cap": CLEAR, "pace": 20}


def test_the_form_shows_the_minimum_credit_in_npr_and_an_unset_setting_empty():
    shown = shown_settings(SIM)
    assert (shown["min_credit"], shown["daily_cap"], shown["host"]) == ("25.00", "500", "")
