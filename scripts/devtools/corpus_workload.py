"""The corpus workload: a scripted stretch of a Sandesh installation's life, run unchanged against
each release by scripts/devtools/corpus.py, so that the release's log holds every event type it can write.

It speaks to the release only as its operators and customers do: the release's own `sandesh`
commands, its HTTP API and dashboard, and its emulator's control lines; what the phones received
is read from the emulator's phones log.  Where releases differ it asks the release what it offers
(`Offers.of`, from its --help texts), so a later release runs the same script and takes the steps
it offers too.  Every step checks what it caused and stops the run loudly when the release did
something else.
"""
from __future__ import annotations

import json
import re
import socket
import ssl
import threading
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable

import requests

from .corpus_release import CorpusError, Emulator, Process, Release, say, until

# The retry delays of a webhook delivery after attempts 1 to 7 (docs/api.md, "Retries"); the
# 8th attempt is the last.  The workload moves the clock by them to make a delivery dead.
WEBHOOK_DELAYS = (10, 30, 120, 600, 1800, 3600, 10800)
# The emulator gives its modems the operators in turn (scripts/service/emulator.py: MNC 01, 02, 04, 03),
# and the dispatcher prefers a SIM of the recipient's operator: a fresh number of an operator is
# sent by that operator's modem, so a control line aimed at that modem meets the message.
PREFIX = {"emu-1": "984", "emu-2": "980", "emu-3": "988"}  # Nepal Telecom, Ncell, Smart Telecom
LONG_TEXT = ("Your Corpus Foods order 1042 has shipped. It travels with Himal Express and should reach you "
             "within two days. Track it at corpus.example/t/1042 or call us on 01-5550100 with any question.")
PASSWORD = "corpus-password-0123"
# The server key the log is written under after its rotation (a test key, as the first one).
NEW_SECRET_KEY = "corpus-secret-key-after-rotation-0123456789abcdef"
REMOTE_IP = "203.0.113.7"


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class Offers:
    """What a release offers beyond the first release, read from its own --help texts."""
    people: bool             # `sandesh user` and the dashboard's sign-in, authentication codes, people
    promo_hours: bool        # `workspace set-promo-hours`
    sim_plan: bool           # `sim update --pin/--daily-cap/--balance-ussd`, the emulator's credit
    outage_redelivery: bool  # `webhooks redeliver --client CL --since ISO`
    server_key: bool         # `key rotate` and `key retire`, with SANDESH_PREVIOUS_KEYS

    @classmethod
    def of(cls, release: Release) -> Offers:
        return cls(people=bool(release.help("user")),
                   promo_hours="set-promo-hours" in release.help("workspace"),
                   sim_plan="--balance-ussd" in release.help("sim", "update"),
                   outage_redelivery="--since" in release.help("webhooks", "redeliver"),
                   server_key="retire" in release.help("key"))


