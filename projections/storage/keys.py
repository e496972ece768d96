"""The server's keys: a root key that wraps data keys (docs/operations.md, "Rotating the key";
docs/design.md, "Keys").  Envelope encryption, as Vault's transit keys and cloud KMSs do it.

- **The root key** is SANDESH_SECRET_KEY (SANDESH_PREVIOUS_KEYS: older ones, during a rotation).
  It encrypts nothing but data keys.  A root key is named by its id, 8 hex digits of a hash of
  it, so the database can say which exist without holding any.  `sandesh_keys`: one row per
  root key; the `current` one wraps the data keys, `previous` ones wrap nothing once a rotation
  is done, and a `retired` one is needed by nothing.
- **Data keys** are 32 random bytes, each of one use (PURPOSES), kept in `sandesh_data_keys`
  wrapped (AES-GCM) under the current root key.  Each use has one `current` data key, which
  writes; every data key reads.  Events, sealed secrets (webhook secrets, SIM PINs,
  authenticator secrets), the keys of texts, OTP code hashes and the dashboard's CSRF tokens
  each have their own.
- **A rotation** wraps every data key again under the new root key (a row each) and gives each
  use a new current data key, in one transaction: nothing written is written again, whatever
  the log's length.  `compromised_at` marks the data keys of before a rotation made for a
  leaked key: what they sealed is due for replacement, and their keyed hashes no longer check.

Releases up to 0.3.0 used keys derived from the root key itself (`derive_key`).  `db migrate`
records those as data keys too ("legacy": id `<root id>/<use>`, wrapped like the others), so the
root key that made them can be retired while what they encrypted stays readable.  Until the log
is finalized at NEW_FORMATS_FROM, values are written in those formats, with the current root's
derived keys, which the previous release reads during a rolling upgrade.

Formats:
- an event's state: `sk\\x02`, the data key's id (4 bytes), then the library's AESCipher format
  (nonce, tag, ciphertext); older: `sk\\x01` and a root key's id, or no mark (the first root key's);
- a sealed value: `k2.<data key id>.<base64 of nonce + ciphertext>`; older:
  `k1.<root key id>.<...>`, or the base64 alone (the first root key's).

A process encrypts, seals and makes keyed hashes only with keys it read from the database: it
refuses (KeyRefused) until it has read them, and whenever it does not hold the root key that
wraps them or its own newest root key was retired (`KeyRing.refusal`), so that it never writes
what the others cannot read.
"""
from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import logging
import threading
from dataclasses import dataclass
from ssl import RAND_bytes
from typing import Any, Callable, Iterable, Sequence

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from psycopg.rows import dict_row, tuple_row

from sandesh.domain.release import older
from sandesh.domain.settings import ConfigurationError

logger = logging.getLogger("sandesh.keys")

DDL = """
CREATE TABLE IF NOT EXISTS sandesh_keys (
    id text PRIMARY KEY, position integer NOT NULL UNIQUE,
    state text NOT NULL CHECK (state IN ('current', 'previous', 'retired')),
    added_at timestamptz NOT NULL DEFAULT now(),
    current_since double precision, rotated_by text,
    resealed_through bigint, resealed_at timestamptz,
    retired_at timestamptz, retired_by text);
CREATE UNIQUE INDEX IF NOT EXISTS sandesh_keys_one_current ON sandesh_keys (state) WHERE state = 'current';
CREATE TABLE IF NOT EXISTS sandesh_data_keys (
    id text PRIMARY KEY, purpose text NOT NULL, legacy_of text,
    wrapped bytea NOT NULL, wrapped_by text NOT NULL,
    state text NOT NULL CHECK (state IN ('current', 'previous')),
    created_at timestamptz NOT NULL DEFAULT now(), compromised_at timestamptz);
CREATE UNIQUE INDEX IF NOT EXISTS sandesh_data_keys_current ON sandesh_data_keys (purpose) WHERE state = 'current';
"""

PURPOSES = ("event-store", "sealed-secrets", "text-keys", "otp-codes", "dashboard-csrf")
NEW_FORMATS_FROM = "0.4.0"  # the release whose finalized log takes data keys' formats
EVENT_MARK, LEGACY_EVENT_MARK = b"sk\x02", b"sk\x01"
SEALED_MARK, LEGACY_SEALED_MARK = "k2.", "k1."
ID_BYTES = 4
NOT_READ = "the database's keys were not read yet (is the database away?)"


