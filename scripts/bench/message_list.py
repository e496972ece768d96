"""GET /v1/sms/messages as a client's history grows, against the product as a user runs it
(`sandesh serve` and `sandesh worker all`, no flag; two emulated modems): the median and p90
of the first page (`limit=50`), of a deep page (a `cursor` three quarters of the way back) and
of a filtered first page (`status=failed`), at 1×, 10× and 100× the client's messages, and of
GET /v1/events (`limit=50`) from the oldest event kept and from `after` an event three quarters
of the way back, over as many events of the client's feed.  The
baseline, in the same run: `GET /v1/sms/messages/{id}` of one message, a durable read of the
same table by its key.  Then EXPLAIN (ANALYZE, BUFFERS) of the first and the deep page's query,
and of GET /v1/sms/inbound's first page over as many replies of the client (its query only:
each reply's text is then read from the log by the reply's id, whatever the history).
docs/performance.md, "Listing messages".

Usage: .venv/bin/python -m scripts.bench.message_list [--base 10000] [--requests 200]

The client's earlier messages are written into the `messages` read model by SQL, and its
replies into `replies`, its events into `events_feed` (the log holds only the sends made during
the run): the list reads only
that table, so what is measured is how its query's cost follows the rows it does not return.
"""
from __future__ import annotations

import argparse
import hashlib
import re
import statistics
import time
from contextlib import ExitStack

import psycopg
import requests

from sandesh.domain.settings import Settings
from sandesh.projections import messages
from sandesh.scripts.service.bootstrap import bootstrap

from .common import funded_workspace, percentile, scratch_database
from .send_bench import SANDESH, product

URL = f"http://127.0.0.1:{SANDESH}"
STATUSES = ("delivered",) * 17 + ("sent", "undelivered", "failed")  # one in 20 failed


FEED_BASE = 10**9  # the filled events' log positions start past the live ones


