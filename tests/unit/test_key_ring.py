"""The server's keys (projections/storage/keys.py): a root key wraps data keys, which encrypt and seal.
Until the log is finalized at 0.4.0 everything is written in 0.3.0's formats, with the root
key's derived keys; after it, under the current data key of each use, which every value names.
A rotation wraps the data keys again and makes new current ones; whatever any data key wrote
stays readable with only the new root key.  A process writes nothing before it read the keys,
nor with a root key that is not the database's or that was retired."""
import base64

import pytest
from eventsourcing.cryptography import AESCipher
from eventsourcing.utils import Environment

from sandesh.domain.otp import hash_code
from sandesh.domain.settings import ConfigurationError, Settings
from sandesh.projections.storage.keys import (EVENT_MARK, LEGACY_EVENT_MARK, NEW_FORMATS_FROM, PURPOSES, KeyMissing,
                                      KeyRefused, KeyRing, RingCipher, RingHashes, RingSealer, derive_key, key_id,
                                      legacy_id, wrap)

OLD = "old-key-0123456789abcdef0123456789abcdef"
NEW = "new-key-fedcba9876543210fedcba9876543210"
STATE = b'{"to":"9779812345678","text":"namaste"}'


class Database:
    """What `sandesh_keys` and `sandesh_data_keys` would hold: root keys, data keys wrapped."""

    def __init__(self, first: str = OLD, *, legacy: bool = True):
        self.roots = [{"id": key_id(first), "position": 0, "state": "current"}]
        self.secrets = {key_id(first): first}
        self.data: list[dict] = []
        if legacy:
            for purpose in PURPOSES:
                self._add(legacy_id(key_id(first), purpose), purpose, key_id(first), derive_key(first, purpose),
                          "previous")
        self._new_data_keys()

    def _add(self, kid: str, purpose: str, legacy_of: str | None, material: bytes, state: str) -> None:
        current = next(r["id"] for r in self.roots if r["state"] == "current")
        self.data.append({"id": kid, "purpose": purpose, "legacy_of": legacy_of, "state": state,
                          "material": material, "compromised_at": None,
                          "wrapped": wrap(self.secrets[current], kid, purpose, material), "wrapped_by": current})

    def _new_data_keys(self) -> None:
        for row in self.data:
            row["state"] = "previous"
        for n, purpose in enumerate(PURPOSES):
            self._add(f"{len(self.data) + n:08x}", purpose, None, bytes([len(self.data) + n]) * 32, "current")

    def rotate(self, to: str, compromised: bool = False) -> None:
        for row in self.roots:
            row["state"] = "previous" if row["state"] == "current" else row["state"]
        self.roots.append({"id": key_id(to), "position": len(self.roots), "state": "current"})
        self.secrets[key_id(to)] = to
        for row in self.data:
            row["wrapped"], row["wrapped_by"] = wrap(to, row["id"], row["purpose"], row["material"]), key_id(to)
            if compromised:
                row["compromised_at"] = "now"
        self._new_data_keys()

    def retire(self, secret: str) -> None:
        next(r for r in self.roots if r["id"] == key_id(secret))["state"] = "retired"

    def ring(self, *secrets: str, finalized: str = NEW_FORMATS_FROM) -> KeyRing:
        ring = KeyRing(secrets)
        ring.follow(self.roots, self.data, finalized)
        return ring


def test_before_the_log_is_finalized_events_are_in_the_library_format_that_0_3_0_reads():
    library = AESCipher(Environment(env={"CIPHER_KEY": base64.b64encode(derive_key(OLD, "event-store")).decode()}))
    ours = RingCipher(Database().ring(OLD, finalized="0.3.0"))
    assert library.decrypt(ours.encrypt(STATE)) == STATE
    assert ours.decrypt(library.encrypt(STATE)) == STATE


def test_a_damaged_or_foreign_event_is_refused():
    ours = RingCipher(Database().ring(OLD))
    sealed = bytearray(ours.encrypt(STATE))
    assert ours.encrypt(STATE) != bytes(sealed), "a fresh nonce each time"
    sealed[-1] ^= 1
    with pytest.raises(ValueError, match="Invalid cipher tag"):
        ours.decrypt(bytes(sealed))
    with pytest.raises(ValueError):
        ours.decrypt(b"short")
    with pytest.raises(ValueError, match="Invalid cipher tag"):
        RingCipher(Database(NEW, legacy=False).ring(NEW)).decrypt(ours.encrypt(STATE))


def test_once_finalized_events_name_their_data_key_and_one_rotation_later_the_new_root_key_alone_reads_all():
    db = Database()
    legacy = AESCipher(Environment(env={"CIPHER_KEY": base64.b64encode(derive_key(OLD, "event-store")).decode()}))
    written_by_0_3_0 = legacy.encrypt(STATE)
    before = RingCipher(db.ring(OLD)).encrypt(STATE)
    assert before[:3] == EVENT_MARK
    db.rotate(NEW)
    after = RingCipher(db.ring(NEW, OLD)).encrypt(STATE)
    assert after[:3] == EVENT_MARK and after[3:7] != before[3:7], "a new data key writes"
    db.retire(OLD)
    alone = RingCipher(db.ring(NEW))
    assert alone.decrypt(written_by_0_3_0) == alone.decrypt(before) == alone.decrypt(after) == STATE


