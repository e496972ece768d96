"""The PasswordHasher port (domain/ports.py): argon2id by argon2-cffi, beside the other secrets
adapters (store.py's Sealer).

A hash costs 46 MiB, one pass, one lane: the first of the OWASP password storage cheat sheet's
argon2id settings, which it rates as strong as 64 MiB in three passes (argon2-cffi's default,
RFC 9106's second option) at about a third of the CPU: about 0.04 s of one core here.  Each
check still streams its memory through the caches that the API and PostgreSQL share, so where
and how often it runs is chosen for them (docs/performance.md, "Sign-ins beside the API"):

- in a child process of its own, not a thread of the API's process: a thread at a low priority
  that holds the GIL between two C calls would hold up the event loop beside it;
- at Linux's SCHED_IDLE priority: any other process that wants a core takes it at once;
- one check at a time on the machine (an flock on a file of the service's runtime directory,
  Settings.runtime_dir, which no other user may hold), whatever the number of API processes.

Hashes made with other costs (0.3.0 and earlier: 64 MiB, three passes, four lanes) verify as
they are, with their own costs.
"""
from __future__ import annotations

import fcntl
import multiprocessing
import os
import threading
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import IO, Any, Callable

from argon2 import PasswordHasher as Argon2
from argon2.exceptions import InvalidHashError, VerificationError

TIME_COST, MEMORY_KIB, LANES = 1, 46 * 1024, 1
LOCK_FILE = "passwords.lock"  # in the runtime directory

_argon2 = Argon2(time_cost=TIME_COST, memory_cost=MEMORY_KIB, parallelism=LANES)  # argon2id
_lock: IO[str] | None = None


def _start(lock_path: str) -> None:
    """In the child: the lowest priority, and the machine's lock file (its owner's alone)."""
    global _lock
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (OSError, AttributeError):
        os.nice(19)
    os.makedirs(os.path.dirname(lock_path) or ".", mode=0o700, exist_ok=True)
    _lock = os.fdopen(os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600), "a")


def _hash(password: str) -> str:
    assert _lock is not None
    fcntl.flock(_lock, fcntl.LOCK_EX)
    try:
        return _argon2.hash(password)
    finally:
        fcntl.flock(_lock, fcntl.LOCK_UN)


def _verify(password_hash: str, password: str) -> bool:
    assert _lock is not None
    fcntl.flock(_lock, fcntl.LOCK_EX)
    try:
        return _argon2.verify(password_hash, password)
    except (VerificationError, InvalidHashError):
        return False
    finally:
        fcntl.flock(_lock, fcntl.LOCK_UN)


class Argon2Hasher:
    """Hashes and checks on a child process, started at the first use (spawned: a fork of a
    process with threads may copy a lock held by one of them)."""

    def __init__(self, runtime_dir: str) -> None:
        self.lock_path = os.path.join(os.path.abspath(runtime_dir), LOCK_FILE)
        self._child: ProcessPoolExecutor | None = None
        self._starting = threading.Lock()

    def _run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """fn(*args) on the child; a child that died (killed, out of memory) is replaced once."""
        for last in (False, True):
            with self._starting:
                if self._child is None:
                    self._child = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"),
                                                      initializer=_start, initargs=(self.lock_path,))
                child = self._child
            try:
                return child.submit(fn, *args).result()
            except BrokenProcessPool:
                with self._starting:
                    if self._child is child:
                        self._child = None
                if last:
                    raise
        raise AssertionError("unreachable")

    def hash(self, password: str) -> str:
        return self._run(_hash, password)

    def verify(self, password_hash: str, password: str) -> bool:
        return self._run(_verify, password_hash, password)

    def close(self) -> None:
        if self._child is not None:
            self._child.shutdown(wait=False, cancel_futures=True)
