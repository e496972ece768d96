"""A Huawei HiLink device (an E3372h stick, a B525 router) as an HTTP server on 127.0.0.1, for
the tests (docs/design.md, "The SIM pool").

It answers the part of the device's web API that Sandesh and the `huawei-lte-api` package use,
as the devices and their users' reports show it:

- a page whose `<meta name="csrf_token">` tags hold request tokens, each POST answered with a
  new one in `__RequestVerificationToken`; the last TOKENS_KEPT issued are good, an older one or
  one from before the device forgot its sessions is `125003`;
- an optional login (`password_type` 4: SHA-256 over user, password and token), a session that
  expires when idle (`125003`, then `100003` until the next login), and at most MAX_SESSIONS
  sessions a device keeps until they log out (`108003` past them);
- `sms/send-sms` one message at a time: a second one while the first is still going is
  `113004`; a pretty-printed request is `100005`, as a list of indexes to `sms/delete-sms` is;
- the local inbox (`sms/sms-list`, `set-read`, `delete-sms`), where replies land and, when
  `UseSReport` is on, delivery reports (SmsType 7 delivered, 8 failed), one for each part;
- identity and signal (`device/information`, `device/signal`, `monitoring/status`,
  `net/current-plmn`) and USSD (`ussd/send`, `ussd/status`, `ussd/get`).

`device.vanish()` closes its socket, as a stick pulled out does; `device.come_back()` reopens it.
"""
from __future__ import annotations

import base64
import hashlib
import re
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable
from urllib.parse import quote

import xmltodict

from sandesh.domain.segments import segment

from .device_server import Answer, DeviceServer

MAX_SESSIONS = 4
TOKENS_KEPT = 8
SESSION_IDLE_SECONDS = 300.0
SEND_SECONDS = 0.2          # from send-sms until the network took the message
REPORT_SECONDS = 0.1        # from the send until the delivery report lands in the inbox
USSD_SECONDS = 0.2

OK_BODY = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><response>OK</response>"
PRETTY = re.compile(rb"[^?]>\s*\n\s*<")  # whitespace between elements, not after the declaration


def _error(code: int) -> bytes:
    return f"<?xml version=\"1.0\" encoding=\"UTF-8\"?><error><code>{code}</code><message></message></error>".encode()


def _response(fields: dict[str, Any]) -> bytes:
    return xmltodict.unparse({"response": fields}).encode()


class Refused(Exception):
    def __init__(self, code: int):
        self.code = code


@dataclass
class Sent:
    to: str
    text: str
    at: float           # when the network took it (time.time())
    posted_at: float    # when its send-sms came (time.monotonic(): benchmarks time sends to it)


