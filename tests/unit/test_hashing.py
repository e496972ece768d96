"""The dashboard's password work waits on its own bounded executor (api/waiting.py, `Hashing`):
never on the threads the API's requests need; past its queue a try is told to come back; a
trusted device's try goes first, in a line of its own as bounded; starts are spaced.  And the
secret files `sandesh up` writes."""
from __future__ import annotations

import asyncio
import threading
import time

import pytest

from sandesh.api.waiting import Busy, Hashing


def slow(seconds: float, done: list[str], name: str) -> str:
    time.sleep(seconds)
    done.append(name)
    return name


def test_past_the_queue_a_try_is_busy_with_a_retry_after():
    async def run() -> tuple[list[str], list[int]]:
        hashing, done, refused = Hashing(threads=1, queue=2, spacing=0.0), [], []

        async def one(name: str) -> None:
            try:
                await hashing(slow, 0.2, done, name)
            except Busy as busy:
                refused.append(busy.retry_after)

        await asyncio.gather(*(one(f"try {n}") for n in range(6)))
        return done, refused

    done, refused = asyncio.run(run())
    assert done == ["try 0", "try 1", "try 2"], "one running, two waiting"
    assert len(refused) == 3 and all(wait >= 1 for wait in refused)


def test_a_trusted_devices_try_goes_before_the_others_and_its_own_line_is_bounded_too():
    async def run() -> list[str]:
        hashing, done = Hashing(threads=1, queue=1, spacing=0.0), []
        first = asyncio.ensure_future(hashing(slow, 0.2, done, "running"))
        await asyncio.sleep(0.01)
        waiting = asyncio.ensure_future(hashing(slow, 0.0, done, "waiting"))
        await asyncio.sleep(0.01)
        with pytest.raises(Busy):
            hashing.check()
        trusted = asyncio.ensure_future(hashing(slow, 0.0, done, "trusted", trusted=True))
        await asyncio.sleep(0.01)
        with pytest.raises(Busy):  # `queue` trusted tries wait already: the next is told to come back
            hashing.check(trusted=True)
        await asyncio.gather(first, waiting, trusted)
        return done

    assert asyncio.run(run()) == ["running", "trusted", "waiting"]


def test_starts_are_spaced_and_a_try_that_left_gives_its_thread_back_only_when_its_work_ends():
    async def run() -> tuple[list[float], int, int]:
        hashing, starts = Hashing(threads=1, queue=8, spacing=0.3, burst=1), []
        began = time.monotonic()

        def mark() -> None:
            starts.append(time.monotonic() - began)

        await asyncio.gather(*(hashing(mark) for _ in range(3)))
        release = threading.Event()
        left = asyncio.ensure_future(hashing(release.wait))
        await asyncio.sleep(0.4)
        left.cancel()  # the client went away: its check still runs to its end
        await asyncio.sleep(0.05)
        running = hashing._running
        release.set()
        await asyncio.sleep(0.1)
        return starts, running, hashing._running

    starts, running_after_leaving, running_at_the_end = asyncio.run(run())
    assert [round(b - a, 1) for a, b in zip(starts, starts[1:])] == [0.3, 0.3]
    assert running_after_leaving == 1 and running_at_the_end == 0


def test_a_burst_of_a_few_starts_at_once_and_the_next_ones_are_spaced():
    async def run() -> list[float]:
        hashing, starts = Hashing(threads=3, queue=8, spacing=0.3, burst=3), []
        began = time.monotonic()
        await asyncio.gather(*(hashing(lambda: starts.append(time.monotonic() - began)) for _ in range(5)))
        return sorted(starts)

    starts = asyncio.run(run())
    assert starts[2] < 0.1, "three at once"
    assert starts[3] >= 0.25 and starts[4] >= 0.55, starts




def test_a_secret_file_is_never_readable_by_others_not_even_for_a_moment(tmp_path):
    """`sandesh up`'s server key and env file are made with mode 0600 (os.open), not chmod-ed after."""
    import os

    from sandesh.scripts.service.up import write_secret

    old = os.umask(0)
    try:
        write_secret(tmp_path / "secret_key", "k" * 64)
        (tmp_path / "sandesh.env").write_text("old")
        write_secret(tmp_path / "sandesh.env", "DATABASE_URL=x\n")
    finally:
        os.umask(old)
    for name in ("secret_key", "sandesh.env"):
        assert (tmp_path / name).stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "sandesh.env").read_text() == "DATABASE_URL=x\n"
