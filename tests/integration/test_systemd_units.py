"""The systemd units of scripts/service/systemd/ are valid to systemd itself and run the service as
docs/operations.md, "Production" says: as `sandesh` with the serial ports for the workers only,
configured by /etc/sandesh/sandesh.env, restarted on failure, stopped by SIGTERM within their
timeout, and confined."""
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sandesh.api.uploads.children import MEMORY
from sandesh.scripts.service.serve import options
from sandesh.workers.supervisor import WORKERS

ROOT = Path(__file__).resolve().parents[2]
UNITS = ROOT / "scripts" / "service" / "systemd"
SERVE, WORKER, TARGET = "sandesh-serve.service", "sandesh-worker.service", "sandesh.target"
SERVICES = (SERVE, WORKER)
INSTALLED = "/opt/sandesh/.venv/bin/sandesh"
CHECKOUT = Path(sys.executable).parent / "sandesh"  # this checkout's own `sandesh`
API_PROCESS = 128 * 2**20  # twice what one API process takes (docs/operations.md, "Production")

HARDENING = {
    "NoNewPrivileges": "yes", "CapabilityBoundingSet": "", "ProtectSystem": "strict", "ProtectHome": "yes",
    "PrivateTmp": "yes", "ProtectKernelTunables": "yes", "ProtectKernelModules": "yes",
    "ProtectControlGroups": "yes", "RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6",
    "LockPersonality": "yes", "RestrictRealtime": "yes", "RestrictSUIDSGID": "yes",
    "SystemCallArchitectures": "native", "StateDirectory": "sandesh", "WorkingDirectory": "/var/lib/sandesh",
}


def settings(name: str, section: str = "Service") -> dict[str, list[str]]:
    """A unit's settings in one section, each with every value it is given, in order."""
    found: dict[str, list[str]] = {}
    current = None
    for line in (UNITS / name).read_text().splitlines():
        line = line.strip()
        if line.startswith("[") and line.endswith("]"):
            current = line[1:-1]
        elif current == section and line and not line.startswith(("#", ";")):
            key, _, value = line.partition("=")
            found.setdefault(key.strip(), []).append(value.strip())
    return found


def one(name: str, key: str, section: str = "Service") -> str:
    values = settings(name, section).get(key, [])
    assert len(values) == 1, f"{name}: {key}= is set {len(values)} times"
    return values[0]


def seconds(text: str) -> float:
    assert re.fullmatch(r"\d+s?", text), f"a time span in plain seconds: {text!r}"
    return float(text.rstrip("s"))


