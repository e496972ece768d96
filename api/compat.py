"""Sparrow SMS's v2 API and Aakash SMS's v3 send, answered as they answer, so that software
written for either sends through Sandesh with only its base URL changed
(docs/api.md, "Moving from Sparrow or Aakash"):

- `GET` or `POST /compat/sparrow/v2/sms/`: `token` (a Sandesh API key), `from` (taken, not used:
  the pool's SIMs send), `to` (numbers separated by commas: 98XXXXXXXX, 97798XXXXXXXX or
  +97798XXXXXXXX) and `text`, in the query string, a form or JSON.  The valid numbers are sent
  as one batch, as `POST /v1/sms/send/batch` sends (one append: all charged or none), as
  messages of the client's compat type (transactional unless the operator team set another);
  the invalid ones are counted out.  200 `{"count", "response_code": 200,
  "response"}`; Sparrow's 403 `{"response_code", "response"}` for the refusals it has a code for.
- `GET /compat/sparrow/v2/credit/?token=`: the single-segment messages the balance pays for, and
  the segments the client was charged so far.
- `POST /compat/aakash/sms/v3/send`: `auth_token`, `to` and `text`, form or JSON; the valid
  numbers are sent as above, and both lists answered: `{"error": false, "message", "data":
  {"valid": [...], "invalid": [...]}}`, or `{"error": true, "message", "data": []}`.

The checks of `/v1` hold (the key, the client and workspace, the request rate, the SMS switch,
the route, opt-outs, promotional hours); a refusal Sparrow has no code for is answered as `/v1`
answers it.  The token never reaches a log: the access line names the route, not the query."""
from __future__ import annotations

import re
from typing import Any, Callable, ContextManager

import falcon
import falcon.asgi
import orjson

from sandesh.domain import sending
from sandesh.domain.application import Sandesh
from sandesh.domain.errors import DomainError
from sandesh.domain.operators import of_number
from sandesh.projections import counters, registry

from .auth import Authentication
from .errors import ApiError, from_domain
from .waiting import Blocking, Commit, drive

MAX_RECEIVERS = 1000
# Sparrow's codes (its public API documentation, github.com/sparrowsms/apidocs), by the /v1 code they stand for
MISSING, INVALID_TOKEN, INACTIVE, INVALID_RECEIVER, EMPTY_TEXT, NO_VALID_RECEIVER, NO_CREDITS = (
    1000, 1002, 1003, 1007, 1010, 1011, 1013)
SPARROW_CODES = {"unauthorized": (INVALID_TOKEN, "Invalid Token"),
                 "client_disabled": (INACTIVE, "Account Inactive"),
                 "workspace_pending": (INACTIVE, "Account Inactive"),
                 "workspace_suspended": (INACTIVE, "Account Inactive"),
                 "insufficient_balance": (NO_CREDITS, "Insufficient Credits")}
LOCAL = re.compile(r"9[678][0-9]{8}")


class Refusal(Exception):
    def __init__(self, code: int, text: str):
        self.code, self.text = code, text


def _refused(resp: falcon.asgi.Response, refusal: Refusal) -> None:
    resp.status = falcon.HTTP_403
    resp.content_type = falcon.MEDIA_JSON
    resp.data = orjson.dumps({"response_code": refusal.code, "response": refusal.text})


async def _fields(req: falcon.asgi.Request) -> dict[str, str]:
    """The query string's fields, and over them a form's or a JSON object's."""
    fields = {k: v if isinstance(v, str) else ",".join(v) for k, v in req.params.items()}
    if req.method == "POST" and req.content_length:
        try:
            body = await req.get_media()
        except falcon.HTTPError:
            raise ApiError("invalid_request", "The body is neither a form nor a JSON object.") from None
        if isinstance(body, dict):
            fields.update({k: v if isinstance(v, str) else str(v) for k, v in body.items() if v is not None})
    return fields


async def _caller(authentication: Authentication, token: str | None) -> Any:
    try:
        return await authentication.caller(token or None, "POST")
    except ApiError as error:
        if error.code in SPARROW_CODES:
            raise Refusal(*SPARROW_CODES[error.code]) from None
        raise


def receivers(to: str) -> list[str]:
    """`to` as Sparrow takes it: numbers separated by commas, local or with the country code."""
    numbers = [n.strip() for n in to.split(",") if n.strip()]
    return ["977" + n if LOCAL.fullmatch(n) else n for n in numbers]


async def _batch(sender: Any, caller: Any, requests: list[Any]) -> list[Any]:
    """The requests sent as one batch, as POST /v1/sms/send/batch sends them: each result a
    message or the item's refusal; the refusals Sparrow and Aakash have a code for, raised so."""
    try:
        sent = await drive(sender.sandesh.sending.send_batch_steps(caller, requests), sender.blocking, sender.commit)
    except DomainError as error:
        answer = from_domain(error)
        if answer is not None and answer.code in SPARROW_CODES:
            raise Refusal(*SPARROW_CODES[answer.code]) from None
        raise
    return list(sent.results)


