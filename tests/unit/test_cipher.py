"""The event store's cipher keeps eventsourcing's AESCipher format: a log written by either
is read by the other, and a damaged event is refused."""
import base64
import os

import pytest
from eventsourcing.cryptography import AESCipher
from eventsourcing.utils import Environment

from sandesh.projections.store import Cipher


def _env(key: bytes) -> Environment:
    return Environment(env={"CIPHER_KEY": base64.b64encode(key).decode()})


def test_same_format_as_the_library_both_ways():
    env = _env(os.urandom(32))
    ours, theirs = Cipher(env), AESCipher(env)
    state = b'{"to":"9779812345678","text":"namaste"}'
    assert theirs.decrypt(ours.encrypt(state)) == state
    assert ours.decrypt(theirs.encrypt(state)) == state
    assert ours.encrypt(state) != ours.encrypt(state)  # a fresh nonce each time


def test_a_damaged_or_foreign_event_is_refused():
    ours = Cipher(_env(os.urandom(32)))
    sealed = bytearray(ours.encrypt(b"state"))
    sealed[-1] ^= 1
    with pytest.raises(ValueError, match="Invalid cipher tag"):
        ours.decrypt(bytes(sealed))
    with pytest.raises(ValueError):
        ours.decrypt(b"short")
    with pytest.raises(ValueError, match="Invalid cipher tag"):
        Cipher(_env(os.urandom(32))).decrypt(ours.encrypt(b"state"))
