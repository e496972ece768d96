"""A link the dashboard hands out (an invited person's set-password link) is built from
SANDESH_PUBLIC_URL, never from the request's Host header, which whoever asks for it writes: an
owner tricked into inviting from a page served under another name still hands out a link to
the service (docs/dashboard.md, "People").  Plain HTTP, as a browser without JavaScript."""
from __future__ import annotations

import re
from urllib.parse import urlsplit

import requests

from scripts.devtools.corpus_dashboard import Browser
from tests.conftest import Server

PASSWORD = "correct horse battery staple"


def test_an_invitation_link_is_at_the_public_url_whatever_the_host_header(env, sandesh):
    workspace = sandesh("workspace", "create", "--name", "Links")["id"]
    sandesh("workspace", "activate", workspace)
    public = "https://sms.example.com.np"
    server = Server({**env, "SANDESH_PUBLIC_URL": public}, workers=1)
    try:
        owner = sandesh("user", "add", "--email", "owner@links.example", "--name", "Owner", "--workspace", workspace,
                        "--role", "owner")
        browser = Browser(server.url, now=lambda: 0.0)
        browser.set_password(owner["setPasswordLink"], PASSWORD)
        browser.sign_in("owner@links.example", PASSWORD)
        people = f"/dashboard/w/{workspace}/people"
        token = re.search(r'name="csrf" value="([^"]+)"', browser.page(people).text).group(1)
        cookies = "; ".join(f"{c.name}={c.value}" for c in browser.http.cookies)  # as sent to the service's name
        page = requests.post(server.url + people, timeout=30, allow_redirects=False,
                             headers={"Host": "attacker.example", "Cookie": cookies},
                             data={"csrf": token, "email": "invited@links.example", "name": "Invited",
                                   "role": "viewer"}).text
        [link] = re.findall(r"https?://[^\s<\"]+/dashboard/set-password/[\w.-]+", page)
        assert urlsplit(link)._replace(path="").geturl() == public, link
        assert "attacker.example" not in page
    finally:
        server.stop()
