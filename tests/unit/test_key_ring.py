"""The server's key ring (projections/keys.py): until a rotation everything is written in the
formats of releases before it; after one, what the new key writes names it, and every key
held reads everything; OTP codes and CSRF tokens made with an older key stay good while it is held."""
import base64

import pytest
from eventsourcing.cryptography import AESCipher
from eventsourcing.utils import Environment

from sandesh.domain.otp import hash_code
from sandesh.domain.settings import ConfigurationError, Settings
from sandesh.projections.keys import (EVENT_MARK, KeyMissing, KeyRing, RingCipher, RingHashes, RingSealer,
                                      derive_key, key_id)

OLD = "old-key-0123456789abcdef0123456789abcdef"
NEW = "new-key-fedcba9876543210fedcba9876543210"
STATE = b'{"to":"9779812345678","text":"namaste"}'


def rotated(*secrets: str) -> KeyRing:
    """A ring after the rotation from OLD to its newest key."""
    ring = KeyRing(secrets)
    ring.follow([{"id": key_id(OLD), "position": 0, "state": "previous"},
                 {"id": ring.newest, "position": 1, "state": "current"}])
    return ring


def first(*secrets: str) -> KeyRing:
    """A ring on a database that never rotated: OLD is its first and current key."""
    ring = KeyRing(secrets)
    ring.follow([{"id": key_id(OLD), "position": 0, "state": "current"}])
    return ring


def test_before_a_rotation_events_are_in_the_library_format_that_earlier_releases_read():
    library = AESCipher(Environment(env={"CIPHER_KEY": base64.b64encode(derive_key(OLD, "event-store")).decode()}))
    for ring in (KeyRing([OLD]), first(NEW, OLD)):  # holding the next key already changes nothing
        ours = RingCipher(ring)
        assert library.decrypt(ours.encrypt(STATE)) == STATE
        assert ours.decrypt(library.encrypt(STATE)) == STATE


def test_after_a_rotation_events_name_the_new_key_and_both_keys_read_everything():
    before = RingCipher(first(OLD)).encrypt(STATE)
    both = RingCipher(rotated(NEW, OLD))
    after = both.encrypt(STATE)
    assert after[:7] == EVENT_MARK + bytes.fromhex(key_id(NEW))
    assert both.decrypt(before) == STATE and both.decrypt(after) == STATE
    assert RingCipher(rotated(NEW)).decrypt(after) == STATE
    with pytest.raises(ValueError, match="no key of this process"):
        RingCipher(rotated(NEW)).decrypt(before)  # what the old key wrote needs it, until resealed
    with pytest.raises(ValueError, match="no key of this process"):
        RingCipher(first(OLD)).decrypt(after)


def test_sealed_secrets_open_under_either_key_and_say_whether_they_need_resealing():
    old_sealed = RingSealer(first(OLD)).seal("whsec_abc")
    ring = rotated(NEW, OLD)
    sealer = RingSealer(ring)
    new_sealed = sealer.seal("whsec_abc")
    assert new_sealed.startswith(f"k1.{key_id(NEW)}.") and "." not in old_sealed
    assert sealer.open(old_sealed) == sealer.open(new_sealed) == "whsec_abc"
    assert not sealer.current(old_sealed) and sealer.current(new_sealed)
    assert RingSealer(first(OLD)).current(old_sealed)
    with pytest.raises(ValueError):
        RingSealer(rotated(NEW)).open(old_sealed)
    assert RingSealer(ring, "text-keys").seal("k") != RingSealer(ring).seal("k")  # a key per use


def test_codes_and_tokens_of_the_old_key_check_until_it_is_retired():
    ring = rotated(NEW, OLD)
    otp = RingHashes(ring, "otp-codes")
    assert otp()[0] == otp.current() == derive_key(NEW, "otp-codes")
    made_before = hash_code(derive_key(OLD, "otp-codes"), "otp_1", "123456")
    assert made_before in [hash_code(key, "otp_1", "123456") for key in otp()]
    ring.follow([{"id": key_id(OLD), "position": 0, "state": "retired"},
                 {"id": key_id(NEW), "position": 1, "state": "current"}])
    assert otp() == (derive_key(NEW, "otp-codes"),)


def test_a_process_turns_only_to_a_key_it_holds():
    ring = first(OLD)
    ring.follow([{"id": key_id(OLD), "position": 0, "state": "previous"},
                 {"id": key_id(NEW), "position": 1, "state": "current"}])
    assert ring.current == key_id(OLD)  # it cannot write with a key it does not hold
    assert key_id(OLD) != key_id(NEW) and len(key_id(OLD)) == 8 and OLD not in key_id(OLD)


def test_previous_keys_are_checked_like_the_key():
    settings = Settings.from_env({"SANDESH_SECRET_KEY": NEW, "SANDESH_PREVIOUS_KEYS": f"{OLD}, too-short"})
    with pytest.raises(ConfigurationError, match="SANDESH_PREVIOUS_KEYS: key 2 is shorter"):
        settings.require_key_ring()
    settings = Settings.from_env({"SANDESH_SECRET_KEY": NEW, "SANDESH_PREVIOUS_KEYS": f" {OLD} "})
    assert settings.require_key_ring() == (NEW, OLD)
    assert issubclass(KeyMissing, ConfigurationError)  # a command says why and exits 2
