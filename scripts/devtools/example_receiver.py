"""An example webhook receiver: verifies each delivery, ignores repeats, prints the events.

    WEBHOOK_SECRET=whsec_... python scripts/devtools/example_receiver.py --port 8443 --cert receiver.pem

WEBHOOK_SECRET may hold two secrets separated by a comma while you rotate (the new one and the
previous one).  `--cert` is a PEM file with the private key and certificate chain: webhooks
are delivered over HTTPS only.  Each verified event is printed as one JSON line:
`{"verified": true, "delivery": "whd_…", "event": {...}}`.

What it shows (docs/api.md, "Verifying a signature" and "Retries"):
1. Verify the raw body, before parsing it, against `x-service-signature` (answer 400 if it fails).
2. Deduplicate on `x-service-delivery`: retries of one event reuse it.
3. Answer 2xx quickly, within 10 s; do slow work after answering.
4. Events may arrive out of order: compare `at` before overwriting a later status.
"""
from __future__ import annotations

import argparse
import json
import os
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


from sandesh.domain.signature import SignatureError, verify_signature  # (or copy that file)


def make_handler(secrets: list[str], tolerance: int, delay: float = 0.0) -> type[BaseHTTPRequestHandler]:
    seen: set[str] = set()
    latest: dict[str, str] = {}  # message id -> `at` of the newest status applied
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep connections open between deliveries
        disable_nagle_algorithm = True  # the answer's headers and body go out at once

        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            raw = self.rfile.read(int(self.headers.get("content-length") or 0))
            try:
                verify_signature(secrets, self.headers.get("x-service-signature"), raw, tolerance=tolerance)
            except SignatureError as error:
                self._answer(400, str(error))
                return
            delivery = self.headers.get("x-service-delivery", "")
            event = json.loads(raw)
            with lock:
                repeat = delivery in seen
                seen.add(delivery)
                stale = event.get("type") == "message.status" and latest.get(event["id"], "") > event["at"]
                if not repeat and not stale and event.get("type") == "message.status":
                    latest[event["id"]] = event["at"]
            if not repeat:
                print(json.dumps({"verified": True, "delivery": delivery, "stale": stale, "event": event}), flush=True)
            time.sleep(delay)
            self._answer(200, "ok")

        def _answer(self, status: int, text: str) -> None:
            data = text.encode()
            self.send_response(status)
            self.send_header("content-type", "text/plain")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    return Handler


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Verify and print Sandesh webhook deliveries (HTTPS).")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8443)
    parser.add_argument("--cert", required=True, help="PEM file with the private key and certificate chain")
    parser.add_argument("--tolerance", type=int, default=300, help="seconds a signature's t may differ (default 300)")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds to wait before answering (a slow receiver)")
    args = parser.parse_args(argv)
    secrets = [s.strip() for s in os.environ.get("WEBHOOK_SECRET", "").split(",") if s.strip()]
    if not secrets:
        parser.error("set WEBHOOK_SECRET to the client's webhook secret (whsec_...)")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(args.cert)
    server = ThreadingHTTPServer((args.host, args.port), make_handler(secrets, args.tolerance, args.delay))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    print(f"listening on https://{args.host}:{args.port}", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
