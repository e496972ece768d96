"""Uploaded files are read on a child process of the API's, within its limits of memory and CPU
(api/uploads/children.py): a child that dies, overruns or stops answering is a sentence to the
person, and the next file is read by a new one.  Real child processes, real signals."""
from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path
from typing import Any, Awaitable, Callable

import pytest

from sandesh.api.uploads.children import BUSY, LATE, MEMORY, Readers, too_big, too_slow
from scripts.bench.hostile_lists import cell, xlsx

NUMBERS = b"phone\n9812345678\n9812345679\n"


def heavy_csv() -> bytes:
    """A list within every limit that still takes a child some 50 MB more than it starts with:
    10,000 rows of 24 columns, 4.5 MB."""
    header = ",".join(["phone"] + [f"c{i}" for i in range(1, 24)])
    return (header + "\n" + "".join(",".join([f"98{r:08d}"] + ["x" * 18] * 23) + "\n" for r in range(10_000))).encode()


def slow_workbook() -> bytes:
    """A list within every limit that takes a child a second or more of CPU: 10,000 rows of 24
    cells of text."""
    row = b"<row>" + cell("9812345678") + cell("x" * 18) * 23 + b"</row>"
    return xlsx(b"<row>" + cell("phone") + b"".join(cell(f"c{i}") for i in range(1, 24)) + b"</row>" + row * 10_000)


def read_bytes(pid: int, counter: str = "rchar") -> int:
    return int(Path(f"/proc/{pid}/io").read_text().split(f"{counter}: ")[1].split()[0])


def reading_children() -> list[int]:
    """This process's children that read files."""
    found = []
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        for pid in (task / "children").read_text().split():
            if "sandesh.api.uploads.children" in Path(f"/proc/{pid}/cmdline").read_text():
                found.append(int(pid))
    return found


async def signalled_while_reading(readers: Readers, data: bytes, signum: int) -> Any:
    """The answer to a file whose child is sent `signum` once it took the whole file (what it
    read, and the byte it writes to say so, counted in /proc/<pid>/io), while it reads it.  A
    signal before that byte is a child that died before it took the file, which is replaced."""
    await readers.read("list.csv", NUMBERS, "")  # a child, warm
    (pid,) = reading_children()
    before, written = read_bytes(pid), read_bytes(pid, "wchar")
    reading = asyncio.ensure_future(readers.read("list.xlsx", data, ""))
    deadline = time.monotonic() + 30
    while read_bytes(pid) < before + len(data) or read_bytes(pid, "wchar") <= written:
        assert time.monotonic() < deadline, "the child never took the file"
        await asyncio.sleep(0.005)
    os.kill(pid, signum)
    return await reading


def run(test: Callable[[Readers], Awaitable[Any]], **limits: Any) -> Any:
    async def within() -> Any:
        readers = Readers(**limits)
        try:
            return await test(readers)
        finally:
            await readers.close()

    return asyncio.run(within())


def test_a_file_is_read_on_one_child_without_the_apis_environment_at_the_lowest_priority(monkeypatch):
    monkeypatch.setenv("SANDESH_SECRET_KEY", "the key a child never sees 0123456789abcdef")

    async def test(readers: Readers) -> tuple[list[Any], list[Any], dict[str, Any]]:
        first = await readers.read("list.csv", NUMBERS, "")
        (pid,) = reading_children()
        second = await readers.read("list.csv", NUMBERS, "")
        assert reading_children() == [pid], "the same child reads the next file"
        limits = Path(f"/proc/{pid}/limits").read_text()
        return [first, second], [os.sched_getscheduler(pid), Path(f"/proc/{pid}/environ").read_bytes()], \
            {"address space": [line for line in limits.splitlines() if line.startswith("Max address space")][0]}

    reads, (policy, environ), limits = run(test)
    assert [[r.number for r in read.recipients] for read in reads] == [["9779812345678", "9779812345679"]] * 2
    assert policy == os.SCHED_IDLE
    assert b"SANDESH" not in environ and b"DATABASE_URL" not in environ
    assert limits["address space"].split()[3] == str(MEMORY)


