"""Sign-ins beside the API: the p50 and p99 of POST /v1/sms/otp/send (or, `--measure balance`,
of GET /v1/sms/balance read as fast as 4 clients can) alone, then while 50 concurrent sign-ins
try wrong passwords, against the product as a user runs it (`sandesh serve` and `sandesh worker
all`, no flag; two emulated modems).  docs/performance.md, "Sign-ins beside the API".

Usage: .venv/bin/python -m scripts.bench.signin_pressure [--seconds 20] [--signins 50] [--otp-rate 100]
       [--flood] [--measure otp|balance] [--strangers each|one]

The measured requests and the sign-ins come from two processes of their own, so that neither's
client work slows the other's measure.  Each OTP send goes to a new number from a new calling
address (X-Forwarded-For through a trusted proxy), so no OTP limit answers it.  Each sign-in
try comes with a new email, from a new /64 of one /48 (`--strangers each`, the default) or all
from one address (`--strangers one`, as strangers on one machine behind the proxy look); a try
told to come back waits its Retry-After, unless `--flood`: then it tries again at once.
"""
from __future__ import annotations

import argparse
import itertools
import json
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from contextlib import ExitStack

import requests

from sandesh.domain.settings import Settings
from sandesh.scripts.service.bootstrap import bootstrap

from .common import ROOT, funded_workspace, percentile, scratch_database, summary, timed_load
from .send_bench import SANDESH, product

URL = f"http://127.0.0.1:{SANDESH}"
CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def otp_load(key: str, seconds: float, rate: float, first: int) -> dict:
    """OTP sends at `rate` a second for `seconds`, each at its time whatever the others' answers
    (8 threads take turns); their latencies."""
    def send(http: requests.Session, k: int) -> int:
        n = first + k
        return http.post(f"{URL}/v1/sms/otp/send", timeout=30, json={"to": f"97798{n % 10**8:08d}", "purpose": "login"},
                         headers={"x-api-key": key,
                                  "X-Forwarded-For": f"10.{n >> 16 & 255}.{n >> 8 & 255}.{n & 255}"}).status_code
    return timed_load(send, seconds, 8, rate)


def balance_load(key: str, seconds: float) -> dict:
    """GET /v1/sms/balance by 4 clients, each as soon as its last answered, for `seconds`; their latencies."""
    return timed_load(lambda http, _: http.get(f"{URL}/v1/sms/balance", headers={"x-api-key": key},
                                               timeout=30).status_code, seconds, 4)


