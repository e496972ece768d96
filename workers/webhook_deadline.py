"""Every webhook attempt ends by its deadline: connecting, TLS, the answer's head and as much of
its body as is read, all together (docs/design.md, "Webhook sender").

A socket's timeout bounds one read, so a receiver that drips a byte every few seconds, in its
head or its body, would hold the attempt (and its thread) for as long as it likes.  Here, the
connections of the webhook session (workers/webhook_guard.py) give their socket to the attempt
running on their thread, and a watchdog thread shuts down the socket of an attempt past its
deadline: whatever read or write the attempt is blocked in then fails at once, and the
connection is never used again.  Before there is a socket, the connection asks `remaining()`:
the host's resolution and each address's connect are given only what is left.

    with DEADLINES.within(10.0):
        response = session.send(request, stream=True, ...)
"""
from __future__ import annotations

import itertools
import socket
import threading
import time
from contextlib import contextmanager
from typing import Iterator

WATCH_EVERY = 0.05  # seconds: how late past its deadline an attempt may end


class Deadlines:
    def __init__(self) -> None:
        self._current = threading.local()  # the attempt running on this thread: its number
        self._lock = threading.Lock()
        self._attempts: dict[int, tuple[float, list[socket.socket]]] = {}  # number -> (deadline, sockets)
        self._numbers = itertools.count()
        self._watchdog: threading.Thread | None = None

    @contextmanager
    def within(self, seconds: float) -> Iterator[None]:
        """The attempt made on this thread inside the block ends within `seconds`."""
        number = next(self._numbers)
        with self._lock:
            self._attempts[number] = (time.monotonic() + seconds, [])
            if self._watchdog is None:
                self._watchdog = threading.Thread(target=self._watch, name="webhook deadlines", daemon=True)
                self._watchdog.start()
        self._current.number = number
        try:
            yield
        finally:
            self._current.number = None
            with self._lock:
                self._attempts.pop(number, None)

    def remaining(self) -> float | None:
        """Seconds left to the deadline of the attempt on this thread (0 when it passed); None outside one."""
        number = getattr(self._current, "number", None)
        with self._lock:
            attempt = self._attempts.get(number) if number is not None else None
        return None if attempt is None else max(0.0, attempt[0] - time.monotonic())

    def watched(self, sock: socket.socket) -> socket.socket:
        """A socket the attempt on this thread uses: shut down at its deadline."""
        number = getattr(self._current, "number", None)
        if number is not None:
            with self._lock:
                if number in self._attempts:
                    self._attempts[number][1].append(sock)
        return sock

    def _watch(self) -> None:
        while True:
            time.sleep(WATCH_EVERY)
            now = time.monotonic()
            with self._lock:
                late = [sockets for deadline, sockets in self._attempts.values() if deadline <= now and sockets]
                due = [list(sockets) for sockets in late]
                for sockets in late:
                    sockets.clear()
            for sockets in due:
                for sock in sockets:
                    _shut(sock)


def _shut(sock: socket.socket) -> None:
    """End every read and write on the socket, from another thread.  The plain socket's shutdown
    even for a TLS socket: its own would drop the TLS state under the reading thread."""
    try:
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except OSError:  # closed already
        pass


DEADLINES = Deadlines()
