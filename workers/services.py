"""Keyword services, in the webhooks worker (docs/api.md, "Keyword services"): each keyword SMS
is answered once.  Its client's reply URL is called with `GET ?from=&to=&text=&keyword=`, once,
within 10 s, with no retry, since the sender is waiting; a 200 or 202 whose body is one SMS of
text goes back to the sender, and anything else gives the client's default reply, if it has one
(domain/usecases/services.py records both, once).  The URL is reached through the webhooks'
guard: https://, a public address unless private ones are allowed, and then http:// too.

The sender's step (workers/webhooks.py) hands the keyword SMS that are due to a few threads of
their own, so that a slow reply URL holds one thread and neither the webhooks nor other keywords."""
from __future__ import annotations

import logging
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import requests
from requests.adapters import HTTPAdapter

from sandesh.domain.client import one_sms_problem
from sandesh.domain.inbound import Reply
from sandesh.domain.usecases.services import DEFAULT, NOTHING, SERVICE, Asked
from sandesh.projections import inbound, registry, request_rate
from sandesh.projections.storage.runtime import Runtime

from . import webhook_guard
from .webhook_deadline import DEADLINES

logger = logging.getLogger("sandesh.worker.services")

DEADLINE = 10.0  # seconds for the reply URL's whole answer
ASKED_STALE = 3 * DEADLINE  # a service asked this long ago and never answered: its sender stopped
THREADS = 4
MAX_BODY = 4096  # bytes of the URL's answer read at most: one SMS is far less
USER_AGENT = "Sandesh-Keywords/1"


def session(allow_private: bool, ca_bundle: str | None) -> requests.Session:
    """The webhooks' session; where private addresses are allowed, plain http:// as well."""
    http = webhook_guard.session(allow_private, ca_bundle, THREADS)
    if allow_private:
        http.mount("http://", HTTPAdapter(pool_connections=THREADS, pool_maxsize=THREADS, max_retries=0))
    return http


class KeywordCalls:
    def __init__(self, runtime: Runtime, http: requests.Session | None = None):
        self.runtime, self.sandesh = runtime, runtime.sandesh
        settings = runtime.settings
        self.http = http or session(settings.webhook_allow_private, settings.requests_ca_bundle)
        self.pool = ThreadPoolExecutor(THREADS, thread_name_prefix="keyword")
        self.running: set[str] = set()  # reply ids handed to a thread
        self.lock = threading.Lock()

    def step(self) -> int:
        """Hand the keyword SMS that are due to the threads; how many were handed."""
        with self.runtime.connection() as conn:
            due = inbound.services_due(conn, self.runtime.clock.now() - ASKED_STALE)
        handed = 0
        for row in due:
            with self.lock:
                if row["id"] in self.running or len(self.running) >= 2 * THREADS:
                    continue
                self.running.add(row["id"])
            self.pool.submit(self._serve, row)
            handed += 1
        return handed

    def _serve(self, row: dict[str, Any]) -> None:
        try:
            self.serve(row)
        except Exception:  # noqa: BLE001 - the next step finds it due again
            logger.exception("keyword SMS %s not answered; tried again at the next step", row["id"])
        finally:
            with self.lock:
                self.running.discard(row["id"])

    def serve(self, row: dict[str, Any]) -> Reply | None:
        """Ask the service of one keyword SMS and send its answer; None when another sender has it."""
        now = self.runtime.clock.now()
        with self.runtime.connection() as conn:
            client = registry.client_services(conn, row["client_id"])
            caller = request_rate.client_caller(conn, row["client_id"], self.runtime.settings.route_window, now)
            sim = registry.sim_name(conn, row["sim_id"])
        default = client["default_reply"] if client else None
        services = self.sandesh.services
        if row["service"] == "asked":  # asked by a sender that stopped before the answer was recorded
            return services.answer(row["id"], caller, default, DEFAULT if default else NOTHING,
                                   "the reply URL was called by a sender that stopped before its answer")
        asked = services.ask(row["id"])
        if asked is None:
            return None
        url = client["reply_url"] if client else None
        text, outcome = self.call(url, asked, sim or row["sim_id"]) if url else \
            (None, "the client has no reply URL")
        if text is not None:
            reply = services.answer(row["id"], caller, text, SERVICE, outcome)
        else:
            reply = services.answer(row["id"], caller, default, DEFAULT if default else NOTHING, outcome)
        logger.info("keyword SMS %s (%s) answered: %s", row["id"], asked.keyword, outcome)
        return reply

    def call(self, url: str, asked: Asked, to: str) -> tuple[str | None, str]:
        """The text the reply URL answers (None: none to send) and what it did."""
        params = {"from": asked.reply.sender, "to": to, "text": asked.text, "keyword": asked.keyword}
        started = time.monotonic()
        with DEADLINES.within(DEADLINE):
            try:
                response = self.http.get(url, params=params, timeout=(DEADLINE, DEADLINE), allow_redirects=False,
                                         stream=True, headers={"user-agent": USER_AGENT})
                body = _read(response, started)
            except requests.RequestException as error:
                if time.monotonic() - started >= DEADLINE:
                    return None, f"no answer within {DEADLINE:.0f} s"
                # the URL's query holds the sender's number and SMS: kept out of the log and the event
                return None, re.sub(r"\?\S*", "", webhook_guard.describe(error))
        if time.monotonic() - started > DEADLINE or body is None:
            return None, f"no answer within {DEADLINE:.0f} s"
        if response.status_code not in (200, 202):
            return None, f"HTTP {response.status_code}"
        text = body.decode(response.encoding or "utf-8", errors="replace").strip()
        problem = one_sms_problem(text)
        if problem:
            return None, f"HTTP {response.status_code}, but its text is not one SMS: {problem}"
        return text, f"HTTP {response.status_code}"

    def close(self, wait: bool = True) -> None:
        """Stop; with `wait`, the calls running end first (each within its deadline) and record their answers."""
        self.pool.shutdown(wait=wait, cancel_futures=True)


def _read(response: requests.Response, started: float) -> bytes | None:
    """Up to MAX_BODY bytes of the answer, within the deadline (None: not within it)."""
    body = b""
    try:
        while len(body) <= MAX_BODY:
            chunk = response.raw.read(1024, decode_content=True)
            if not chunk:
                break
            body += chunk
            if time.monotonic() - started > DEADLINE:
                return None
    finally:
        response.close()
    return body[:MAX_BODY + 1]
