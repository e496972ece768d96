"""gunicorn's `asgi` worker, guarded against clients that are slow on purpose (docs/design.md,
"Slow clients").

gunicorn's own ASGI protocol arms no timer before a request's head is complete, and its worker
counts open connections without capping them: a few hundred sockets that trickle one byte now
and then would stay open for ever.  On the event loop they hold no thread, but they hold memory
and file descriptors, and a proxy in front is the operator's choice, not a given.  So:

- a request's head must be complete within HEAD_SECONDS of its first byte (or of the
  connection); its body must not stall for BODY_STALL_SECONDS, and must be whole within
  BODY_SECONDS; otherwise the client gets `408` (when no response has started) and the
  connection is closed;
- an idle keep-alive connection is closed after the `keepalive` setting (scripts/service/serve.py);
- past `worker_connections` open connections, a process answers a new one `503` with
  `Retry-After` at once and closes it, rather than let it wait.
"""
from __future__ import annotations

import asyncio
from typing import Any

import orjson
from gunicorn.asgi.protocol import ASGIProtocol
from gunicorn.workers.gasgi import ASGIWorker

HEAD_SECONDS = 10.0
BODY_STALL_SECONDS = 10.0
BODY_SECONDS = 60.0  # a 4 MB batch at 70 kB/s


def _answer(status: str, code: str, message: str, extra: str = "") -> bytes:
    body = orjson.dumps({"error": message, "code": code})
    return (f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n{extra}"
            "Connection: close\r\n\r\n").encode("latin-1") + body


TOO_SLOW = _answer("408 Request Timeout", "request_timeout",
                   "The request did not arrive in time; send it whole, without pauses.")
FULL = _answer("503 Service Unavailable", "unavailable", "Too many open connections; retry in a second.",
               "Retry-After: 1\r\n")


# Whether gunicorn's C parser is installed is found once, on ASGIProtocol: asked first through a
# subclass, it would be recorded on the subclass, where ASGIProtocol's parser choice never looks.
ASGIProtocol._check_h1c_protocol_available()


class GuardedProtocol(ASGIProtocol):
    def __init__(self, worker: Any):
        super().__init__(worker)
        self._deadline: asyncio.TimerHandle | None = None  # the head's, or the body's next chunk's
        self._body_deadline: asyncio.TimerHandle | None = None  # the whole body's
        self._responding = False

    # The connection cap

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        if self.worker.nr_conns > self.worker.worker_connections:
            self._safe_write(FULL)
            self._give_up()
            return
        self._arm(HEAD_SECONDS)

    # The head

    def data_received(self, data: bytes) -> None:
        if self._keepalive_handle is not None:  # the next request starts on an idle connection
            self._cancel_keepalive_timer()
            self._arm(HEAD_SECONDS)
        super().data_received(data)

    def _on_headers_complete(self) -> Any:
        self._disarm()
        self._responding = False
        result = super()._on_headers_complete()
        if self._body_receiver is not None and not self._body_receiver._complete:
            self._arm(BODY_STALL_SECONDS)
            self._body_deadline = self.worker.loop.call_later(BODY_SECONDS, self._too_slow)
        return result

    # The body

    def _on_body(self, chunk: bytes) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        self._deadline = self.worker.loop.call_later(BODY_STALL_SECONDS, self._too_slow)
        super()._on_body(chunk)

    def _on_message_complete(self) -> None:
        self._disarm()
        super()._on_message_complete()

    def _send_response_start(self, *args: Any, **kwargs: Any) -> None:
        self._responding = True
        super()._send_response_start(*args, **kwargs)

    # Timers

    def _arm(self, seconds: float) -> None:
        self._disarm()
        if not self._closed:
            self._deadline = self.worker.loop.call_later(seconds, self._too_slow)

    def _disarm(self) -> None:
        for timer in (self._deadline, self._body_deadline):
            if timer is not None:
                timer.cancel()
        self._deadline = self._body_deadline = None

    def _too_slow(self) -> None:
        self._disarm()
        if not self._responding:
            self._safe_write(TOO_SLOW)
        self._give_up()

    def _give_up(self) -> None:
        self._close_transport()
        if self._request_ready is not None:  # wake the connection's task so that it ends
            self._request_ready.set()

    def connection_lost(self, exc: BaseException | None) -> None:
        self._disarm()
        super().connection_lost(exc)


class GuardedWorker(ASGIWorker):
    """gunicorn's `asgi` worker, serving with GuardedProtocol."""

    def init_process(self) -> None:
        import gunicorn.workers.gasgi as gasgi

        # ASGIWorker._serve builds each connection's protocol from this module-level name and
        # offers no setting for it; this process is a worker of its own, so it is set here.
        gasgi.ASGIProtocol = GuardedProtocol
        super().init_process()
