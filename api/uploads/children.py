"""Uploaded files read on a child process (docs/dashboard.md, "Limits of a list"): the API's
event loop never reads one, nor do its blocking threads.

Each API process keeps one child, started at its first file and kept for the next; a file that
finds it busy waits its turn, QUEUE files at most (one more is told to try again).  The
child is `python -I -m sandesh.api.uploads.children`, the installed package:

- with none of the API's environment (no key, no database address) and none of its threads;
- at the lowest priority (SCHED_IDLE, as password checks: projections/storage/passwords.py), on any core:
  reading a list never takes a core from the API;
- within MEMORY bytes of address space (RLIMIT_AS), and CPU_SECONDS of CPU for each file
  (RLIMIT_CPU, whose SIGXCPU ends it).

A file goes down the child's stdin, its recipients come back on its stdout as JSON; the request
awaits them on the event loop, holding no thread.  A child that dies, or that has not answered
within WAIT_SECONDS, is killed and replaced at the next file: the person reads a sentence that
says so, never a 500.  A child whose API process is gone reads the end of its stdin and exits.
(Not a ProcessPoolExecutor: one whose process dies is broken for every file that waits on it;
here a file's request knows whether the child died of it, and the child has no key to leak.)"""
from __future__ import annotations

import asyncio
import os
import resource
import signal
import struct
import sys
import traceback
from typing import Any

import orjson

from sandesh.domain.recipients import Listed, Recipient, Refusal
from sandesh.domain.said import Said, _, packed, unpacked

from .files import read_file

MEMORY = 256 * 2**20  # bytes of address space of a child
CPU_SECONDS = 10  # of CPU for one file
WAIT_SECONDS = 60  # for a file's answer, once its turn came
QUEUE = 4  # files that wait for the child of a process, beyond the one it reads
OUT_OF_TIME = 3  # a child's exit status when a file took its CPU_SECONDS
# ... and the byte it writes first, in place of an answer's length: an exit status is not always
# known (asyncio reports 255 for a child whose status it could not collect)
OUT_OF_TIME_MARK = b"\xff"
TAKEN = b"+"  # a child's first byte of each answer: it has read the whole file

BUSY = _("Other lists are being read just now: try again in a minute.")
LATE = _("The file could not be read in time: try again in a minute.")
UNREADABLE = _("The file could not be read: save it again from Excel, as XLSX or as CSV UTF-8.")


def too_slow(cpu_seconds: int) -> Said:
    return _("The file took more than %(seconds)s seconds to read: upload a smaller list, or save it as CSV.",
             seconds=cpu_seconds)


