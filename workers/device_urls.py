"""The port URL of a device on the network (`hilink://…`, `android://…`), read or refused with a
sentence that says what is wrong (workers/links.py)."""
from __future__ import annotations

from urllib.parse import SplitResult, parse_qs, urlsplit


class BadPort(ValueError):
    """A port URL that names no device: the sentence says what is wrong."""


def read(url: str, scheme: str, form: str) -> tuple[SplitResult, int | None, dict[str, list[str]]]:
    """The URL's parts, its port number and its query; `form` is how the sentences write it."""
    parts, a = urlsplit(url), "an" if scheme[0] in "aeiou" else "a"
    if parts.scheme != scheme:
        raise BadPort(f"{url.rpartition('@')[2]!r} is not {a} {scheme}:// port")
    if "@" in parts.path or "@" in parts.query or "@" in parts.fragment:
        raise BadPort("a password's / ? # and % are written with URL escapes: %2F %3F %23 %25")
    try:
        port = parts.port
    except ValueError:
        raise BadPort("the port after the host must be a number from 1 to 65535") from None
    if not parts.hostname:
        raise BadPort(f"{a} {scheme}:// port names the device's address: {form}")
    query = parse_qs(parts.query)
    if parts.path not in ("", "/") or set(query) - {"signing_key"}:
        raise BadPort(f"{a} {scheme}:// port is {form}, with nothing else after the host")
    return parts, port, query
