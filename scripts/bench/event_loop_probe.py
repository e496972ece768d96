"""Would an event loop lift the send ratio?  A probe for that decision, not the product.

It serves POST /v1/sms/send on an asyncio event loop (Falcon's ASGI app under gunicorn's `asgi`
worker, as `sandesh serve` would pick it: one worker per core, no flag), and a bare ASGI app that
parses the same JSON and answers 202 under the same settings.  It runs them in turn beside the
product as installed (`sandesh serve`, gunicorn's gthread) and bare_app.py under its settings,
and prints each one's rate, latencies, CPU per send and thread switches.

What the event-loop send does: the product's middleware (metrics, request id, database gate,
authentication with the caller cache), called from coroutines; the product's use case
(`Sandesh.send_sms`), its appends collected instead of committed; then the request awaits the
process's group commit, whose committer thread resolves the request's future on the loop.  So no
request holds a thread while its commit runs.  Left out: Idempotency-Key sends (their claim
reads the database), and the answer to a refused append (a guard, an outage), which only the
thread-per-request product renders.  The figures, and what they mean for the issue:
docs/performance.md, "An event loop, measured (sixth session)".

Usage: .venv/bin/python -m sandesh.scripts.bench.event_loop_probe [--seconds 6] [--repeat 3]
Needs wrk.  Uses a scratch database on $SANDESH_TEST_POSTGRES; PostgreSQL's CPU is that of
every postgres process of the machine, so run it alone.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
from typing import Any

import orjson

from sandesh.domain.settings import Settings
from sandesh.scripts.bootstrap import bootstrap

from .common import reported_route, scratch_database
from .cpu_split import _cpu_seconds, _switches
from .send_bench import _clients, _median, _serving, _settle, _wrk

PORTS = {"sandesh serve (gthread)": 18731, "bare app (gthread)": 18732,
         "event-loop send (asgi)": 18733, "bare app (asgi)": 18734}


def bare_asgi() -> Any:
    """bare_app.py's Send on the event loop."""
    import falcon
    import falcon.asgi
    from ssl import RAND_bytes

    class Send:
        async def on_post(self, req: Any, resp: Any) -> None:
            body = orjson.loads(await req.stream.read())
            if not isinstance(body, dict) or "to" not in body or "text" not in body:
                raise falcon.HTTPBadRequest()
            resp.status = falcon.HTTP_202
            resp.data = orjson.dumps({"messageId": "msg_" + RAND_bytes(16).hex(), "status": "queued",
                                      "messageType": body.get("messageType", "transactional"), "segments": 1,
                                      "encoding": "GSM-7", "cost": 100})

    app = falcon.asgi.App()
    app.add_route("/v1/sms/send", Send())
    app.add_route("/", Send())
    return app


def _coroutines(middleware: Any) -> Any:
    """A synchronous Falcon middleware as the ASGI app wants it: each of its methods, awaited."""
    methods = {}
    for name in ("process_request", "process_resource", "process_response"):
        method = getattr(middleware, name, None)
        if method is not None:
            async def call(self: Any, *args: Any, _method: Any = method) -> None:
                _method(*args)
            methods[name] = call
    return type(f"Async{type(middleware).__name__}", (), methods)()


def sandesh_asgi() -> Any:
    """The send path on the event loop, built from the product's parts (see the module's docstring)."""
    import falcon
    import falcon.asgi

    from sandesh.api.app import DatabaseGate, RequestId, _api_error, _errors, _http_error
    from sandesh.api.auth import Authentication
    from sandesh.api.errors import ApiError
    from sandesh.api.metrics import RequestMetrics
    from sandesh.domain import sending
    from sandesh.projections.callers import Callers
    from sandesh.projections.group_commit import GroupCommit
    from sandesh.scripts.logs import configure_logging

    settings = Settings.from_env(os.environ)
    configure_logging(settings)
    runtime = bootstrap(settings)
    sandesh = runtime.app
    commits = GroupCommit(sandesh.append_events)
    collected: list[Any] = []
    sandesh.append = lambda *aggregates: collected.extend(aggregates)  # one request at a time runs on the loop

    async def committed(aggregates: list[Any]) -> None:
        loop = asyncio.get_running_loop()
        done = loop.create_future()

        def resolve(error: BaseException | None) -> None:
            if not done.done():
                done.set_result(None) if error is None else done.set_exception(error)

        commits.submit(*aggregates, then=lambda error: loop.call_soon_threadsafe(resolve, error))
        await done

    class Send:
        async def on_post(self, req: Any, resp: Any) -> None:
            body = orjson.loads(await req.stream.read())
            if not isinstance(body, dict):
                raise falcon.HTTPBadRequest()
            req.context.message_type = body.get("messageType", "transactional")
            now = sandesh.clock.now()
            request, _ = sending.parse_send(body, now)
            if request is None:
                raise falcon.HTTPBadRequest()
            collected.clear()
            sent = sandesh.send_sms(req.context.caller, request)
            aggregates = list(collected)
            await committed(aggregates)
            resp.status = falcon.HTTP_202
            resp.content_type = falcon.MEDIA_JSON
            resp.data = sent.body

    class Health:
        public = True

        async def on_get(self, req: Any, resp: Any) -> None:
            resp.media = {"status": "ok"}

    callers = Callers(runtime.connection, settings.route_window, settings.database_url)
    app = falcon.asgi.App(middleware=[_coroutines(m) for m in (
        RequestMetrics(), RequestId(), DatabaseGate(runtime.health),
        Authentication(runtime.connection, sandesh.clock, callers))])
    app.add_route("/v1/sms/send", Send())
    app.add_route("/v1/health", Health())
    handlers = [(Exception, _errors(runtime.health)), (falcon.HTTPError, _http_error), (ApiError, _api_error)]
    for kind, handler in handlers:
        async def handle(req: Any, resp: Any, error: Exception, params: dict, ws: Any = None,
                         _handler: Any = handler) -> None:
            _handler(req, resp, error, params)
        app.add_error_handler(kind, handle)
    return app


