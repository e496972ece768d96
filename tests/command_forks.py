"""Runs `sandesh …` for the tests as forks of one process that imported the command's modules
once.  Each command is still a process of its own, with its own environment, folder, output,
exit status and exit handlers, as `python -m sandesh.scripts.service.cli` gives it; it costs a
fork instead of an interpreter's start and the imports, which were most of the suite's CPU.

The server (`python -m tests.command_forks SOCKET`) answers each connection from a process of
its own, so commands a test runs at once run at once: that process forks the command, sends its
pid, waits for it, then sends its exit status."""
from __future__ import annotations

import atexit
import os
import signal
import socket
import subprocess
import sys
import selectors
import threading
import uuid
from pathlib import Path
from typing import Any

import orjson

CLI = "sandesh.scripts.service.cli"


def _command(request: dict[str, Any]) -> int:
    """In the forked child: becomes `sandesh ARGS` run in ENV and CWD, and returns its status."""
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    for fd, path in ((1, request["out"]), (2, request["err"])):
        os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), fd)
    from sandesh.scripts.service import cli

    sys.argv = [cli.__file__, *request["args"]]
    try:
        status: Any = cli.main(request["args"])
    except SystemExit as done:
        status = done.code
    except BaseException:
        import traceback

        traceback.print_exc()
        status = 1
    if status is None:
        status = 0
    elif not isinstance(status, int):
        print(status, file=sys.stderr)
        status = 1
    threading._shutdown()  # type: ignore[attr-defined]  # as the interpreter does at its end
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    return status


def _answer(conn: socket.socket) -> None:
    """In a process of its own: reads one request, forks the command, reports its pid and status."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    request = orjson.loads(conn.makefile("rb").readline())
    pid = os.fork()
    if pid == 0:
        conn.close()
        os._exit(_command(request))
    conn.sendall(b"%d\n" % pid)
    _, status = os.waitpid(pid, 0)
    conn.sendall(b"%d\n" % os.waitstatus_to_exitcode(status))


def serve(path: str) -> None:
    import sandesh.scripts.service.commands  # noqa: F401  what every command imports, once

    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the answering processes are reaped by the kernel
    listener = socket.socket(socket.AF_UNIX)
    if os.path.exists(path):
        os.unlink(path)
    listener.bind(path)
    listener.listen(64)
    waiting = selectors.DefaultSelector()
    waiting.register(listener, selectors.EVENT_READ)
    waiting.register(sys.stdin, selectors.EVENT_READ)  # the test process's end: closed when it ends
    print("ready", flush=True)
    while True:
        if any(key.fileobj is sys.stdin for key, _ in waiting.select()):
            return
        conn, _ = listener.accept()
        if os.fork() == 0:
            listener.close()
            try:
                _answer(conn)
            finally:
                os._exit(0)
        conn.close()


class Commands:
    """The test process's side: one server per test process, started at the first command."""

    def __init__(self, root: Path):
        self.root = root
        self.folder = Path(os.environ.get("TMPDIR", "/tmp")) / f"sandesh-commands-{uuid.uuid4().hex[:12]}"
        self.server: subprocess.Popen | None = None
        self.lock = threading.Lock()
        atexit.register(self.close)

    def _started(self) -> str:
        with self.lock:
            path = str(self.folder / "socket")
            if self.server is None or self.server.poll() is not None:
                self.folder.mkdir(mode=0o700, exist_ok=True)
                env = {**os.environ, "PYTHONPATH": str(self.root)}
                self.server = subprocess.Popen([sys.executable, "-m", "tests.command_forks", path], cwd=self.root,
                                               env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
                assert self.server.stdout is not None and self.server.stdout.readline() == b"ready\n"
            return path

    def run(self, args: list[str], env: dict[str, str], cwd: Path, timeout: float) -> subprocess.CompletedProcess:
        path = self._started()
        name = uuid.uuid4().hex
        out, err = self.folder / f"{name}.out", self.folder / f"{name}.err"
        request = {"args": args, "env": env, "cwd": str(cwd), "out": str(out), "err": str(err)}
        with socket.socket(socket.AF_UNIX) as conn:
            conn.connect(path)
            conn.sendall(orjson.dumps(request) + b"\n")
            answers = conn.makefile("rb")
            pid = int(answers.readline())
            conn.settimeout(timeout)
            try:
                status = answers.readline()
            except TimeoutError:
                os.kill(pid, signal.SIGKILL)
                raise subprocess.TimeoutExpired(args, timeout) from None
        try:
            return subprocess.CompletedProcess(args, int(status), out.read_text(), err.read_text())
        finally:
            out.unlink(missing_ok=True)
            err.unlink(missing_ok=True)

    def close(self) -> None:
        if self.server is not None:
            self.server.kill()
            self.server.wait()
            self.server = None
        for left in self.folder.glob("*"):
            left.unlink(missing_ok=True)
        if self.folder.exists():
            self.folder.rmdir()


if __name__ == "__main__":
    serve(sys.argv[1])
