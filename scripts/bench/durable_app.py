"""The send benchmark's baseline: the minimum a durable send API must do, written as most people
would write it (docs/performance.md, "Send benchmark").

A Falcon app under gunicorn's thread-per-request worker (gthread, one worker per core, 16
threads, a psycopg pool of 16 connections) that parses the same JSON as a send, inserts one
row and commits it, one transaction per request, and answers 202.  No key, no rate, no balance,
no idempotency, no log: what Sandesh does on top of this is its product.

Run: python -m scripts.bench.durable_app HOST:PORT   (DATABASE_URL names the database)
"""
from __future__ import annotations

import argparse
import os
import uuid

import falcon
import orjson
from psycopg_pool import ConnectionPool

THREADS = 16

DDL = """CREATE TABLE IF NOT EXISTS durable_sends (
    id text PRIMARY KEY, "to" text NOT NULL, text text NOT NULL, message_type text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now())"""


class Send:
    def __init__(self, pool: ConnectionPool):
        self.pool = pool

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = orjson.loads(req.bounded_stream.read())
        if not isinstance(body, dict) or not isinstance(body.get("to"), str) or not isinstance(body.get("text"), str):
            raise falcon.HTTPBadRequest()
        message_id = "msg_" + uuid.uuid4().hex
        message_type = body.get("messageType", "transactional")
        with self.pool.connection() as conn:  # commits when the block ends
            conn.execute('INSERT INTO durable_sends (id, "to", text, message_type) VALUES (%s, %s, %s, %s)',
                         (message_id, body["to"], body["text"], message_type))
        resp.status = falcon.HTTP_202
        resp.content_type = falcon.MEDIA_JSON
        resp.data = orjson.dumps({"messageId": message_id, "status": "queued", "messageType": message_type})


class Health:
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = {"status": "ok"}


def create_app() -> falcon.App:
    pool = ConnectionPool(os.environ["DATABASE_URL"], min_size=THREADS, max_size=THREADS, open=True)
    with pool.connection() as conn:
        conn.execute(DDL)
    app = falcon.App()
    app.add_route("/v1/sms/send", Send(pool))
    app.add_route("/v1/health", Health())
    return app


def main() -> None:
    from sandesh.scripts.service.serve import Gunicorn, _cores

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bind", metavar="HOST:PORT")
    args = parser.parse_args()
    settings = {"bind": args.bind, "workers": _cores(), "worker_class": "gthread", "threads": THREADS,
                "worker_connections": 1000, "loglevel": "warning", "accesslog": None, "keepalive": 5}
    Gunicorn(settings, create_app).run()


if __name__ == "__main__":
    main()
