"""A real HTTPS webhook receiver for tests: TLS with a trustme certificate for `localhost`,
every request recorded with its raw body, answers scripted per path."""
from __future__ import annotations

import socket
import ssl
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import trustme

from tests import contract


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float


class Receiver:
    def __init__(self, directory: Path, *, port: int = 0, ca: trustme.CA | None = None):
        """`port` and `ca` bring a receiver back where a closed one was, with the same certificate."""
        self.ca = ca or trustme.CA()
        self.ca_file = directory / "webhook-ca.pem"
        self.ca.cert_pem.write_to_path(str(self.ca_file))
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ca.issue_cert("localhost", "127.0.0.1").configure_cert(context)
        self.received: list[Received] = []
        self.answers: dict[str, list[Any]] = {}
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                contract.record_webhook(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                with receiver.lock:
                    receiver.received.append(Received(self.path, {k.lower(): v for k, v in self.headers.items()},
                                                      body, time.time()))
                    script = receiver.answers.get(self.path)
                    answer = script.pop(0) if script and len(script) > 1 else (script[0] if script else 200)
                if isinstance(answer, tuple):  # ("hang", seconds, then status)
                    time.sleep(answer[1])
                    answer = answer[2]
                try:
                    self.send_response(answer)
                    self.send_header("content-length", "2")
                    if 300 <= answer < 400:
                        self.send_header("location", "https://localhost/elsewhere")
                    self.end_headers()
                    self.wfile.write(b"ok")
                except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
                    pass

            def do_GET(self) -> None:  # noqa: N802 - a keyword's reply URL (workers/services.py)
                path, _, query = self.path.partition("?")
                with receiver.lock:
                    receiver.received.append(Received(path, {k.lower(): v for k, v in self.headers.items()},
                                                      query.encode(), time.time()))
                    script = receiver.answers.get(path)
                    answer = script.pop(0) if script and len(script) > 1 else (script[0] if script else (200, ""))
                if answer[0] == "hang":  # ("hang", seconds, status, text)
                    time.sleep(answer[1])
                    answer = answer[2:]
                body = answer[1].encode()
                try:
                    self.send_response(answer[0])
                    self.send_header("content-type", "text/plain; charset=utf-8")
                    self.send_header("content-length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
                    pass

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"https://localhost:{self.port}{path}"

    def answer(self, path: str, *answers: Any) -> None:
        """Answers for `path`, in order; the last one repeats.  ("hang", 11, 200) waits 11 s first.
        A GET's answers are (status, text), or ("hang", seconds, status, text)."""
        with self.lock:
            self.answers[path] = list(answers)

    def at(self, path: str) -> list[Received]:
        with self.lock:
            return [r for r in self.received if r.path == path]

    def wait(self, path: str, count: int, timeout: float = 20.0) -> list[Received]:
        deadline = time.monotonic() + timeout
        while len(found := self.at(path)) < count:
            assert time.monotonic() < deadline, f"{len(found)} of {count} requests at {path}"
            time.sleep(0.02)
        return found

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Dripping:
    """A receiver that answers slowly on purpose, on real sockets with TLS (the test CA's
    certificate for `localhost`): `head` sends its status line a byte every `every` seconds;
    `body` answers 200 with a 1 MB Content-Length, then a byte every `every` seconds; `endless`
    answers 200 and streams a body that never ends as fast as it is read.  Records when each
    connection it served was closed by the other side."""

    def __init__(self, ca: trustme.CA, mode: str, every: float = 5.0):
        self.mode, self.every = mode, every
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ca.issue_cert("localhost", "127.0.0.1").configure_cert(self.context)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.closed_at: list[float] = []
        self.sent: list[int] = []
        self.stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, path: str) -> str:
        return f"https://localhost:{self.port}{path}"

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                raw, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(raw,), daemon=True).start()

    def _serve(self, raw: socket.socket) -> None:
        sent = 0
        try:
            with self.context.wrap_socket(raw, server_side=True) as tls:
                request = b""
                while b"\r\n\r\n" not in request:
                    request += tls.recv(65536)
                head, _, body = request.partition(b"\r\n\r\n")
                length = int(next((line.split(b":")[1] for line in head.split(b"\r\n")
                                   if line.lower().startswith(b"content-length")), b"0"))
                while len(body) < length:
                    body += tls.recv(65536)
                if self.mode == "head":
                    for byte in b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok":
                        tls.sendall(bytes([byte]))
                        sent += 1
                        if self.stop.wait(self.every):
                            return
                elif self.mode == "body":
                    tls.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 1000000\r\n\r\n")
                    while not self.stop.wait(self.every):
                        tls.sendall(b"x")
                        sent += 1
                else:
                    tls.sendall(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
                    chunk = b"%x\r\n%s\r\n" % (65536, b"y" * 65536)
                    while not self.stop.is_set():
                        tls.sendall(chunk)
                        sent += 65536
        except (OSError, ssl.SSLError):
            self.closed_at.append(time.monotonic())
        finally:
            self.sent.append(sent)

    def close(self) -> None:
        self.stop.set()
        self.listener.close()
