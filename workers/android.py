"""A SIM in an Android phone running SMS Gateway for Android (capcom6/android-sms-gateway) in
local server mode, spoken to over the LAN through the `android-sms-gateway` client
(docs/operations.md, "Android phones").

Its port is `android://USER:PASSWORD@HOST[:PORT][?signing_key=KEY]`, with the user and password
the app shows.  What the app does, and what this driver does about it:

- A message is posted with Sandesh's own message id.  The app refuses an id it has (409), so a
  post whose answer was lost is posted again safely: the phone never has it twice.
- The app sends one message at a time; the driver waits on `GET /message/{id}` until the message
  is `Sent` (the network took it), or `Failed` before that (it did not go).  A phone that holds
  it `Pending` past SENT_WITHIN (asleep, say) leaves it of unknown outcome: never posted again.
- Delivery comes from the same state, `Delivered` or `Failed` after `Sent`, polled at each look.
- Replies are read from `GET /inbox`, oldest first, from a cursor the caller keeps.  With a
  signing key and an HTTPS `SANDESH_PUBLIC_URL`, the phone also posts what it receives and each
  message's fate to Sandesh at once (api/devices.py); both ways name a message alike
  (`message_key`), so it is recorded once.
- `/health` `fail` (a flat battery, no network) makes the SIM unhealthy.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable
from urllib.parse import unquote

import requests
from android_sms_gateway import client, domain, errors, http

from . import device_urls
from .device_urls import BadPort
from .modem import CommandTimeout, Health, ModemError, NotSubmitted, PortGone

SCHEME = "android"
DEFAULT_PORT = 8080
TIMEOUT = 10.0
SENT_WITHIN = 120.0     # a message not sent within this long is of unknown outcome
INBOX_PAGE = 500        # the app's largest `limit`
WEBHOOK_EVENTS = ("sms:received", "sms:delivered", "sms:failed")


@dataclass(frozen=True)
class AndroidPort:
    host: str
    port: int
    username: str
    password: str
    signing_key: str | None

    @classmethod
    def parse(cls, url: str) -> AndroidPort:
        parts, port, query = device_urls.read(url, SCHEME, "android://USER:PASSWORD@HOST[:PORT][?signing_key=KEY]")
        if not parts.username or parts.password is None:
            raise BadPort("give the user and password the app shows: android://USER:PASSWORD@HOST[:PORT]")
        return cls(parts.hostname, port or DEFAULT_PORT, unquote(parts.username), unquote(parts.password),
                   query["signing_key"][-1] if "signing_key" in query else None)

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def shown(self) -> str:
        return f"{SCHEME}://{self.username}:***@{self.host}:{self.port}"


class _Timed(requests.Session):
    """The client's requests carry no timeout: a phone that stops answering would hold the SIM's thread."""

    def __init__(self, timeout: float):
        super().__init__()
        self.timeout = timeout

    def request(self, *args: Any, **kwargs: Any) -> requests.Response:  # type: ignore[override]
        kwargs.setdefault("timeout", self.timeout)
        return super().request(*args, **kwargs)


@dataclass(frozen=True)
class Received:
    id: str
    sender: str
    text: str
    created_at: str   # the phone's ISO time: the inbox's order and cursor


class Android:
    def __init__(self, port_url: str, *, timeout: float = TIMEOUT, sleep: Callable[[float], None] = time.sleep):
        self.port = AndroidPort.parse(port_url)
        self.sleep = sleep
        self._session = _Timed(timeout)
        self._api = client.APIClient(self.port.username, self.port.password, base_url=self.port.base_url,
                                     http=http.RequestsHttpClient(self._session))
        self.gone = True

    def _call(self, ask: Callable[[], Any]) -> Any:
        try:
            answer = ask()
        except errors.UnauthorizedError:
            raise ModemError(f"{self.port.shown()} refused the user and password") from None
        except requests.RequestException as error:
            self.gone = True
            raise PortGone(f"{self.port.shown()} does not answer: {type(error).__name__}") from None
        self.gone = False
        return answer

    def open(self) -> str | None:
        """The phone's model; refuses wrong credentials before anything else."""
        found = self._call(lambda: self._session.get(self.port.base_url + "/", headers=self._api.headers))
        if found.status_code == 401:
            raise ModemError(f"{self.port.shown()} refused the user and password")
        return found.json().get("model") if found.ok else None

    def register_webhooks(self, url: str, prefix: str) -> None:
        """Points the phone's webhooks for what it receives and each message's fate at `url`;
        each under an id of `prefix`, so registering again replaces them."""
        for event in WEBHOOK_EVENTS:
            hook = domain.Webhook(id=f"{prefix}-{event.replace(':', '-')}", url=url, event=domain.WebhookEvent(event))
            try:
                self._call(lambda h=hook: self._api.create_webhook(h))
            except errors.BadRequestError as error:  # the app takes only https:// (or http://127.0.0.1)
                raise ModemError(f"{self.port.shown()} refused the webhook {url}: {error}") from None

    def close(self) -> None:
        self._session.close()
        self.gone = True

    def health(self) -> Health:
        try:
            found = self._call(lambda: self._api.health_check())
        except errors.InternalServerError:  # the app's `fail`: no network, a flat battery
            return Health(False, 0, None)
        return Health(found.status.value != "fail", 1, None)

    def send(self, message_id: str, to: str, text: str, ttl_seconds: int | None) -> None:
        """Returns once the phone says it is `Sent`.  NotSubmitted: it proved it did not go."""
        message = domain.Message(phone_numbers=["+" + to.lstrip("+")], text_message=domain.TextMessage(text),
                                 with_delivery_report=True, ttl=ttl_seconds, id=message_id)
        deadline = time.monotonic() + SENT_WITHIN
        while True:
            try:
                self._call(lambda: self._api.send(message, skip_phone_validation=True))
                break
            except errors.APIError as error:
                if error.status_code == 409:  # it has it already: posted before the answer was lost
                    break
                raise NotSubmitted(f"{self.port.shown()} refused the message ({error.status_code}: {error})") from None
            except PortGone as error:  # the id makes posting again safe; a phone that stays away leaves it unknown
                if time.monotonic() > deadline:
                    raise CommandTimeout(f"outcome of the send unknown: {error}") from None
                self.sleep(1.0)
        pause = 0.02  # the phone sends within a second or so: asked often at first, then less
        while True:
            try:
                state = self.state(message_id)
            except PortGone as error:
                state = None
                if time.monotonic() > deadline:
                    raise CommandTimeout(f"outcome of the send unknown: {error}") from None
            if state is not None and state[0] in ("Sent", "Delivered"):
                return
            if state is not None and state[0] == "Failed":
                raise NotSubmitted(f"{self.port.shown()}: {state[1] or 'the phone could not send it'}")
            if time.monotonic() > deadline:
                raise CommandTimeout(f"{self.port.shown()} did not send it within {SENT_WITHIN:.0f} s")
            self.sleep(pause)
            pause = min(0.5, pause * 1.5)

    def state(self, message_id: str) -> tuple[str, str | None] | None:
        """The message's state on the phone and its recipient's error, or None when it does not have it."""
        try:
            found = self._call(lambda: self._api.get_state(message_id))
        except errors.NotFoundError:
            return None
        error = next((r.error for r in found.recipients if r.error), None)
        return found.state.value, error

    def inbox(self, since: str | None) -> list[Received]:
        """What the phone received from `since` (the phone's ISO time) on, oldest first."""
        query = {"type": "SMS", "limit": str(INBOX_PAGE), **({"from": since} if since else {})}
        found = self._call(lambda: self._session.get(self.port.base_url + "/inbox", params=query,
                                                     headers=self._api.headers))
        if not found.ok:
            raise ModemError(f"{self.port.shown()}: GET /inbox answered {found.status_code}")
        items = [Received(str(i["id"]), i.get("sender") or "", i.get("contentPreview") or "", i.get("createdAt") or "")
                 for i in found.json() if i.get("type", "SMS") == "SMS"]
        return sorted(items, key=lambda i: i.created_at)


def message_key(inbox_id: str) -> str:
    """The name a received message has in the phone's webhooks (`messageId`: its hash, unsigned,
    in hex) from its id in `GET /inbox` (`text:` and the same hash, signed, in decimal)."""
    return format(int(inbox_id.partition(":")[2]) & 0xFFFFFFFF, "x")
