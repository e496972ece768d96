"""The send path in one process, without an HTTP server: N threads call the WSGI app as
`sandesh serve` builds it (caller cache, group commit), each sending one message after another.
It prints sends/s, the process's CPU per send (user and kernel) and its threads' context
switches per send: what the request threads and the committer cost each other, apart from
gunicorn (docs/performance.md, "Random bytes without a thread switch").

Usage: .venv/bin/python -m sandesh.scripts.bench.send_threads [--threads 1 4 16] [--sends 1500]
Uses a scratch database on $SANDESH_TEST_POSTGRES.
"""
from __future__ import annotations

import argparse
import resource
import threading
import time

import orjson

from sandesh.domain.settings import Settings
from sandesh.scripts.bootstrap import bootstrap

from .common import funded_workspace, reported_route, scratch_database, send_environ

BODY = orjson.dumps({"to": "9779812345678", "text": "Your Sandesh order 1234 has shipped. Track it at sandesh.example/t/1234"})


def main() -> None:
    from sandesh.api.app import create_app
    from sandesh.projections.callers import Callers

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--sends", type=int, default=1500, help="per thread")
    args = parser.parse_args()
    with scratch_database() as env:
        runtime = bootstrap(Settings.from_env(env), group_commit=True)
        app, settings = runtime.app, runtime.settings
        with reported_route(runtime):
            workspace = funded_workspace(app, "Threads", 10**12)
            _, key, _ = app.create_client(workspace, "T", None, 10**6, "bench")
            wsgi = create_app(app, runtime.connection, route_window=settings.route_window, health=runtime.health,
                              callers=Callers(runtime.connection, settings.route_window, settings.database_url))
            answered: list[str] = []

            def send() -> None:
                b"".join(wsgi(send_environ(key, BODY),
                              lambda status, headers: answered.append(status) if status[0] != "2" else None))

            for _ in range(300):  # warm: the caller cache, prepared statements
                send()
            print(f"{'threads':>7} {'sends/s':>8} {'user ms':>8} {'kernel ms':>9} {'switches':>9}   per send")
            for count in args.threads:
                threads = [threading.Thread(target=lambda: [send() for _ in range(args.sends)]) for _ in range(count)]
                before, started = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
                after, elapsed = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter() - started
                n = count * args.sends
                print(f"{count:>7} {n / elapsed:>8.0f} {(after.ru_utime - before.ru_utime) / n * 1000:>8.3f} "
                      f"{(after.ru_stime - before.ru_stime) / n * 1000:>9.3f} {(after.ru_nvcsw - before.ru_nvcsw) / n:>9.1f}")
            assert not answered, f"refused sends: {answered[:3]}"
        runtime.close()


if __name__ == "__main__":
    main()