def test_a_file_that_is_not_csv_is_told_by_its_row_and_the_child_reads_on():
    """Excel for Mac's "CSV (Macintosh)" ends its lines with CR alone, which the csv module
    refuses: the sentence says which row and why, and the child that read it lives on."""
    async def test(readers: Readers) -> tuple[Any, list[int], Any, list[int]]:
        refused = await readers.read("list.csv", b"phone,name\r9779812345678,Sita\r", "")
        before = reading_children()
        after = await readers.read("list.csv", NUMBERS, "")
        return refused, before, after, reading_children()

    refused, before, after, children = run(test)
    assert refused.errors["file"].startswith("Row 1 of the file is not CSV: new-line character seen")
    assert len(after.recipients) == 2 and children == before


def test_a_file_that_needs_more_memory_than_a_child_may_take_is_a_sentence_and_the_next_is_read():
    async def test(readers: Readers) -> list[Any]:
        return [await readers.read("list.csv", heavy_csv(), ""), await readers.read("list.csv", NUMBERS, "")]

    heavy, after = run(test, memory=64 * 2**20)  # a child starts in 35 MB; this list takes it to 82
    assert heavy.errors == {"file": too_big(64 * 2**20)} and not heavy.recipients
    assert heavy.errors["file"] == "The file took more than 64 MB to read: upload a smaller list, or save it as CSV."
    assert len(after.recipients) == 2 and not after.errors


@pytest.mark.parametrize("signum, said", [(signal.SIGXCPU, too_slow(10)), (signal.SIGKILL, too_big(MEMORY))])
def test_a_child_that_overruns_its_cpu_or_is_killed_while_reading_is_a_sentence_and_is_replaced(signum, said):
    """SIGXCPU is what RLIMIT_CPU sends past a file's seconds; SIGKILL what the kernel's
    out-of-memory killer sends."""
    async def test(readers: Readers) -> list[Any]:
        return [await signalled_while_reading(readers, slow_workbook(), signum),
                await readers.read("list.csv", NUMBERS, "")]

    stopped, after = run(test)
    assert stopped.errors == {"file": said}
    assert len(after.recipients) == 2 and not after.errors


def test_a_child_that_stops_answering_is_killed_at_the_wait_and_replaced():
    async def test(readers: Readers) -> list[Any]:
        await readers.read("list.csv", NUMBERS, "")
        (stopped,) = reading_children()
        os.kill(stopped, signal.SIGSTOP)
        late = await readers.read("list.xlsx", slow_workbook(), "")
        after = await readers.read("list.csv", NUMBERS, "")
        assert stopped not in reading_children()
        return [late, after]

    # The stopped child never answers, so the first file is late whatever the wait; the wait
    # also bounds the new child's start, which takes seconds on a busy machine.
    late, after = run(test, wait=6)
    assert late.errors == {"file": LATE}
    assert len(after.recipients) == 2


def test_a_child_that_died_between_two_files_is_replaced_without_a_word():
    async def test(readers: Readers) -> Any:
        await readers.read("list.csv", NUMBERS, "")
        (pid,) = reading_children()
        os.kill(pid, signal.SIGKILL)
        await asyncio.sleep(0.2)
        return await readers.read("list.csv", NUMBERS, "")

    after = run(test)
    assert len(after.recipients) == 2 and not after.errors


def test_past_the_queue_a_file_is_told_to_come_back():
    async def test(readers: Readers) -> list[Any]:
        return list(await asyncio.gather(*(readers.read("list.csv", NUMBERS, "") for _ in range(3))))

    answers = run(test, queue=1)
    assert [a.errors.get("file") for a in answers] == [None, None, BUSY]
