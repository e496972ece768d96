"""GET /v1/events (docs/api.md, "GET /v1/events"): the calling client's events as a feed, oldest
first, from `events_feed` (projections/feed.py), with long polling.

A long poll holds its socket and a future on the event loop, never a thread: `Arrivals` listens
on the feed's channel from one thread per process and resolves the futures of the clients
whose feeds grew.  A request registers its future before it reads, so an event committed
between the read and the wait still wakes it.  While the channel is down (or not yet
connected), a waiting request reads again every second instead.
"""
from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import falcon.asgi

from sandesh.domain.application import Sandesh
from sandesh.domain.clock import iso
from sandesh.domain.listing import EventQuery, parse_event_query
from sandesh.domain.webhook import FEED_HISTORY, INBOUND
from sandesh.projections import feed
from sandesh.projections.storage import channels

from .body import parsed
from .errors import ApiError, invalid
from .waiting import Blocking

UNHEARD_POLL = 1.0  # seconds between reads of a waiting request while the channel is down
FEED_POLLS_PER_CLIENT = 10  # SANDESH_FEED_POLLS: a client's waiting polls, shared out among the API's processes
FEED_POLLS_PER_PROCESS = 500  # half of a process's worker_connections: the rest serve every other request
BUDGET_RETRY_AFTER = 1  # seconds: a poll past the budget comes back once one of the waiting ones answered


class Arrivals:
    """The futures of this process's waiting requests, by client, resolved when the feed's
    channel names their client (or when the channel connects or is lost: anything may have
    been missed)."""

    def __init__(self, database_url: str | None):
        self.database_url = database_url
        self.live = False
        self._waiting: dict[str, set[asyncio.Future[None]]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop = threading.Event()

    def expect(self, client_id: str) -> asyncio.Future[None]:
        """A future resolved at the client's next event; `forget` it when done."""
        if self._loop is None:
            self._start(asyncio.get_running_loop())
        future = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(client_id, set()).add(future)
        return future

    def forget(self, client_id: str, future: asyncio.Future[None]) -> None:
        waiting = self._waiting.get(client_id)
        if waiting is not None:
            waiting.discard(future)
            if not waiting:
                del self._waiting[client_id]

    def close(self) -> None:
        self._stop.set()

    def _start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        if self.database_url is None:
            return
        threading.Thread(target=channels.listen, name="feed-arrivals", daemon=True, kwargs={
            "database_url": self.database_url, "channel": feed.CHANNEL, "wake": self._heard, "stop": self._stop,
            "on_connect": lambda: self._heard(None, live=True),
            "on_lost": lambda: self._heard(None, live=False)}).start()

    def _heard(self, client_id: str | None, live: bool | None = None) -> None:
        """On the listening thread: hand the news to the loop."""
        assert self._loop is not None
        self._loop.call_soon_threadsafe(self._wake, client_id, live)

    def _wake(self, client_id: str | None, live: bool | None) -> None:
        if live is not None:
            self.live = live
        woken = [client_id] if client_id is not None else list(self._waiting)
        for name in woken:
            for future in self._waiting.pop(name, ()):
                if not future.done():
                    future.set_result(None)


class PollBudget:
    """How many long polls may wait in this process (docs/api.md, "GET /v1/events"): `per_client`
    of one client, `total` of all, so that one client, or one tenant's many, cannot take the
    connections every other client needs.  On the event loop only."""

    def __init__(self, per_client: int, total: int):
        self.per_client, self.total = per_client, total
        self._held: dict[str, int] = {}
        self._count = 0

    def take(self, client_id: str) -> None:
        """One more waiting poll of the client; 429 rate_limited when past either bound."""
        if self._count >= self.total or self._held.get(client_id, 0) >= self.per_client:
            whose = "this client's" if self._count < self.total else "every client's"
            raise ApiError("rate_limited", f"Too many of {whose} long polls wait already; retry in "
                                           f"{BUDGET_RETRY_AFTER} s, with fewer polls at once.",
                           headers={"Retry-After": str(BUDGET_RETRY_AFTER)})
        self._held[client_id] = self._held.get(client_id, 0) + 1
        self._count += 1

    def give(self, client_id: str) -> None:
        self._count -= 1
        left = self._held[client_id] - 1
        if left:
            self._held[client_id] = left
        else:
            del self._held[client_id]


class EventFeed:
    """GET /v1/events: `limit` of the client's events after `after`, waiting up to `wait` seconds
    for the first when there is none yet, within the process's PollBudget."""

    def __init__(self, sandesh: Sandesh, connection: Any, blocking: Blocking, arrivals: Arrivals, budget: PollBudget):
        self.sandesh = sandesh
        self.connection = connection
        self.blocking = blocking
        self.arrivals = arrivals
        self.budget = budget

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        query = parsed(parse_event_query, req.params)
        client_id = req.context.caller.client_id
        deadline = time.monotonic() + query.wait
        waiting = False  # holds a place of the budget: from its first wait until it answers
        try:
            while True:
                arrival = self.arrivals.expect(client_id)
                try:
                    page = await self.blocking(self._read, query, client_id)
                    left = deadline - time.monotonic()
                    if page["data"] or left <= 0:
                        resp.media = page
                        return
                    if not waiting:
                        self.budget.take(client_id)
                        waiting = True
                    await asyncio.wait({arrival}, timeout=left if self.arrivals.live else min(left, UNHEARD_POLL))
                finally:
                    self.arrivals.forget(client_id, arrival)
        finally:
            if waiting:
                self.budget.give(client_id)

    def _read(self, query: EventQuery, client_id: str) -> dict[str, Any]:
        now = self.sandesh.clock.now()
        with self.connection() as conn:
            after = None
            if query.after is not None:
                after = feed.position_of(conn, query.after, client_id, now)
                if after is None:
                    raise invalid(["after"], "after must be the id of one of this client's events of the last "
                                             f"{FEED_HISTORY // 86_400} days", "unknown_cursor")
            rows = feed.page(conn, client_id, after, now, query.limit + 1)
        return {"data": [self._view(row) for row in rows[:query.limit]], "hasMore": len(rows) > query.limit}

    def _view(self, row: dict[str, Any]) -> dict[str, Any]:
        data = row["body"]
        if row["event_type"] == INBOUND:  # the text, from the log, where alone it is kept
            reply = self.sandesh.dispatch.reply(row["subject"])
            data = {**data, "text": self.sandesh.texts.open(reply.text)}  # in its place: the body keeps the key
        return {"id": row["id"], "type": row["event_type"], "createdAt": iso(row["at"]), "data": data}
