"""docs/operations.md, "Production", followed as an operator follows it, short of systemd itself:
a fresh virtual environment outside the checkout with `pip install` of the checkout (not
editable), the environment file, `sandesh db migrate`, and `serve` and the workers started by
the `ExecStart=` lines of the unit files with the units' environment.  From there a send reaches
a modem and is delivered, and the dashboard and the operator console render."""
from __future__ import annotations

import re
import secrets
import shlex
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import orjson
import pytest
import requests

from scripts.devtools.corpus_dashboard import Browser
from sandesh.domain.release import VERSION
from tests.conftest import ROOT, free_port
from tests.installation import Processes, answering, devices, wait_until

UNITS = ROOT / "scripts" / "service" / "systemd"
INSTALLED = "/opt/sandesh/.venv"  # where the units and the docs put the virtual environment
PASSWORD = "a long passphrase for the shop 42"


def unit(name: str) -> dict[str, list[str]]:
    """The [Service] settings of a unit file, each with its values in order."""
    found: dict[str, list[str]] = {}
    section = None
    for line in (UNITS / name).read_text().splitlines():
        line = line.strip()
        if line.startswith("["):
            section = line
        elif section == "[Service]" and line and not line.startswith(("#", ";")):
            key, _, value = line.partition("=")
            found.setdefault(key, []).append(value)
    return found


def environment_file(path: Path) -> dict[str, str]:
    """Read as systemd reads an EnvironmentFile=: NAME=value a line, no expansion, quotes removed."""
    found = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith(("#", ";")):
            key, _, value = line.partition("=")
            found[key.strip()] = value.strip().strip("\"'")
    return found


def docs_block(after: str, language: str = "sh") -> str:
    """The first fenced block of docs/operations.md after the line holding `after`."""
    text = (ROOT / "docs" / "operations.md").read_text()
    start = text.index(after)
    return textwrap.dedent(re.search(rf"```{language}\n(.*?)```", text[start:], re.S).group(1))


@pytest.fixture
def installed(tmp_path: Path) -> Path:
    """Step 2 run as the docs give it, on an sdist of the checkout, with /opt moved under this
    test's folder: the release's folder, its venv, `pip install` (not editable), the link."""
    subprocess.run([sys.executable, "-m", "build", "--sdist", "--no-isolation", "--outdir", str(tmp_path), str(ROOT)],
                   check=True, capture_output=True, timeout=300)
    script = docs_block("2. The release and its virtual environment")
    assert re.search(r"^release=\S+", script, re.M) and "pip install" in script and "--editable" not in script
    script = re.sub(r"^release=\S+", f"release={VERSION}", script, flags=re.M).replace("/opt/", f"{tmp_path}/opt/")
    (tmp_path / "opt").mkdir()
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "opt" / "sandesh").resolve() == tmp_path / "opt" / f"sandesh-{VERSION}"
    return tmp_path / "opt" / "sandesh" / ".venv"