def signin_load(seconds: float, signins: int, flood: bool, strangers: str = "each") -> dict:
    """`signins` threads each trying a wrong password, again and again, with a new email each
    time, from a new /64 or (`strangers` "one") one address; the statuses they got.  A try told
    to come back (429, 503) waits its Retry-After first, as the page asks, unless `flood`."""
    tries = itertools.count(1)
    statuses: Counter[int] = Counter()
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def run() -> None:
        http = requests.Session()
        while time.monotonic() < stop:
            n = next(tries)
            address = f"2001:db8:{n >> 16 & 0xffff:x}:{n & 0xffff:x}::1" if strangers == "each" else "2001:db8::7"
            page = http.get(f"{URL}/dashboard/sign-in", timeout=60, headers={"X-Forwarded-For": address})
            token = CSRF.search(page.text)
            if token is None:
                with lock:
                    statuses[page.status_code] += 1
                continue
            answer = http.post(f"{URL}/dashboard/sign-in", timeout=60, allow_redirects=False,
                               headers={"X-Forwarded-For": address},
                               data={"csrf": token.group(1), "email": f"nobody{n}@example.com", "password": "guess"})
            with lock:
                statuses[answer.status_code] += 1
            if answer.status_code in (429, 503) and not flood:
                time.sleep(float(answer.headers.get("Retry-After", 1)))

    threads = [threading.Thread(target=run) for _ in range(signins)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {"statuses": dict(statuses)}


def child(role: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "scripts.bench.signin_pressure", "--role", role, *args], cwd=ROOT,
                            stdout=subprocess.PIPE, text=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20, help="seconds of each phase (default 20)")
    parser.add_argument("--signins", type=int, default=50, help="concurrent sign-ins (default 50)")
    parser.add_argument("--otp-rate", type=float, default=100, help="OTP sends a second (default 100)")
    parser.add_argument("--flood", action="store_true",
                        help="sign-ins told to come back (503) try again at once, not after their Retry-After")
    parser.add_argument("--measure", choices=["otp", "balance"], default="otp",
                        help="what is timed: OTP sends at --otp-rate (default), or balance reads as fast as they go")
    parser.add_argument("--strangers", choices=["each", "one"], default="each",
                        help="each sign-in from a new /64 of one /48 (default), or all from one address")
    parser.add_argument("--role", choices=["otp", "balance", "signins"], help=argparse.SUPPRESS)
    parser.add_argument("--key", help=argparse.SUPPRESS)
    parser.add_argument("--first", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "otp":
        print(json.dumps(otp_load(args.key, args.seconds, args.otp_rate, args.first)))
        return
    if args.role == "balance":
        print(json.dumps(balance_load(args.key, args.seconds)))
        return
    if args.role == "signins":
        print(json.dumps(signin_load(args.seconds, args.signins, args.flood, args.strangers)))
        return
    with scratch_database() as env, ExitStack() as running:
        env["SANDESH_TRUSTED_PROXIES"] = "127.0.0.1"  # the calling address is X-Forwarded-For's, as behind a proxy
        runtime = bootstrap(Settings.from_env(env), pool_size=2)
        workspace = funded_workspace(runtime.sandesh, "Sign-in pressure", 10**12)
        key = runtime.sandesh.operators.create_client(workspace, "Pressure", None, 10**6, "bench")[1]
        runtime.close()
        running.enter_context(product(env, running))
        deadline = time.monotonic() + 30
        while requests.post(f"{URL}/v1/sms/otp/send", headers={"x-api-key": key, "X-Forwarded-For": "10.255.0.1"},
                            json={"to": "9779899999999", "purpose": "warm"}, timeout=10).status_code != 202:
            assert time.monotonic() < deadline, "no route"
            time.sleep(1)
        measured = ["--key", key, "--seconds", str(args.seconds), "--otp-rate", str(args.otp_rate)]
        if args.measure == "otp":
            print(f"POST /v1/sms/otp/send at {args.otp_rate:.0f}/s, {args.seconds:.0f} s a phase; sandesh serve "
                  f"and sandesh worker all as installed (no flag)")
        else:
            print(f"GET /v1/sms/balance by 4 clients as fast as they go, {args.seconds:.0f} s a phase; sandesh "
                  f"serve and sandesh worker all as installed (no flag)")
        print(f"{'phase':<34} {'answers':>7} {'p50 ms':>8} {'p99 ms':>8}")
        alone = child(args.measure, *measured)
        first = json.loads(alone.communicate()[0])
        print(summary("alone", first), flush=True)
        time.sleep(2)
        signins = child("signins", "--seconds", str(args.seconds + 4), "--signins", str(args.signins),
                        "--strangers", args.strangers, *(["--flood"] if args.flood else []))
        time.sleep(2)  # the sign-ins under way
        beside = child(args.measure, *measured, "--first", str(10**7))
        second = json.loads(beside.communicate()[0])
        tried = json.loads(signins.communicate()[0])
        print(summary(f"beside {args.signins} sign-ins{' (flood)' if args.flood else ''}", second), flush=True)
        print(f"sign-in answers: {tried['statuses']}")
        ratio = percentile(second["latencies"], 99) / percentile(first["latencies"], 99)
        print(f"p99 beside sign-ins / p99 alone: {ratio:.2f}")


if __name__ == "__main__":
    main()
