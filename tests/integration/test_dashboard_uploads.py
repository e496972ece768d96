"""Uploads on the Send and Contacts pages against a real `sandesh serve` of one worker process
(docs/dashboard.md, "Limits of a list" and "Security"): lists made to exhaust a reader are
refused with the sentence of the limit they pass while the API answers as before, a malformed
list is a sentence and never a 500, and a form is bounded before it is read: its session and
its person's role first, then a body of at most 6 MB, then its CSRF token."""
from __future__ import annotations

import re
import socket
import threading
import time
from typing import Any, Iterator

import psycopg
import pytest
import requests
from playwright.sync_api import expect

from sandesh.api.uploads.limits import CELLS, COLUMNS, NOT_XLSX, TEXT
from sandesh.api.uploads.workbook import NO_SHEET
from scripts.bench.hostile_lists import cell, empty_cells, one_string_everywhere, wide_csv, xlsx
from tests.conftest import Server
from tests.integration.test_dashboard import PASSWORD, add_person, browser, link_path, sign_in  # noqa: F401

CSRF = re.compile(r'name="csrf" value="([^"]+)"')
SENTENCE = re.compile(r'id="(?:file|recipients)-error" role="alert">([^<]*)<')
MB = 2**20


@pytest.fixture(scope="module")
def server(env: dict[str, str]) -> Iterator[Server]:
    """One worker process: what its event loop does, every request of the test waits for."""
    running = Server(env, workers=1)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def shop(sandesh: Any, server: Server) -> dict[str, Any]:
    """An active workspace with an API client, an owner, a viewer and a contact list."""
    workspace = sandesh("workspace", "create", "--name", "Books of Bhaktapur")["id"]
    sandesh("workspace", "activate", workspace)
    sandesh("workspace", "credit", workspace, "100")
    key = sandesh("client", "create", "--workspace", workspace, "--brand", "Books")["key"]
    people = {}
    for role in ("owner", "viewer"):
        added = add_person(sandesh, workspace, f"{role}@bhaktapur.example", role=role)
        http = requests.Session()
        form = http.get(server.url + link_path(added), timeout=30).text
        http.post(server.url + link_path(added), data={"csrf": CSRF.search(form).group(1), "password": PASSWORD},
                  timeout=60)
        people[role] = signed_in(server, added["email"])
    owner = people["owner"]
    made = post_form(server, owner, f"/dashboard/w/{workspace}/contacts",
                     {"name": "Readers", "recipients": "9812345678"})
    assert made.status_code == 303, made.text
    return {"id": workspace, "key": key, **people, "list": made.headers["location"].split("?")[0].rsplit("/", 1)[1]}


def signed_in(server: Server, email: str) -> requests.Session:
    http = requests.Session()
    token = CSRF.search(http.get(server.url + "/dashboard/sign-in", timeout=30).text).group(1)
    answer = http.post(server.url + "/dashboard/sign-in", data={"csrf": token, "email": email, "password": PASSWORD},
                       timeout=60)
    assert answer.ok and "sandesh_session" in http.cookies, answer.text
    return http


def post_form(server: Server, http: requests.Session, path: str, fields: dict[str, str],
              file: tuple[str, bytes] | None = None) -> requests.Response:
    """The page's form posted as a browser posts it (multipart/form-data, with its CSRF token)."""
    token = CSRF.search(http.get(server.url + path.split("/add")[0], timeout=30).text).group(1)
    parts = {name: (None, value) for name, value in {"csrf": token, **fields}.items()}
    if file is not None:
        parts["file"] = file
    return http.post(server.url + path, files=parts, allow_redirects=False, timeout=120)


def sentence(answer: requests.Response) -> str:
    found = SENTENCE.search(answer.text)
    return found.group(1).replace("&#39;", "'") if found else f"(no sentence: {answer.status_code})"


def drafts(env: dict[str, str]) -> int:
    with psycopg.connect(env["DATABASE_URL"]) as conn:
        return conn.execute("SELECT count(*) FROM send_drafts").fetchone()[0]


