"""A person at a release's dashboard, for the corpus workload (scripts/devtools/corpus_workload.py): plain
HTTP as a browser without JavaScript sends it, cookies kept, each form posted with the CSRF token
of the page it is on, authentication codes computed with pyotp on the service clock."""
from __future__ import annotations

import re
from typing import Callable
from urllib.parse import urlparse

import pyotp
import requests

from .corpus_release import CorpusError

CSRF = re.compile(r'name="csrf" value="([^"]+)"')
SECRET = re.compile(r'<code class="secret">([A-Z2-7]+)</code>')


class Browser:
    def __init__(self, base: str, now: Callable[[], float]):
        self.base, self.now = base, now
        self.http = requests.Session()

    def page(self, path: str) -> requests.Response:
        answer = self.http.get(self.base + path, timeout=30)
        if answer.status_code != 200:
            raise CorpusError(f"GET {path} answered {answer.status_code}: {answer.text[:500]}")
        return answer

    def submit(self, page: str, action: str, fields: dict[str, str]) -> requests.Response:
        """Post the form at `action` as it is on `page`, redirects followed; the page it ends on."""
        token = CSRF.search(self.page(page).text)
        if token is None:
            raise CorpusError(f"{page} has no form with a CSRF token")
        answer = self.http.post(self.base + action, data={"csrf": token.group(1), **fields}, timeout=30)
        if answer.status_code != 200 or "class=\"error\"" in answer.text:
            raise CorpusError(f"POST {action} answered {answer.status_code} at {answer.url}: {answer.text[:1500]}")
        return answer

    def code(self, secret: str) -> str:
        return pyotp.TOTP(secret).at(int(self.now()))

    def set_password(self, link: str, password: str) -> None:
        path = urlparse(link).path
        landed = self.submit(path, path, {"password": password})
        if not landed.url.endswith("/dashboard/sign-in?password=set"):
            raise CorpusError(f"setting a password through {path} ended at {landed.url}")

    def sign_in(self, email: str, password: str, *, totp_secret: str | None = None, enroll: bool = False) -> str | None:
        """Email and password, then the code of `totp_secret` when one is asked, or (`enroll`) the
        setup of an authenticator app when one is owed; answers the secret of that setup."""
        landed = self.submit("/dashboard/sign-in", "/dashboard/sign-in", {"email": email, "password": password})
        secret = None
        if landed.url.endswith("/dashboard/sign-in/code"):
            if totp_secret is None:
                raise CorpusError(f"{email} was asked for a code, and has no app")
            landed = self.submit("/dashboard/sign-in/code", "/dashboard/sign-in/code", {"code": self.code(totp_secret)})
        elif landed.url.endswith("/dashboard/sign-in/enroll") and enroll:
            secret = self._secret("/dashboard/sign-in/enroll")
            landed = self.submit("/dashboard/sign-in/enroll", "/dashboard/sign-in/enroll", {"code": self.code(secret)})
        if "/dashboard/w/" not in landed.url and "/dashboard/ops/" not in landed.url:
            raise CorpusError(f"{email} signed in and landed at {landed.url}")
        return secret

    def _secret(self, path: str) -> str:
        found = SECRET.search(self.page(path).text)
        if found is None:
            raise CorpusError(f"{path} shows no authenticator key")
        return found.group(1)

    def enroll(self, password: str, path: str = "/dashboard/authenticator") -> str:
        """Set up an authenticator app for the signed-in person, with their password; its secret."""
        secret = self._secret(path)
        self.submit(path, path, {"code": self.code(secret), "current": password})
        return secret

    def require_codes(self, workspace: str) -> None:
        self.submit(f"/dashboard/w/{workspace}/overview", f"/dashboard/w/{workspace}/authentication-codes",
                    {"required": "on"})

    def person_action(self, workspace: str, person_id: str, action: str, **fields: str) -> None:
        """An owner's Change role (`role`) or Remove of another person, on the workspace's People page."""
        people = f"/dashboard/w/{workspace}/people"
        self.submit(people, f"{people}/{person_id}/{action}", fields)

    def sign_out(self) -> None:
        landed = self.submit("/dashboard", "/dashboard/sign-out", {})
        if not landed.url.endswith("/dashboard/sign-in"):
            raise CorpusError(f"signing out ended at {landed.url}")
