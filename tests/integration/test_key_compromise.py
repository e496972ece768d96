"""A leaked root key (docs/operations.md, "A leaked key"): `sandesh key rotate --compromised`
marks the data keys of before, and `sandesh key status` lists what they sealed until each is
replaced by its own use case: the owner rotates the client's webhook secret from the dashboard,
the person sets up their authenticator app again at their next sign-in, an operator sets the
SIM's new PIN.  Each workspace's next text is sealed under a new key; the old texts still read."""
from __future__ import annotations

import re

import pyotp
import pytest

from sandesh.domain import totp
from sandesh.domain.clock import parse_iso
from sandesh.domain.sending import parse_send
from sandesh.projections.storage.keys import key_id
from tests.conftest import SECRET_KEY, Sandesh, Server
from tests.helpers import funded_workspace

NEW = "the-root-key-after-the-leak-0123456789abcdef01"
PASSWORD = "a passphrase for after the leak"
CSRF = re.compile(r'name="csrf" value="([^"]+)"')
SECRET = re.compile(r'<code class="secret">([A-Z2-7]+)</code>')


def post(http, base: str, page: str, action: str, **fields: str):
    token = CSRF.search(http.get(base + page, timeout=30).text).group(1)
    return http.post(base + action, data={"csrf": token, **fields}, timeout=30)


@pytest.fixture(scope="module")
def both(env, tmp_path_factory) -> Sandesh:
    return Sandesh({**env, "SANDESH_SECRET_KEY": NEW, "SANDESH_PREVIOUS_KEYS": SECRET_KEY},
                   tmp_path_factory.mktemp("both"))


def test_what_the_leaked_key_sealed_is_due_until_each_is_replaced(runtime, sandesh, both, env):
    import requests

    workspace = funded_workspace(runtime.sandesh, "Leak", 10**6, "t")
    client, _, _ = runtime.sandesh.operators.create_client(workspace, "Leak", None, 100, "t")
    sim = runtime.sandesh.sims.add_sim("leak-1", "loop://", 115200, None, "t")
    sandesh("sim", "update", "leak-1", "--pin", "2468")
    sandesh("sim", "add", "--name", "router-1", "--port", "hilink://admin:before-leak@192.0.2.1")
    person, token = runtime.sandesh.people.add_person("owner@leak.example", "Owner", workspace, "owner", False, "t")
    runtime.sandesh.people.set_password(token, PASSWORD)
    app_secret = totp.new_secret()
    runtime.sandesh.people.enroll_totp(person.id, app_secret, totp.hotp(app_secret, totp.step_of(runtime.clock.now())),
                                   proof=PASSWORD)
    before, _ = parse_send({"to": "9779841000100", "text": "written before the leak"})
    old_message = runtime.sandesh.sending.send(client.id, workspace, before, 100)
    with runtime.connection() as conn:
        old_text_key = conn.execute("SELECT id FROM text_keys WHERE owner = %s", (workspace,)).fetchone()["id"]
    assert sandesh("key", "status")["dueForReplacement"] == {"webhookSecrets": [], "authenticatorApps": [],
                                                             "simPins": [], "simPortSecrets": []}

    rotated = both("key", "rotate", "--compromised")
    assert rotated["compromised"] is True and rotated["previous"] == key_id(SECRET_KEY)
    due = both("key", "status")["dueForReplacement"]
    assert client.id in due["webhookSecrets"] and "owner@leak.example" in due["authenticatorApps"]
    assert "leak-1" in due["simPins"] and due["simPortSecrets"] == ["router-1"]

    server = Server({**env, "SANDESH_SECRET_KEY": NEW, "SANDESH_PREVIOUS_KEYS": SECRET_KEY}, workers=1)
    try:
        base = server.url
        http = requests.Session()
        landed = post(http, base, "/dashboard/sign-in", "/dashboard/sign-in", email="owner@leak.example",
                      password=PASSWORD)
        assert landed.url.endswith("/dashboard/sign-in/code")
        both("clock", "advance", str(totp.STEP + 1))  # a code of a later step than the one the setup used
        now = parse_iso(both("clock", "show")["now"])
        landed = post(http, base, "/dashboard/sign-in/code", "/dashboard/sign-in/code",
                      code=pyotp.TOTP(app_secret).at(int(now)))
        assert landed.url.endswith("/dashboard/sign-in/enroll"), "the app is set up again before the session begins"
        page = http.get(base + "/dashboard/sign-in/enroll", timeout=30).text
        assert "The server's key leaked" in page
        new_secret = SECRET.search(page).group(1)
        landed = post(http, base, "/dashboard/sign-in/enroll", "/dashboard/sign-in/enroll",
                      code=pyotp.TOTP(new_secret).at(int(now) + totp.STEP), current=PASSWORD)
        assert landed.url.endswith("/overview"), landed.url

        clients = http.get(f"{base}/dashboard/w/{workspace}/clients", timeout=30).text
        assert "Webhook secret due for replacement" in clients
        rotated_secret = post(http, base, f"/dashboard/w/{workspace}/clients",
                              f"/dashboard/w/{workspace}/clients/{client.id}/rotate-secret", grace_hours="24")
        assert rotated_secret.status_code == 200 and "Webhook secret due" not in rotated_secret.text
    finally:
        server.stop()
    both("sim", "update", "leak-1", "--pin", "1357")
    both("sim", "update", "router-1", "--port", "hilink://admin:after-leak@192.0.2.1")
    assert both("key", "status")["dueForReplacement"] == {"webhookSecrets": [], "authenticatorApps": [],
                                                           "simPins": [], "simPortSecrets": []}

    # Texts: the next one under a new key of the workspace; the old one still reads.
    after, _ = parse_send({"to": "9779841000101", "text": "written after the leak"})
    with _runtime({**env, "SANDESH_SECRET_KEY": NEW}) as new:
        new.sandesh.sending.send(client.id, workspace, after, 100)
        with new.connection() as conn:
            keys = conn.execute("SELECT id, replaced_at FROM text_keys WHERE owner = %s ORDER BY created_at",
                                (workspace,)).fetchall()
        assert [k["id"] for k in keys][0] == old_text_key and keys[0]["replaced_at"] is not None
        assert len(keys) == 2 and keys[1]["replaced_at"] is None
        history = Sandesh({**env, "SANDESH_SECRET_KEY": NEW}, both.cwd)("message", "history", old_message.id)
        assert "written before the leak" in str(history)


class _runtime:
    def __init__(self, env):
        from sandesh.domain.settings import Settings
        from sandesh.scripts.service.bootstrap import bootstrap

        self.runtime = bootstrap(Settings.from_env(env), pool_size=2)

    def __enter__(self):
        return self.runtime

    def __exit__(self, *_):
        self.runtime.close()