def _serve(which: str, bind: str) -> None:
    from sandesh.scripts import metrics_dir
    from sandesh.scripts.serve import Gunicorn, options

    settings = options(bind, log_level="warning")
    settings["worker_class"] = "asgi"
    if which == "sandesh":
        metrics_dir.use(Settings.from_env(os.environ))
    else:
        del settings["child_exit"]
    Gunicorn(settings, sandesh_asgi if which == "sandesh" else bare_asgi).run()


def _measured(port: int, workers: list[int], keys: list[str], seconds: int, database_url: str) -> dict[str, float]:
    _settle(database_url)
    postgres = [int(p) for p in subprocess.run(["pgrep", "-x", "postgres"], capture_output=True, text=True).stdout.split()]
    before = (_cpu_seconds(workers), _cpu_seconds(postgres), _switches(workers))
    run = _wrk(f"http://127.0.0.1:{port}", keys, seconds, 32)
    after = (_cpu_seconds(workers), _cpu_seconds(postgres), _switches(workers))
    done = run["rps"] * seconds
    run["workers_ms"] = (sum(after[0]) - sum(before[0])) / done * 1000
    run["postgres_ms"] = (sum(after[1]) - sum(before[1])) / done * 1000
    run["switches"] = (after[2] - before[2]) / done
    return run


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "serve":  # a server of the probe, started by the probe
        _serve(sys.argv[2], sys.argv[3])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     epilog="Scenario (a): one workspace, one client, wrk -c32.")
    parser.add_argument("--seconds", type=int, default=6)
    parser.add_argument("--repeat", type=int, default=3, help="runs per server, alternating; the median is shown")
    args = parser.parse_args()
    if not shutil.which("wrk"):
        raise SystemExit("the probe needs wrk: apt-get install wrk")
    with scratch_database() as env:
        runtime = bootstrap(Settings.from_env(env), pool_size=1)
        with reported_route(runtime):
            keys = _clients(env, 1, 1)
            quiet = {**env, "SANDESH_LOG_LEVEL": "WARNING"}
            commands = {"sandesh serve (gthread)": ("sandesh.scripts.cli serve --bind", "/v1/health"),
                        "bare app (gthread)": ("sandesh.scripts.bench.bare_app", "/"),
                        "event-loop send (asgi)": ("sandesh.scripts.bench.event_loop_probe serve sandesh", "/v1/health"),
                        "bare app (asgi)": ("sandesh.scripts.bench.event_loop_probe serve bare", "/")}
            runs: dict[str, list[dict[str, float]]] = {name: [] for name in commands}
            for _ in range(args.repeat):
                for name, (command, ready) in commands.items():
                    with _serving(command, quiet, PORTS[name], ready) as workers:
                        runs[name].append(_measured(PORTS[name], workers, keys, args.seconds, env["DATABASE_URL"]))
        runtime.close()
    print(f"wrk -t2 -c32 -d{args.seconds}s, scenario (a), median of {args.repeat} alternating runs; "
          "CPU per request of the server's workers and of every postgres process")
    print(f"{'server':<26} {'sends/s':>8} {'p50 ms':>7} {'p99 ms':>7} {'non-2xx':>8} {'workers ms':>11} "
          f"{'postgres ms':>12} {'switches':>9} {'ratio':>6}")
    medians = {name: _median(r) for name, r in runs.items()}
    bare_of = {"sandesh serve (gthread)": "bare app (gthread)", "event-loop send (asgi)": "bare app (asgi)"}
    for name, m in medians.items():
        ratio = f"{m['rps'] / medians[bare_of[name]]['rps']:.0%}" if name in bare_of else ""
        print(f"{name:<26} {m['rps']:8.0f} {m['p50']:7.2f} {m['p99']:7.2f} {m['non2xx'] + m['errors']:8.0f} "
              f"{m['workers_ms']:11.3f} {m['postgres_ms']:12.3f} {m['switches']:9.2f} {ratio:>6}   runs: "
              + "/".join(f"{r['rps']:.0f}" for r in runs[name]))


if __name__ == "__main__":
    main()
