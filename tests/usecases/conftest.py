"""The use cases' behaviour, run twice: over the in-memory adapters (tests/memory.py: no
database, seconds) and over PostgreSQL as `bootstrap()` wires it.  `-k memory` runs the first alone."""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Callable

import pytest

from sandesh.domain.application import Sandesh
from sandesh.domain.clock import SystemClock
from sandesh.domain.ports import Caller
from sandesh.domain.types import MESSAGE_TYPES, default_rates
from sandesh.projections import sim_health

from tests import memory

_numbers = itertools.count(9841000000)


@dataclass
class Store:
    sandesh: Sandesh
    balance: Callable[[str], int]
    heartbeat: Callable[[str], None]  # a SIM's healthy heartbeat, now (its dispatcher's, in service)

    def workspace(self, amount: int = 10_000, types: list[str] | None = None) -> str:
        """An active workspace with `amount` paisa."""
        workspace = self.sandesh.operators.create_workspace("Pasal", types, {}, "tester")
        self.sandesh.operators.activate_workspace(workspace.id, "tester")
        if amount:
            self.sandesh.operators.credit_workspace(workspace.id, amount, None, "tester")
        return workspace.id

    def caller(self, workspace_id: str | None = None, **changes: Any) -> Caller:
        """A client of a (new) workspace, as authentication would describe it."""
        workspace_id = workspace_id or self.workspace()
        client, _, _ = self.sandesh.operators.create_client(workspace_id, "Pasal", None, None, "tester")
        fields: dict[str, Any] = dict(client_id=client.id, workspace_id=workspace_id, brand="Pasal",
                                      workspace_status="active", rates=default_rates(),
                                      allowed_types=list(MESSAGE_TYPES), sms_enabled=True, has_route=True,
                                      promo_hours=None)  # quiet hours off unless a test sets them
        return Caller(**{**fields, **changes})

    def route(self) -> str:
        """A SIM that is a route: enabled, and reported healthy now."""
        sim = self.sandesh.sims.add_sim(f"route-{a_number()}", "loop://", 115200, None, "tester")
        self.heartbeat(sim.id)
        return sim.id


def a_number() -> str:
    return f"977{next(_numbers)}"


@pytest.fixture(params=["memory", "postgres"])
def store(request: pytest.FixtureRequest) -> Store:
    if request.param == "memory":
        app = memory.in_memory(SystemClock())
        return Store(app, lambda workspace_id: memory.balance(app, workspace_id),
                     lambda sim_id: memory.heartbeat(app, sim_id))
    runtime = request.getfixturevalue("runtime")

    def balance(workspace_id: str) -> int:
        with runtime.connection() as conn:
            return conn.execute("SELECT balance FROM workspaces WHERE id = %s", (workspace_id,)).fetchone()["balance"]

    def heartbeat(sim_id: str) -> None:
        with runtime.connection() as conn:
            sim_health.record(conn, sim_id, healthy=True, registered=True, signal_dbm=-73, last_error=None,
                              dispatcher="tests", at=runtime.clock.now())

    return Store(runtime.sandesh, balance, heartbeat)
