"""Hostile uploads beside the API (docs/performance.md, "Uploads beside the API"): the p50 and
p99 of GET /v1/sms/balance alone, then while signed-in senders upload, again and again, a tiny
list without a number column, then lists made to exhaust a reader (each one refused), against
the product as a user runs it (`sandesh serve` and `sandesh worker all`, no flag; two emulated
modems).

Usage: .venv/bin/python -m scripts.bench.upload_pressure [--seconds 20] [--uploaders 4] [--rate 100]

The hostile lists are hostile_lists.py's: a workbook of 20 million empty cells in one row (80 MB
of sheet, 79 KB zipped), one of 12 million (48 MB: under the unzipped limit, so read until its
cells pass theirs), a CSV whose header has 5,000 columns over 2,000 rows of a number alone (52 KB),
and a workbook whose 250,000 cells each name one shared string of 400 characters (100 MB of text
from 24 KB of file).  The balance requests and the uploads come from two processes of their own,
so that neither's client work slows the other's measure.
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
from pathlib import Path

import requests

from sandesh.domain.settings import Settings
from sandesh.scripts.service.bootstrap import bootstrap

from .common import ROOT, funded_workspace, percentile, scratch_database, summary, timed_load
from .hostile_lists import HOSTILE
from .send_bench import SANDESH, children, cmdline, product

URL = f"http://127.0.0.1:{SANDESH}"
CSRF = re.compile(r'name="csrf" value="([^"]+)"')
PASSWORD = "upload pressure 1234"


# The load

def balance_load(key: str, seconds: float, rate: float) -> dict:
    """GET /v1/sms/balance at `rate` a second for `seconds`, each at its time whatever the
    others' answers (8 threads take turns); their latencies."""
    return timed_load(lambda http, _: http.get(f"{URL}/v1/sms/balance", headers={"x-api-key": key},
                                               timeout=30).status_code, seconds, 8, rate)


def signed_in(email: str) -> requests.Session:
    http = requests.Session()
    token = CSRF.search(http.get(f"{URL}/dashboard/sign-in", timeout=30).text).group(1)
    http.post(f"{URL}/dashboard/sign-in", data={"csrf": token, "email": email, "password": PASSWORD}, timeout=60)
    return http


# A list with no number column: refused at once, after the same pages, multipart form and child
# as a hostile list, so that the two phases beside uploads differ by what the lists hold alone.
TINY = {"no number column.csv": lambda: b"name\nRam\n"}


def upload_load(workspace: str, email: str, seconds: float, uploaders: int, lists: str) -> dict:
    """`uploaders` signed-in senders, each posting the lists (HOSTILE, or TINY) in turn to the
    Send page until `seconds` pass; what each list was answered (status, and the sentence)."""
    files = {name: make() for name, make in (HOSTILE if lists == "hostile" else TINY).items()}
    said: Counter[str] = Counter()
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def run(k: int) -> None:
        http = signed_in(email)
        send = f"{URL}/dashboard/w/{workspace}/send"
        for name in itertools.islice(itertools.cycle(files), k, None):
            if time.monotonic() >= stop:
                break
            token = CSRF.search(http.get(send, timeout=60).text).group(1)
            answer = http.post(send, data={"csrf": token, "text": "Hello", "type": "transactional"},
                               files={"file": (name, files[name])}, timeout=120)
            sentence = re.search(r'id="file-error" role="alert">([^<]*)<', answer.text)
            with lock:
                said[f"{name}: {answer.status_code} {sentence.group(1) if sentence else '(no sentence)'}"] += 1

    threads = [threading.Thread(target=run, args=(k,)) for k in range(uploaders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {"answers": dict(said)}


def child(role: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "scripts.bench.upload_pressure", "--role", role, *args], cwd=ROOT,
                            stdout=subprocess.PIPE, text=True)


def peak_rss(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(status.split("VmHWM:")[1].split()[0]) // 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20, help="seconds of each phase (default 20)")
    parser.add_argument("--uploaders", type=int, default=4, help="senders uploading at once (default 4)")
    parser.add_argument("--rate", type=float, default=100, help="balance requests a second (default 100)")
    parser.add_argument("--role", choices=["balance", "uploads"], help=argparse.SUPPRESS)
    parser.add_argument("--key", help=argparse.SUPPRESS)
    parser.add_argument("--workspace", help=argparse.SUPPRESS)
    parser.add_argument("--email", help=argparse.SUPPRESS)
    parser.add_argument("--lists", choices=["hostile", "tiny"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "balance":
        print(json.dumps(balance_load(args.key, args.seconds, args.rate)))
        return
    if args.role == "uploads":
        print(json.dumps(upload_load(args.workspace, args.email, args.seconds, args.uploaders, args.lists)))
        return
    with scratch_database() as env, ExitStack() as running:
        runtime = bootstrap(Settings.from_env(env), pool_size=2)
        workspace = funded_workspace(runtime.sandesh, "Upload pressure", 10**12)
        key = runtime.sandesh.operators.create_client(workspace, "Pressure", None, 10**6, "bench")[1]
        email = "sender@upload-pressure.example"
        _, link = runtime.sandesh.people.add_person(email, "Sender", workspace, "sender", False, "bench")
        runtime.sandesh.people.set_password(link, PASSWORD)
        runtime.close()
        pids = running.enter_context(product(env, running))
        print(f"GET /v1/sms/balance at {args.rate:.0f}/s, {args.seconds:.0f} s a phase; sandesh serve and "
              f"sandesh worker all as installed (no flag); {args.uploaders} senders uploading beside")
        print(f"{'phase':<34} {'requests':>7} {'p50 ms':>8} {'p99 ms':>8}")
        alone = child("balance", "--key", key, "--seconds", str(args.seconds), "--rate", str(args.rate))
        first = json.loads(alone.communicate()[0])
        print(summary("alone", first), flush=True)
        for lists in ("tiny", "hostile"):
            time.sleep(2)
            uploads = child("uploads", "--workspace", workspace, "--email", email, "--seconds",
                            str(args.seconds + 4), "--uploaders", str(args.uploaders), "--lists", lists)
            time.sleep(4)  # the uploads under way
            beside = child("balance", "--key", key, "--seconds", str(args.seconds), "--rate", str(args.rate))
            second = json.loads(beside.communicate()[0])
            answered = json.loads(uploads.communicate()[0])
            print(summary(f"beside {args.uploaders} uploaders, {lists} lists", second), flush=True)
            for answer, count in sorted(answered["answers"].items()):
                print(f"  {count:>5} x {answer}")
            ratio = percentile(second["latencies"], 99) / percentile(first["latencies"], 99)
            print(f"  p99 beside them / p99 alone: {ratio:.2f}")
        for pid in pids["serve"]:
            readers = [c for c in children(pid) if "sandesh.api.uploads.children" in cmdline(c)]
            print(f"API process {pid}: peak RSS {peak_rss(pid)} MiB; its reader: "
                  + (", ".join(f"peak RSS {peak_rss(c)} MiB" for c in readers) or "none"))


if __name__ == "__main__":
    main()