def derive_key(secret_key: str, purpose: str) -> bytes:
    """A 32-byte key for one use, derived from a root key: the wrapping key, and the formats of 0.3.0 and earlier."""
    return hmac.new(secret_key.encode(), f"sandesh/{purpose}".encode(), hashlib.sha256).digest()


@functools.lru_cache(maxsize=256)
def labelled(material: bytes, label: str) -> bytes:
    """A key of one use drawn from a data key (HKDF-SHA256, RFC 5869, `label` as its info): the
    dashboard's CSRF tokens, device cookies and authenticator setups each MAC with their own, so
    that a value made for one never checks as another."""
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=f"sandesh/{label}".encode()).derive(material)


def key_id(secret_key: str) -> str:
    """A root key's public name: 8 hex digits that tell keys apart and reveal nothing of them."""
    return derive_key(secret_key, "key-id")[:ID_BYTES].hex()


class KeyMissing(ConfigurationError):
    """A process lacks a key the database needs, or holds a retired one as its newest; the
    message says which and what to set."""


class KeyRefused(Exception):
    """This process may not encrypt, seal or make a keyed hash now (KeyRing.refusal says why):
    a request answers 503, a worker stops."""


@dataclass(frozen=True)
class DataKey:
    id: str
    purpose: str
    legacy_of: str | None   # the root key it is derived from (the formats of 0.3.0 and earlier)
    material: bytes
    compromised: bool = False


def legacy_id(root: str, purpose: str) -> str:
    return f"{root}/{purpose}"


def _wrap_aad(data_key: str, purpose: str) -> bytes:
    return f"{data_key}|{purpose}".encode()


def wrap(secret_key: str, data_key: str, purpose: str, material: bytes) -> bytes:
    nonce = RAND_bytes(12)
    return nonce + AESGCM(derive_key(secret_key, "wrap-data-keys")).encrypt(nonce, material,
                                                                          _wrap_aad(data_key, purpose))


def unwrap(secret_key: str, data_key: str, purpose: str, wrapped: bytes) -> bytes:
    return AESGCM(derive_key(secret_key, "wrap-data-keys")).decrypt(wrapped[:12], wrapped[12:],
                                                                    _wrap_aad(data_key, purpose))


