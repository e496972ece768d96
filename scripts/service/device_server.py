"""The HTTP server under the emulated network devices (a HiLink stick, an Android phone): one
device on 127.0.0.1, a thread per connection, that can vanish as an unplugged device does."""
from __future__ import annotations

import http.server
import socket
import threading
from typing import Any

Answer = tuple[int, bytes, dict[str, str]]  # status, body, headers


class DeviceServer:
    """Subclasses answer `handle(method, path, headers, body)`; `port` 0 picks a free one."""

    name = "device"

    def __init__(self) -> None:
        self._server: http.server.ThreadingHTTPServer | None = None
        self._connections: set[socket.socket] = set()
        self.port = 0

    def handle(self, method: str, path: str, headers: dict[str, str], body: bytes) -> Answer:
        raise NotImplementedError

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def start(self) -> Any:
        device = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body are two writes

            def log_message(self, *args: Any) -> None:
                pass

            def setup(self) -> None:
                super().setup()
                device._connections.add(self.connection)

            def finish(self) -> None:
                device._connections.discard(self.connection)
                super().finish()

            def do_GET(self) -> None:
                self._answer(b"")

            def do_DELETE(self) -> None:
                self._answer(b"")

            def do_POST(self) -> None:
                self._answer(self.rfile.read(int(self.headers.get("Content-Length") or 0)))

            do_PATCH = do_POST

            def _answer(self, body: bytes) -> None:
                status, payload, headers = device.handle(self.command, self.path, dict(self.headers), body)
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, name=f"{self.name} server", daemon=True).start()
        return self

    def vanish(self) -> None:
        """Gone as an unplugged device: no new connection, and the open ones cut."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        for connection in list(self._connections):
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def come_back(self) -> None:
        """Plugged in again, at the same address."""
        self.start()

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.vanish()
