"""A phone running SMS Gateway for Android (capcom6/android-sms-gateway) in local server mode, as
an HTTP server on 127.0.0.1, for the tests (docs/design.md, "The SIM pool").

It answers what the app's local server answers, as its source has it:

- HTTP Basic on every route but `GET /health` (401 otherwise); `GET /` gives the phone's model;
- `POST /message` (or `/messages`): 202 with the message `Pending`; 400 for a body without
  exactly one text or without numbers; 409 for an `id` the phone has already;
- one message at a time, each recipient `Pending` → `Processed` → `Sent` → `Delivered` (with
  `withDeliveryReport`), or `Failed` with a reason; `GET /message/{id}` gives the states, 404
  for an id it does not know;
- `GET /inbox?type=SMS&from=…` lists what it received, oldest first, with `contentPreview` the
  whole text of an SMS;
- `GET /health`: `pass`, `warn` or `fail` (500) from its checks;
- `POST /webhooks` (https://, or http:// to 127.0.0.1 only, else 400); then each `sms:received`,
  `sms:delivered` and `sms:failed` is posted there, signed: `X-Signature` the hex HMAC-SHA256,
  keyed with `signing_key`, of the body and then `X-Timestamp`; retried while it is not 2xx.

`phone.vanish()` closes its socket, as a phone off the Wi-Fi; `phone.asleep` makes it hold
messages `Pending`, as a phone whose app Android put to sleep.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import secrets
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

from sandesh.domain.segments import segment

from .device_server import Answer, DeviceServer

SEND_SECONDS = 0.05
DELIVER_SECONDS = 0.1


def _iso(at: float) -> str:
    return datetime.fromtimestamp(at, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "+00:00"


def _json(status: int, body: Any) -> Answer:
    return status, json.dumps(body).encode(), {"Content-Type": "application/json"}


def _message(status: int, text: str) -> Answer:
    return _json(status, {"message": text})


@dataclass
class AndroidPhone(DeviceServer):
    name: str = "phone-1"
    username: str = "sms"
    password: str = "Xy12ab34"
    model: str = "SM-A105F"
    send_seconds: float = SEND_SECONDS
    deliver_seconds: float = DELIVER_SECONDS
    refused_numbers: set[str] = field(default_factory=set)      # the network fails these
    undelivered_numbers: set[str] = field(default_factory=set)  # delivery reports say failed
    unreported_numbers: set[str] = field(default_factory=set)   # no delivery report ever comes
    battery: int = 80
    signing_key: str = "Kf8Zq2Lp"
    webhooks: dict[str, dict[str, str]] = field(default_factory=dict)
    posted: list[tuple[str, int]] = field(default_factory=list)   # each webhook post: event, status
    asleep: bool = False
    sent: list[dict[str, Any]] = field(default_factory=list)     # what left the phone, in order
    messages: dict[str, dict[str, Any]] = field(default_factory=dict)
    inbox: list[dict[str, Any]] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        DeviceServer.__init__(self)
        self._lock = threading.RLock()
        self._wake = threading.Event()
        threading.Thread(target=self._sender, name=f"{self.name} sender", daemon=True).start()

    def port_url(self, signed: bool = False) -> str:
        key = f"?signing_key={quote(self.signing_key, safe='')}" if signed else ""
        return f"android://{quote(self.username, safe='')}:{quote(self.password, safe='')}@127.0.0.1:{self.port}{key}"

    # The knobs

    def receive(self, sender: str, text: str) -> str:
        """A message comes in: kept in the inbox, and posted to an `sms:received` webhook."""
        with self._lock:
            hashed = secrets.randbits(32) - 2**31  # a Java hashCode: the inbox's id and the webhook's name of it
            item = {"id": f"text:{hashed}", "type": "SMS", "sender": sender, "recipient": None, "simNumber": 1,
                    "contentPreview": text, "createdAt": _iso(time.time())}
            self.inbox.append(item)
            self._emit("sms:received", {"messageId": format(hashed & 0xFFFFFFFF, "x"), "sender": sender,
                                        "phoneNumber": sender, "message": text, "receivedAt": item["createdAt"]})
            return item["id"]

    def _emit(self, event: str, payload: dict[str, Any]) -> None:
        for hook in [h for h in self.webhooks.values() if h["event"] == event]:
            body = json.dumps({"id": secrets.token_urlsafe(12), "webhookId": hook["id"], "event": event,
                               "deviceId": "dev-" + self.name, "payload": payload}).encode()
            threading.Thread(target=self._webhook, args=(hook["url"], event, body), daemon=True).start()

    def _webhook(self, url: str, event: str, body: bytes) -> None:
        """As the app's queue does: tried again with backoff until a 2xx (here 5 tries, from 0.1 s)."""
        import requests

        for attempt in range(5):
            timestamp = str(int(time.time()))
            signature = hmac.new(self.signing_key.encode(), body + timestamp.encode(), hashlib.sha256).hexdigest()
            try:
                status = requests.post(url, data=body, timeout=5, headers={
                    "Content-Type": "application/json", "X-Signature": signature, "X-Timestamp": timestamp,
                    "User-Agent": "me.capcom.smsgateway/1.68.0"}).status_code
            except requests.RequestException:
                status = 0
            self.posted.append((event, status))
            if 200 <= status < 300:
                return
            time.sleep(0.1 * 2 ** attempt)

    def wake(self) -> None:
        self.asleep = False
        self._wake.set()

    # The API

    def handle(self, method: str, path: str, headers: dict[str, str], body: bytes) -> Answer:
        parts = urlsplit(path)
        route, query = parts.path.rstrip("/") or "/", parse_qs(parts.query)
        with self._lock:
            self.requests.append(f"{method} {route}")
            if route == "/health":
                return self._health()
            expected = base64.b64encode(f"{self.username}:{self.password}".encode()).decode()
            if headers.get("Authorization") != f"Basic {expected}":
                return 401, b"", {"WWW-Authenticate": 'Basic realm="Access to SMS Gateway"'}
            if route == "/":
                return _json(200, {"status": "ok", "model": self.model})
            if route == "/device":
                return _json(200, [{"id": "dev-" + self.name, "name": self.model}])
            if route in ("/message", "/messages") and method == "POST":
                return self._post(body)
            found = re.fullmatch(r"/messages?/([^/]+)", route)
            if found and method == "GET":
                message = self.messages.get(found.group(1))
                return _json(200, self._view(message)) if message else (404, b"", {})
            if route in ("/webhook", "/webhooks") and method == "POST":
                return self._register(body)
            if route == "/inbox" and method == "GET":
                since = query.get("from", [""])[0]
                shown = [m for m in self.inbox if not since or m["createdAt"] >= since]
                limit = int(query.get("limit", ["50"])[0])
                if not 1 <= limit <= 500:
                    return _message(400, "limit must be between 1 and 500")
                return 200, json.dumps(shown[:limit]).encode(), {"Content-Type": "application/json",
                                                                 "X-Total-Count": str(len(shown))}
            return _message(404, "Not Found")

    def _register(self, body: bytes) -> Answer:
        hook = json.loads(body)
        url = urlsplit(hook.get("url") or "")
        if not (url.scheme == "https" or (url.scheme == "http" and url.hostname == "127.0.0.1")):
            return _message(400, "url must start with https:// or http://127.0.0.1")
        if hook.get("event") not in ("sms:received", "sms:sent", "sms:delivered", "sms:failed", "system:ping"):
            return _message(400, "Unsupported event")
        hook = {"id": hook.get("id") or secrets.token_urlsafe(12), "url": hook["url"], "event": hook["event"],
                "source": "Local"}
        self.webhooks[hook["id"]] = hook  # an id it has is replaced
        return _json(201, hook)

    def _health(self) -> Answer:
        battery = "fail" if self.battery < 10 else "warn" if self.battery < 25 else "pass"
        status = battery
        return _json(500 if status == "fail" else 200, {
            "version": "1.68.0", "releaseId": 68, "status": status,
            "checks": {"battery:level": {"status": battery, "observedValue": self.battery, "observedUnit": "percent",
                                         "description": "Battery level in percent"},
                       "connection:status": {"status": "pass", "observedValue": 1, "observedUnit": "boolean",
                                             "description": "Internet connection status"}}})

    def _post(self, body: bytes) -> Answer:
        try:
            request = json.loads(body)
        except ValueError:
            return _message(400, "Invalid request")
        text = (request.get("textMessage") or {}).get("text") if request.get("textMessage") else request.get("message")
        if sum(1 for k in ("textMessage", "dataMessage", "message") if request.get(k) is not None) != 1:
            return _message(400, "Must specify exactly one of: textMessage, dataMessage, or message")
        if not text:
            return _message(400, "Text message is empty")
        if not request.get("phoneNumbers"):
            return _message(400, "Empty phone numbers list")
        message_id = request.get("id") or secrets.token_urlsafe(16)
        if message_id in self.messages:
            return _message(409, "Message with the same ID already exists")
        now = time.time()
        self.messages[message_id] = {
            "id": message_id, "text": text, "withDeliveryReport": request.get("withDeliveryReport", True),
            "recipients": [{"phoneNumber": n, "state": "Pending"} for n in request["phoneNumbers"]],
            "states": {"Pending": _iso(now)}, "created": now, "posted_at": time.monotonic()}
        self._wake.set()
        view = self._view(self.messages[message_id])
        return _json(202, {**view, "states": {}})

    def _view(self, message: dict[str, Any]) -> dict[str, Any]:
        recipients = message["recipients"]
        states = [r["state"] for r in recipients]
        state = next((s for s in ("Pending", "Processed") if s in states), None) or (
            "Failed" if all(s == "Failed" for s in states) else
            "Delivered" if all(s == "Delivered" for s in states) else "Sent")
        return {"id": message["id"], "deviceId": "dev-" + self.name, "state": state, "isHashed": False,
                "isEncrypted": False, "textMessage": {"text": message["text"]}, "recipients": recipients,
                "states": message["states"]}

    # The phone's own work: one message at a time, newest first (the app's default order, LIFO)

    def _sender(self) -> None:
        while True:
            self._wake.wait(0.05)
            self._wake.clear()
            while not self.asleep:
                with self._lock:
                    waiting = [m for m in self.messages.values() if m["recipients"][0]["state"] == "Pending"]
                    if not waiting:
                        break
                    message = max(waiting, key=lambda m: m["created"])
                    self._move(message, "Processed")
                time.sleep(self.send_seconds)
                with self._lock:
                    self._send(message)

    def _move(self, message: dict[str, Any], state: str, error: str | None = None) -> None:
        for recipient in message["recipients"]:
            if recipient["state"] != "Failed":
                recipient["state"] = state
                if error:
                    recipient["error"] = error
        message["states"][state] = _iso(time.time())

    def _send(self, message: dict[str, Any]) -> None:
        number = message["recipients"][0]["phoneNumber"].lstrip("+")
        if number in self.refused_numbers:
            self._move(message, "Failed", "Send result: RESULT_ERROR_GENERIC_FAILURE (1)")
            return
        self._move(message, "Sent")
        self.sent.append({"to": message["recipients"][0]["phoneNumber"], "text": message["text"], "id": message["id"],
                          "parts": segment(message["text"]).segments, "posted_at": message["posted_at"]})
        if message["withDeliveryReport"] and number not in self.unreported_numbers:
            failed = number in self.undelivered_numbers
            threading.Timer(self.deliver_seconds, self._reported, (message, failed)).start()

    def _reported(self, message: dict[str, Any], failed: bool) -> None:
        with self._lock:
            recipient = message["recipients"][0]["phoneNumber"]
            if failed:
                reason = "Delivery result from SC +9779800009999: 70"
                self._move(message, "Failed", reason)
                self._emit("sms:failed", {"messageId": message["id"], "phoneNumber": recipient,
                                          "failedAt": _iso(time.time()), "reason": reason})
            else:
                self._move(message, "Delivered")
                self._emit("sms:delivered", {"messageId": message["id"], "phoneNumber": recipient,
                                             "deliveredAt": _iso(time.time())})
