"""Helpers the tests share."""
from __future__ import annotations

from typing import Any


def funded_workspace(app: Any, name: str, amount: int, actor: str = "test", rates: dict[str, int] | None = None) -> str:
    """An active workspace with `amount` paisa of balance, made through the operator use cases."""
    workspace = app.operators.create_workspace(name, None, rates or {}, actor)
    app.operators.activate_workspace(workspace.id, actor)
    if amount:
        app.operators.credit_workspace(workspace.id, amount, None, actor)
    return workspace.id


_numbers = iter(range(10_000_000, 99_999_999))


def until(check: Any, timeout: float = 10.0, every: float = 0.1) -> Any:
    """What `check()` returns once it is true; fails the test after `timeout` seconds."""
    import time

    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(every)
    return found


def sims(sandesh: Any) -> dict[str, dict[str, Any]]:
    """`sandesh sim list` by name."""
    return {s["name"]: s for s in sandesh("sim", "list")["sims"]}


def send(runtime: Any, account: tuple[str, str], text: str, to: str | None = None,
         message_type: str = "transactional") -> Any:
    """A message through the send use case, to `to` or to a number of its own (a number shared
    between tests would stick to one SIM)."""
    from sandesh.domain.sending import parse_send

    request, problems = parse_send({"to": to or f"97798{next(_numbers):08d}", "text": text, "messageType": message_type})
    assert not problems, problems
    return runtime.sandesh.sending.send(account[1], account[0], request, 100 * request.segments)


def funded_client(app: Any, name: str, amount: int = 10**8, actor: str = "test") -> tuple[str, str]:
    """(workspace, client id) of a new funded workspace's one API client."""
    workspace = funded_workspace(app, name, amount, actor)
    return workspace, app.operators.create_client(workspace, name[:1], None, 1000, actor)[0].id


def fails_over(runtime: Any, account: tuple[str, str], sandesh: Any, device: Any, name: str, serial: Any) -> list[str]:
    """`device` (SIM `name`) vanishes beside the enabled serial modem of `serial`: it stops being
    a route, and five messages then go out once each, through the modem.  Their ids."""
    from tests.conftest import wait_for_status

    sandesh("sim", "enable", serial.modems[0].name)
    device.vanish()
    until(lambda: sims(sandesh)[name]["state"] != "active")
    moved = [send(runtime, account, f"failover {n}").id for n in range(5)]
    wait_for_status(runtime, moved, {"delivered"})
    assert sorted(m["text"] for m in serial.received if m["text"].startswith("failover")) == \
        [f"failover {n}" for n in range(5)], "each went out once, through the serial modem"
    return moved
