"""Who may do what: the gating rules of docs/api.md, "Authentication", as one pure function."""
from __future__ import annotations

from .workspace import PENDING, SUSPENDED


def refusal(client_enabled: bool, workspace_status: str, method: str) -> str | None:
    """The error code that refuses this request, or None.  GET works for pending and suspended
    workspaces (docs/design.md, "Decisions: HTTP interface"); POST needs an active one."""
    if not client_enabled:
        return "client_disabled"
    if method != "GET" and method != "HEAD":
        if workspace_status == PENDING:
            return "workspace_pending"
        if workspace_status == SUSPENDED:
            return "workspace_suspended"
    return None