class KeyRing:
    """The root keys one process holds (newest first), and the data keys it read with them."""

    def __init__(self, secrets: Sequence[str]):
        self.secrets: dict[str, str] = {}
        for secret in secrets:
            self.secrets.setdefault(key_id(secret), secret)
        self.newest = next(iter(self.secrets))
        self.current = self.newest        # the root key that wraps: the database's `current`, once read
        self.original: str | None = None  # the database's first root key, whose values carry no id
        self.retired: frozenset[str] = frozenset()
        self.new_formats = False          # the log is finalized at NEW_FORMATS_FROM or later
        self.data: dict[str, DataKey] = self._derived()
        self.writers: dict[str, DataKey] = {}  # by purpose: the current data keys (new formats)
        self.refusal: str | None = NOT_READ
        self.on_refused: Callable[[str], None] | None = None  # a worker stops (workers/supervisor.py)
        # Reads the database's keys now (the wiring gives it): a value under a data key made a
        # moment ago by another process's rotation is read at once, not after the next second's read.
        self.reload: Callable[[], None] | None = None
        self.version = 0  # moves whenever what the ciphers choose from changes
        self._unwrapped: dict[tuple[str, bytes], bytes] = {}
        self._following = threading.Lock()
        self._aeads: dict[str, AESGCM] = {}

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(self.secrets)

    def _derived(self) -> dict[str, DataKey]:
        """The legacy data keys of every root key held, as 0.3.0 derived them."""
        return {legacy_id(kid, p): DataKey(legacy_id(kid, p), p, kid, derive_key(secret, p))
                for kid, secret in self.secrets.items() for p in PURPOSES}

    def follow(self, roots: Iterable[dict[str, Any]], data_keys: Iterable[dict[str, Any]],
               finalized: str | None) -> None:
        """Take the database's keys: its root keys (rows of `sandesh_keys`), its data keys (rows of
        `sandesh_data_keys`, unwrapped with the root keys held) and the release its log is
        finalized at; then decide whether this process may write (`refusal`).  The Watch's
        thread calls it every second, and a reader meeting an unknown data key (`knows`)."""
        with self._following:
            self._follow(list(roots), list(data_keys), finalized)

    def _follow(self, roots: list[dict[str, Any]], data_keys: list[dict[str, Any]], finalized: str | None) -> None:
        current, retired, original = None, set(), None
        for row in roots:
            if row["position"] == 0:
                original = row["id"]
            if row["state"] == "current":
                current = row["id"]
            elif row["state"] == "retired":
                retired.add(row["id"])
        # Once the database holds data keys, they are all there are: a root key's derived keys
        # count only as recorded (and marked) there, never from the root keys this process holds.
        data, writers, unopened = ({} if data_keys else self._derived()), {}, []
        for row in data_keys:
            material = self._unwrap(row)
            if material is None:
                unopened.append(row["id"])
                continue
            found = DataKey(row["id"], row["purpose"], row["legacy_of"], material, row["compromised_at"] is not None)
            data[found.id] = found
            if row["state"] == "current":
                writers[found.purpose] = found
        new_formats = finalized is not None and not older(finalized, NEW_FORMATS_FROM)
        refusal = None
        if current is not None and current not in self.secrets:
            refusal = (f"the database's keys are wrapped under root key {current}, which this process does not "
                       f"hold (it holds {', '.join(self.ids)}): set it as SANDESH_SECRET_KEY and restart "
                       "(docs/operations.md, \"Rotating the key\")")
        elif self.newest in retired:
            refusal = (f"SANDESH_SECRET_KEY is root key {self.newest}, which was retired: set the current one, "
                       f"{current} (`sandesh key status`)")
        elif unopened:
            refusal = (f"data keys {', '.join(unopened[:3])} are wrapped under a root key this process does not "
                       "hold: set the current root key as SANDESH_SECRET_KEY")
        elif new_formats and (lacking := [p for p in PURPOSES if p not in writers]):
            refusal = f"the database has no current data key for {', '.join(lacking)}: run `sandesh db migrate`"
        state = (current or self.newest, original or current or self.newest, frozenset(retired), new_formats,
                 tuple(sorted((k.id, k.compromised) for k in data.values())), tuple(sorted(writers)))
        if state != getattr(self, "_state", None):
            self._state = state
            self.current, self.original, self.retired, self.new_formats = state[0], state[1], state[2], new_formats
            self.data, self.writers = data, writers
            self._aeads.clear()
            self.version += 1
        if refusal != self.refusal:
            if refusal is None:
                logger.info("writing with the database's keys (root key %s)", self.current)
            else:
                logger.error("this process writes nothing: %s", refusal)
            self.refusal = refusal
            if refusal is not None and self.on_refused is not None:
                self.on_refused(refusal)

    def _unwrap(self, row: dict[str, Any]) -> bytes | None:
        wrapped = bytes(row["wrapped"])
        found = self._unwrapped.get((row["id"], wrapped))
        if found is None:
            secret = self.secrets.get(row["wrapped_by"])
            if secret is None:
                return None
            try:
                found = self._unwrapped[(row["id"], wrapped)] = unwrap(secret, row["id"], row["purpose"], wrapped)
            except InvalidTag:
                return None
        return found

    def writer(self, purpose: str) -> DataKey:
        """The data key that writes values of `purpose` now; KeyRefused when this process may not write."""
        if self.refusal is not None:
            raise KeyRefused(self.refusal)
        if self.new_formats:
            return self.writers[purpose]
        return self.data[legacy_id(self.current, purpose)]

    def marked(self) -> bool:
        """Whether the legacy formats name their root key: from the first rotation on."""
        return self.current != self.original

    def aead(self, key: DataKey) -> AESGCM:
        found = self._aeads.get(key.id)
        if found is None:
            found = self._aeads[key.id] = AESGCM(key.material)
        return found

    def knows(self, data_key: str) -> bool:
        """Whether a data key is known, reading the database's keys again once when it is not."""
        if data_key not in self.data and self.reload is not None:
            try:
                self.reload()
            except Exception as error:  # noqa: BLE001 - the value stays unread, as with no key
                logger.warning("could not read the database's keys again: %s", error)
        return data_key in self.data

    def legacy_order(self, purpose: str) -> list[DataKey]:
        """The legacy keys of `purpose` to try on a value that names none: the first root key's, the current's, the rest."""
        keys = [k for k in self.data.values() if k.purpose == purpose and k.legacy_of is not None]
        first = {self.original: 0, self.current: 1}
        return sorted(keys, key=lambda k: first.get(k.legacy_of, 2))


