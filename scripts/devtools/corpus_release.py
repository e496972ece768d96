"""An earlier release installed on its own, and its commands and processes, run against one
database: the part of the corpus maker (scripts/devtools/corpus.py) that tests use too, to run an old
release beside this one (tests/integration/test_mixed_releases.py)."""
from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Iterable

import psycopg

ROOT = Path(__file__).resolve().parents[2]
RELEASES = ROOT / "var" / "releases"
DEFAULT_SERVER = "postgresql://root@127.0.0.1:5432/postgres"


class CorpusError(Exception):
    """A step failed; the message names the command and carries its stderr."""


def say(text: str) -> None:
    sys.stderr.write(f"corpus: {text}\n")
    sys.stderr.flush()


def run(command: list[str], *, cwd: Path | None = None, timeout: float = 900, **kwargs: Any) -> str:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout, **kwargs)
    if done.returncode != 0:
        raise CorpusError(f"{' '.join(map(str, command))} exited {done.returncode}:\n{done.stderr or done.stdout}")
    return done.stdout


def full_commit(commit: str) -> str:
    return run(["git", "rev-parse", "--verify", f"{commit}^{{commit}}"], cwd=ROOT).strip()


# An installed release ----------------------------------------------------------------------------

def release_install(commit: str) -> Path:
    """The `sandesh` command of `commit`, installed on its own: a detached worktree of the commit
    under var/releases/<commit>/src and a venv beside it with `pip install -e` of that worktree
    (both kept, and reused when already there).  Its dependencies are held to the versions of the
    venv that runs this, which this checkout is tested with; the release's code is its own."""
    commit = full_commit(commit)
    home = RELEASES / commit
    src, venv = home / "src", home / "venv"
    stamp = venv / f".installed-{commit}"
    run(["git", "worktree", "prune"], cwd=ROOT)
    if not (src / ".git").exists() or run(["git", "rev-parse", "HEAD"], cwd=src).strip() != commit:
        if src.exists():
            run(["git", "worktree", "remove", "--force", str(src)], cwd=ROOT)
        home.mkdir(parents=True, exist_ok=True)
        say(f"git worktree add --detach {src} {commit[:12]}")
        run(["git", "worktree", "add", "--detach", str(src), commit], cwd=ROOT)
        stamp.unlink(missing_ok=True)
    if not stamp.exists():
        say(f"installing release {commit[:12]} into {venv}")
        run([sys.executable, "-m", "venv", "--clear", str(venv)])
        constraints = home / "constraints.txt"
        frozen = run([sys.executable, "-m", "pip", "freeze", "--exclude-editable"]).splitlines()
        # Sandesh itself is this checkout's release, installed here: the release's own takes its place.
        constraints.write_text("".join(f"{line}\n" for line in frozen if not line.lower().startswith("sandesh")))
        run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
             "-c", str(constraints), "-e", str(src)], timeout=1800)
        stamp.touch()
    return venv / "bin" / "sandesh"


# Databases on the local server -------------------------------------------------------------------

def admin_url() -> str:
    """Where databases are created: $SANDESH_TEST_POSTGRES, as for the tests, else the local server."""
    return os.environ.get("SANDESH_TEST_POSTGRES") or DEFAULT_SERVER


def database_url(name: str) -> str:
    return psycopg.conninfo.make_conninfo(admin_url(), dbname=name)


def create_database(name: str) -> str:
    """A new, empty database `name` (an older one of that name is dropped first); its URL."""
    with psycopg.connect(admin_url(), autocommit=True, connect_timeout=5) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return database_url(name)


def pg_tool(name: str) -> str:
    """A PostgreSQL client program of the `pgserver` wheel (a dependency): new enough for the local
    server and for the embedded one alike, so a dump made here restores wherever the tests run."""
    with warnings.catch_warnings():  # platformdirs warns of a missing XDG_RUNTIME_DIR it has no use for here
        warnings.simplefilter("ignore")
        from pgserver._commands import POSTGRES_BIN_PATH

    return str(Path(POSTGRES_BIN_PATH) / name)