@pytest.mark.parametrize("page", ["contacts", "send"])
def test_a_row_of_millions_of_empty_cells_is_refused_while_the_api_answers(server, shop, page):
    """openpyxl read such a row whole, on the event loop for Contacts (13 s in which no request
    was answered) and on the API's blocking threads for Send."""
    latencies: list[float] = []
    done = threading.Event()

    def balance() -> None:
        http = requests.Session()
        while not done.is_set():
            started = time.monotonic()
            assert http.get(server.url + "/v1/sms/balance", headers={"x-api-key": shop["key"]}, timeout=60).ok
            latencies.append(time.monotonic() - started)
            time.sleep(0.05)

    asking = threading.Thread(target=balance)
    asking.start()
    try:
        time.sleep(0.5)
        answer = post_form(server, shop["owner"], f"/dashboard/w/{shop['id']}/{page}",
                           {"name": "Empty", "text": "Hi", "type": "transactional"},
                           ("empty.xlsx", empty_cells(2_000_000)))
        time.sleep(0.5)
    finally:
        done.set()
        asking.join()
    assert max(latencies) < 1.0, f"the slowest balance took {max(latencies):.2f} s"
    assert (answer.status_code, sentence(answer)) == (400, CELLS)


@pytest.mark.parametrize("page", ["send", "contacts"])
def test_a_csv_whose_header_has_5000_columns_is_refused(server, shop, page):
    answer = post_form(server, shop["owner"], f"/dashboard/w/{shop['id']}/{page}",
                       {"name": "Wide", "text": "Hi", "type": "transactional"}, ("wide.csv", wide_csv(5_000, 2_000)))
    assert (answer.status_code, sentence(answer)) == (400, COLUMNS)


def test_one_shared_string_in_every_cell_is_refused_and_nothing_is_kept(server, shop, env):
    """24 KB of workbook, 100 MB of text: it was sealed into a preview, and into a list's events."""
    bomb = ("bomb.xlsx", one_string_everywhere(10_000, 25, 400))
    before = drafts(env)
    sent = post_form(server, shop["owner"], f"/dashboard/w/{shop['id']}/send",
                     {"text": "Hi {c1}", "type": "transactional"}, bomb)
    listed = post_form(server, shop["owner"], f"/dashboard/w/{shop['id']}/contacts", {"name": "Bomb"}, bomb)
    assert [(a.status_code, sentence(a)) for a in (sent, listed)] == [(400, TEXT)] * 2
    assert drafts(env) == before
    assert "Bomb" not in shop["owner"].get(f"{server.url}/dashboard/w/{shop['id']}/contacts", timeout=30).text


@pytest.mark.parametrize("name, data, said", [
    ("long.csv", b"phone,note\n9812345678," + b"x" * (128 * 1024 + 1) + b"\n",
     "Row 2 has a cell longer than 500 characters."),
    ("cut.xlsx", xlsx(b"<row>" + cell("phone") + b"</row><row><c><v>981"), NOT_XLSX),
    ("index.xlsx", xlsx(b'<row><c t="s"><v>7</v></c></row>', ["phone"]), NOT_XLSX),
    ("sheetless.xlsx", xlsx(b"", sheets=False), NO_SHEET),
], ids=["a CSV cell over 128 KiB", "a sheet cut short", "a shared string that is not there", "no sheet"])
def test_a_malformed_list_is_a_sentence_not_a_500(server, shop, name, data, said):
    answer = post_form(server, shop["owner"], f"/dashboard/w/{shop['id']}/send",
                       {"text": "Hi", "type": "transactional"}, (name, data))
    assert (answer.status_code, sentence(answer)) == (400, said)


@pytest.mark.parametrize("page", ["send", "contacts"])
def test_more_than_10000_numbers_typed_are_refused(server, shop, page):
    """A 1 MiB paste gave 95,000 recipients, sent in one append."""
    numbers = "\n".join(f"98{n:08d}" for n in range(10_001))
    answer = post_form(server, shop["owner"], f"/dashboard/w/{shop['id']}/{page}",
                       {"name": "Many", "recipients": numbers, "text": "Hi", "type": "transactional"})
    assert (answer.status_code, sentence(answer)) == (400, "More than 10,000 numbers: at most 10,000 are sent at once.")


# The body of a form, bounded before it is read

