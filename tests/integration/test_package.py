"""The package is the product (docs/operations.md, "Releases"): the sdist and the wheel built from
the tracked files hold every part that `sandesh` runs, found rather than listed, and nothing that
only a developer runs; the suite itself runs against that wheel, installed as a user installs it."""
from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

import sandesh.domain
from sandesh.domain.release import VERSION

ROOT = Path(__file__).resolve().parents[2]
# What ships: every file under these, modules, templates, static files and units alike.
SHIPPED = ("domain", "projections", "api", "workers", "scripts/service")
# What stays in the repository and runs from the checkout (README, "Developers").
KEPT_HOME = ("scripts/bench", "scripts/devtools", "tests")


def tracked() -> list[str]:
    """The files git tracks: what a clean clone has."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    return [name for name in listed.decode().split("\0") if name and (ROOT / name).is_file()]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], list[str], list[str]]:
    """(tracked files, the sdist's names, the wheel's names), the sdist made from a copy of the
    tracked files and the wheel from the sdist, as `python -m build` makes a release."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the tracked files are unknown")
    where = tmp_path_factory.mktemp("package")
    copy = where / "sandesh"
    files = tracked()
    for name in files:
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, copy / name)
    done = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(where / "dist"), str(copy)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    [sdist] = (where / "dist").glob("sandesh-*.tar.gz")
    [wheel] = (where / "dist").glob("sandesh-*.whl")
    with tarfile.open(sdist) as archive:
        in_sdist = [name.split("/", 1)[1] for name in archive.getnames() if "/" in name]
    return files, in_sdist, zipfile.ZipFile(wheel).namelist()


def test_every_file_of_the_product_is_in_the_wheel(built):
    files, _, wheel = built
    product = [name for name in files if name.startswith(tuple(f"{folder}/" for folder in SHIPPED))]
    assert len(product) > 150 and any(n.startswith("api/dashboard/templates/ops/") for n in product)
    missing = [name for name in product if f"sandesh/{name}" not in wheel]
    assert missing == []
    assert "sandesh/scripts/__init__.py" in wheel


def test_the_wheel_holds_nothing_else(built):
    """Only `sandesh/...` and its metadata; no benchmark, developer tool or test."""
    _, _, wheel = built
    assert {name.split("/")[0] for name in wheel} == {"sandesh", f"sandesh-{VERSION}.dist-info"}
    code = [name for name in wheel if name.startswith("sandesh/")]
    assert [name for name in code if not name.startswith(tuple(f"sandesh/{f}/" for f in SHIPPED))] \
        == ["sandesh/scripts/__init__.py"]
    assert not [name for name in code if name.startswith(tuple(f"sandesh/{f}/" for f in KEPT_HOME))]
    assert not [name for name in code if "__pycache__" in name or name.endswith(".pyc")]


def test_the_sdist_carries_what_an_operator_without_git_needs(built):
    """The docs, the CHANGELOG and the units beside the code, so that `pip install` of the unpacked
    sdist is the whole install of docs/operations.md, "Production"."""
    files, sdist, _ = built
    wanted = [name for name in files if name.startswith(("docs/", "scripts/service/", "domain/"))]
    wanted += ["CHANGELOG.md", "README.md", "pyproject.toml", "scripts/service/systemd/sandesh-serve.service",
               "scripts/service/systemd/sandesh-worker.service", "scripts/service/systemd/sandesh.target"]
    assert [name for name in wanted if name not in sdist] == []


def test_the_wheel_says_its_release(built):
    _, _, wheel = built
    assert f"sandesh-{VERSION}.dist-info/METADATA" in wheel


def test_the_suite_runs_the_installed_package_not_the_checkout():
    """scripts/test.sh installs a wheel of the checkout, not an editable install: a module or
    template that the package lacks fails the tests that use it."""
    installed = Path(sandesh.domain.__file__).resolve()
    assert installed != ROOT / "domain" / "__init__.py"
    assert installed.parts[-4:] == ("site-packages", "sandesh", "domain", "__init__.py"), installed


def test_the_command_and_python_m_run_outside_the_checkout(tmp_path):
    """From another folder (the checkout not on sys.path) both entry points find the package."""
    command = Path(sys.executable).parent / "sandesh"
    for argv in ([str(command), "--help"], [sys.executable, "-m", "sandesh.scripts.service.cli", "--help"]):
        done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert "Sandesh: SMS and OTP gateway for Nepal" in done.stdout