def drop_database(name: str) -> None:
    with psycopg.connect(admin_url(), autocommit=True, connect_timeout=5) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def release_env(database: str, *, secret_key: str, ca_file: Path, metrics_dir: Path) -> dict[str, str]:
    """The environment of every process of a release under test: this one database, the corpus
    key, the test clock, webhooks to this machine trusting the test CA, and nothing else of
    ours (no other SANDESH_ setting, no PYTHONPATH or venv that could lend it today's code)."""
    keep = {k: v for k, v in os.environ.items()
            if not k.startswith(("SANDESH_", "PYTHON", "VIRTUAL_ENV", "DATABASE_URL", "REQUESTS_CA_BUNDLE"))}
    env = {**keep, "DATABASE_URL": database, "SANDESH_SECRET_KEY": secret_key, "SANDESH_CLOCK": "test",
           "SANDESH_WEBHOOK_ALLOW_PRIVATE": "1", "REQUESTS_CA_BUNDLE": str(ca_file),
           "SANDESH_METRICS_DIR": str(metrics_dir), "USER": "corpus"}
    return env


# The processes and commands of a release ---------------------------------------------------------

class Process:
    """A long-running process of a release (serve, a worker, the emulator), its output in a log file."""

    def __init__(self, name: str, command: list[str], env: dict[str, str], cwd: Path, *, pipes: bool = False):
        self.name = name
        self.log_path = cwd / f"{name}.log"
        self.log = open(self.log_path, "ab")
        self.popen = subprocess.Popen(command, env=env, cwd=cwd, start_new_session=True, stderr=self.log,
                                      stdin=subprocess.PIPE if pipes else subprocess.DEVNULL,
                                      stdout=subprocess.PIPE if pipes else self.log)
        self.stopped = False  # stopped on purpose: its exit is no failure

    def output(self, lines: int = 40) -> str:
        if not self.log.closed:
            self.log.flush()
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])

    def check(self) -> None:
        if not self.stopped and self.popen.poll() is not None:
            raise CorpusError(f"{self.name} exited {self.popen.returncode}:\n{self.output()}")

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM, as an operator stops it (each process stops cleanly on it); SIGKILL after `timeout`."""
        self.stopped = True
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self.log.close()
        return self.popen.returncode

    def kill(self) -> None:
        """SIGKILL of the process and whatever it started (a worker's children)."""
        self.stopped = True
        if self.popen.poll() is None:
            try:
                os.killpg(self.popen.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.popen.wait(timeout=30)


class Release:
    """One installed release's `sandesh` command, run against one database with one environment."""

    def __init__(self, sandesh: Path, env: dict[str, str], workdir: Path):
        # Its venv first on the PATH: a process of the release that starts another by name starts its own.
        self.sandesh, self.workdir = sandesh, workdir
        self.env = {**env, "PATH": f"{sandesh.parent}{os.pathsep}{env.get('PATH', '')}"}
        self.processes: list[Process] = []
        self._help: dict[tuple[str, ...], str] = {}

    def run(self, *args: str, stdin: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
        # Run in a folder of its own: a ./var/sandesh.env of this checkout is never read.
        return subprocess.run([str(self.sandesh), *args], env=self.env, cwd=self.workdir, input=stdin,
                              capture_output=True, text=True, timeout=timeout)

    def __call__(self, *args: str, stdin: str | None = None) -> Any:
        """The command's JSON answer; CorpusError with its stderr when it fails."""
        done = self.run(*args, stdin=stdin)
        if done.returncode != 0:
            raise CorpusError(f"sandesh {' '.join(args)} exited {done.returncode}:\n{done.stderr}")
        return json.loads(done.stdout)

    def lines(self, *args: str) -> list[Any]:
        """A command that answers JSON lines (`sandesh audit`)."""
        done = self.run(*args)
        if done.returncode != 0:
            raise CorpusError(f"sandesh {' '.join(args)} exited {done.returncode}:\n{done.stderr}")
        return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]

    def help(self, *words: str) -> str:
        """`sandesh WORDS --help`, empty when the release has no such command."""
        if words not in self._help:
            done = self.run(*words, "--help")
            self._help[words] = done.stdout if done.returncode == 0 else ""
        return self._help[words]

    def start(self, name: str, *args: str, env: dict[str, str] | None = None, pipes: bool = False) -> Process:
        process = Process(name, [str(self.sandesh), *args], {**self.env, **(env or {})}, self.workdir, pipes=pipes)
        self.processes.append(process)
        return process

    def stop_all(self) -> None:
        for process in reversed(self.processes):
            process.stop()


def until(check: Callable[[], Any], what: str, timeout: float = 60, every: float = 0.25,
          processes: Iterable[Process] = ()) -> Any:
    """Wait for `check()` to answer something true, and answer it; CorpusError naming `what`
    after `timeout` s, or as soon as one of `processes` has died."""
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        for process in processes:
            process.check()
        if time.monotonic() > deadline:
            raise CorpusError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(every)


class Emulator:
    """A release's own `sandesh emulator`: N virtual modems on pseudo-terminals, driven through
    JSON control lines on its stdin (scripts/service/emulator.py, control())."""

    def __init__(self, release: Release, sims: int, phones_log: Path, *, register: bool, report_delay: float = 0.3):
        args = ["emulator", "--sims", str(sims), "--phones-log", str(phones_log), "--report-delay", str(report_delay)]
        self.phones_log = phones_log
        self.process = release.start("emulator", *args, *(["--register"] if register else []), pipes=True)
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.modems = [self._line(60) for _ in range(sims)]

    def _read(self) -> None:
        for line in self.process.popen.stdout:
            self.lines.put(line)

    def _line(self, timeout: float) -> dict[str, Any]:
        try:
            return json.loads(self.lines.get(timeout=timeout))
        except queue.Empty:
            self.process.check()
            raise CorpusError(f"the emulator said nothing within {timeout:.0f} s:\n{self.process.output()}") from None

    def control(self, sim: str, **command: Any) -> dict[str, Any]:
        stdin = self.process.popen.stdin
        stdin.write((json.dumps({"sim": sim, **command}) + "\n").encode())
        stdin.flush()
        reply = self._line(10)
        if not reply.get("ok"):
            raise CorpusError(f"the emulator refused {command} for {sim}: {reply}")
        return reply

    def received(self) -> list[dict[str, Any]]:
        """What the phones received, oldest first."""
        if not self.phones_log.exists():
            return []
        return [json.loads(line) for line in self.phones_log.read_text().splitlines() if line.strip()]

    def stop(self) -> None:
        self.process.stop()


# The event types of a release ---------------------------------------------------------------------

# Run by a release's own Python: the topics of every event class its domain defines.  Each
# aggregate also gets a generic `Event` and `Created` class from eventsourcing; a `Created` counts
# only when it is the one the aggregate is created with.
EVENT_TOPICS = """
import importlib, json, pkgutil
import eventsourcing.domain
import sandesh.domain as domain
from eventsourcing.domain import CanInitAggregate, CanMutateAggregate
from eventsourcing.utils import get_topic

topics = set()
for info in pkgutil.walk_packages(domain.__path__, "sandesh.domain."):
    module = importlib.import_module(info.name)
    for owner in vars(module).values():
        if not isinstance(owner, type) or owner.__module__ != module.__name__:
            continue
        initial = eventsourcing.domain._created_event_classes.get(owner, [])
        for name, event in vars(owner).items():
            if (name != "Event" and isinstance(event, type) and issubclass(event, CanMutateAggregate)
                    and event.__qualname__ == f"{owner.__qualname__}.{name}"
                    and (not issubclass(event, CanInitAggregate) or event in initial)):
                topics.add(get_topic(event))
print(json.dumps(sorted(topics)))
"""


def release_event_topics(sandesh: Path) -> list[str]:
    """Every event type the release at `sandesh` (its installed command) can write, by topic."""
    return json.loads(run([str(sandesh.parent / "python"), "-c", EVENT_TOPICS]))
