"""The examples of docs/api.md, "Moving from Sparrow or Aakash", run as they stand in the doc
(Debian's php-cli, and Python with requests) against a real `sandesh serve`, with only their
base URL and key filled in: their messages reach emulated phones through a real dispatcher, as
Sparrow sends by GET and by JSON do."""
from __future__ import annotations

import re
import subprocess
import sys

import pytest
import requests

from tests.conftest import ROOT
from tests.helpers import funded_workspace, until

SECTION = re.compile(r"^### Moving from Sparrow or Aakash\n(.*?)^### ", re.S | re.M)
BLOCK = re.compile(r"^```(python|php)\n(.*?)^```", re.S | re.M)


def examples(server, key: str) -> dict[str, str]:
    section = SECTION.search((ROOT / "docs" / "api.md").read_text()).group(1)
    return {language: code.replace("https://HOST", server.url).replace("YOUR_SANDESH_KEY", key)
            for language, code in BLOCK.findall(section)}


@pytest.fixture(scope="module")
def key(runtime, sandesh, phones):
    workspace = funded_workspace(runtime.sandesh, "Examples", 10_000)
    return sandesh("client", "create", "--workspace", workspace, "--brand", "School")["key"]


def run(command: list[str], code: str, tmp_path, name: str) -> str:
    script = tmp_path / name
    script.write_text(code)
    done = subprocess.run([*command, str(script)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def phones_got(phones, numbers: list[str]) -> list[str]:
    return until(lambda: len(got := sorted(m["to"].lstrip("+") for m in phones.received
                                           if m["to"].lstrip("+") in numbers)) == len(numbers) and got, 30)


def test_the_php_written_for_sparrow_sends_with_only_its_base_url_changed(server, phones, key, tmp_path):
    code = examples(server, key)["php"]
    assert "api.sparrowsms.com" not in code and "/compat/sparrow/v2/sms/" in code
    assert run(["php"], code, tmp_path, "send.php") == \
        '{"count":2,"response_code":200,"response":"2 messages have been queued for delivery"}'
    assert phones_got(phones, ["9779841000001", "9779841000002"]) == ["9779841000001", "9779841000002"]


def test_the_python_written_for_aakash_sends_the_valid_number(server, phones, key, tmp_path):
    answer = run([sys.executable], examples(server, key)["python"], tmp_path, "send.py")
    assert answer == "1 messages have been queued for delivery."
    assert phones_got(phones, ["9779841000003"]) == ["9779841000003"]


def test_sparrow_sends_by_get_and_by_json_reach_the_phones_too(server, phones, key):
    by_get = requests.get(server.url + "/compat/sparrow/v2/sms/", timeout=10,
                          params={"token": key, "from": "InfoSMS", "to": "9841000004", "text": "By GET"})
    by_json = requests.post(server.url + "/compat/sparrow/v2/sms/", timeout=10,
                            json={"token": key, "from": "InfoSMS", "to": "+9779841000005", "text": "By JSON"})
    assert (by_get.json()["count"], by_json.json()["count"]) == (1, 1)
    assert phones_got(phones, ["9779841000004", "9779841000005"]) == ["9779841000004", "9779841000005"]
