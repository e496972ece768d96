"""A campaign of 10,000 from the dashboard's Send page, against the product as a user runs it
(`sandesh serve` and `sandesh worker all`, no flag; two emulated modems): the seconds a
10,000-row CSV file takes to preview (upload, read, plan, the page), and the seconds "Send
10,000 messages" takes to be accepted (one append of every message and the charge).  The
baseline, on the same database in the same run: the same 10,000 messages sent through the API
as 10 batches of 1,000 (`POST /v1/sms/send/batch`).
docs/performance.md, "A campaign of 10,000".

Usage: .venv/bin/python -m scripts.bench.campaign [--rows 10000] [--repeat 3] [--history 0]

--history N first appends N messages of other workspaces to the log (10× and 100× show whether
a campaign's cost grows with what it does not touch).
"""
from __future__ import annotations

import argparse
import re
import statistics
import time
from contextlib import ExitStack

import requests

from sandesh.domain.settings import Settings
from sandesh.scripts.service.bootstrap import bootstrap

from .common import bench_clients, funded_workspace, scratch_database
from .send_bench import SANDESH, product

URL = f"http://127.0.0.1:{SANDESH}"
CSRF = re.compile(r'name="csrf" value="([^"]+)"')
TOKEN = re.compile(r'name="token" value="([^"]+)"')
PASSWORD = "a bench password of some length"
TEXT = "नमस्ते {नाम}, कक्षा {class} को अभिभावक भेला आइतबार बिहान १० बजे।"


def history(runtime, messages: int) -> None:
    """`messages` sends of other workspaces, in batches of 1,000."""
    from sandesh.domain.sending import parse_send

    made = bench_clients(runtime.sandesh, "History", 4, 1)
    request, _ = parse_send({"to": "9779812345678", "text": "earlier traffic"})
    for n in range(messages):
        client, workspace = made[n % len(made)]
        runtime.sandesh.sending.send(client, workspace, request, 100)


def csv_file(rows: int, first: int) -> bytes:
    lines = ["नाम,mobile,class"] + [f"अभिभावक {i},98{first + i:08d},{i % 10 + 1}" for i in range(rows)]
    return ("\ufeff" + "\n".join(lines) + "\n").encode()


def signed_in(email: str) -> requests.Session:
    http = requests.Session()
    page = http.get(f"{URL}/dashboard/sign-in", timeout=30)
    answer = http.post(f"{URL}/dashboard/sign-in", timeout=60, allow_redirects=False,
                       data={"csrf": CSRF.search(page.text).group(1), "email": email, "password": PASSWORD})
    assert answer.status_code == 303, f"sign-in answered {answer.status_code}"
    return http


def campaign(http: requests.Session, workspace: str, data: bytes, rows: int) -> tuple[float, float]:
    """The seconds of the preview and of the send."""
    page = http.get(f"{URL}/dashboard/w/{workspace}/send", timeout=30)
    started = time.perf_counter()
    preview = http.post(f"{URL}/dashboard/w/{workspace}/send", timeout=120,
                        data={"csrf": CSRF.search(page.text).group(1), "text": TEXT, "type": "transactional"},
                        files={"file": ("parents.csv", data, "text/csv")})
    previewed = time.perf_counter() - started
    assert preview.status_code == 200 and f"Send {rows:,} messages" in preview.text, preview.text[-2000:]
    started = time.perf_counter()
    sent = http.post(f"{URL}/dashboard/w/{workspace}/send/confirm", timeout=120, allow_redirects=False,
                     data={"csrf": CSRF.search(preview.text).group(1), "token": TOKEN.search(preview.text).group(1)})
    accepted = time.perf_counter() - started
    assert sent.status_code == 303 and "/campaigns/cmp_" in sent.headers["location"], sent.status_code
    shown = http.get(URL + sent.headers["location"], timeout=30).text
    assert f"<dd>{rows:,} (" in shown, "the campaign's page counts every recipient"
    return previewed, accepted


def batches(key: str, rows: int, first: int) -> float:
    """The seconds of the same messages through the API, 1,000 to a batch."""
    http = requests.Session()
    started = time.perf_counter()
    for start in range(0, rows, 1000):
        items = [{"to": f"97798{first + i:08d}", "text": f"नमस्ते अभिभावक {i}, कक्षा {i % 10 + 1} को अभिभावक भेला "
                  f"आइतबार बिहान १० बजे।"} for i in range(start, min(rows, start + 1000))]
        answer = http.post(f"{URL}/v1/sms/send/batch", json={"messages": items}, headers={"x-api-key": key},
                           timeout=120)
        assert answer.status_code == 202, answer.text[:500]
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000, help="rows of the file (default 10000)")
    parser.add_argument("--repeat", type=int, default=3, help="campaigns, and baselines, each (default 3)")
    parser.add_argument("--history", type=int, default=0, help="messages of other workspaces first (default 0)")
    args = parser.parse_args()
    with scratch_database() as env, ExitStack() as running:
        runtime = bootstrap(Settings.from_env(env), pool_size=2)
        if args.history:
            began = time.monotonic()
            history(runtime, args.history)
            print(f"{args.history:,} earlier messages of other workspaces in {time.monotonic() - began:.0f} s")
        workspace = funded_workspace(runtime.sandesh, "Campaign bench", 10**12)
        key = runtime.sandesh.operators.create_client(workspace, "Baseline", None, 10**6, "bench")[1]
        email = "owner@campaign.example"
        _, token = runtime.sandesh.people.add_person(email, "Bench Owner", workspace, "owner", False, "bench")
        runtime.sandesh.people.set_password(token, PASSWORD)
        runtime.close()
        running.enter_context(product(env, running))
        http = signed_in(email)
        print(f"a {args.rows:,}-row CSV file (Devanagari names, a template of two placeholders: UCS-2, 1 segment)"
              f" on the Send page; sandesh serve and sandesh worker all as installed (no flag)")
        print(f"{'run':>4} {'preview s':>10} {'accept s':>10} {'baseline s':>11}")
        previews, accepts, baselines = [], [], []
        for run in range(args.repeat):
            data = csv_file(args.rows, 2 * run * args.rows)
            previewed, accepted = campaign(http, workspace, data, args.rows)
            baseline = batches(key, args.rows, (2 * run + 1) * args.rows)
            previews.append(previewed)
            accepts.append(accepted)
            baselines.append(baseline)
            print(f"{run + 1:>4} {previewed:>10.2f} {accepted:>10.2f} {baseline:>11.2f}", flush=True)
        print(f"median: preview {statistics.median(previews):.2f} s, accept {statistics.median(accepts):.2f} s; "
              f"the same messages as 10 API batches {statistics.median(baselines):.2f} s")


if __name__ == "__main__":
    main()
