"""What the README tells a newcomer to run runs: its two commands, `.ci/run` running the second,
the editable install of the developers' loop, and every benchmark and tool it names."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
FENCED = re.findall(r"^```sh\n(.*?)^```", README, re.M | re.S)


def test_the_two_commands_are_the_first_thing_shown_and_ci_runs_the_second():
    assert FENCED, "the README shows its commands in ```sh blocks"
    first = [line.split("#")[0].strip() for line in FENCED[0].splitlines() if line.strip()]
    assert first == ["scripts/up.sh", "scripts/test.sh"]
    for script in first:
        assert os.access(ROOT / script, os.X_OK), f"{script} is not executable"
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^exec scripts/test\.sh\s*$", ci, re.M), ".ci/run runs exactly the README's test command"


@pytest.mark.parametrize("module", sorted(set(re.findall(r"python -m\s+(scripts\.(?:bench|devtools)\.\w+)", README))))
def test_each_benchmark_and_tool_the_readme_names_runs(module):
    done = subprocess.run([sys.executable, "-m", module, "--help"], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert "usage:" in done.stdout


def test_the_editable_install_of_the_developers_loop_is_the_checkout(tmp_path):
    """`pip install -e .` (README, "Developers"): the `sandesh` package is then the checkout's
    folders, so an edit is seen without a build."""
    assert ".venv/bin/pip install -e ." in README
    venv.create(tmp_path / "venv", with_pip=True)
    python = tmp_path / "venv" / "bin" / "python"
    backend = {**os.environ, "PYTHONPATH": sysconfig.get_paths()["purelib"]}  # hatchling, from the suite's venv
    installed = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                                "-e", str(ROOT)], env=backend, capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stderr[-2000:]
    where = subprocess.run([str(python), "-c", "import sandesh.domain.segments as s; print(s.__file__)"],
                           cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert where.stdout.strip() == str(ROOT / "domain" / "segments.py"), where.stderr