@dataclass
class HilinkDevice(DeviceServer):
    """One stick or router and its SIM; its fields are the knobs a test turns."""

    name: str = "hilink-1"
    imei: str = "866110030000001"
    imsi: str = "429020000000101"
    iccid: str = "8997702000000001010"
    msisdn: str = ""
    model: str = "E3372h-320"
    plmn: str = "42902"
    operator_name: str = "Ncell"
    username: str | None = None        # a router's login; None: no login, as a stick at 192.168.8.1
    password: str | None = None
    rssi_dbm: int = -71
    registered: bool = True
    reports: bool = True               # UseSReport: delivery reports land in the inbox
    credit: float = 50.0               # NPR, told by the balance USSD
    part_price: float = 1.0
    refused_numbers: set[str] = field(default_factory=set)   # the network fails these (FailPhone)
    undelivered_numbers: set[str] = field(default_factory=set)  # reported as failed (SmsType 8)
    send_seconds: float = SEND_SECONDS
    sent: list[Sent] = field(default_factory=list)
    inbox: dict[int, dict[str, str]] = field(default_factory=dict)
    deleted: list[int] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)   # every API path asked, in order

    def __post_init__(self) -> None:
        self._lock = threading.RLock()
        self._tokens: list[str] = []
        self._sessions: dict[str, float] = {}   # logged-in session cookies: last use
        self._cookies: set[str] = set()
        self._next_index = 40000
        self._sending_until = 0.0
        self._status: dict[str, str] = {}
        self._ussd: str | None = None
        self._ussd_ready_at = 0.0
        self._fail_next: dict[str, list[int]] = {}
        self._post_token = ""
        self._pending: tuple[str, str, float] | None = None
        DeviceServer.__init__(self)

    # The knobs

    def fail_next(self, path: str, *codes: int) -> None:
        """The next requests to `path` (as "sms/send-sms") are answered with these error codes."""
        with self._lock:
            self._fail_next.setdefault("/api/" + path, []).extend(codes)

    def expire_sessions(self) -> None:
        """Every token and login is forgotten, as after the device's idle timeout."""
        with self._lock:
            self._tokens.clear()
            self._sessions.clear()

    def receive(self, sender: str, text: str, sms_type: int = 1) -> int:
        """A message lands in the local inbox; its index."""
        with self._lock:
            self._next_index += 1
            self.inbox[self._next_index] = {
                "Smstat": "0", "Index": str(self._next_index), "Phone": sender, "Content": text,
                "Date": time.strftime("%Y-%m-%d %H:%M:%S"), "Sca": "+9779800009999", "SaveType": "4",
                "Priority": "0", "SmsType": str(sms_type)}
            return self._next_index

    @property
    def sessions(self) -> int:
        with self._lock:
            return len(self._sessions)

    # The server

    def port_url(self) -> str:
        login = f"{quote(self.username, safe='')}:{quote(self.password or '', safe='')}@" if self.username else ""
        return f"hilink://{login}127.0.0.1:{self.port}"

    # The API

    def _token(self) -> str:
        token = secrets.token_hex(16)
        self._tokens = [*self._tokens[-(TOKENS_KEPT - 1):], token]
        return token

    def handle(self, method: str, path: str, headers: dict[str, str], body: bytes) -> Answer:
        path = path.split("?")[0]
        cookie = re.search(r"SessionID=([^;]+)", headers.get("Cookie", ""))
        with self._lock:
            self.requests.append(path)
            out: dict[str, str] = {}
            if cookie is None or cookie.group(1) not in self._cookies:
                session = secrets.token_hex(16)
                self._cookies.add(session)
                out["Set-Cookie"] = f"SessionID={session}; path=/; HttpOnly"
            else:
                session = cookie.group(1)
            if path in ("/", "/html/index.html"):
                page = "".join(f'<meta name="csrf_token" content="{self._token()}"/>' for _ in range(2))
                return 200, f"<html><head>{page}</head><body></body></html>".encode(), {
                    **out, "Content-Type": "text/html"}
            if path == "/api/webserver/SesTokInfo":
                return 200, _response({"SesInfo": f"SessionID={session}", "TokInfo": self._token()}), out
            try:
                if self._fail_next.get(path):
                    raise Refused(self._fail_next[path].pop(0))
                if method == "POST":
                    token = headers.get("__RequestVerificationToken", "")
                    if token not in self._tokens:
                        raise Refused(125003)   # stale, or from before the device forgot them
                    self._post_token = token   # a login's password is hashed with it
                    out["__RequestVerificationToken"] = self._token()
                    if PRETTY.search(body):
                        raise Refused(100005)
                request = (xmltodict.parse(body, strip_whitespace=False) or {}).get("request") or {} if body else {}
                if path not in ("/api/user/state-login", "/api/user/login") and self.username is not None:
                    seen = self._sessions.get(session)
                    if seen is None or time.monotonic() - seen > SESSION_IDLE_SECONDS:
                        self._sessions.pop(session, None)
                        raise Refused(100003)
                    self._sessions[session] = time.monotonic()
                answer = self._api(path, request, session)
            except Refused as refused:
                return 200, _error(refused.code), out
            return 200, answer, {**out, "Content-Type": "text/xml"}

    def _api(self, path: str, request: dict[str, Any], session: str) -> bytes:
        now = time.monotonic()
        self._settle(now)
        routes: dict[str, Callable[[], bytes]] = {
            "/api/user/state-login": lambda: _response({
                "State": "0" if session in self._sessions or self.username is None else "-1",
                "Username": self.username or "", "password_type": "4", "extern_password_type": "1"}),
            "/api/user/login": lambda: self._login(request, session),
            "/api/user/logout": lambda: self._logout(session),
            "/api/device/information": lambda: _response({
                "DeviceName": self.model, "SerialNumber": "G4P7S19A01000001", "Imei": self.imei, "Imsi": self.imsi,
                "Iccid": self.iccid, "Msisdn": self.msisdn, "HardwareVersion": "CL1E3372HM",
                "SoftwareVersion": "22.200.15.00.00", "WebUIVersion": "17.100.13.01.03", "ProductFamily": "LTE",
                "Classify": "hilink"}),
            "/api/device/signal": lambda: _response({"rssi": f"{self.rssi_dbm}dBm", "rsrp": "-95dBm", "sinr": "8dB"}),
            "/api/monitoring/status": lambda: _response({
                "ConnectionStatus": "901", "SignalIcon": "4", "SimStatus": "1",
                "ServiceStatus": "2" if self.registered else "1", "CurrentNetworkType": "19"}),
            "/api/net/current-plmn": lambda: _response({
                "State": "0", "FullName": self.operator_name, "ShortName": self.operator_name,
                "Numeric": self.plmn if self.registered else "", "Rat": "7"}),
            "/api/sms/config": lambda: _response({"SaveMode": "0", "Validity": "10752", "UseSReport": str(int(self.reports)),
                                                  "SendType": "1", "Sca": "+9779800009999", "smsisusepdu": "0"}),
            "/api/sms/send-sms": lambda: self._send(request, now),
            "/api/sms/send-status": lambda: _response(self._status or {
                "Phone": "", "SucPhone": "", "FailPhone": "", "TotalCount": "0", "CurIndex": "0"}),
            "/api/sms/sms-count": lambda: _response({
                "LocalUnread": str(sum(m["Smstat"] == "0" for m in self.inbox.values())),
                "LocalInbox": str(len(self.inbox)), "LocalMax": "500"}),
            "/api/sms/sms-list": lambda: self._list(request),
            "/api/sms/set-read": lambda: self._set_read(request),
            "/api/sms/delete-sms": lambda: self._delete(request),
            "/api/ussd/send": lambda: self._ussd_send(request, now),
            "/api/ussd/status": lambda: _response({"result": "1" if now < self._ussd_ready_at else "0"}),
            "/api/ussd/get": lambda: self._ussd_get(now),
        }
        if path not in routes:
            raise Refused(100002)
        return routes[path]()

    def _login(self, request: dict[str, Any], session: str) -> bytes:
        if self.username is None:
            raise Refused(100002)
        if session not in self._sessions and len(self._sessions) >= MAX_SESSIONS:
            raise Refused(108003)   # the device keeps sessions that never logged out
        if request.get("Username") != self.username or request.get("Password") != self._password(self._post_token):
            raise Refused(108006)
        self._sessions[session] = time.monotonic()
        return OK_BODY.encode()

    def _password(self, token: str) -> str:
        inner = base64.b64encode(hashlib.sha256((self.password or "").encode()).hexdigest().encode())
        return base64.b64encode(hashlib.sha256(self.username.encode() + inner + token.encode()).hexdigest().encode()).decode()

    def _logout(self, session: str) -> bytes:
        self._sessions.pop(session, None)
        return OK_BODY.encode()

    def _send(self, request: dict[str, Any], now: float) -> bytes:
        phones = (request.get("Phones") or {}).get("Phone")
        text = request.get("Content") or ""
        if not phones or not isinstance(phones, str) or str(len(text)) != str(request.get("Length")):
            raise Refused(100005)
        if now < self._sending_until:
            raise Refused(113004)   # the last message is still going out
        if not self.registered:
            raise Refused(113018)
        self._sending_until = now + self.send_seconds
        self._status = {"Phone": phones, "SucPhone": "", "FailPhone": "", "TotalCount": "1", "CurIndex": "0"}
        self._pending = (phones, text, now)
        threading.Timer(self.send_seconds, self._settle_later).start()
        return OK_BODY.encode()

    def _settle_later(self) -> None:
        with self._lock:
            self._settle(time.monotonic())

    def _settle(self, now: float) -> None:
        """The message going out has gone, when its time came; its report lands after it."""
        pending = self._pending
        if pending is None or now < self._sending_until:
            return
        self._pending = None
        phone, text, posted_at = pending
        number = phone.lstrip("+")
        failed = number in self.refused_numbers or self.credit < self.part_price
        if failed:
            self._status.update(FailPhone=phone, CurIndex="1")
            return
        self.credit -= self.part_price
        self._status.update(SucPhone=phone, CurIndex="1")
        self.sent.append(Sent(phone, text, time.time(), posted_at))
        if self.reports:  # the network reports each part the device sent
            delivered = number not in self.undelivered_numbers
            for _ in range(segment(text).segments):
                threading.Timer(REPORT_SECONDS, self.receive, (phone, "", 7 if delivered else 8)).start()

    def _list(self, request: dict[str, Any]) -> bytes:
        if int(request.get("BoxType") or 1) != 1:
            return _response({"Count": "0", "Messages": None})
        count = int(request.get("ReadCount") or 20)
        page = int(request.get("PageIndex") or 1)
        ordered = sorted(self.inbox.values(), key=lambda m: int(m["Index"]),
                         reverse=str(request.get("Ascending")) != "1")
        shown = ordered[(page - 1) * count: page * count]
        return _response({"Count": str(len(shown)), "Messages": {"Message": shown} if shown else None})

    def _set_read(self, request: dict[str, Any]) -> bytes:
        index = request.get("Index")
        if not isinstance(index, str) or int(index) not in self.inbox:
            raise Refused(100005)
        self.inbox[int(index)]["Smstat"] = "1"
        return OK_BODY.encode()

    def _delete(self, request: dict[str, Any]) -> bytes:
        index = request.get("Index")
        if not isinstance(index, str):
            raise Refused(100005)   # a list of indexes: devices take one at a time
        if self.inbox.pop(int(index), None) is not None:
            self.deleted.append(int(index))
        return OK_BODY.encode()

    def _ussd_send(self, request: dict[str, Any], now: float) -> bytes:
        code = request.get("content") or ""
        self._ussd = f"Your balance is Rs. {self.credit:.2f}. Valid till 2027-12-31." if code == "*400#" else \
            "Unknown service code."
        self._ussd_ready_at = now + USSD_SECONDS
        return OK_BODY.encode()

    def _ussd_get(self, now: float) -> bytes:
        if self._ussd is None or now < self._ussd_ready_at:
            raise Refused(111019)   # no answer yet
        answer, self._ussd = self._ussd, None
        return _response({"content": answer})
