"""Fixtures that build real things: a fresh PostgreSQL database, the `sandesh` command, a
running `sandesh serve` under gunicorn, a SIM reported healthy the way a dispatcher does."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import orjson
import psycopg
import pytest
import requests

from tests import contract
from tests.command_forks import Commands

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SERVER = "postgresql://root@127.0.0.1:5432/postgres"


contract.install()


@pytest.fixture(autouse=True)
def conforms_to_the_contract() -> Iterator[None]:
    """Fails a test that received an answer, or whose receiver got a webhook, that the OpenAPI
    document does not describe (tests/contract.py)."""
    contract.take()  # what an earlier test's threads received late is not this test's
    yield
    found = contract.take()
    assert not found, "not as /v1/openapi.json says:\n" + "\n".join(found[:20])


def pytest_terminal_summary(terminalreporter: Any) -> None:
    terminalreporter.write_line(f"checked against /v1/openapi.json: {contract.checked['responses']} responses, "
                                f"{contract.checked['webhooks']} webhook deliveries")


def _test_server() -> str:
    """$SANDESH_TEST_POSTGRES; else the local server; else, on a machine without one, the
    embedded PostgreSQL that `sandesh up` uses, started under var/test-pg for this run."""
    given = os.environ.get("SANDESH_TEST_POSTGRES")
    if given:
        return given
    try:
        psycopg.connect(DEFAULT_SERVER, connect_timeout=3).close()
        return DEFAULT_SERVER
    except psycopg.OperationalError:
        pass
    from sandesh.scripts.service.up import embedded_database

    url = embedded_database(ROOT / "var" / "test-pg", "postgres")
    sys.stderr.write(f"no PostgreSQL at {DEFAULT_SERVER}: the tests run on an embedded one ({url})\n")
    os.environ["SANDESH_TEST_POSTGRES"] = url  # for the benchmarks' helpers and every subprocess
    return url


SERVER_URL = _test_server()
SECRET_KEY = "test-secret-key-0123456789abcdef0123456789"


def _admin() -> psycopg.Connection:
    try:
        return psycopg.connect(SERVER_URL, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as error:
        pytest.fail(
            f"These tests need a PostgreSQL server at {SERVER_URL} (set SANDESH_TEST_POSTGRES to another "
            f"server's URL, whose user may create databases): {error}", pytrace=False)


_template: list[str] = []  # the migrated database of this test process, once made


def migrated_template() -> str:
    """A database migrated once per test process by `sandesh db migrate`, as the docs run it;
    each module's database is a copy of it (CREATE DATABASE … TEMPLATE), which costs a file copy
    instead of a migration.  Dropped when the session ends (pytest_sessionfinish)."""
    if not _template:
        name = f"sandesh_template_{uuid.uuid4().hex[:12]}"
        with _admin() as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        env = {**os.environ, "DATABASE_URL": psycopg.conninfo.make_conninfo(SERVER_URL, dbname=name),
               "SANDESH_SECRET_KEY": SECRET_KEY}
        subprocess.run([sys.executable, "-m", "sandesh.scripts.service.cli", "db", "migrate"], env=env, cwd=ROOT,
                       check=True, capture_output=True)
        _template.append(name)
    return _template[0]


def pytest_sessionfinish(session: pytest.Session) -> None:
    if _template:
        with _admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{_template.pop()}" WITH (FORCE)')


@pytest.fixture(scope="module")
def database_url() -> Iterator[str]:
    """A fresh, migrated database for one test module (a copy of `migrated_template`), dropped afterwards."""
    name = f"sandesh_test_{uuid.uuid4().hex[:12]}"
    template = migrated_template()
    with _admin() as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    yield psycopg.conninfo.make_conninfo(SERVER_URL, dbname=name)
    with _admin() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def empty_database_url() -> Iterator[str]:
    """A new database, not migrated (a test's own release or an earlier one migrates it), dropped afterwards."""
    name = f"sandesh_test_{uuid.uuid4().hex[:12]}"
    with _admin() as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield psycopg.conninfo.make_conninfo(SERVER_URL, dbname=name)
    with _admin() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="module")
