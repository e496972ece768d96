"""`sandesh serve` keeps each worker to a core of its own (scripts/service/serve.py, docs/performance.md
"One core per worker"), and a worker started in place of a killed one takes the core it left."""
import os
import signal
import time

import psutil
import requests

from tests.conftest import Server


def _cores_of_workers(server: Server) -> dict[int, list[int]]:
    """Each live worker's pid and the cores its threads may run on (all of its threads: the
    request threads, the committer and the pool's)."""
    found = {}
    for worker in psutil.Process(server.process.pid).children():
        try:
            found[worker.pid] = sorted(set().union(*(os.sched_getaffinity(t.id) for t in worker.threads())))
        except (ProcessLookupError, psutil.NoSuchProcess):
            pass  # a worker being reaped
    return found


def _settled(server: Server, count: int, but: int | None = None) -> dict[int, list[int]]:
    """The workers once there are `count` of them (none with pid `but`) and each has taken its core."""
    deadline = time.monotonic() + 30
    while True:
        for _ in range(8):  # requests, so that request threads are among those checked
            try:
                requests.get(server.url + "/v1/health", timeout=5)
            except requests.ConnectionError:
                pass  # one the killed worker had taken
        workers = _cores_of_workers(server)
        if len(workers) == count and but not in workers and all(len(cores) == 1 for cores in workers.values()):
            return workers
        assert time.monotonic() < deadline, (workers, server.output()[-2000:])
        time.sleep(0.1)


def test_each_worker_keeps_to_its_own_core_and_a_replacement_takes_the_core_left(env):
    machine = sorted(os.sched_getaffinity(0))
    server = Server(env, workers=len(machine))
    try:
        workers = _settled(server, len(machine))
        assert sorted(cores[0] for cores in workers.values()) == machine, workers

        victim, [its_core] = next(iter(workers.items()))
        os.kill(victim, signal.SIGKILL)
        again = _settled(server, len(machine), but=victim)
        assert sorted(cores[0] for cores in again.values()) == machine, again
        [newcomer] = set(again) - set(workers)
        assert again[newcomer] == [its_core]
    finally:
        server.stop()
