"""Who is calling: the socket's peer, or what a trusted proxy says the peer was; and whether the
request came over TLS."""
from __future__ import annotations

import falcon.asgi


def calling_ip(req: falcon.asgi.Request, trusted_proxies: tuple[str, ...]) -> str:
    """The socket peer; when the peer is a trusted proxy, the nearest X-Forwarded-For address
    that is not one. A proxy appends the address it was called from, so the hops are read from
    the right: whatever a client wrote in the header itself sits to the left of that and is never
    believed (it would let a caller pick the IP its limits are counted on)."""
    peer = req.remote_addr or ""
    if peer not in trusted_proxies:
        return peer
    hops = [hop.strip() for hop in (req.get_header("X-Forwarded-For") or "").split(",")]
    for hop in reversed(hops):
        if hop and hop not in trusted_proxies:
            return hop
    return peer


def over_tls(req: falcon.asgi.Request, trusted_proxies: tuple[str, ...]) -> bool:
    """The request came over TLS: to us, or to a trusted proxy that says so (X-Forwarded-Proto)."""
    if req.scheme == "https":
        return True
    return (req.remote_addr or "") in trusted_proxies and req.get_header("X-Forwarded-Proto") == "https"