class RingCipher:
    """The event store's cipher (eventsourcing's Cipher interface; the library's AESCipher format
    inside): writes with the current data key, reads with any.  Every event of a send and of a
    replay passes here, so its choices are kept until the ring changes."""

    def __init__(self, ring: KeyRing):
        self.ring = ring
        self._version = -1
        self._by_id: dict[bytes, AESGCM] = {}
        self._by_root: dict[bytes, AESGCM] = {}
        self._order: tuple[AESGCM, ...] = ()

    def _choose(self) -> None:
        ring = self.ring
        self._version = ring.version
        keys = [k for k in ring.data.values() if k.purpose == "event-store"]
        self._by_id = {bytes.fromhex(k.id): ring.aead(k) for k in keys if k.legacy_of is None}
        self._by_root = {bytes.fromhex(k.legacy_of): ring.aead(k) for k in keys if k.legacy_of is not None}
        self._order = tuple(ring.aead(k) for k in ring.legacy_order("event-store"))

    def encrypt(self, plaintext: bytes) -> bytes:
        ring = self.ring
        key = ring.writer("event-store")
        if self._version != ring.version:
            self._choose()
        if key.legacy_of is None:
            mark = EVENT_MARK + bytes.fromhex(key.id)
        else:
            mark = LEGACY_EVENT_MARK + bytes.fromhex(key.legacy_of) if ring.marked() else b""
        nonce = RAND_bytes(12)  # not os.urandom: docs/performance.md, "Random bytes without a thread switch"
        sealed = ring.aead(key).encrypt(nonce, plaintext, None)
        return mark + nonce + sealed[-16:] + sealed[:-16]

    def decrypt(self, ciphertext: bytes) -> bytes:
        if ciphertext[:3] == EVENT_MARK and ciphertext[3:7] not in self._by_id:
            self.ring.knows(ciphertext[3:7].hex())
        if self._version != self.ring.version:
            self._choose()
        mark = ciphertext[:3]
        if mark in (EVENT_MARK, LEGACY_EVENT_MARK):
            aead = (self._by_id if mark == EVENT_MARK else self._by_root).get(ciphertext[3:7])
            if aead is not None:
                opened = _open_event(aead, ciphertext[7:])
                if opened is not None:
                    return opened
        if len(ciphertext) < 28:
            raise ValueError("Damaged cipher text: too short")
        for aead in self._order:
            opened = _open_event(aead, ciphertext)
            if opened is not None:
                return opened
        raise ValueError("Invalid cipher tag: no key of this process opens the event "
                         "(docs/operations.md, \"Rotating the key\")")


def _open_event(aead: AESGCM, body: bytes) -> bytes | None:
    try:
        return aead.decrypt(body[:12], body[28:] + body[12:28], None)
    except InvalidTag:
        return None