class Receiver:
    """The clients' webhook receiver: HTTPS on localhost with a certificate of a test CA, which the
    release's webhook sender trusts through REQUESTS_CA_BUNDLE; an answer per path, every request kept."""

    def __init__(self, directory: Path):
        import trustme

        ca = trustme.CA()
        self.ca_file = directory / "webhook-ca.pem"
        ca.cert_pem.write_to_path(str(self.ca_file))
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ca.issue_cert("localhost", "127.0.0.1").configure_cert(context)
        self.received: list[dict[str, Any]] = []
        self.answers: dict[str, int] = {}
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                with receiver.lock:
                    receiver.received.append({"path": self.path, "body": body, "at": time.time(),
                                              "headers": {k.lower(): v for k, v in self.headers.items()}})
                    status = receiver.answers.get(self.path, 200)
                self.send_response(status)
                self.send_header("content-length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, path: str) -> str:
        return f"https://localhost:{self.port}{path}"

    def answer(self, path: str, status: int) -> None:
        with self.lock:
            self.answers[path] = status

    def at(self, path: str) -> list[dict[str, Any]]:
        with self.lock:
            return [r for r in self.received if r["path"] == path]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Numbers:
    """Fresh recipients: a number nobody was sent to yet goes to its operator's modem."""

    def __init__(self) -> None:
        self.used: dict[str, int] = {}

    def on(self, sim: str) -> str:
        n = self.used[sim] = self.used.get(sim, 0) + 1
        return f"977{PREFIX[sim]}{1000000 + n:07d}"


class Workload:
    def __init__(self, release: Release, receiver: Receiver, workdir: Path, *, sims: int, release_name: str,
                 commit: str):
        self.release, self.receiver, self.workdir = release, receiver, workdir
        self.sims, self.release_name, self.commit = sims, release_name, commit
        self.offers = Offers.of(release)
        self.numbers = Numbers()
        self.offset = 0.0
        self.workspaces: dict[str, str] = {}
        self.clients: dict[str, dict[str, Any]] = {}
        self.people: list[dict[str, Any]] = []
        self.messages: dict[str, str] = {}   # message id -> the name of its client
        self.story: dict[str, Any] = {}      # ids a test may look for, by what they show
        self.steps_done: list[str] = []
        self.retired_keys: list[str] = []  # server keys retired during the run; the log needs none of them
        self.restarts = 0
        self.api_url = f"http://127.0.0.1:{free_port()}"
        self.http = requests.Session()
        self.release.env["SANDESH_PUBLIC_URL"] = self.api_url  # the base of `sandesh user` set-password links

    # The run ------------------------------------------------------------------------------------

    def run(self) -> tuple[dict[str, Any], dict[str, Any]]:
        say(f"[{self.release_name}] the release offers {asdict(self.offers)}")
        steps: list[tuple[str, Callable[[], None], bool]] = [
            ("migrate, start the emulator, the workers and the API", self.start, True),
            ("workspaces: created, activated, credited, rates, types, promotional hours", self.workspaces_step, True),
            ("clients: created with webhooks, key rotated, updated, disabled, enabled, secret rotated",
             self.clients_step, True),
            ("sends of each type, idempotent replay, multi-part, UCS-2, reports delivered and undelivered",
             self.sends_step, True),
            ("OTPs: verified, a wrong try, locked", self.otps_step, True),
            ("a batch, replayed with its Idempotency-Key", self.batch_step, True),
            ("scheduled sends: one released, one canceled; an OTP expired", self.scheduled_step, True),
            ("refusals: rejected, requeued, a SIM quarantined and released", self.refusals_step, True),
            ("replies: attributed, multi-part, STOP and START, unattributed", self.replies_step, True),
            ("opt-outs by an operator", self.optouts_step, True),
            ("the SMS switch off and on", self.switch_step, True),
            ("SIMs: disabled, enabled, added, moved, updated; a network quarantine that lifts",
             self.sims_step, True),
            ("a workspace suspended, reinstated, suspended", self.paused_step, True),
            ("a workspace's texts erased", self.erase_step, True),
            ("webhooks dead after every retry, redelivered", self.outage_step, True),
            ("an outage redelivered for a client", self.outage_redelivery_step, self.offers.outage_redelivery),
            ("outcomes unknown: a dispatcher killed mid-send, a message expired", self.unknown_step, True),
            ("a day later: no reports, a stopped send failed, an erased text failed", self.day_later_step, True),
            ("a SIM's PIN, plan and credit", self.sim_plan_step, self.offers.sim_plan),
            ("people: passwords, sign-in, authentication codes, roles", self.people_step, self.offers.people),
            ("a webhook secret rotated with a grace period", self.rotation_step, True),
            ("the server key rotated and the old one retired", self.server_key_step, self.offers.server_key),
            ("the dispatcher stopped: messages left waiting and scheduled", self.end_step, True),
        ]
        for title, step, offered in steps:
            if offered:
                say(f"[{self.release_name}] {title}")
                step()
                self.steps_done.append(title)
        return self.answers(), self.manifest()

    # Processes -----------------------------------------------------------------------------------

    def start(self) -> None:
        self.release("db", "migrate")
        self.emulator = Emulator(self.release, self.sims, self.workdir / "phones.jsonl", register=True)
        self.offset = self.release("clock", "show")["offsetSeconds"]
        self.dispatcher = self.release.start("dispatch", "worker", "dispatch")
        self.webhooks = self.release.start("webhooks", "worker", "webhooks")
        self.projections = self.release.start("projections", "worker", "projections")
        self.serve = self.release.start("serve", "serve", "--bind", self.api_url.removeprefix("http://"),
                                        "--workers", "1")
        until(self._answers_health, "sandesh serve to answer", processes=[self.serve])
        until(lambda: all(self.sim(m["name"])["state"] == "active" for m in self.emulator.modems),
              "every emulated SIM to be active", processes=self.running)

    @property
    def running(self) -> list[Process]:
        """The processes a wait watches: one that dies unasked stops the run at once."""
        return [self.dispatcher, self.webhooks, self.projections, self.serve, self.emulator.process]

    def _answers_health(self) -> bool:
        try:
            return self.http.get(self.api_url + "/v1/health", timeout=2).status_code == 200
        except requests.ConnectionError:
            return False

    # The clock -----------------------------------------------------------------------------------

    def now(self) -> float:
        """The service clock: wall time plus the test clock's offset, which only this run moves."""
        return time.time() + self.offset

    def advance(self, seconds: float) -> None:
        self.offset = self.release("clock", "advance", str(seconds))["offsetSeconds"]

    # Customers -----------------------------------------------------------------------------------

    def post(self, client: str, path: str, body: Any = None, *, key: str | None = None,
             expect: int | tuple[int, ...] = (200, 202)) -> requests.Response:
        """A customer's POST with the client's current key; CorpusError unless the status is expected.
        A send that found no route (the dispatcher reports each SIM every 10 s, and a moved clock
        ages the last report) is asked again, as a customer would after `Retry-After`."""
        headers = {"x-api-key": self.clients[client]["key"], "content-type": "application/json"}
        if key:
            headers["Idempotency-Key"] = key
        expected = (expect,) if isinstance(expect, int) else expect
        deadline = time.monotonic() + 30
        while True:
            answer = self.http.post(self.api_url + path, headers=headers, timeout=30,
                                    data=None if body is None else json.dumps(body, ensure_ascii=False).encode())
            retry = answer.status_code == 503 and 503 not in expected and answer.json().get("code") == "unavailable"
            if not retry or time.monotonic() > deadline:
                break
            time.sleep(1)
        if answer.status_code not in expected:
            raise CorpusError(f"POST {path} {body} answered {answer.status_code}, not {expected}: {answer.text}")
        return answer

    def get(self, client: str, path: str) -> dict[str, Any]:
        answer = self.http.get(self.api_url + path, headers={"x-api-key": self.clients[client]["key"]}, timeout=30)
        if answer.status_code != 200:
            raise CorpusError(f"GET {path} answered {answer.status_code}: {answer.text}")
        return answer.json()

    def send(self, client: str, body: dict[str, Any], *, key: str | None = None) -> str:
        accepted = self.post(client, "/v1/sms/send", body, key=key, expect=202).json()
        self.messages[accepted["messageId"]] = client
        return accepted["messageId"]

    def status(self, message_id: str) -> str:
        return self.get(self.messages[message_id], f"/v1/sms/messages/{message_id}")["status"]

    def settle(self, message_ids: list[str], statuses: set[str], timeout: float = 45) -> None:
        """Wait until each message is in one of `statuses`."""
        def settled() -> bool:
            return all(self.status(m) in statuses for m in message_ids)

        try:
            until(settled, f"{message_ids} to be {statuses}", timeout=timeout, processes=self.running)
        except CorpusError as error:
            raise CorpusError(f"{error}; they are {[self.status(m) for m in message_ids]}") from None

    def history(self, message_id: str) -> dict[str, Any]:
        return self.release("message", "history", message_id)

    def events_of(self, message_id: str) -> list[str]:
        return [e["type"] for e in self.history(message_id)["events"]]

    def sim(self, name: str) -> dict[str, Any]:
        return next(s for s in self.release("sim", "list")["sims"] if s["name"] == name)

    def sim_state(self, name: str, state: str, what: str, timeout: float = 60) -> None:
        until(lambda: self.sim(name)["state"] == state, f"SIM {name} {what}", timeout=timeout, every=0.5,
              processes=self.running)

    def phone(self, number: str, count: int = 1) -> dict[str, Any]:
        """The `count`-th message the phone of `number` received (waits for it)."""
        def got() -> list[dict[str, Any]]:
            found = [m for m in self.emulator.received() if m["to"] == number]
            return found if len(found) >= count else []

        return until(got, f"the phone {number} to receive message {count}", processes=self.running)[count - 1]

    def code_for(self, number: str, count: int = 1) -> str:
        return re.search(r"\b(\d{6})\b", self.phone(number, count)["text"]).group(1)

    def reply(self, number: str, text: str, sim: str | None = None) -> None:
        """A reply from `number`, to the SIM that last sent to it unless `sim` says another."""
        sim = sim or [m for m in self.emulator.received() if m["to"] == number][-1]["sim"]
        self.emulator.control(sim, inbound={"from": "+" + number, "text": text})

    def replies(self, *args: str) -> list[dict[str, Any]]:
        return self.release("inbound", "list", "--limit", "1000", *args)["replies"]

    def reply_from(self, number: str, attributed: bool = True, count: int = 1) -> None:
        def arrived() -> bool:
            found = [r for r in self.replies() if r["from"].lstrip("+") == number]
            return len(found) >= count and (found[0]["clientId"] is not None) == attributed

        until(arrived, f"a reply from {number}", processes=self.running, every=0.5)

    def opted_out(self, workspace: str) -> set[str]:
        return {o["number"] for o in self.release("optout", "list", self.workspaces[workspace])["optOuts"]}

    def deliveries(self, client: str) -> list[dict[str, Any]]:
        return self.release("webhooks", "list", "--client", self.clients[client]["id"], "--limit", "1000")["deliveries"]

    # Steps ---------------------------------------------------------------------------------------

    def workspaces_step(self) -> None:
        r = self.release
        main = r("workspace", "create", "--name", "Corpus Foods", "--types", "transactional,otp", "--rate", "otp=50",
                 "--rate", "transactional=80")["id"]
        r("workspace", "activate", main)
        r("workspace", "credit", main, "5000000", "--note", "corpus: opening balance")
        r("workspace", "set-rates", main, "promotional=40")
        r("workspace", "set-types", main, "transactional,otp,promotional")
        if self.offers.promo_hours:  # the run may fall at any hour of a Nepal day: promotions must go at once
            r("workspace", "set-promo-hours", main, "off")
        paused = r("workspace", "create", "--name", "Corpus Paused")["id"]
        r("workspace", "activate", paused)
        r("workspace", "credit", paused, "200000")
        if self.offers.promo_hours:
            r("workspace", "set-promo-hours", paused, "09:00-19:00")
        erased = r("workspace", "create", "--name", "Corpus Erased", "--types", "transactional")["id"]
        r("workspace", "activate", erased)
        r("workspace", "credit", erased, "200000", "--note", "corpus: to be erased")
        pending = r("workspace", "create", "--name", "Corpus Pending", "--types", "otp")["id"]
        self.workspaces.update(main=main, paused=paused, erased=erased, pending=pending)

    def client(self, name: str, workspace: str, brand: str, path: str | None, *args: str) -> dict[str, Any]:
        url = self.receiver.url(path) if path else None
        created = self.release("client", "create", "--workspace", self.workspaces[workspace], "--brand", brand,
                               *(["--webhook-url", url] if url else []), *args)
        self.clients[name] = {"id": created["id"], "workspace": self.workspaces[workspace], "key": created["key"],
                              "webhookSecret": created["webhookSecret"], "webhookUrl": url, "webhookPath": path}
        return self.clients[name]

    def clients_step(self) -> None:
        r = self.release
        foods = self.client("foods", "main", "Corpus Foods", "/hooks/foods", "--rate-limit", "1000")
        outage = self.client("outage", "main", "Corpus Outage", "/hooks/outage", "--rate-limit", "1000")
        self.client("paused", "paused", "Corpus Paused", "/hooks/paused")
        self.client("erased", "erased", "Corpus Erased", "/hooks/erased")
        self.client("quiet", "main", "Corpus Quiet", None)
        foods["firstKey"] = foods["key"]
        foods["key"] = r("client", "rotate-key", foods["id"])["key"]
        r("client", "update", foods["id"], "--brand", "Corpus Foods Ltd")
        r("client", "disable", foods["id"])
        self.post("foods", "/v1/sms/send", {"to": self.numbers.on("emu-1"), "text": "refused"}, expect=403)
        r("client", "enable", foods["id"])
        r("client", "disable", self.clients["quiet"]["id"])
        rotated = r("client", "rotate-secret", outage["id"], "--grace-hours", "0")
        outage.update(previousWebhookSecret=outage["webhookSecret"], webhookSecret=rotated["webhookSecret"],
                      previousSecretValidUntil=rotated.get("previousSecretValidUntil"))

    def sends_step(self) -> None:
        n = self.numbers
        order = {"to": n.on("emu-1"), "text": "Your order 1042 has shipped."}
        tx = self.send("foods", order, key="corpus-order-1042")
        replayed = self.post("foods", "/v1/sms/send", order, key="corpus-order-1042", expect=202)
        if replayed.headers.get("idempotent-replayed") != "true" or replayed.json()["messageId"] != tx:
            raise CorpusError(f"the Idempotency-Key was not replayed: {replayed.headers} {replayed.text}")
        promo = self.send("foods", {"to": n.on("emu-2"), "messageType": "promotional",
                                    "text": "Dashain offer: 20% off everything at Corpus Foods this week."})
        long = self.send("foods", {"to": n.on("emu-3"), "text": LONG_TEXT})
        nepali = self.send("foods", {"to": n.on("emu-1"), "text": "तपाईंको अर्डर १०४२ पठाइयो। धन्यवाद!"})
        valid = self.send("foods", {"to": n.on("emu-2"), "text": "Your table is held for an hour.", "validFor": 3600})
        otp_type = self.send("foods", {"to": n.on("emu-3"), "text": "481516 is your Corpus Foods code.",
                                       "messageType": "otp"})
        self.settle([tx, promo, long, nepali, valid, otp_type], {"delivered"})
        self.emulator.control("emu-3", reports=[[0x20, 0x00]])  # "still trying", then delivered
        trying = self.send("foods", {"to": n.on("emu-3"), "text": "Your parcel is on its way."})
        self.emulator.control("emu-1", reports=[0x45])  # a permanent failure
        undelivered = self.send("foods", {"to": n.on("emu-1"), "text": "This one never reaches the phone."})
        self.settle([trying], {"delivered"})
        self.settle([undelivered], {"undelivered"})
        self.story.update(idempotent=tx, promotional=promo, multipart=long, ucs2=nepali, validFor=valid,
                          otpType=otp_type, stillTrying=trying, undelivered=undelivered)

    def otps_step(self) -> None:
        def otp(number: str, purpose: str) -> str:
            sent = self.post("foods", "/v1/sms/otp/send", {"to": number, "purpose": purpose, "ip": REMOTE_IP},
                             expect=202)
            self.messages[sent.json()["messageId"]] = "foods"
            return sent.json()["messageId"]

        def verify(number: str, purpose: str, code: str) -> dict[str, Any]:
            return self.post("foods", "/v1/sms/otp/verify", {"to": number, "purpose": purpose, "code": code},
                             expect=200).json()

        right = self.numbers.on("emu-1")
        verified_id = otp(right, "login")
        if not verify(right, "login", self.code_for(right))["verified"]:
            raise CorpusError("the right OTP code did not verify")
        locked = self.numbers.on("emu-2")
        locked_id = otp(locked, "login")
        code = self.code_for(locked)
        wrong = f"{(int(code) + 1) % 10**6:06d}"
        answers = [verify(locked, "login", wrong) for _ in range(5)]
        after = verify(locked, "login", code)
        if any(a["verified"] for a in answers) or after["verified"] or after["reason"] != "too_many_attempts":
            raise CorpusError(f"five wrong codes did not lock the OTP: {answers} {after}")
        expiring = self.numbers.on("emu-3")
        expiring_id = otp(expiring, "signup")
        self.expiring = (expiring, self.code_for(expiring))
        self.settle([verified_id, locked_id, expiring_id], {"delivered"})
        self.story.update(otpVerified=verified_id, otpLocked=locked_id, otpLockedTo=locked, otpExpired=expiring_id)

    def batch_step(self) -> None:
        body = {"messages": [
            {"to": self.numbers.on("emu-2"), "text": "Batch offer: free delivery today.", "messageType": "promotional"},
            {"to": "9812345678", "text": "this number is wrong"},
            {"to": self.numbers.on("emu-1"), "text": "Your order 1043 arrives soon.", "sendAt": iso(self.now() + 300)},
        ]}
        first = self.post("foods", "/v1/sms/send/batch", body, key="corpus-batch-1", expect=202)
        again = self.post("foods", "/v1/sms/send/batch", body, key="corpus-batch-1", expect=202)
        if again.headers.get("idempotent-replayed") != "true" or again.json() != first.json():
            raise CorpusError(f"the batch was not replayed: {again.headers} {again.text}")
        results = first.json()["results"]
        if "messageId" in results[1] or [r.get("status") for r in results] != ["queued", None, "scheduled"]:
            raise CorpusError(f"the batch was not answered item by item: {results}")
        for result in results:
            if "messageId" in result:
                self.messages[result["messageId"]] = "foods"
        self.batch = [results[0]["messageId"], results[2]["messageId"]]
        self.settle(self.batch[:1], {"delivered"})
        self.story.update(batch=self.batch)

    def scheduled_step(self) -> None:
        later = iso(self.now() + 600)
        released = self.send("foods", {"to": self.numbers.on("emu-2"), "text": "Reminder: table at 8 pm.",
                                       "sendAt": later})
        canceled = self.send("foods", {"to": self.numbers.on("emu-3"), "text": "This reminder is taken back.",
                                       "sendAt": later})
        answer = self.post("foods", f"/v1/sms/messages/{canceled}/cancel", expect=200).json()
        if answer["status"] != "canceled":
            raise CorpusError(f"cancel answered {answer}")
        self.settle([released, self.batch[1]], {"scheduled"})
        self.advance(601)
        self.settle([released, self.batch[1]], {"delivered"})
        number, code = self.expiring
        expired = self.post("foods", "/v1/sms/otp/verify", {"to": number, "purpose": "signup", "code": code},
                            expect=200).json()
        if expired["verified"]:
            raise CorpusError(f"an OTP verified 10 minutes after it was sent: {expired}")
        self.story.update(released=released, canceled=canceled)

    def refusals_step(self) -> None:
        self.emulator.control("emu-1", fail_next=["AT+CMGS", "+CMS ERROR: 28"])  # unidentified subscriber
        rejected = self.send("foods", {"to": self.numbers.on("emu-1"), "text": "To a number nobody has."})
        self.settle([rejected], {"rejected"})
        self.emulator.control("emu-2", fail_next=["AT+CMGS", "+CMS ERROR: 42"])  # congestion: sent elsewhere
        requeued = self.send("foods", {"to": self.numbers.on("emu-2"), "text": "Sent on by another SIM."})
        self.settle([requeued], {"delivered"})
        self.emulator.control("emu-3", fail_next=["AT+CMGS", "+CMS ERROR: 8"])  # barred: the SIM's fault
        moved = self.send("foods", {"to": self.numbers.on("emu-3"), "text": "Sent after the SIM was barred."})
        self.settle([moved], {"delivered"})
        for message in (requeued, moved):
            if "requeued" not in self.events_of(message):
                raise CorpusError(f"{message} was not requeued: {self.history(message)}")
        self.sim_state("emu-3", "quarantined", "quarantined after CMS 8")
        self.release("sim", "release", "emu-3")
        self.sim_state("emu-3", "active", "back after its release")
        self.story.update(rejected=rejected, requeued=requeued, quarantinedOn=moved)

    def replies_step(self) -> None:
        first = self.phone_of(self.story["idempotent"])
        self.reply(first, "Thank you, received.")
        self.reply_from(first)
        promo = self.phone_of(self.story["promotional"])
        self.reply(promo, "Please tell me more about the Dashain offer: which shops take part, until which day it "
                          "runs, and whether it applies to orders placed online as well as in the shop? Thanks.")
        self.reply_from(promo)
        self.reply(promo, "STOP")
        until(lambda: promo in self.opted_out("main"), f"{promo} opted out by its STOP", processes=self.running)
        self.post("foods", "/v1/sms/send", {"to": promo, "text": "Another offer", "messageType": "promotional"},
                  expect=403)
        self.reply(promo, "start")
        until(lambda: promo not in self.opted_out("main"), f"{promo} back in by its START", processes=self.running)
        batch = self.phone_of(self.batch[0])
        self.reply(batch, "UNSUBSCRIBE")
        until(lambda: batch in self.opted_out("main"), f"{batch} opted out by its reply", processes=self.running)
        stranger = f"977{PREFIX['emu-3']}9999999"
        self.reply(stranger, "Who is this?", sim="emu-3")
        self.reply_from(stranger, attributed=False)
        self.story.update(replied=[first, promo, batch], unattributedFrom=stranger)

    def phone_of(self, message_id: str) -> str:
        return self.get(self.messages[message_id], f"/v1/sms/messages/{message_id}")["to"]

    def optouts_step(self) -> None:
        main = self.workspaces["main"]
        kept = self.numbers.on("emu-1")
        self.release("optout", "add", main, kept)
        back = self.numbers.on("emu-1")
        self.release("optout", "add", main, "+" + back)
        self.release("optout", "remove", main, back)
        refused = self.post("foods", "/v1/sms/send", {"to": kept, "text": "offer", "messageType": "promotional"},
                            expect=403)
        if refused.json()["code"] != "recipient_opted_out":
            raise CorpusError(f"a promotion to an opted-out number answered {refused.text}")

    def switch_step(self) -> None:
        self.release("sms", "disable", "--reason", "corpus: maintenance window")
        refused = self.post("foods", "/v1/sms/send", {"to": self.numbers.on("emu-1"), "text": "not now"}, expect=503)
        if refused.json()["code"] != "sms_disabled":
            raise CorpusError(f"a send with the switch off answered {refused.text}")
        self.release("sms", "enable")

    def sims_step(self) -> None:
        r = self.release
        r("sim", "disable", "emu-3")
        self.sim_state("emu-3", "disabled", "disabled")
        r("sim", "enable", "emu-3")
        self.sim_state("emu-3", "active", "enabled again")
        # A SIM that is never driven: added, taken out at once, moved and changed while out.
        r("sim", "add", "--name", "spare-1", "--port", "loop://")
        r("sim", "disable", "spare-1")
        r("sim", "update", "spare-1", "--port", "loop://?corpus=moved")
        r("sim", "update", "spare-1", "--baud", "9600", "--host", "modems-2")
        # Off the network and back: a quarantine that lifts itself (at the next heartbeats, 10 s apart).
        self.emulator.control("emu-3", registration=0)
        self.sim_state("emu-3", "quarantined", "quarantined while off the network", timeout=60)
        self.emulator.control("emu-3", registration=1)
        self.sim_state("emu-3", "active", "recovered on the network", timeout=60)

    def paused_step(self) -> None:
        sent = self.send("paused", {"to": self.numbers.on("emu-1"), "text": "Corpus Paused says hello."})
        self.settle([sent], {"delivered"})
        paused = self.workspaces["paused"]
        self.release("workspace", "suspend", paused)
        refused = self.post("paused", "/v1/sms/send", {"to": self.numbers.on("emu-1"), "text": "no"}, expect=403)
        if refused.json()["code"] != "workspace_suspended":
            raise CorpusError(f"a send of a suspended workspace answered {refused.text}")
        self.release("workspace", "reinstate", paused)
        self.release("workspace", "suspend", paused)

    def erase_step(self) -> None:
        sent = self.send("erased", {"to": self.numbers.on("emu-2"), "text": "A text that will be erased."})
        self.settle([sent], {"delivered"})
        number = self.phone_of(sent)
        self.reply(number, "Erase this reply too.")
        self.reply_from(number)
        waiting = self.send("erased", {"to": self.numbers.on("emu-3"), "text": "Scheduled, then erased.",
                                       "sendAt": iso(self.now() + 3600)})
        shredded = self.release("workspace", "shred-texts", self.workspaces["erased"])
        if not shredded.get("keysDestroyed"):
            raise CorpusError(f"shred-texts destroyed no key: {shredded}")
        self.story.update(erased=sent, erasedWaiting=waiting)

    def outage_step(self) -> None:
        """The Outage client's receiver answers 500 to every attempt: its deliveries die after the
        8th, the clock moved past each retry delay.  Then one is redelivered by its id."""
        path = "/hooks/outage"
        self.receiver.answer(path, 500)
        self.outage_since = iso(self.now() - 1)
        sent = self.send("outage", {"to": self.numbers.on("emu-1"), "text": "Nobody hears the webhooks of this."})
        self.settle([sent], {"delivered"})
        self.wait_attempts("outage", [sent], 1)
        for attempt, delay in enumerate(WEBHOOK_DELAYS, start=2):
            self.advance(delay + 1)
            self.wait_attempts("outage", [sent], attempt)
        dead = [d for d in self.deliveries("outage") if d["subject"] == sent]
        if {d["state"] for d in dead} != {"dead"}:
            raise CorpusError(f"the outage's deliveries are not dead: {dead}")
        self.receiver.answer(path, 200)
        again = self.release("webhooks", "redeliver", dead[0]["id"])
        until(lambda: any(d["state"] == "delivered" for d in self.deliveries("outage") if d["id"] == again["id"]),
              "the redelivered webhook to be delivered", processes=self.running)
        self.story.update(deadWebhooksOf=sent, redelivered=dead[0]["id"], redelivery=again["id"])

    def wait_attempts(self, client: str, subjects: list[str], attempts: int) -> None:
        def reached() -> bool:
            found = [d for d in self.deliveries(client) if d["subject"] in subjects and not d["redeliveryOf"]]
            return len(found) >= 2 * len(subjects) and all(d["attempts"] >= attempts for d in found)

        until(reached, f"{client}'s webhooks of {subjects} at attempt {attempts}", every=0.5, processes=self.running)

    def outage_redelivery_step(self) -> None:
        """Another message's deliveries wait for their second attempt, then one command redelivers
        the outage: the waiting ones are hurried, the dead one not redelivered yet is sent anew."""
        path = "/hooks/outage"
        self.receiver.answer(path, 500)
        sent = self.send("outage", {"to": self.numbers.on("emu-2"), "text": "These webhooks wait for a retry."})
        self.settle([sent], {"delivered"})
        self.wait_attempts("outage", [sent], 1)
        self.receiver.answer(path, 200)
        answer = self.release("webhooks", "redeliver", "--client", self.clients["outage"]["id"],
                              "--since", self.outage_since)
        if answer["redelivered"] < 3:
            raise CorpusError(f"the outage's redelivery took {answer}")

        def settled() -> bool:
            listed = self.deliveries("outage")
            new = [d for d in listed if d["redeliveryOf"] and d["id"] != self.story["redelivery"]]
            mine = [d for d in listed if d["subject"] == sent]
            return bool(new) and all(d["state"] == "delivered" for d in new + mine)

        until(settled, "the outage's redelivery to be delivered", every=0.5, processes=self.running)
        self.story.update(hurriedWebhooksOf=sent)

    def unknown_step(self) -> None:
        """A part whose +CMGS never came when its dispatcher was killed: its outcome is unknown and
        it is never sent again.  A message with a minute's validity waits while no dispatcher runs
        and ends failed.  One sent message never gets a status report."""
        self.emulator.control("emu-1", reports=[None])
        silent = self.send("foods", {"to": self.numbers.on("emu-1"), "text": "No report will come for this."})
        self.settle([silent], {"sent"})
        self.emulator.control("emu-2", reports=[None])
        self.emulator.control("emu-2", hang_after_pdu=True)
        hung = self.send("foods", {"to": self.numbers.on("emu-2"), "text": "The modem never answers for this."})
        self.phone(self.phone_of(hung))
        self.settle([hung], {"submitted"})
        self.dispatcher.kill()
        expiring = self.send("foods", {"to": self.numbers.on("emu-3"), "text": "Worth a minute only.",
                                       "validFor": 60})
        self.advance(120)
        self.dispatcher = self.release.start("dispatch-2", "worker", "dispatch")
        until(lambda: "outcome_unknown" in self.events_of(hung), f"{hung}'s outcome unknown", every=0.5,
              processes=self.running)
        self.settle([expiring], {"failed"})
        self.story.update(reportUnknown=silent, outcomeUnknown=hung, expired=expiring)

    def day_later_step(self) -> None:
        self.advance(24 * 3600 + 120)
        silent, hung, erased = self.story["reportUnknown"], self.story["outcomeUnknown"], self.story["erasedWaiting"]
        until(lambda: "report_unknown" in self.events_of(silent), f"{silent}'s report given up", every=1,
              processes=self.running)
        self.settle([hung, erased], {"failed"})

    def sim_plan_step(self) -> None:
        r = self.release
        r("sim", "update", "emu-1", "--pin", "1234")
        r("sim", "update", "emu-1", "--daily-cap", "500", "--monthly-cap", "10000", "--pace", "25")
        self.emulator.control("emu-2", credit=5.0)  # NPR 5, below the default minimum of NPR 10
        r("sim", "update", "emu-2", "--balance-ussd", "*400#", "--balance-every", "40")
        self.sim_state("emu-2", "quarantined", "quarantined for credit")
        self.emulator.control("emu-2", credit=500.0)
        self.advance(15 * 60 + 5)  # asked again every 15 minutes while quarantined for credit
        self.sim_state("emu-2", "active", "back with credit")
        sent = self.send("foods", {"to": self.numbers.on("emu-1"), "text": "Sent by a SIM with a plan."})
        self.settle([sent], {"delivered"})

    def people_step(self) -> None:
        """An owner sets a password through the printed link, signs in, sets up an authenticator
        app and makes the workspace's owners use one; another person is given a role, removed,
        added again, sent a new link, disabled and enabled; a viewer is left invited (their link
        unused); the owner signs in again with a code; an operator sets up an app at sign-in."""
        from .corpus_dashboard import Browser

        r, main = self.release, self.workspaces["main"]
        owner = r("user", "add", "--email", "owner@corpus.example", "--name", "Corpus Owner", "--workspace", main,
                  "--role", "owner")
        browser = Browser(self.api_url, self.now)
        browser.set_password(owner["setPasswordLink"], PASSWORD)
        browser.sign_in("owner@corpus.example", PASSWORD)
        secret = browser.enroll(PASSWORD)
        browser.require_codes(main)
        dev = r("user", "add", "--email", "dev@corpus.example", "--name", "Corpus Developer", "--workspace", main,
                "--role", "developer")
        browser.person_action(main, dev["id"], "role", role="viewer")
        browser.person_action(main, dev["id"], "remove")
        r("user", "add", "--email", "dev@corpus.example", "--name", "Corpus Developer", "--workspace", main,
          "--role", "developer")
        r("user", "reset", "dev@corpus.example")
        r("user", "disable", "dev@corpus.example")
        r("user", "enable", "dev@corpus.example")
        viewer = r("user", "add", "--email", "viewer@corpus.example", "--name", "Corpus Viewer", "--workspace", main,
                   "--role", "viewer")
        browser.sign_out()
        self.advance(31)  # a code is never taken twice: the next one is of a later 30-second step
        browser = Browser(self.api_url, self.now)
        browser.sign_in("owner@corpus.example", PASSWORD, totp_secret=secret)
        ops = r("user", "add", "--email", "ops@corpus.example", "--name", "Corpus Ops", "--operator")
        operator = Browser(self.api_url, self.now)
        operator.set_password(ops["setPasswordLink"], PASSWORD)
        ops_secret = operator.sign_in("ops@corpus.example", PASSWORD, enroll=True)
        self.people = [
            {"email": "owner@corpus.example", "role": "owner", "workspace": main, "password": PASSWORD,
             "totpSecret": secret},
            {"email": "dev@corpus.example", "role": "developer", "workspace": main, "password": None,
             "totpSecret": None},
            {"email": "viewer@corpus.example", "role": "viewer", "workspace": main, "password": None,
             "totpSecret": None, "setPasswordLink": viewer["setPasswordLink"]},
            {"email": "ops@corpus.example", "role": "operator", "workspace": None, "password": PASSWORD,
             "totpSecret": ops_secret},
        ]

    def rotation_step(self) -> None:
        """The Foods client's webhook secret rotated late, with the longest grace period: the log
        ends while the previous secret still signs beside the new one."""
        from sandesh.domain.signature import verify_signature

        foods = self.clients["foods"]
        rotated = self.release("client", "rotate-secret", foods["id"], "--grace-hours", "168")
        foods.update(previousWebhookSecret=foods["webhookSecret"], webhookSecret=rotated["webhookSecret"],
                     previousSecretValidUntil=rotated["previousSecretValidUntil"])
        sent = self.send("foods", {"to": self.numbers.on("emu-1"), "text": "Signed with both secrets."})
        self.settle([sent], {"delivered"})

        def hooks() -> list[dict[str, Any]]:
            return [h for h in self.receiver.at("/hooks/foods") if json.loads(h["body"]).get("id") == sent]

        for hook in until(lambda: len(hooks()) >= 2 and hooks(), f"the webhooks of {sent}", processes=self.running):
            for secret in (foods["webhookSecret"], foods["previousWebhookSecret"]):
                verify_signature(secret, hook["headers"]["x-service-signature"], hook["body"], now=self.now())
        self.story.update(signedTwice=sent)

    def server_key_step(self) -> None:
        """The server key replaced as docs/operations.md "Rotating the key" says for that release:
        every process restarted with the new key and the old one to read with, `key rotate` (which
        re-encrypts what the old key sealed), `key retire --now`, and every process restarted with
        the new key alone; a send then goes out under it."""
        r, old = self.release, self.release.env["SANDESH_SECRET_KEY"]
        old_id = r("key", "status")["writes"]
        self.restart({"SANDESH_SECRET_KEY": NEW_SECRET_KEY, "SANDESH_PREVIOUS_KEYS": old})
        rotated = until(self._rotated, "every process to hold the new key", timeout=120, every=2,
                        processes=self.running)
        if rotated["previous"] != old_id:  # (0.3.0 also resealed the log: `resealed`)
            raise CorpusError(f"key rotate did not rotate from {old_id}: {rotated}")
        r("key", "retire", old_id, "--now")
        self.restart({"SANDESH_SECRET_KEY": NEW_SECRET_KEY, "SANDESH_PREVIOUS_KEYS": None})
        sent = self.send("foods", {"to": self.numbers.on("emu-2"), "text": "Written under the new key."})
        self.settle([sent], {"delivered"})
        self.retired_keys.append(old)
        self.story.update(keyRotated={"previous": old_id, "current": rotated["current"], "after": sent})

    def _rotated(self) -> dict[str, Any] | None:
        """`key rotate`'s answer, or None while it refuses because a process has not reported the new key yet."""
        done = self.release.run("key", "rotate")
        if done.returncode == 0:
            return json.loads(done.stdout)
        if "hold" not in done.stderr:
            raise CorpusError(f"sandesh key rotate exited {done.returncode}:\n{done.stderr}")
        return None

    def restart(self, settings: dict[str, str | None]) -> None:
        """The API and the workers stopped and started again, one at a time, with `settings` changed
        (None removes one) for them and for every later command."""
        for name, value in settings.items():
            if value is None:
                self.release.env.pop(name, None)
            else:
                self.release.env[name] = value
        self.restarts += 1
        for attribute, args in (("projections", ("worker", "projections")), ("webhooks", ("worker", "webhooks")),
                                ("dispatcher", ("worker", "dispatch")),
                                ("serve", ("serve", "--bind", self.api_url.removeprefix("http://"), "--workers", "1"))):
            getattr(self, attribute).stop()
            setattr(self, attribute, self.release.start(f"{args[1] if args[0] == 'worker' else 'serve'}-r{self.restarts}",
                                                        *args))
        until(self._answers_health, "sandesh serve to answer", processes=[self.serve])
        until(lambda: all(self.sim(m["name"])["state"] == "active" for m in self.emulator.modems),
              "every emulated SIM to be active", processes=self.running)

    def end_step(self) -> None:
        """The log ends with work left over for the next release: the Outage client's webhooks of
        one message waiting for a retry (its receiver answers 500), then, the dispatcher stopped,
        three messages accepted (the route is still fresh) and waiting, one of them with an
        Idempotency-Key, and one scheduled two hours ahead.  The other processes finish what
        they follow, and stop."""
        self.receiver.answer("/hooks/outage", 500)
        retried = self.send("outage", {"to": self.numbers.on("emu-1"), "text": "Its webhooks wait for a retry."})
        self.settle([retried], {"delivered"})
        self.wait_attempts("outage", [retried], 1)
        self.dispatcher.stop()
        receipt = {"to": self.numbers.on("emu-1"), "text": "Waiting for a modem: your receipt 77."}
        accepted = self.post("foods", "/v1/sms/send", receipt, key="corpus-receipt-77", expect=202)
        self.messages[accepted.json()["messageId"]] = "foods"
        waiting = [
            accepted.json()["messageId"],
            self.send("foods", {"to": self.numbers.on("emu-2"), "text": "Waiting: weekend offer, 10% off.",
                                "messageType": "promotional"}),
            self.send("foods", {"to": self.numbers.on("emu-3"), "text": LONG_TEXT}),
        ]
        scheduled = self.send("foods", {"to": self.numbers.on("emu-1"), "text": "Scheduled two hours ahead.",
                                        "sendAt": iso(self.now() + 7200)})
        self.settle(waiting, {"queued"})
        self.settle([scheduled], {"scheduled"})
        self.story.update(waiting=waiting, scheduled=[scheduled], webhooksWaiting=retried,
                          idempotentWaiting={"key": "corpus-receipt-77", "body": receipt, "reply": accepted.text})
        until(self.caught_up, "the projections to catch up with the log", processes=[self.projections])
        until(self.webhooks_settled, "the webhook sender to finish its deliveries", every=0.5,
              processes=[self.webhooks])
        for process in (self.webhooks, self.projections, self.emulator.process):
            if process.stop() != 0:
                raise CorpusError(f"{process.name} did not stop cleanly:\n{process.output()}")

    def caught_up(self) -> bool:
        ready = self.http.get(self.api_url + "/v1/ready", timeout=10).json()
        return all(lag == 0 for lag in ready["checks"]["projectionLag"].values())

    def webhooks_settled(self) -> bool:
        """Every delivery delivered or dead, but those left waiting on purpose."""
        listed = self.release("webhooks", "list", "--limit", "1000")["deliveries"]
        return all(d["state"] in ("delivered", "dead") or d["subject"] == self.story["webhooksWaiting"]
                   for d in listed)

    # What the release answered, and what a test needs to know --------------------------------------

    def answers(self) -> dict[str, Any]:
        r = self.release
        self.clock = r("clock", "show")
        answers: dict[str, Any] = {
            "messages": {m: self.get(c, f"/v1/sms/messages/{m}") for m, c in self.messages.items()},
            "balances": {c["id"]: self.get(name, "/v1/sms/balance") for name, c in self.clients.items()
                         if name != "quiet"},
            "histories": {m: self.history(m) for m in self.messages},
            "sims": r("sim", "list"),
            "webhooks": r("webhooks", "list", "--limit", "1000"),
            "audit": r.lines("audit", "--limit", "1000"),
            "inbound": r("inbound", "list", "--limit", "1000"),
            "optouts": {ws: r("optout", "list", ws) for ws in self.workspaces.values()},
            "workspaces": r("workspace", "list"),
            "clients": r("client", "list"),
        }
        if self.offers.people:
            answers["people"] = r("user", "list")
        self.serve.stop()
        return answers

    def manifest(self) -> dict[str, Any]:
        return {
            "release": self.release_name,
            "commit": self.commit,
            "secretKey": self.release.env["SANDESH_SECRET_KEY"],
            "retiredKeys": self.retired_keys,
            "clock": self.clock,
            "offers": asdict(self.offers),
            "workspaces": self.workspaces,
            "clients": self.clients,
            "people": self.people,
            "messages": self.messages,
            "waiting": self.story["waiting"],
            "scheduled": self.story["scheduled"],
            "story": self.story,
            "emulator": {"sims": self.sims, "names": [m["name"] for m in self.emulator.modems],
                         "iccids": {m["name"]: m["iccid"] for m in self.emulator.modems}},
            "steps": self.steps_done,
        }