def too_big(memory: int) -> Said:
    return _("The file took more than %(mb)s MB to read: upload a smaller list, or save it as CSV.",
             mb=memory // 2**20)


class Readers:
    """`await readers.read(filename, data, number_column)`: the file's recipients, read on the
    process's child (files.read_file), or a sentence under "file"."""

    def __init__(self, memory: int = MEMORY, cpu_seconds: int = CPU_SECONDS, queue: int = QUEUE,
                 wait: float = WAIT_SECONDS):
        self.memory, self.cpu_seconds, self.queue, self.wait = memory, cpu_seconds, queue, wait
        self._child: asyncio.subprocess.Process | None = None
        self._turn = asyncio.Lock()
        self._waiting = 0  # on the event loop only: the files read or waiting

    async def read(self, filename: str, data: bytes, number_column: str) -> Listed:
        if self._waiting > self.queue:
            return Listed(errors={"file": BUSY})
        meta = orjson.dumps({"filename": filename, "numberColumn": number_column})
        self._waiting += 1
        try:
            async with self._turn:
                answer = await self._ask(struct.pack(">II", len(meta), len(data)) + meta + data)
        finally:
            self._waiting -= 1
        return answer if isinstance(answer, Listed) else _read_of(answer)

    async def _ask(self, request: bytes) -> Any:
        """The child's answer to one file, or a Listed with the sentence of its failure.  A child
        found dead before it took the whole file (killed while it waited) is replaced once."""
        for last in (False, True):
            try:
                child = await self._started()
            except OSError:  # no process could start now (the service's limit of tasks, say)
                return Listed(errors={"file": LATE})
            assert child.stdin is not None and child.stdout is not None
            taken = False
            try:
                async with asyncio.timeout(self.wait):
                    child.stdin.write(request)
                    await child.stdin.drain()
                    taken = await child.stdout.readexactly(1) == TAKEN
                    size = struct.unpack(">I", await child.stdout.readexactly(4))[0]
                    return orjson.loads(await child.stdout.readexactly(size))
            except (asyncio.IncompleteReadError, ConnectionError) as error:  # the child died
                self._end(child)
                status = await child.wait()
                slow = status == OUT_OF_TIME or getattr(error, "partial", b"")[:1] == OUT_OF_TIME_MARK
                if taken or last:
                    return Listed(errors={"file": too_slow(self.cpu_seconds) if slow else too_big(self.memory)})
            except TimeoutError:
                self._end(child)
                return Listed(errors={"file": LATE})
            except BaseException:  # the request was cancelled: what the child holds is no one's
                self._end(child)
                raise
        raise AssertionError("unreachable")

    async def _started(self) -> asyncio.subprocess.Process:
        if self._child is None or self._child.returncode is not None:
            self._child = await asyncio.create_subprocess_exec(
                sys.executable, "-I", "-m", "sandesh.api.uploads.children", str(self.memory), str(self.cpu_seconds),
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                env={"PATH": os.defpath, "LANG": "C.UTF-8"})
        return self._child

    def _end(self, child: asyncio.subprocess.Process) -> None:
        if child.returncode is None:
            child.kill()
        self._child = None

    async def close(self) -> None:
        child = self._child
        if child is not None:
            self._end(child)
            await child.wait()


def _read_of(answer: dict[str, Any]) -> Listed:
    return Listed(recipients=[Recipient(line, number, fields) for line, number, fields in answer["recipients"]],
                refused=[Refusal(line, given, unpacked(reason)) for line, given, reason in answer["refused"]],
                columns=answer["columns"], source=unpacked(answer["source"]),
                errors={name: unpacked(error) for name, error in answer["errors"].items()})


# The child

def main(memory: int, cpu_seconds: int) -> None:
    _confine(memory)
    from . import workbook  # noqa: F401 (openpyxl's date rules): loaded once, before the first file

    requests, answers = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing but answers on the answers' pipe
    while True:
        head = requests.read(8)
        if len(head) < 8:
            return  # the API process is gone
        meta_size, data_size = struct.unpack(">II", head)
        meta, data = orjson.loads(requests.read(meta_size)), requests.read(data_size)
        answers.write(TAKEN)
        answers.flush()
        _allow_cpu(cpu_seconds)
        try:
            read = read_file(meta["filename"], data, meta["numberColumn"])
        except MemoryError:
            read = Listed(errors={"file": too_big(memory)})
        except Exception:  # a file no rule foresaw: a sentence for the person, its traceback for the log
            traceback.print_exc()
            read = Listed(errors={"file": UNREADABLE})
        del data
        answer = orjson.dumps({"recipients": [[r.line, r.number, r.fields] for r in read.recipients],
                               "refused": [[r.line, r.given, packed(r.reason)] for r in read.refused],
                               "columns": read.columns, "source": packed(read.source),
                               "errors": {name: packed(error) for name, error in read.errors.items()}})
        answers.write(struct.pack(">I", len(answer)) + answer)
        answers.flush()


def _confine(memory: int) -> None:
    _limit(resource.RLIMIT_AS, memory)
    _limit(resource.RLIMIT_CORE, 0)
    signal.signal(signal.SIGXCPU, _out_of_time)
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (OSError, AttributeError):
        os.nice(19)
    try:
        os.sched_setaffinity(0, range(os.cpu_count() or 1))  # not only its API process's core
    except OSError:
        pass


def _out_of_time(*_: Any) -> None:
    """SIGXCPU: the file took its seconds.  Said on the answers' pipe, then by the exit status."""
    try:
        os.write(1, OUT_OF_TIME_MARK)
    finally:
        os._exit(OUT_OF_TIME)


def _allow_cpu(seconds: int) -> None:
    """RLIMIT_CPU counts the life of the process: the next file may take `seconds` more."""
    used = resource.getrusage(resource.RUSAGE_SELF)
    _limit(resource.RLIMIT_CPU, int(used.ru_utime + used.ru_stime) + seconds + 1)


def _limit(which: int, value: int) -> None:
    """The soft limit: its hard limit stays, so that the next file may raise it again."""
    _, hard = resource.getrlimit(which)
    resource.setrlimit(which, (value if hard == resource.RLIM_INFINITY else min(value, hard), hard))


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