def test_a_log_that_0_3_0_rotated_reads_with_its_root_keys_derived_keys():
    """0.3.0 named the root key in a rotated event (`sk\\x01`); migrated, its derived key is a data key."""
    db = Database(OLD, legacy=False)
    db.roots = [{"id": key_id(OLD), "position": 0, "state": "retired"},
                {"id": key_id(NEW), "position": 1, "state": "current"}]
    db.secrets[key_id(NEW)] = NEW
    db.data = []
    for purpose in PURPOSES:
        db._add(legacy_id(key_id(NEW), purpose), purpose, key_id(NEW), derive_key(NEW, purpose), "previous")
    db._new_data_keys()
    library = AESCipher(Environment(env={"CIPHER_KEY": base64.b64encode(derive_key(NEW, "event-store")).decode()}))
    marked = LEGACY_EVENT_MARK + bytes.fromhex(key_id(NEW)) + library.encrypt(STATE)
    assert RingCipher(db.ring(NEW)).decrypt(marked) == STATE


def test_sealed_secrets_name_their_data_key_and_open_after_a_rotation():
    db = Database()
    legacy_sealed = RingSealer(db.ring(OLD, finalized="0.3.0")).seal("whsec_abc")
    assert "." not in legacy_sealed, "the first root key's format names nothing"
    sealed = RingSealer(db.ring(OLD)).seal("whsec_abc")
    assert sealed.startswith("k2.")
    db.rotate(NEW)
    db.retire(OLD)
    sealer = RingSealer(db.ring(NEW))
    assert sealer.open(legacy_sealed) == sealer.open(sealed) == "whsec_abc"
    assert not sealer.compromised(sealed)
    assert RingSealer(db.ring(NEW), "text-keys").seal("k") != sealer.seal("k")  # a key per use


def test_a_rotation_for_a_leaked_key_makes_what_was_sealed_before_due_and_stops_its_hashes():
    db = Database()
    sealed = RingSealer(db.ring(OLD)).seal("whsec_abc")
    otp_before = RingHashes(db.ring(OLD), "otp-codes").current()
    made_before = hash_code(otp_before, "otp_1", "123456")
    db.rotate(NEW)
    otp = RingHashes(db.ring(NEW, OLD), "otp-codes")
    assert made_before in [hash_code(key, "otp_1", "123456") for key in otp()], "a code sent just before checks"
    db2 = Database()
    sealed2 = RingSealer(db2.ring(OLD)).seal("whsec_abc")
    before = RingHashes(db2.ring(OLD), "otp-codes").current()
    db2.rotate(NEW, compromised=True)
    ring = db2.ring(NEW)
    assert RingSealer(ring).compromised(sealed2) and RingSealer(ring).open(sealed2) == "whsec_abc"
    assert not RingSealer(ring).compromised(RingSealer(ring).seal("whsec_new"))
    assert before not in RingHashes(ring, "otp-codes")(), "a code made with a leaked key no longer checks"
    assert not RingSealer(db.ring(NEW)).compromised(sealed)


def test_a_root_keys_derived_keys_check_only_as_the_database_records_them():
    """A rotation for a leaked key stops the old root key's derived keys as well as its data keys;
    a derived key the database holds no row for (a log with no legacy formats) checks nothing, even
    when the process still holds the root key; before the keys are read, nothing checks."""
    legacy = Database()
    derived = derive_key(OLD, "dashboard-csrf")
    assert derived in RingHashes(legacy.ring(OLD), "dashboard-csrf")(), "recorded at migrate: it checks"
    legacy.rotate(NEW, compromised=True)
    assert derived not in RingHashes(legacy.ring(NEW, OLD), "dashboard-csrf")()
    fresh = Database(legacy=False)
    assert derived not in RingHashes(fresh.ring(OLD), "dashboard-csrf")()
    fresh.rotate(NEW)
    fresh.retire(OLD)
    assert derived not in RingHashes(fresh.ring(NEW, OLD), "dashboard-csrf")()
    assert RingHashes(KeyRing([OLD]), "dashboard-csrf")() == ()


def test_a_process_writes_nothing_until_it_read_the_keys_nor_with_a_root_key_not_current_or_retired():
    unread = KeyRing([OLD])
    for write in (lambda r: RingCipher(r).encrypt(STATE), lambda r: RingSealer(r).seal("x"),
                  lambda r: RingHashes(r, "otp-codes").current()):
        with pytest.raises(KeyRefused, match="not read yet"):
            write(unread)
    db = Database()
    db.rotate(NEW)
    stale = db.ring(OLD)
    assert "does not hold" in stale.refusal
    with pytest.raises(KeyRefused):
        RingCipher(stale).encrypt(STATE)
    db.retire(OLD)
    told: list[str] = []
    retired = KeyRing([OLD, NEW])
    retired.on_refused = told.append
    retired.follow(db.roots, db.data, NEW_FORMATS_FROM)
    assert "was retired" in retired.refusal and told == [retired.refusal]
    with pytest.raises(KeyRefused):
        RingSealer(retired).seal("x")
    assert db.ring(NEW).refusal is None


def test_previous_keys_are_checked_like_the_key():
    settings = Settings.from_env({"SANDESH_SECRET_KEY": NEW, "SANDESH_PREVIOUS_KEYS": f"{OLD}, too-short"})
    with pytest.raises(ConfigurationError, match="SANDESH_PREVIOUS_KEYS: key 2 is shorter"):
        settings.require_key_ring()
    settings = Settings.from_env({"SANDESH_SECRET_KEY": NEW, "SANDESH_PREVIOUS_KEYS": f" {OLD} "})
    assert settings.require_key_ring() == (NEW, OLD)
    assert issubclass(KeyMissing, ConfigurationError)  # a command says why and exits 2
    assert key_id(OLD) != key_id(NEW) and len(key_id(OLD)) == 8 and OLD not in key_id(OLD)