class RingSealer:
    """Small secrets sealed at rest under a data key of one use (the domain's Sealer port):
    sealed with the current one, opened with any."""

    def __init__(self, ring: KeyRing, purpose: str = "sealed-secrets"):
        self.ring, self.purpose = ring, purpose

    def seal(self, plaintext: str) -> str:
        ring = self.ring
        key = ring.writer(self.purpose)
        nonce = RAND_bytes(12)
        aad = key.id.encode() if key.legacy_of is None else None
        body = base64.urlsafe_b64encode(nonce + ring.aead(key).encrypt(nonce, plaintext.encode(), aad)).decode()
        if key.legacy_of is None:
            return f"{SEALED_MARK}{key.id}.{body}"
        return f"{LEGACY_SEALED_MARK}{key.legacy_of}.{body}" if ring.marked() else body

    def open(self, sealed: str) -> str:
        for key, body in self._candidates(sealed):
            opened = self._open(key, body)
            if opened is not None:
                return opened
        raise ValueError("no key of this process opens the sealed value (docs/operations.md, \"Rotating the key\")")

    def data_key(self, sealed: str) -> DataKey | None:
        """The data key a sealed value is under; None when no key held opens it."""
        for key, body in self._candidates(sealed):
            if self._open(key, body) is not None:
                return key
        return None

    def compromised(self, sealed: str | None) -> bool:
        """Whether a sealed value is under a data key of before a rotation for a leaked key (due for replacement)."""
        key = self.data_key(sealed) if sealed else None
        return key is not None and key.compromised

    def _candidates(self, sealed: str) -> list[tuple[DataKey, str]]:
        if sealed.startswith(SEALED_MARK):
            kid, _, body = sealed[len(SEALED_MARK):].partition(".")
            return [(self.ring.data[kid], body)] if self.ring.knows(kid) else []
        data = self.ring.data
        if sealed.startswith(LEGACY_SEALED_MARK):
            root, _, body = sealed[len(LEGACY_SEALED_MARK):].partition(".")
            named = data.get(legacy_id(root, self.purpose))
            if named is not None:
                return [(named, body)]
        return [(key, sealed) for key in self.ring.legacy_order(self.purpose)]

    def _open(self, key: DataKey, body: str) -> str | None:
        try:
            raw = base64.urlsafe_b64decode(body.encode())
            aad = key.id.encode() if key.legacy_of is None else None
            return self.ring.aead(key).decrypt(raw[:12], raw[12:], aad).decode()
        except (InvalidTag, ValueError):
            return None


class RingHashes:
    """Keys of one use for keyed hashes (OTP codes, CSRF tokens): the current data key makes
    them; every one that is not compromised checks them, so those made before a rotation stay
    valid until they expire, unless the rotation was for a leaked key."""

    def __init__(self, ring: KeyRing, purpose: str):
        self.ring, self.purpose = ring, purpose

    def current(self) -> bytes:
        return self.ring.writer(self.purpose).material

    def __call__(self) -> tuple[bytes, ...]:
        ring = self.ring
        if ring.refusal == NOT_READ:  # nothing checks before the database said which keys hold
            return ()
        first = () if ring.refusal is not None else (self.current(),)
        return (*first, *(k.material for k in ring.data.values()
                          if k.purpose == self.purpose and not k.compromised and k.material not in first))


# The database's keys

def _rows(conn: Any, query: str, params: Any = None) -> list[dict[str, Any]]:
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(query, params).fetchall()


def _tuples(conn: Any, query: str, params: Any = None) -> list[tuple[Any, ...]]:
    with conn.cursor(row_factory=tuple_row) as cur:
        return cur.execute(query, params).fetchall()


def _present(conn: Any, table: str) -> bool:
    return _rows(conn, "SELECT to_regclass(%s) IS NOT NULL AS present", (table,))[0]["present"]


def read(conn: Any) -> list[dict[str, Any]]:
    """The database's root keys, the first first; [] before a release with key rotation migrated it."""
    if not _present(conn, "sandesh_keys"):
        return []
    return _rows(conn, "SELECT id, position, state, added_at, current_since, rotated_by, retired_at, retired_by"
                       " FROM sandesh_keys ORDER BY position")


def read_data_keys(conn: Any) -> list[dict[str, Any]]:
    """The database's data keys, wrapped; [] before a release with data keys migrated it."""
    if not _present(conn, "sandesh_data_keys"):
        return []
    return _rows(conn, "SELECT id, purpose, legacy_of, wrapped, wrapped_by, state, created_at, compromised_at"
                       " FROM sandesh_data_keys ORDER BY created_at, id")


def follow(conn: Any, ring: KeyRing, finalized: str | None) -> None:
    ring.follow(read(conn), read_data_keys(conn), finalized)


def check(conn: Any, ring: KeyRing, finalized: str | None) -> list[dict[str, Any]]:
    """Follow the database's keys; refuse (KeyMissing) a process that may not write with them.
    Returns the root keys."""
    rows = read(conn)
    ring.follow(rows, read_data_keys(conn), finalized)
    if ring.refusal is not None:
        raise KeyMissing(ring.refusal)
    return rows