def env(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("SANDESH_")},
        "DATABASE_URL": database_url, "SANDESH_SECRET_KEY": SECRET_KEY, "SANDESH_CLOCK": "test",
        "SANDESH_WEBHOOK_ALLOW_PRIVATE": "1", "USER": "tester",
        "SANDESH_METRICS_DIR": str(tmp_path_factory.mktemp("metrics")),  # this module's processes only
    }


@pytest.fixture(scope="module")
def runtime(env: dict[str, str]) -> Iterator[Any]:
    """The application and its database, in the test process (the dispatcher's tests need 6 connections)."""
    from sandesh.domain.settings import Settings
    from sandesh.scripts.service.bootstrap import bootstrap

    rt = bootstrap(Settings.from_env(env), pool_size=6)
    yield rt
    rt.close()


COMMANDS = Commands(ROOT)


class Sandesh:
    """Runs the real `sandesh` command in a process of its own (a fork of one that imported it,
    tests/command_forks.py), in a folder without ./var."""

    def __init__(self, env: dict[str, str], cwd: Path):
        self.env, self.cwd = env, cwd
        self.after_clock_advance: list[Callable[[], None]] = []

    def run(self, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        done = self.execute(list(args), {**self.env, **(env or {}), "PYTHONPATH": str(ROOT)})
        if args[:2] == ("clock", "advance") and done.returncode == 0:
            for hook in self.after_clock_advance:
                hook()
        return done

    def execute(self, args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
        return COMMANDS.run(args, env, self.cwd, timeout=60)

    def __call__(self, *args: str, **kwargs: Any) -> Any:
        done = self.run(*args, **kwargs)
        assert done.returncode == 0, f"sandesh {' '.join(args)} failed ({done.returncode}): {done.stderr}"
        return orjson.loads(done.stdout)


@pytest.fixture(scope="module")
def sandesh(env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Sandesh:
    return Sandesh(env, tmp_path_factory.mktemp("cwd"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A real `sandesh serve` (with `args` added to its command line), its output in `log`."""

    def __init__(self, env: dict[str, str], workers: int = 2, args: tuple[str, ...] = ()):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {"SANDESH_PUBLIC_URL": self.url, **env}  # the links it hands out lead to it
        self.log = open(Path(env.get("SANDESH_TEST_LOGDIR", "/tmp")) / f"sandesh-serve-{self.port}.log", "w+")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "sandesh.scripts.service.cli", "serve", "--bind", f"127.0.0.1:{self.port}",
             "--workers", str(workers), *args],
            env={**env, "PYTHONPATH": str(ROOT)}, cwd=ROOT, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                requests.get(self.url + "/v1/sms/balance", timeout=5)
                return
            except (requests.ConnectionError, requests.Timeout):  # not listening yet, or still starting
                assert self.process.poll() is None, self.output()
                time.sleep(0.1)
        raise AssertionError("sandesh serve did not start: " + self.output())

    def output(self) -> str:
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.log.close()


@pytest.fixture(scope="module")
def server(env: dict[str, str]) -> Iterator[Server]:
    running = Server(env)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def projections_worker(env: dict[str, str]) -> Iterator[subprocess.Popen]:
    """A real `sandesh worker projections`: the followed read models trail the log by about a
    second, as in service."""
    worker = subprocess.Popen([sys.executable, "-m", "sandesh.scripts.service.cli", "worker", "projections"], cwd=ROOT,
                              env={**env, "PYTHONPATH": str(ROOT)}, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    yield worker
    worker.terminate()
    worker.wait(timeout=15)


@pytest.fixture(scope="module")
def receiver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The HTTPS webhook receiver (tests/receiver.py), with a test certificate of its own."""
    from tests.receiver import Receiver

    running = Receiver(tmp_path_factory.mktemp("tls"))
    yield running
    running.close()


@pytest.fixture(scope="module")
def active_client(sandesh: Sandesh) -> dict[str, Any]:
    """An active workspace with NPR 1,000 and one client."""
    workspace = sandesh("workspace", "create", "--name", "Acme")
    sandesh("workspace", "activate", workspace["id"])
    sandesh("workspace", "credit", workspace["id"], "100000")
    client = sandesh("client", "create", "--workspace", workspace["id"], "--brand", "Acme")
    return {"workspace": workspace["id"], "client": client["id"], "key": client["key"]}


class Route:
    """An enabled SIM that a running dispatcher reports on (without one a send answers 503
    unavailable: docs/api.md, "Order of checks"), recorded with the dispatcher's own heartbeat
    function, as often as a dispatcher reports it and again whenever the test clock jumps.
    Nothing drives the modem: what is sent through it stays queued."""

    def __init__(self, runtime: Any, sim_id: str):
        from sandesh.workers.dispatcher import heartbeat_seconds

        self.runtime, self.sim_id = runtime, sim_id
        self.healthy, self.reporting = True, True
        self._lock, self._stop = threading.Lock(), threading.Event()
        self.report()
        self._thread = threading.Thread(target=self._keep_reporting, daemon=True,
                                        args=(heartbeat_seconds(runtime.settings.route_window),))
        self._thread.start()

    def report(self) -> None:
        from sandesh.projections import sim_health

        with self._lock:
            if not self.reporting:
                return
            with self.runtime.connection() as conn:
                sim_health.record(conn, self.sim_id, healthy=self.healthy, registered=self.healthy,
                                  signal_dbm=-73, last_error=None if self.healthy else "not registered on the network",
                                  dispatcher="tests", at=self.runtime.clock.now())

    def _keep_reporting(self, every: float) -> None:
        while not self._stop.wait(every):
            self.report()

    @contextmanager
    def silent(self) -> Iterator[None]:
        """Its dispatcher reports once more, then stops (the heartbeat ages), then resumes."""
        self.report()
        with self._lock:
            self.reporting = False
        try:
            yield
        finally:
            self.reporting = True
            self.report()

    @contextmanager
    def unhealthy(self) -> Iterator[None]:
        """Its dispatcher reports the SIM off the network, then back on it."""
        self.healthy = False
        self.report()
        try:
            yield
        finally:
            self.healthy = True
            self.report()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


@pytest.fixture(scope="module")
def route(sandesh: Sandesh, runtime: Any) -> Iterator[Route]:
    sim = sandesh("sim", "add", "--name", "route-1", "--port", "loop://")
    reported = Route(runtime, sim["id"])
    sandesh.after_clock_advance.append(reported.report)
    yield reported
    sandesh.after_clock_advance.remove(reported.report)
    reported.close()


@contextmanager
def running_dispatcher(runtime: Any, host: str | None = None) -> Iterator[Any]:
    """A real Dispatcher in this process, its loop on a thread, stopped afterwards."""
    from sandesh.workers.dispatcher import Dispatcher

    dispatcher = Dispatcher(runtime, host)
    dispatcher.start()
    thread = threading.Thread(target=dispatcher.run, daemon=True)
    thread.start()
    try:
        yield dispatcher
    finally:
        holding = dispatcher.close(wait=20)
        thread.join(timeout=5)
        assert not holding, f"SIM threads still holding their ports after the dispatcher closed: {holding}"


@pytest.fixture(scope="module")
def postgres() -> Iterator[Any]:
    """A PostgreSQL server of the module's own, which its tests may stop and start."""
    import tempfile

    from tests.private_postgres import PrivatePostgres

    # Not under pytest's own temporary folder: any pytest that starts on this machine sets that
    # folder back to mode 0700, which locks out the server's `pgserver` user mid-run.
    server = PrivatePostgres(Path(tempfile.mkdtemp(prefix="sandesh-private-pg-")))
    server.start()
    yield server
    server.remove()


@pytest.fixture(scope="module")
def phones(runtime: Any) -> Iterator[Any]:
    """Two emulated modems on pseudo-terminals, registered as SIMs, and a real dispatcher
    driving them."""
    from sandesh.scripts.service.commands import register_emulated
    from sandesh.scripts.service.emulator import Emulator

    with Emulator(sims=2, report_delay=0.05) as emulator:
        register_emulated(runtime, emulator.devices(), "test")
        with running_dispatcher(runtime):
            yield emulator


def wait_for_status(runtime: Any, message_ids: list[str], statuses: set[str], timeout: float = 20.0) -> dict:
    """Wait until every message is in one of `statuses` (read from the log); returns them."""
    deadline = time.monotonic() + timeout
    while True:
        found = {m: runtime.sandesh.history.message(m).status for m in message_ids}
        if all(s in statuses for s in found.values()):
            return found
        assert time.monotonic() < deadline, found
        time.sleep(0.02)