def test_the_documented_production_install_serves_sends_and_renders(installed, tmp_path, empty_database_url):
    venv = installed
    port = free_port()
    public = f"http://127.0.0.1:{port}"
    # Step 3: the environment file with the docs' variables (this machine's values), and the key
    # in a file of its own, which systemd hands each unit's process as a credential.
    documented = docs_block("3. The configuration")
    assert all(name in documented for name in ("DATABASE_URL=", "SANDESH_PUBLIC_URL=", "SANDESH_TRUSTED_PROXIES=",
                                               "/etc/sandesh/secret_key"))
    assert "SANDESH_SECRET_KEY=" not in documented, "the key is in no environment file"
    env_file = tmp_path / "etc" / "sandesh.env"
    env_file.parent.mkdir()
    env_file.write_text(f"DATABASE_URL={empty_database_url}\nSANDESH_PUBLIC_URL={public}\n"
                        f"SANDESH_TRUSTED_PROXIES=127.0.0.1\n")
    key_file = tmp_path / "etc" / "secret_key"
    key_file.write_text(secrets.token_hex(32) + "\n")
    key_file.chmod(0o600)
    state, run = tmp_path / "var-lib-sandesh", tmp_path / "run-sandesh"
    state.mkdir()
    (run / "metrics").mkdir(parents=True)

    def service_env(name: str) -> dict[str, str]:
        """What systemd gives the unit's process: a bare environment, the EnvironmentFile=, then
        Environment=, and its LoadCredential= copied into a credentials directory of its own."""
        settings = unit(name)
        assert settings["EnvironmentFile"] == ["/etc/sandesh/sandesh.env"]
        [credential] = settings["LoadCredential"]
        credential_name, _, source = credential.partition(":")
        assert source == "/etc/sandesh/secret_key"
        credentials = tmp_path / "credentials" / name
        credentials.mkdir(parents=True, exist_ok=True)
        shutil.copy(key_file, credentials / credential_name)
        env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8",
               "HOME": str(state), "USER": "sandesh", "CREDENTIALS_DIRECTORY": str(credentials),
               **environment_file(env_file)}
        for assignment in settings.get("Environment", []):
            key, _, value = assignment.partition("=")
            env[key] = value.replace("/run/sandesh", str(run))
        return env

    def exec_start(name: str, *drop_in: str) -> list[str]:
        [line] = unit(name)["ExecStart"]
        argv = shlex.split(line)
        assert argv[0] == f"{INSTALLED}/bin/sandesh"
        return [str(venv / "bin" / "sandesh"), *argv[1:], *drop_in]

    command_env = service_env("sandesh-serve.service")

    def sandesh(*args: str) -> dict:
        done = subprocess.run([str(venv / "bin" / "sandesh"), "--actor", "root", *args], env=command_env, cwd=state,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"sandesh {' '.join(args)}: {done.stderr}"
        return orjson.loads(done.stdout)

    # Step 4: the tables, as the docs run it.
    assert "/opt/sandesh/.venv/bin/sandesh db migrate" in docs_block("4. Create the database")
    migrated = sandesh("db", "migrate")
    assert migrated["ok"] is True and migrated["release"] == VERSION
    version = subprocess.run([str(venv / "bin" / "sandesh"), "--version"], capture_output=True, text=True, timeout=60)
    assert version.stdout.strip() == f"sandesh {VERSION}"

    # Step 5: the units' processes, the API on this test's port as a drop-in would set it.
    processes = Processes(tmp_path)
    emulator = None
    try:
        processes.start("serve", exec_start("sandesh-serve.service", "--bind", f"127.0.0.1:{port}"),
                        service_env("sandesh-serve.service"))
        processes.start("worker", exec_start("sandesh-worker.service"), service_env("sandesh-worker.service"))
        wait_until(lambda: answering(public), "the API", timeout=60)
        health = requests.get(f"{public}/v1/health", timeout=5).json()
        assert health == {"status": "ok", "version": VERSION}

        # A shop's workspace and key, and a modem (emulated: what `sandesh sim add` registers).
        workspace = sandesh("workspace", "create", "--name", "Thamel Tea House")["id"]
        sandesh("workspace", "activate", workspace)
        sandesh("workspace", "credit", workspace, "50000")
        client = sandesh("client", "create", "--workspace", workspace, "--brand", "Thamel Tea")
        phones = tmp_path / "phones.jsonl"
        log = open(tmp_path / "emulator.log", "ab")
        emulator = subprocess.Popen([str(venv / "bin" / "sandesh"), "emulator", "--sims", "1", "--register",
                                     "--report-delay", "0.5", "--phones-log", str(phones)],
                                    env=command_env, cwd=state, stdout=log, stderr=log, stdin=subprocess.PIPE)
        wait_until(lambda: devices(tmp_path / "emulator.log", 1), "the emulated modem", timeout=60)

        def send():
            answer = requests.post(f"{public}/v1/sms/send", headers={"x-api-key": client["key"]}, timeout=10,
                                   json={"to": "9779841234567", "text": "Your table is ready. नमस्ते!"})
            return answer if answer.status_code == 202 else None

        sent = wait_until(send, "a route (the dispatcher reports the SIM healthy)", timeout=60).json()

        def status():
            found = requests.get(f"{public}/v1/sms/messages/{sent['messageId']}", timeout=5,
                                 headers={"x-api-key": client["key"]}).json()["status"]
            return found if found == "delivered" else None

        wait_until(status, "the message delivered", timeout=60)
        received = [orjson.loads(line) for line in phones.read_text().splitlines()]
        assert [(r["to"], r["text"]) for r in received] == [("9779841234567", "Your table is ready. नमस्ते!")]

        # The workspace owner's dashboard, every page of its navigation.
        owner = sandesh("user", "add", "--email", "owner@thamel.example", "--name", "Owner", "--workspace", workspace,
                        "--role", "owner")
        assert owner["setPasswordLink"].startswith(f"{public}/dashboard/set-password/")
        person = Browser(public, time.time)
        person.set_password(owner["setPasswordLink"], PASSWORD)
        person.sign_in("owner@thamel.example", PASSWORD, enroll=True)
        overview = person.page(f"/dashboard/w/{workspace}/overview").text
        pages = sorted(set(re.findall(rf'href="(/dashboard/w/{workspace}/[a-z-]+)"', overview)))
        assert len(pages) >= 6, pages
        for path in [*pages, f"/dashboard/w/{workspace}/messages/{sent['messageId']}"]:
            assert "<h1" in person.page(path).text, path

        # The operator console: the SIM pool and the workspaces.
        ops = sandesh("user", "add", "--email", "ops@sandesh.example", "--name", "Ops", "--operator")
        operator = Browser(public, time.time)
        operator.set_password(ops["setPasswordLink"], PASSWORD)
        operator.sign_in("ops@sandesh.example", PASSWORD, enroll=True)
        assert "emu-1" in operator.page("/dashboard/ops/sims").text
        assert "Thamel Tea House" in operator.page("/dashboard/ops/workspaces").text
        console = operator.page(f"/dashboard/ops/workspaces/{workspace}").text
        for path in sorted(set(re.findall(r'href="(/dashboard/ops/[a-z]+)"', console))):
            assert "<h1" in operator.page(path).text, path

        # Stopped as systemd stops them: SIGTERM to the main process, within the units' TimeoutStopSec.
        for name, unit_name in (("serve", "sandesh-serve.service"), ("worker", "sandesh-worker.service")):
            process = processes.running.pop(name)
            started = time.monotonic()
            process.terminate()
            assert process.wait(timeout=float(unit(unit_name)["TimeoutStopSec"][0])) == 0, name
            assert time.monotonic() - started < float(unit(unit_name)["TimeoutStopSec"][0])
    finally:
        if emulator is not None:
            emulator.terminate()
            emulator.wait(timeout=15)
        processes.stop_all()