def fill(database_url: str, client_id: str, workspace_id: str, first: int, last: int, start: float,
         recent: float, spacing: float) -> None:
    """Rows first..last-1 of the client's history, a second apart from `start`, in one INSERT,
    and as many events of its feed, `spacing` seconds apart from `recent` (all within the 30
    days the feed keeps)."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO messages (id, client_id, workspace_id, \"to\", status, route, message_type, segments,"
            " encoding, cost, error, created_at, updated_at)"
            " SELECT 'msg_' || md5(%(client)s || n::text), %(client)s, %(ws)s, '97798' || lpad((n %% 100000000)::text, 8,"
            " '0'), (%(statuses)s::text[])[n %% 20 + 1], 'device', 'transactional', 1, 'GSM-7', 100, NULL,"
            " %(start)s + n, %(start)s + n + 5 FROM generate_series(%(first)s, %(last)s - 1) n",
            {"client": client_id, "ws": workspace_id, "statuses": list(STATUSES), "start": start, "first": first,
             "last": last})
        conn.execute(
            "INSERT INTO replies (id, sim_id, sender, reference, total, parts, opened_at, received_at, client_id,"
            " in_reply_to) SELECT 'in_' || md5(%(client)s || n::text), 'sim_bench', '9779800000000', NULL, 1, 1,"
            " %(start)s + n, %(start)s + n, %(client)s, 'msg_' || md5(%(client)s || n::text)"
            " FROM generate_series(%(first)s, %(last)s - 1) n",
            {"client": client_id, "start": start, "first": first, "last": last})
        conn.execute(
            "INSERT INTO events_feed (id, client_id, position, event_type, subject, body, at)"
            " SELECT 'evt_' || md5(%(client)s || n::text), %(client)s, %(base)s + n, 'message.status',"
            " 'msg_' || md5(%(client)s || n::text), jsonb_build_object('type', 'message.status', 'id',"
            " 'msg_' || md5(%(client)s || n::text), 'status', 'delivered', 'to', '9779800000000',"
            " 'at', '2026-11-23T08:15:41.870Z', 'route', 'device', 'messageType', 'transactional', 'segments', 1),"
            " %(recent)s + n * %(spacing)s FROM generate_series(%(first)s, %(last)s - 1) n",
            {"client": client_id, "base": FEED_BASE, "recent": recent, "spacing": spacing, "first": first,
             "last": last})
        conn.execute("VACUUM ANALYZE messages")
        conn.execute("VACUUM ANALYZE replies")
        conn.execute("VACUUM ANALYZE events_feed")


def timed(http: requests.Session, key: str, path: str, count: int) -> list[float]:
    took = []
    for _ in range(count):
        started = time.perf_counter()
        answer = http.get(URL + path, headers={"x-api-key": key}, timeout=30)
        took.append((time.perf_counter() - started) * 1000)
        assert answer.status_code == 200, answer.text[:300]
    return took


def explain(database_url: str, client_id: str, before: tuple[float, str] | None, table: str = "messages") -> str:
    from sandesh.projections import inbound, keyset

    where = (["client_id = %s"], [client_id]) if table == "messages" else \
        (["client_id = %s", "received_at IS NOT NULL"], [client_id])
    order = messages.ORDER if table == "messages" else inbound.ORDER
    query, params = keyset.newest_first_query(table, order, where, None, None, ("before", before) if before else None,
                                              51)
    with psycopg.connect(database_url) as conn:
        plan = conn.execute("EXPLAIN (ANALYZE, BUFFERS) " + query, params).fetchall()
    return "\n".join("    " + row[0] for row in plan)


def executed(plan: str) -> str:
    """The execution time and shared buffers of an EXPLAIN (ANALYZE, BUFFERS)."""
    time_ms = re.search(r"Execution Time: ([0-9.]+) ms", plan).group(1)
    buffers = re.search(r"Buffers: shared hit=([0-9]+)", plan).group(1)
    return f"{time_ms} ms, {buffers} buffers"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=int, default=10_000, help="the client's messages at 1× (default 10000)")
    parser.add_argument("--requests", type=int, default=200, help="requests of each kind at each size (default 200)")
    args = parser.parse_args()
    with scratch_database() as env, ExitStack() as running:
        runtime = bootstrap(Settings.from_env(env), pool_size=2)
        workspace = funded_workspace(runtime.sandesh, "List bench", 10**12)
        client, key, _ = runtime.sandesh.operators.create_client(workspace, "Lister", None, 10**6, "bench")
        runtime.close()
        running.enter_context(product(env, running))
        http = requests.Session()
        for _ in range(20):  # real sends, through the log and the projections worker
            answer = http.post(URL + "/v1/sms/send", json={"to": "9779812345678", "text": "a live send"},
                               headers={"x-api-key": key}, timeout=30)
            assert answer.status_code == 202, answer.text
        live = answer.json()["messageId"]
        time.sleep(2)
        start = time.time() - 400 * 86_400
        print(f"GET /v1/sms/messages of one client; sandesh serve and sandesh worker all as installed (no flag); "
              f"{args.requests} sequential requests of each kind; ms")
        print(f"{'messages':>10} {'first p50':>10} {'p90':>6} {'deep p50':>9} {'p90':>6} {'failed p50':>11} "
              f"{'p90':>6} {'by id p50':>10} {'p90':>6} {'events p50':>11} {'p90':>6} {'deep p50':>9} {'p90':>6}")
        recent = time.time() - 29 * 86_400
        spacing = 28 * 86_400 / (100 * args.base)
        filled = 0
        plans, inbound_plans = [], []
        for size in (args.base, 10 * args.base, 100 * args.base):
            fill(env["DATABASE_URL"], client.id, workspace, filled, size, start, recent, spacing)
            filled = size
            deep_n = size // 4
            deep = "msg_" + hashlib.md5(f"{client.id}{deep_n}".encode()).hexdigest()
            timed(http, key, "/v1/sms/messages?limit=50", 20)  # warm
            first = timed(http, key, "/v1/sms/messages?limit=50", args.requests)
            deeper = timed(http, key, f"/v1/sms/messages?limit=50&cursor={deep}", args.requests)
            failed = timed(http, key, "/v1/sms/messages?limit=50&status=failed", args.requests)
            by_id = timed(http, key, f"/v1/sms/messages/{live}", args.requests)
            oldest = timed(http, key, "/v1/events?limit=50", args.requests)
            deep_event = "evt_" + hashlib.md5(f"{client.id}{deep_n}".encode()).hexdigest()
            after = timed(http, key, f"/v1/events?limit=50&after={deep_event}", args.requests)
            print(f"{size:>10,} " + " ".join(f"{statistics.median(t):>{w}.1f} {percentile(t, 90):>6.1f}" for t, w in
                                             ((first, 10), (deeper, 9), (failed, 11), (by_id, 10), (oldest, 11),
                                              (after, 9))), flush=True)
            plans.append((size, start + deep_n, deep))
            inbound_plans.append((size, executed(explain(env["DATABASE_URL"], client.id, None, "replies"))))
        size, at, deep = plans[-1]
        print(f"\nEXPLAIN (ANALYZE, BUFFERS), the first page at {size:,}:")
        print(explain(env["DATABASE_URL"], client.id, None))
        print(f"the deep page at {size:,}:")
        print(explain(env["DATABASE_URL"], client.id, (at, deep)))
        print("GET /v1/sms/inbound's first page, its query: " + "; ".join(f"{n:,} replies {took}"
                                                                         for n, took in inbound_plans))
        print(f"at {size:,}:")
        print(explain(env["DATABASE_URL"], client.id, None, "replies"))
        print(f"GET /v1/events?after= an event ¾ back, at {size:,}:")
        with psycopg.connect(env["DATABASE_URL"]) as conn:
            plan = conn.execute("EXPLAIN (ANALYZE, BUFFERS) SELECT id, event_type, subject, body, at FROM events_feed"
                                " WHERE client_id = %s AND position > %s AND at >= %s ORDER BY position LIMIT 51",
                                (client.id, FEED_BASE + size // 4, time.time() - 30 * 86_400)).fetchall()
        print("\n".join("    " + row[0] for row in plan))


if __name__ == "__main__":
    main()