class SparrowSend:
    public = True  # the key comes as `token` (Authentication.caller checks it)

    def __init__(self, sandesh: Sandesh, authentication: Authentication, blocking: Blocking, commit: Commit):
        self.sandesh, self.authentication, self.blocking, self.commit = sandesh, authentication, blocking, commit

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        await self.on_post(req, resp)

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        fields = await _fields(req)
        try:
            for name in ("token", "to", "text"):
                if name not in fields:
                    raise Refusal(MISSING, f"Required field {name!r} is missing")
            caller = await _caller(self.authentication, fields["token"])
            req.context.caller = caller
            count = await self._send(caller, receivers(fields["to"]), fields["text"])
        except Refusal as refusal:
            _refused(resp, refusal)
            return
        resp.content_type = falcon.MEDIA_JSON
        resp.data = orjson.dumps({"count": count, "response_code": 200,
                                  "response": f"{count} messages have been queued for delivery"})

    async def _send(self, caller: Any, numbers: list[str], text: str) -> int:
        if not text.strip():
            raise Refusal(EMPTY_TEXT, "Text cannot be empty")
        if len(numbers) > MAX_RECEIVERS:
            raise ApiError("invalid_request", f"At most {MAX_RECEIVERS:,} receivers a request.")
        now = self.sandesh.clock.now()
        parsed = [sending.parse_send({"to": number, "text": text, "messageType": caller.compat_type}, now)
                  for number in numbers]
        requests = [request for request, problems in parsed if request is not None and not problems]
        if not requests:
            raise Refusal(INVALID_RECEIVER, "Invalid Receiver") if len(numbers) == 1 else \
                Refusal(NO_VALID_RECEIVER, "No valid receiver")
        results = await _batch(self, caller, list(requests))
        count = sum(1 for result in results if not isinstance(result, sending.ItemRefused))
        if not count:
            raise Refusal(NO_VALID_RECEIVER, "No valid receiver")
        return count


class SparrowCredit:
    public = True

    def __init__(self, authentication: Authentication, connection: Callable[[], ContextManager[Any]],
                 blocking: Blocking):
        self.authentication, self.connection, self.blocking = authentication, connection, blocking

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        try:
            caller = await _caller(self.authentication, req.get_param("token"))
        except Refusal as refusal:
            _refused(resp, refusal)
            return
        workspace, used = await self.blocking(self._read, caller)
        rate = max(1, caller.rates[caller.compat_type])  # paisa a segment
        resp.content_type = falcon.MEDIA_JSON
        resp.data = orjson.dumps({"credits_available": workspace["balance"] // rate,
                                  "credits_consumed": used["segments"], "response_code": 200})

    def _read(self, caller: Any) -> tuple[dict[str, Any], dict[str, int]]:
        with self.connection() as conn:
            return registry.workspace_balance(conn, caller.workspace_id), counters.for_client(conn, caller.client_id)


# Aakash's names of Nepal's operators (domain/operators.py's by prefix)
AAKASH_NETWORKS = {"ntc": "ntc", "ncell": "ncell", "smart": "smartcell"}


class AakashSend:
    public = True  # the key comes as `auth_token`

    def __init__(self, sandesh: Sandesh, authentication: Authentication, blocking: Blocking, commit: Commit):
        self.sandesh, self.authentication, self.blocking, self.commit = sandesh, authentication, blocking, commit

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        resp.content_type = falcon.MEDIA_JSON
        try:
            try:
                fields = await _fields(req)
            except ApiError as error:  # a body Aakash would not read either: said in its shape
                raise Refusal(MISSING, error.message) from None
            missing = [name for name in ("auth_token", "to", "text") if not (fields.get(name) or "").strip()]
            if missing:
                raise Refusal(MISSING, f"{missing[0]} is required")
            caller = await _caller(self.authentication, fields["auth_token"])
            req.context.caller = caller
            valid, invalid = await self._send(caller, fields["to"], fields["text"])
        except Refusal as refusal:
            resp.status = falcon.HTTP_403 if refusal.code in (INVALID_TOKEN, INACTIVE) else falcon.HTTP_400
            resp.data = orjson.dumps({"error": True, "message": refusal.text, "data": []})
            return
        resp.data = orjson.dumps({"error": False, "message": f"{len(valid)} messages have been queued for delivery.",
                                  "data": {"valid": valid, "invalid": invalid}})

    async def _send(self, caller: Any, to: str, text: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        given = [n.strip() for n in to.split(",") if n.strip()]
        if len(given) > MAX_RECEIVERS:
            raise Refusal(NO_VALID_RECEIVER, f"At most {MAX_RECEIVERS:,} receivers a request.")
        now = self.sandesh.clock.now()
        parsed = [(number, *sending.parse_send({"to": receivers(number)[0], "text": text,
                                                "messageType": caller.compat_type}, now)) for number in given]
        requests = [(number, request) for number, request, problems in parsed if request is not None and not problems]
        invalid = [{"mobile": number, "text": text, "credit": 0, "network": "N/A", "status": "aborted"}
                   for number, request, problems in parsed if request is None or problems]
        if not requests:
            raise Refusal(NO_VALID_RECEIVER, "No valid receiver")
        results = await _batch(self, caller, [r for _, r in requests])
        valid = []
        for (number, _), result in zip(requests, results):
            if isinstance(result, sending.ItemRefused):
                invalid.append({"mobile": number, "text": text, "credit": 0, "network": "N/A", "status": "aborted"})
            else:
                valid.append({"id": result.id, "mobile": number, "text": text, "credit": result.segments,
                              "network": AAKASH_NETWORKS.get(of_number(result.to) or "", "N/A"), "status": "queued"})
        return valid, invalid
