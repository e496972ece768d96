"""`sandesh worker all` starts again a worker that dies, however it dies (kill -9), and logs it."""
import os
import signal
import subprocess
import sys
import time

import psutil

from tests.conftest import ROOT


def _children(process):
    """The supervisor's live children and their command lines (a reaped or dying one is left out)."""
    found = {}
    for child in psutil.Process(process.pid).children():
        try:
            if child.status() != psutil.STATUS_ZOMBIE:
                found[child.pid] = " ".join(child.cmdline())
        except psutil.Error:
            continue
    return found


def test_a_worker_killed_with_sigkill_is_restarted_and_the_restart_is_logged(env, tmp_path):
    log = open(tmp_path / "all.log", "w+")
    supervisor = subprocess.Popen([sys.executable, "-m", "sandesh.scripts.service.cli", "worker", "all"], cwd=ROOT,
                                  env={**env, "PYTHONPATH": str(ROOT)}, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 15
        while len(_children(supervisor)) < 3:
            assert time.monotonic() < deadline, _children(supervisor)
            time.sleep(0.1)
        [victim] = [pid for pid, cmd in _children(supervisor).items() if cmd.endswith("worker projections")]
        os.kill(victim, signal.SIGKILL)
        killed_at = time.monotonic()
        while True:
            again = [pid for pid, cmd in _children(supervisor).items() if cmd.endswith("worker projections")]
            if again and again[0] != victim:
                break
            assert time.monotonic() < killed_at + 5, "not restarted within 5 s"
            time.sleep(0.1)
        assert supervisor.poll() is None
        log.seek(0)
        output = log.read()
        assert "worker projections exited with status -9" in output and "worker projections restarted" in output
        assert "restarting it in 1 s" in output, "the first restart comes after 1 s"
    finally:
        supervisor.terminate()
        assert supervisor.wait(timeout=30) == 0
        log.close()
