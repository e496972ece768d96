"""The baseline for the send benchmark: a bare Falcon app that parses the same JSON and answers
202, served by gunicorn with the same settings as `sandesh serve`.
Run: gunicorn -k gthread --workers 2 --threads 8 scripts.bench.bare_app:app"""
import uuid

import falcon
import orjson


class Send:
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = orjson.loads(req.bounded_stream.read())
        if not isinstance(body, dict) or "to" not in body or "text" not in body:
            raise falcon.HTTPBadRequest()
        resp.status = falcon.HTTP_202
        resp.data = orjson.dumps({"messageId": "msg_" + uuid.uuid4().hex, "status": "queued",
                                  "messageType": body.get("messageType", "transactional"), "segments": 1,
                                  "encoding": "GSM-7", "cost": 100})


app = falcon.App()
app.add_route("/v1/sms/send", Send())
