"""Slow and idle clients cost a socket, not a worker (docs/design.md, "Slow clients"): a real
`sandesh serve`, and real sockets that stop inside their headers or body, or trickle a byte
every 2 s, beside ordinary clients."""
import socket
import threading
import time

import pytest
import requests

from tests.conftest import Server

pytestmark = pytest.mark.alone  # it measures latency or throughput: run with nothing beside it (scripts/test.sh)

SLOW = 100  # a quarter each: head stopped, head trickling, body stopped, body trickling


@pytest.fixture(scope="module")
def served(env):
    running = Server(env)
    yield running
    running.stop()


def connect(server, timeout=30.0):
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=timeout)
    return sock


def answer_of(sock, timeout):
    """What the server wrote before it closed the connection (b"" when it only closed it);
    None when it is still open after `timeout`."""
    sock.settimeout(timeout)
    got = b""
    try:
        while True:
            chunk = sock.recv(4096)
            if not chunk:
                return got
            got += chunk
    except socket.timeout:
        return None
    except ConnectionResetError:
        return got


def test_slow_clients_are_cut_off_and_ordinary_ones_beside_them_are_served(served, active_client, sandesh):
    slow_key = sandesh("client", "create", "--workspace", active_client["workspace"], "--brand", "Slow",
                       "--rate-limit", "1000")["key"]  # a client of its own, so the ordinary one keeps its rate
    head = (b"POST /v1/sms/send HTTP/1.1\r\nHost: sandesh\r\nContent-Type: application/json\r\nx-api-key: "
            + slow_key.encode() + b"\r\n")
    body_head = head + b"Content-Length: 400\r\n\r\n"
    kinds = ["head stopped", "head trickling", "body stopped", "body trickling"]
    sockets = {kind: [connect(served) for _ in range(SLOW // 4)] for kind in kinds}
    for sock in sockets["head stopped"] + sockets["head trickling"]:
        sock.sendall(head)
    for sock in sockets["body stopped"] + sockets["body trickling"]:
        sock.sendall(body_head + b'{"to": "977')
    opened = time.monotonic()
    stop = threading.Event()

    def trickle():
        while not stop.wait(2.0):
            for sock in sockets["head trickling"]:
                try:
                    sock.send(b"X")
                except OSError:
                    pass
            for sock in sockets["body trickling"]:
                try:
                    sock.send(b"9")
                except OSError:
                    pass

    threading.Thread(target=trickle, daemon=True).start()
    try:
        session, took, failed = requests.Session(), [], []
        headers = {"x-api-key": active_client["key"]}
        due = opened
        while due < opened + 8:  # one request every 0.06 s, on a schedule: a late wake-up costs no request
            time.sleep(max(0.0, due - time.monotonic()))
            due += 0.06  # within the client's 20 requests a second
            started = time.monotonic()
            try:
                answer = session.get(served.url + "/v1/sms/balance", headers=headers, timeout=5)
                took.append(time.monotonic() - started)
                if answer.status_code != 200:
                    failed.append(answer.status_code)
            except requests.RequestException as error:
                failed.append(repr(error))
        took.sort()
        p99 = took[int(len(took) * 0.99)]
        assert not failed and len(took) > 100, (failed, len(took))
        assert p99 < 0.25, f"p99 {p99 * 1000:.0f} ms beside {SLOW} slow clients"
        # a request whose head or body stops is answered 408 and closed within 10 s of its last byte
        for kind in ("head stopped", "body stopped", "head trickling"):
            for sock in sockets[kind]:
                got = answer_of(sock, max(0.1, opened + 13 - time.monotonic()))
                assert got is not None and got.startswith(b"HTTP/1.1 408 "), (kind, got)
                assert b'"code":"request_timeout"' in got
        # a body that trickles never stalls: it costs its socket (until 60 s), no worker
        assert all(answer_of(sock, 0.05) is None for sock in sockets["body trickling"])
        answer = session.get(served.url + "/v1/sms/balance", headers=headers, timeout=5)
        assert answer.status_code == 200
    finally:
        stop.set()
        for group in sockets.values():
            for sock in group:
                sock.close()


def test_an_idle_keep_alive_connection_is_closed_after_5_seconds(served):
    sock = connect(served)
    try:
        sock.sendall(b"GET /v1/health HTTP/1.1\r\nHost: sandesh\r\n\r\n")
        time.sleep(0.3)
        assert sock.recv(4096).startswith(b"HTTP/1.1 200 ")
        started = time.monotonic()
        assert answer_of(sock, 8) == b""
        assert 4.5 < time.monotonic() - started < 6.5
    finally:
        sock.close()


def test_past_the_cap_a_new_connection_is_refused_at_once(env):
    capped = Server(env, workers=1, args=("--worker-connections", "20"))
    held = []
    try:
        held = [connect(capped) for _ in range(20)]  # idle: each holds a place until its head deadline
        time.sleep(0.3)
        started = time.monotonic()
        extra = connect(capped)
        got = answer_of(extra, 3)
        extra.close()
        assert time.monotonic() - started < 1.0
        assert got is not None and got.startswith(b"HTTP/1.1 503 ") and b"Retry-After: 1" in got
        assert b'"code":"unavailable"' in got
        for sock in held:
            sock.close()
        held = []
        time.sleep(0.3)
        assert requests.get(capped.url + "/v1/health", timeout=5).status_code == 200  # places are given back
    finally:
        for sock in held:
            sock.close()
        capped.stop()
