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