def systemd_analyze(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    tool = shutil.which("systemd-analyze")
    assert tool, "systemd-analyze is missing: scripts/test.sh installs it (Debian's package systemd)"
    return subprocess.run([tool, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.fixture
def runnable(tmp_path: Path) -> Path:
    """The units with ExecStart= at this checkout's `sandesh`, so that systemd can check it runs."""
    assert CHECKOUT.is_file(), CHECKOUT
    for unit in UNITS.iterdir():
        (tmp_path / unit.name).write_text(unit.read_text().replace(INSTALLED, str(CHECKOUT)))
    return tmp_path


def verify(folder: Path, *names: str) -> list[str]:
    """What `systemd-analyze verify` says about these units; a failing exit status is a problem too."""
    done = systemd_analyze("verify", "--man=no", "--generators=no", *names, cwd=folder)
    said = [line for line in (done.stdout + done.stderr).splitlines()
            if any(name in line for name in names) or str(folder) in line]
    return said + ([f"exit status {done.returncode}"] if done.returncode else [])


def test_systemd_verifies_the_units_without_a_warning(runnable):
    assert verify(runnable, TARGET, *SERVICES) == []


def test_the_verification_catches_a_misspelt_option(runnable):
    """`systemd-analyze verify` ignores an unknown key with a warning and exits 0: the warning counts."""
    unit = runnable / SERVE
    unit.write_text(unit.read_text().replace("ProtectSystem=", "ProtectSytem="))
    assert any("ProtectSytem" in line for line in verify(runnable, SERVE))


@pytest.mark.parametrize("name", SERVICES)
def test_each_service_runs_the_installed_sandesh_as_the_sandesh_user_with_the_env_file(name):
    command = {SERVE: "serve", WORKER: "worker all"}[name]
    assert one(name, "ExecStart") == f"{INSTALLED} {command}"
    assert (one(name, "User"), one(name, "Group")) == ("sandesh", "sandesh")
    assert one(name, "EnvironmentFile") == "/etc/sandesh/sandesh.env"


@pytest.mark.parametrize("name", SERVICES)
def test_each_service_reads_the_key_from_a_credential_not_the_environment(name):
    """The key file only root reads is handed to the service by systemd (LoadCredential=), as
    `secret_key` in its $CREDENTIALS_DIRECTORY, where `sandesh` reads it; never the environment."""
    assert one(name, "LoadCredential") == "secret_key:/etc/sandesh/secret_key"
    assert not any("SECRET_KEY" in value for value in settings(name).get("Environment", []))


def test_the_api_binds_as_sandesh_serve_does_by_default():
    """No --bind: 127.0.0.1:8000, behind the TLS proxy (docs/operations.md, "Production")."""
    assert "--bind" not in one(SERVE, "ExecStart")


def test_only_the_workers_reach_the_serial_ports():
    assert "dialout" in one(WORKER, "SupplementaryGroups").split()
    assert one(WORKER, "PrivateDevices") == "no" and one(WORKER, "DevicePolicy") == "closed"
    assert settings(WORKER)["DeviceAllow"] == ["char-ttyUSB rw", "char-ttyACM rw"]
    assert one(SERVE, "PrivateDevices") == "yes" and "SupplementaryGroups" not in settings(SERVE)


@pytest.mark.parametrize("name", SERVICES)
def test_each_service_restarts_on_failure_but_not_on_a_configuration_error(name):
    assert one(name, "Restart") == "on-failure" and seconds(one(name, "RestartSec")) > 0
    assert "2" in one(name, "RestartPreventExitStatus").split()


def test_the_api_is_stopped_by_sigterm_after_gunicorn_had_its_graceful_timeout():
    graceful = options("127.0.0.1:8000", 1)["graceful_timeout"]
    assert (one(SERVE, "KillSignal"), one(SERVE, "KillMode")) == ("SIGTERM", "mixed")
    assert seconds(one(SERVE, "TimeoutStopSec")) > graceful


def test_the_workers_are_stopped_by_sigterm_after_the_supervisor_waited_for_each():
    """`sandesh worker all` waits up to 20 s for each worker in turn (workers/supervisor.py,
    `_stop_all`), so systemd's SIGKILL must not come first; a worker that needs a newer release
    (status 3), or whose root key the database does not take (status 4), is not restarted by the
    supervisor, nor by systemd."""
    assert (one(WORKER, "KillSignal"), one(WORKER, "KillMode")) == ("SIGTERM", "mixed")
    assert seconds(one(WORKER, "TimeoutStopSec")) > 20 * len(WORKERS)
    assert {"3", "4"} <= set(one(WORKER, "RestartPreventExitStatus").split())


def test_the_api_keeps_within_its_memory_and_goes_on_when_one_process_is_ended():
    """MemoryMax= holds the API's processes and their children that read uploads (each within
    MEMORY of address space: api/uploads/children.py), those of two cores at least
    (docs/operations.md, "Production"); the kernel ends one process past it, which is replaced
    (OOMPolicy=continue), rather than the service."""
    most = one(SERVE, "MemoryMax")
    assert re.fullmatch(r"\d+G", most), f"a size in GiB: {most!r}"
    assert int(most[:-1]) * 2**30 >= 2 * (API_PROCESS + MEMORY)
    assert one(SERVE, "OOMPolicy") == "continue"


@pytest.mark.parametrize("name", SERVICES)
def test_each_service_is_confined(name):
    found = {key: one(name, key) for key in HARDENING}
    assert found == HARDENING


def test_the_api_and_the_workers_count_into_one_metrics_directory():
    """"run the API and the workers of one machine with the same SANDESH_METRICS_DIR"
    (docs/operations.md, "Metrics"), kept while either one restarts."""
    for name in SERVICES:
        assert one(name, "Environment") == "SANDESH_METRICS_DIR=/run/sandesh/metrics"
        assert (one(name, "RuntimeDirectory"), one(name, "RuntimeDirectoryPreserve")) == ("sandesh", "yes")


def test_the_target_starts_and_stops_both_services():
    assert one(TARGET, "Wants", "Unit").split() == list(SERVICES)
    assert one(TARGET, "WantedBy", "Install") == "multi-user.target"
    for name in SERVICES:
        assert one(name, "PartOf", "Unit") == TARGET


@pytest.mark.parametrize("name", SERVICES)
def test_systemd_rates_each_service_exposure_at_most_2(runnable, name):
    """docs/operations.md, "Production" gives the figures `systemd-analyze security` measures."""
    if "--offline" not in systemd_analyze("--help", cwd=runnable).stdout:
        pytest.skip("this systemd-analyze cannot review a unit file offline")
    done = systemd_analyze("security", "--offline=yes", "--threshold=20", "--no-pager", f"./{name}", cwd=runnable)
    assert f"Overall exposure level for {name}" in done.stdout and done.returncode == 0, done.stdout[-300:]
