"""The baseline for the send benchmark: a bare Falcon app that parses the same JSON and answers
202, served by gunicorn with the settings `sandesh serve` picks (scripts/serve.options).
Run: python -m sandesh.scripts.bench.bare_app HOST:PORT [--workers N --threads N --worker-connections N]"""
import argparse
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


def main() -> None:
    from sandesh.scripts.serve import Gunicorn, options

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bind", metavar="HOST:PORT")
    parser.add_argument("--workers", type=int)
    parser.add_argument("--threads", type=int)
    parser.add_argument("--worker-connections", type=int)
    args = parser.parse_args()
    settings = options(args.bind, args.workers, args.threads, args.worker_connections, "warning")
    del settings["child_exit"]  # no metrics here
    Gunicorn(settings, lambda: app).run()


if __name__ == "__main__":
    main()