def record_first_key(conn: Any, ring: KeyRing, opens_log: Callable[[KeyRing], str | None]) -> None:
    """At `db migrate`: a database without root keys records its first, the one that opens its
    log's first event (`opens_log` gives its id, None for an empty log), else SANDESH_SECRET_KEY."""
    if read(conn):
        return
    first = opens_log(ring)
    if first is None:
        first = ring.newest
    conn.execute("INSERT INTO sandesh_keys (id, position, state) VALUES (%s, 0, 'current') ON CONFLICT DO NOTHING",
                 (first,))


def record_data_keys(conn: Any, ring: KeyRing, *, legacy: bool) -> None:
    """At `db migrate`, under the current root key (which the ring must hold): a current data key
    for each use that has none, and (`legacy`: the log holds, or will hold until it is finalized,
    values in the formats of 0.3.0 and earlier) the derived keys of every root key not retired."""
    roots = read(conn)
    current = next(r["id"] for r in roots if r["state"] == "current")
    secret = ring.secrets[current]
    have = {r["id"]: r for r in read_data_keys(conn)}
    made = []
    if legacy:
        for root in roots:
            if root["state"] != "retired" and root["id"] in ring.secrets:
                for purpose in PURPOSES:
                    kid = legacy_id(root["id"], purpose)
                    if kid not in have:
                        material = derive_key(ring.secrets[root["id"]], purpose)
                        made.append((kid, purpose, root["id"], wrap(secret, kid, purpose, material), "previous"))
    current_ones = {r["purpose"] for r in have.values() if r["state"] == "current"}
    for purpose in PURPOSES:
        if purpose not in current_ones:
            kid = RAND_bytes(ID_BYTES).hex()
            made.append((kid, purpose, None, wrap(secret, kid, purpose, RAND_bytes(32)), "current"))
    for kid, purpose, legacy_of, wrapped, state in made:
        conn.execute("INSERT INTO sandesh_data_keys (id, purpose, legacy_of, wrapped, wrapped_by, state)"
                     " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                     (kid, purpose, legacy_of, wrapped, current, state))


def first_event_state(conn: Any) -> bytes | None:
    found = _tuples(conn, "SELECT state FROM sandesh_events ORDER BY notification_id LIMIT 1")
    return bytes(found[0][0]) if found else None


# Rotating and retiring (`sandesh key`)

class NotNow(Exception):
    """A rotation or a retirement that cannot happen yet; the message says why and what to do."""


def rotate(conn: Any, ring: KeyRing, actor: str, now: float, running: list[dict[str, Any]], *,
           compromised: bool = False) -> dict[str, Any]:
    """Make SANDESH_SECRET_KEY (the ring's newest) the root key: every data key wrapped again
    under it, and a new current data key for each use, in one transaction; every process turns
    to them within a second.  `compromised`: the old root key leaked, so every data key of
    before is marked, and each workspace's next text gets a new key.  NotNow while a `running`
    process (releases.processes) does not hold the new root key, or before the log is finalized
    at NEW_FORMATS_FROM."""
    rows = read(conn)
    if not rows:
        raise NotNow("the database has no root key yet: run `sandesh db migrate` first")
    if not ring.new_formats:
        raise NotNow(f"the log is finalized at a release before {NEW_FORMATS_FROM}: finalize the upgrade first "
                     "(`sandesh upgrade finalize`), as earlier releases cannot read what a rotation writes")
    current = next(r for r in rows if r["state"] == "current")
    if current["id"] == ring.newest:
        raise NotNow(f"SANDESH_SECRET_KEY is root key {ring.newest}, the current one already. Make a new key, "
                     "set it as SANDESH_SECRET_KEY and the current one in SANDESH_PREVIOUS_KEYS for every "
                     "process, restart them, then rotate (docs/operations.md, \"Rotating the key\")")
    if any(r["id"] == ring.newest and r["state"] == "retired" for r in rows):
        raise NotNow(f"root key {ring.newest} was retired: it never wraps again")
    lacking = [f"{p['kind']} on {p['host']} (pid {p['pid']})" for p in running
               if ring.newest not in (p["keys"] or [])]
    if lacking:
        raise NotNow(f"these processes do not hold root key {ring.newest} yet: {'; '.join(lacking)}. Give them "
                     "the new SANDESH_SECRET_KEY (the current key in SANDESH_PREVIOUS_KEYS) and restart them first")
    new_secret = ring.secrets[ring.newest]
    with conn.transaction():
        conn.execute("LOCK TABLE sandesh_keys, sandesh_data_keys IN EXCLUSIVE MODE")
        data = read_data_keys(conn)
        ring.follow(read(conn), data, NEW_FORMATS_FROM)  # every data key, unwrapped with the old root
        if ring.refusal is not None:
            raise NotNow(ring.refusal)
        conn.execute("UPDATE sandesh_keys SET state = 'previous' WHERE state = 'current'")
        conn.execute(
            "INSERT INTO sandesh_keys (id, position, state, current_since, rotated_by)"
            " VALUES (%s, (SELECT max(position) + 1 FROM sandesh_keys), 'current', %s, %s)"
            " ON CONFLICT (id) DO UPDATE SET state = 'current', current_since = excluded.current_since,"
            " rotated_by = excluded.rotated_by",
            (ring.newest, now, actor))
        for row in data:
            material = ring.data[row["id"]].material
            conn.execute("UPDATE sandesh_data_keys SET wrapped = %s, wrapped_by = %s WHERE id = %s",
                         (wrap(new_secret, row["id"], row["purpose"], material), ring.newest, row["id"]))
        if compromised:
            conn.execute("UPDATE sandesh_data_keys SET compromised_at = now() WHERE compromised_at IS NULL")
            conn.execute("UPDATE text_keys SET replaced_at = %s WHERE shredded_at IS NULL AND replaced_at IS NULL",
                         (now,))
        conn.execute("UPDATE sandesh_data_keys SET state = 'previous' WHERE state = 'current'")
        for purpose in PURPOSES:
            kid = RAND_bytes(ID_BYTES).hex()
            conn.execute("INSERT INTO sandesh_data_keys (id, purpose, wrapped, wrapped_by, state)"
                         " VALUES (%s, %s, %s, %s, 'current')",
                         (kid, purpose, wrap(new_secret, kid, purpose, RAND_bytes(32)), ring.newest))
    ring.follow(read(conn), read_data_keys(conn), NEW_FORMATS_FROM)
    return {"current": ring.newest, "previous": current["id"],
            "dataKeys": {"wrappedAgain": len(data), "made": len(PURPOSES)}, "compromised": compromised}


def wrapped_under(conn: Any, root: str) -> int:
    """How many data keys the root key `root` wraps."""
    return int(_tuples(conn, "SELECT count(*) FROM sandesh_data_keys WHERE wrapped_by = %s", (root,))[0][0]) \
        if _present(conn, "sandesh_data_keys") else 0


def holders_of_secrets(conn: Any) -> list[tuple[str, str]]:
    """(kind, id) of every aggregate that may hold a sealed secret: clients (webhook secrets), SIMs
    with a PIN or a port's secrets, people (authenticator secrets); domain/usecases/keys.py decides which are due."""
    return ([("client", i) for (i,) in _tuples(conn, "SELECT id FROM clients ORDER BY id")]
            + [("sim", i) for (i,) in _tuples(conn, "SELECT id FROM sims WHERE pin_sealed IS NOT NULL"
                                                    " OR port_secret_sealed IS NOT NULL ORDER BY id")]
            + [("person", i) for (i,) in _tuples(conn, "SELECT id FROM people ORDER BY id")])


def retire(conn: Any, kid: str, actor: str) -> None:
    conn.execute("UPDATE sandesh_keys SET state = 'retired', retired_at = now(), retired_by = %s WHERE id = %s",
                 (actor, kid))


def data_key_summary(ring: KeyRing, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`sandesh key status`: each data key without its material."""
    return [{"id": r["id"], "use": r["purpose"], "state": r["state"], "legacyOf": r["legacy_of"],
             "wrappedBy": r["wrapped_by"], "created": r["created_at"].isoformat(),
             "compromised": r["compromised_at"].isoformat() if r["compromised_at"] else None} for r in rows]