def raw_post(server: Server, path: str, headers: dict[str, str], body: Iterator[bytes]) -> tuple[str, float]:
    """The status line a POST of this head is answered, and how long it took; the body's chunks
    are sent beside, for as long as the server takes them."""
    connection = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    started = time.monotonic()
    connection.sendall(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{head}\r\n".encode())

    def send() -> None:
        try:
            for chunk in body:
                connection.sendall(chunk)
        except OSError:  # the server answered and closed: it takes no more
            pass

    sending = threading.Thread(target=send, daemon=True)
    sending.start()
    try:
        answer = connection.recv(200).decode("latin-1")
    finally:
        took = time.monotonic() - started
        connection.close()
    return answer.split("\r\n")[0], took


def first_bytes_only() -> Iterator[bytes]:
    """The body's first bytes, and nothing after: Falcon takes a request's first chunk (ASGI's
    first `http.request` event) before any page runs; a page must answer without the rest."""
    yield b'--xyz\r\nContent-Disposition: form-data; name="csrf"\r\n\r\n'


def cookies(http: requests.Session) -> str:
    return "; ".join(f"{name}={value}" for name, value in http.cookies.items())


MULTIPART = {"Content-Type": "multipart/form-data; boundary=xyz"}


@pytest.mark.parametrize("form", ["send", "contacts", "contacts/{list}/add"])
def test_a_form_whose_length_passes_6_mb_is_413_before_a_byte_of_it_is_read(server, shop, form):
    path = f"/dashboard/w/{shop['id']}/{form.format(list=shop['list'])}"
    status, took = raw_post(server, path, {**MULTIPART, "Content-Length": str(6 * MB + 1),
                                           "Cookie": cookies(shop["owner"])}, first_bytes_only())
    assert status == "HTTP/1.1 413 Payload Too Large" and took < 5


def chunked(parts: int, size: int) -> Iterator[bytes]:
    for n in range(parts):
        part = (f"--xyz\r\nContent-Disposition: form-data; name=\"f{n}\"; filename=\"f{n}.csv\"\r\n\r\n".encode()
                + b"x" * size + b"\r\n")
        yield f"{len(part):x}\r\n".encode() + part + b"\r\n"
    yield b"0\r\n\r\n"


def test_a_chunked_form_is_413_once_its_bytes_pass_6_mb(server, shop):
    """Without a length, the bytes are counted as they come: 20 parts of 5 MiB were held."""
    status, _ = raw_post(server, f"/dashboard/w/{shop['id']}/send",
                         {**MULTIPART, "Transfer-Encoding": "chunked", "Cookie": cookies(shop["owner"])},
                         chunked(20, 5 * MB))
    assert status == "HTTP/1.1 413 Payload Too Large"


@pytest.mark.parametrize("who, answered", [(None, "HTTP/1.1 303 See Other"), ("viewer", "HTTP/1.1 403 Forbidden")])
@pytest.mark.parametrize("form", ["send", "contacts", "contacts/{list}/add"])
def test_a_form_without_a_session_or_of_a_role_that_may_not_is_answered_before_its_body(server, shop, who,
                                                                                        answered, form):
    path = f"/dashboard/w/{shop['id']}/{form.format(list=shop['list'])}"
    headers = {**MULTIPART, "Content-Length": str(MB)}
    if who is not None:
        headers["Cookie"] = cookies(shop[who])
    status, took = raw_post(server, path, headers, first_bytes_only())
    assert status == answered and took < 5


def test_a_person_reads_why_their_list_is_refused(browser, server, shop, tmp_path):
    context = browser.new_context()
    page = context.new_page()
    sign_in(page, server, "owner@bhaktapur.example")
    page.goto(f"{server.url}/dashboard/w/{shop['id']}/send")
    path = tmp_path / "contacts.xlsx"
    path.write_bytes(empty_cells(2_000_000))
    page.get_by_label("Upload a list").set_input_files(str(path))
    page.get_by_label("Message").fill("Hello")
    page.get_by_role("button", name="Preview").click()
    expect(page.locator("#file-error")).to_have_text(CELLS)
    big = tmp_path / "big.csv"
    big.write_bytes(b"phone\n" + b"9812345678\n" * (7 * MB // 11))
    page.get_by_label("Upload a list").set_input_files(str(big))
    page.get_by_role("button", name="Preview").click()
    expect(page.locator("#file-error")).to_have_text("The form is larger than 6 MB: upload a smaller file.")
    context.close()
