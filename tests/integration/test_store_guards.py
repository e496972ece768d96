"""The store's guards come back as typed domain errors (projections/storage/store.py GUARDS), chosen by
the constraint PostgreSQL names, never by the text of the error; a refused append leaves
nothing behind."""
from __future__ import annotations

import orjson
import psycopg
import pytest

from sandesh.api import answers

from sandesh.domain.errors import (GuardRefused, IdempotencyConflict, IdempotencyKeyTaken, InsufficientBalance,
                                   NameTaken, OtpLimited, Refused)
from sandesh.domain.ports import Caller
from sandesh.domain.sending import parse_otp_send, parse_send, request_hash
from sandesh.domain.usecases.sending import Accepted, Replayed
from tests.helpers import funded_workspace


def request(to="9779812345678", text="Your order shipped"):
    parsed, problems = parse_send({"to": to, "text": text})
    assert problems == []
    return parsed


def caller(runtime, workspace_id, **overrides):
    client, _, _ = runtime.sandesh.operators.create_client(workspace_id, "Guards", None, None, "t")
    fields = dict(client_id=client.id, workspace_id=workspace_id, brand="Guards", workspace_status="active",
                  rates={"otp": 100, "transactional": 100, "promotional": 100}, allowed_types=["otp", "transactional"],
                  sms_enabled=True, has_route=True, promo_hours=None)
    return Caller(**{**fields, **overrides})


def balance(runtime, workspace_id):
    with runtime.connection() as conn:
        return conn.execute("SELECT balance FROM workspaces WHERE id = %s", (workspace_id,)).fetchone()["balance"]


def test_a_debit_below_zero_is_insufficient_balance_from_the_check_constraint(runtime):
    workspace = funded_workspace(runtime.sandesh, "Short", 150, "t")
    who = caller(runtime, workspace)
    runtime.sandesh.sending.send(who.client_id, workspace, request(), 100)
    with pytest.raises(InsufficientBalance) as refused:
        runtime.sandesh.sending.send(who.client_id, workspace, request(), 100)
    cause = refused.value.__cause__
    assert isinstance(cause, psycopg.errors.CheckViolation)
    assert cause.diag.constraint_name == "balance_never_negative"
    assert balance(runtime, workspace) == 50  # the refused debit left nothing behind


def test_the_send_use_case_names_the_cost_it_could_not_pay(runtime):
    workspace = funded_workspace(runtime.sandesh, "Shorter", 99, "t")
    with pytest.raises(InsufficientBalance) as refused:
        runtime.sandesh.sending.send_sms(caller(runtime, workspace), request())
    assert refused.value.cost == 100
    assert "(100 paisa)" in str(refused.value)


def test_a_second_commit_under_one_idempotency_key_is_key_taken(runtime):
    workspace = funded_workspace(runtime.sandesh, "Keys", 10_000, "t")
    who = caller(runtime, workspace)
    runtime.sandesh.sending.send(who.client_id, workspace, request(), 100, "key-1", "hash")
    with pytest.raises(IdempotencyKeyTaken) as refused:
        runtime.sandesh.sending.send(who.client_id, workspace, request(), 100, "key-1", "hash")
    assert refused.value.__cause__.diag.constraint_name == "idempotency_keys_pkey"
    assert balance(runtime, workspace) == 9_900


def test_a_replayed_key_returns_the_first_body_and_another_body_conflicts(runtime):
    workspace = funded_workspace(runtime.sandesh, "Replays", 10_000, "t")
    who = caller(runtime, workspace)
    body = {"to": "9779812345678", "text": "Your order shipped"}
    first = runtime.sandesh.sending.send_sms(who, request(), "key-2", request_hash(body))
    again = runtime.sandesh.sending.send_sms(who, request(), "key-2", request_hash(body))
    assert isinstance(first, Accepted) and isinstance(again, Replayed)
    assert again.response.encode() == orjson.dumps(answers.accepted(first.message))  # the first 202, byte for byte
    with pytest.raises(IdempotencyConflict) as conflict:
        runtime.sandesh.sending.send_sms(who, request(text="Other"), "key-2", request_hash({**body, "text": "Other"}))
    assert conflict.value.reason == IdempotencyConflict.DIFFERENT_BODY
    assert balance(runtime, workspace) == 9_900


def test_refusals_come_before_the_charge(runtime):
    workspace = funded_workspace(runtime.sandesh, "Refusals", 10_000, "t")
    with pytest.raises(Refused) as refused:
        runtime.sandesh.sending.send_sms(caller(runtime, workspace, sms_enabled=False), request())
    assert refused.value.code == "sms_disabled"
    assert balance(runtime, workspace) == 10_000


def test_a_sim_name_or_iccid_taken_is_name_taken(runtime):
    runtime.sandesh.sims.add_sim("guard-sim", "loop://", 115200, None, "t")
    with pytest.raises(NameTaken, match="a SIM named 'guard-sim' exists already") as refused:
        runtime.sandesh.sims.add_sim("guard-sim", "loop://", 115200, None, "t")
    assert refused.value.__cause__.__cause__.diag.constraint_name == "sims_name_key"
    first = runtime.sandesh.sims.add_sim("guard-a", "loop://", 115200, None, "t")
    second = runtime.sandesh.sims.add_sim("guard-b", "loop://", 115200, None, "t")
    runtime.sandesh.sims.identify_sim(first.id, "8997701000000000001", "429010000000001")
    with pytest.raises(NameTaken, match="ICCID 8997701000000000001"):
        runtime.sandesh.sims.identify_sim(second.id, "8997701000000000001", "429010000000002")


def test_the_fourth_code_to_one_number_is_refused_by_the_window_guard(runtime):
    workspace = funded_workspace(runtime.sandesh, "Codes", 10_000, "t")
    who = caller(runtime, workspace)
    for purpose in ("login", "signup", "reset"):
        otp_request, problems = parse_otp_send({"to": "9779800000444", "purpose": purpose})
        assert problems == []
        runtime.sandesh.otp.send_otp(who, otp_request, "203.0.113.9")
    otp_request, _ = parse_otp_send({"to": "9779800000444", "purpose": "payment"})
    with pytest.raises(OtpLimited) as refused:
        runtime.sandesh.otp.send_otp(who, otp_request, "203.0.113.9")
    assert refused.value.limit == "otp_number_limit"
    assert isinstance(refused.value.__cause__, GuardRefused)  # raised by the store, then given its wait
    assert refused.value.__cause__.__cause__.diag.constraint_name == "otp_number_limit"
    assert 1 <= refused.value.retry_after <= 600
    assert balance(runtime, workspace) == 10_000 - 3 * 100
