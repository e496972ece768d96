"""The signature checks of docs/api.md, "Verifying a signature", in Python, Node.js and PHP,
each run as it stands in the doc (Debian's python3, nodejs and php-cli) against a real delivery
from the webhooks sender over HTTPS, and against forged ones."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.integration.test_webhooks import Hooked, deliver, lifecycle, sender, workspace  # noqa: F401

SECTION = re.compile(r"^### Verifying a signature\n(.*?)^### ", re.S | re.M)
BLOCK = re.compile(r"^```(python|js|php)\n(.*?)^```", re.S | re.M)

# Each snippet's `verify`, called with the secrets, the header and the body the test gives, prints
# "accepted" or "refused".
HARNESS = {
    "python": ("snippet.py", [sys.executable], """
import os, pathlib, sys
print("accepted" if verify(os.environ["SECRETS"].split(), os.environ["HEADER"],
                           pathlib.Path(os.environ["BODY"]).read_bytes()) else "refused")
"""),
    "js": ("snippet.js", ["node"], """
const fs = require("fs");
console.log(verify(process.env.SECRETS.split(" "), process.env.HEADER, fs.readFileSync(process.env.BODY))
            ? "accepted" : "refused");
"""),
    "php": ("snippet.php", ["php"], """
echo verify(explode(" ", getenv("SECRETS")), getenv("HEADER"), file_get_contents(getenv("BODY")))
    ? "accepted" : "refused", "\\n";
"""),
}


def snippets() -> dict[str, str]:
    section = SECTION.search((ROOT / "docs" / "api.md").read_text()).group(1)
    return {language: code for language, code in BLOCK.findall(section)}


def test_the_doc_gives_the_check_in_python_nodejs_and_php():
    assert set(snippets()) == {"python", "js", "php"}


@pytest.fixture
def delivery(runtime, workspace, receiver, sender):  # noqa: F811
    hooked = Hooked(runtime, workspace, receiver)
    lifecycle(runtime, hooked.send(), ("submit",), ("accept",))
    deliver(sender)
    [received] = hooked.received(1)
    return hooked.secret, received.headers["x-service-signature"], received.body


@pytest.mark.parametrize("language", ["python", "js", "php"])
def test_each_snippet_accepts_a_real_delivery_and_refuses_forged_ones(language, delivery, tmp_path: Path):
    name, command, harness = HARNESS[language]
    if shutil.which(command[0]) is None:
        pytest.fail(f"{command[0]} is missing: scripts/test.sh installs it", pytrace=False)
    script = tmp_path / name
    script.write_text(snippets()[language] + "\n" + harness)
    secret, header, body = delivery

    def check(secrets: str, signature: str, raw: bytes) -> str:
        (tmp_path / "body").write_bytes(raw)
        done = subprocess.run([*command, str(script)], capture_output=True, text=True, timeout=30,
                              env={**os.environ, "SECRETS": secrets, "HEADER": signature, "BODY": str(tmp_path / "body")})
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    assert check(secret, header, body) == "accepted"
    assert check(f"whsec_rotated {secret}", header, body) == "accepted"  # the old secret during a rotation
    assert check(secret, header, body.replace(b'"sent"', b'"delivered"')) == "refused"  # a changed body
    assert check("whsec_" + "A" * 43, header, body) == "refused"  # signed with another secret
    t, v1 = re.fullmatch(r"t=([0-9]+),v1=([0-9a-f]{64})", header).groups()
    assert check(secret, f"t={int(t) - 301},v1={v1}", body) == "refused"  # too old (and not what was signed)
    assert check(secret, "", body) == "refused"
