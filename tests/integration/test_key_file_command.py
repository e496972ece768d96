"""A server key file that cannot be read stops a `sandesh` command with the reason and exit
status 2 (docs/operations.md, "Configuration")."""
from __future__ import annotations

import os
import subprocess
import sys


def test_the_command_says_so_and_exits_2(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SANDESH_")}
    done = subprocess.run([sys.executable, "-m", "sandesh.scripts.service.cli", "clock", "show"], cwd=tmp_path,
                          env={**env, "SANDESH_SECRET_KEY_FILE": str(tmp_path / "missing")},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "SANDESH_SECRET_KEY_FILE: cannot read" in done.stderr
