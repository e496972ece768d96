"""Who is calling: the socket's peer, or what a trusted proxy says the peer was."""
from __future__ import annotations

import falcon.asgi


def calling_ip(req: falcon.asgi.Request, trusted_proxies: tuple[str, ...]) -> str:
    """The socket peer, or the first X-Forwarded-For hop when the peer is a trusted proxy."""
    peer = req.remote_addr or ""
    forwarded = req.get_header("X-Forwarded-For")
    if forwarded and peer in trusted_proxies:
        return forwarded.split(",")[0].strip() or peer
    return peer
