"""Pure rules of the foundation: settings, credentials, gating, aggregates. No database."""
import re

import pytest

from sandesh.domain.access import refusal
from sandesh.domain.client import Client, check_webhook_url
from sandesh.domain.clock import FixedClock, iso, parse_iso
from sandesh.domain.credentials import new_api_key, new_webhook_secret, sha256_hex, shown_prefix
from sandesh.domain.errors import InvalidInput, InvalidTransition
from sandesh.domain.settings import ConfigurationError, Settings
from sandesh.domain.types import parse_npr, parse_rates, parse_types
from sandesh.domain.workspace import Workspace


def test_settings_come_from_the_environment_with_safe_defaults():
    settings = Settings.from_env({})
    assert settings.clock_mode == "system" and not settings.webhook_allow_private
    settings = Settings.from_env({"SANDESH_CLOCK": "test", "SANDESH_WEBHOOK_ALLOW_PRIVATE": "1",
                                  "DATABASE_URL": "postgresql://x/y"})
    assert settings.test_clock and settings.webhook_allow_private and settings.database_url == "postgresql://x/y"


def test_settings_refuse_an_unknown_clock_mode():
    with pytest.raises(ConfigurationError):
        Settings.from_env({"SANDESH_CLOCK": "fast"})


@pytest.mark.parametrize("key", ["", "short", "x" * 31])
def test_a_secret_key_shorter_than_32_characters_is_refused(key):
    with pytest.raises(ConfigurationError, match="at least 32"):
        Settings.from_env({"SANDESH_SECRET_KEY": key}).require_secret_key()


def test_api_key_is_a_live_prefix_and_48_lowercase_hex_characters():
    key = new_api_key()
    assert re.fullmatch(r"sk_live_[0-9a-f]{48}", key)
    assert new_api_key() != key
    assert shown_prefix(key) == key[:12] and len(sha256_hex(key)) == 64


def test_webhook_secret_is_whsec_and_32_random_bytes_in_base64url():
    secret = new_webhook_secret()
    assert re.fullmatch(r"whsec_[A-Za-z0-9_-]{43}", secret)


@pytest.mark.parametrize("enabled, status, method, expected", [
    (False, "active", "GET", "client_disabled"),
    (False, "pending", "POST", "client_disabled"),
    (True, "pending", "GET", None),
    (True, "pending", "POST", "workspace_pending"),
    (True, "active", "GET", None),
    (True, "active", "POST", None),
    (True, "suspended", "GET", None),
    (True, "suspended", "POST", "workspace_suspended"),
])
def test_gating_by_client_and_workspace_status(enabled, status, method, expected):
    """GET of a suspended workspace works (docs/api.md, "Authentication")."""
    assert refusal(enabled, status, method) == expected


def _workspace() -> Workspace:
    return Workspace(name="Acme", types=["otp"], rates={"otp": 100}, actor="t", at=0.0)


def test_a_new_workspace_is_pending_and_activation_makes_it_active():
    workspace = _workspace()
    assert workspace.status == "pending"
    workspace.activate(actor="t", at=1.0)
    assert workspace.status == "active"
    with pytest.raises(InvalidTransition):
        workspace.activate(actor="t", at=2.0)


def test_suspend_and_reinstate():
    workspace = _workspace()
    workspace.activate(actor="t", at=1.0)
    workspace.suspend(actor="t", at=2.0)
    assert workspace.status == "suspended"
    with pytest.raises(InvalidTransition):
        workspace.suspend(actor="t", at=3.0)
    workspace.reinstate(actor="t", at=3.0)
    assert workspace.status == "active"


@pytest.mark.parametrize("amount", [0, -5])
def test_a_credit_must_be_positive(amount):
    with pytest.raises(InvalidInput):
        _workspace().credit(amount, None, actor="t", at=1.0)


def test_rates_and_types_are_parsed_strictly():
    assert parse_rates(["otp=150", "promotional=0"]) == {"otp": 150, "promotional": 0}
    assert parse_types("promotional,otp") == ["otp", "promotional"]
    for bad in (["otp=1.5"], ["sms=10"], ["otp"], ["otp=-1"]):
        with pytest.raises(InvalidInput):
            parse_rates(bad)
    with pytest.raises(InvalidInput):
        parse_types("otp,marketing")


def test_an_amount_in_npr_has_at_most_two_decimals_and_becomes_paisa():
    assert [parse_npr(t) for t in ("10", "12.5", " 500.50 ", "0")] == [1000, 1250, 50050, 0]
    for bad in ("1.234", "-1", "Rs 5", "", "NaN", "1e3x", "1e30", "9" * 40):
        with pytest.raises(InvalidInput):
            parse_npr(bad)


@pytest.mark.parametrize("url", ["http://example.com/hook", "ftp://x", "https://", "example.com"])
def test_a_webhook_url_must_be_https(url):
    with pytest.raises(InvalidInput):
        check_webhook_url(url)


def test_secret_rotation_keeps_the_previous_secret_only_during_a_grace_period():
    client = Client(workspace_id="ws_1", brand="B", webhook_url=None, rate_limit=20, key_hash="h", key_prefix="p",
                    secret_sealed="old", secret_hash="oh", actor="t", at=0.0)
    client.rotate_secret("new", "nh", 24, actor="t", at=100.0)
    assert client.previous_secret_sealed == "old" and client.previous_secret_until == 100.0 + 24 * 3600
    client.rotate_secret("newer", "nh2", 0, actor="t", at=200.0)
    assert client.previous_secret_sealed is None and client.secret_sealed == "newer"
    with pytest.raises(InvalidInput):
        client.rotate_secret("x", "y", 169, actor="t", at=300.0)


def test_times_are_iso_8601_utc_with_z():
    clock = FixedClock(1_800_000_000.0)
    assert iso(clock.now()) == "2027-01-15T08:00:00.000Z"
    assert parse_iso("2027-01-15T08:00:00Z") == 1_800_000_000.0
