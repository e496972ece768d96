"""The PasswordHasher port (domain/ports.py): argon2id by argon2-cffi with its default costs
(RFC 9106's second recommended option), beside the other secrets adapters (store.py's Sealer)."""
from __future__ import annotations

from argon2 import PasswordHasher as Argon2
from argon2.exceptions import InvalidHashError, VerificationError


class Argon2Hasher:
    def __init__(self) -> None:
        self._argon2 = Argon2()  # argon2id

    def hash(self, password: str) -> str:
        return self._argon2.hash(password)

    def verify(self, password_hash: str, password: str) -> bool:
        try:
            return self._argon2.verify(password_hash, password)
        except (VerificationError, InvalidHashError):
            return False
