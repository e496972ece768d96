"""Where the time of one send goes: POST /v1/sms/send through the WSGI app in one process
(no HTTP server, no load generator), CPU time per send, then cProfile's cumulative times for
the stages of the send path.  Usage: .venv/bin/python -m scripts.bench.profile_send [N]
"""
from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time

import orjson

from sandesh.domain.settings import Settings
from sandesh.scripts.bootstrap import bootstrap

from .common import funded_workspace, reported_route, scratch_database, send_environ

STAGES = [
    ("falcon app, whole request", "falcon/app.py", "__call__"),
    ("authentication (no caller cache here: 2 statements)", "api/auth.py", "process_resource"),
    ("body parse (orjson)", "api/body.py", "json_object"),
    ("validation + segments", "domain/sending.py", "parse_send"),
    ("Message aggregate created", "domain/message.py", "accept"),
    ("append, waiting for the group commit", "projections/group_commit.py", "save"),
]


def main(n: int = 3000) -> None:
    from sandesh.api.app import create_app

    body = orjson.dumps({"to": "9779812345678", "text": "Your Sandesh order 1234 has shipped. Track it at sandesh.example/t/1234"})
    with scratch_database() as env:
        runtime = bootstrap(Settings.from_env(env), group_commit=True)
        app = runtime.app
        with reported_route(runtime):
            ws = funded_workspace(app, "Profile", 10**12)
            _, key, _ = app.create_client(ws, "P", None, 10**6, "bench")
            wsgi = create_app(app, runtime.connection, route_window=runtime.settings.route_window,
                              health=runtime.health)

            def send(start_response=lambda status, headers: None) -> None:
                b"".join(wsgi(send_environ(key, body), start_response))

            answered: list[str] = []
            send(lambda status, headers: answered.append(status))
            assert answered == ["202 Accepted"], answered
            for _ in range(300):
                send()
            cpu, wall = time.process_time(), time.perf_counter()
            for _ in range(n):
                send()
            cpu, wall = (time.process_time() - cpu) / n * 1000, (time.perf_counter() - wall) / n * 1000
            profile = cProfile.Profile()
            profile.enable()
            for _ in range(n):
                send()
            profile.disable()
        runtime.close()
    stats = pstats.Stats(profile, stream=io.StringIO()).stats  # type: ignore[attr-defined]
    print(f"one send, sequential, in process: {cpu:.3f} ms CPU (all threads), {wall:.3f} ms wall")
    print("cumulative wall time per send, by stage (cProfile, request thread):")
    for label, path, function in STAGES:
        total = sum(v[3] for (file, _, name), v in stats.items() if file.endswith(path) and name == function)
        print(f"  {label:<40} {total / n * 1000:7.3f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("n", metavar="N", type=int, nargs="?", default=3000, help="sends, one after another (default: 3000)")
    main(parser.parse_args().n)
