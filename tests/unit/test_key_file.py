"""The server key from a file (docs/operations.md, "Configuration"): SANDESH_SECRET_KEY_FILE, or
`secret_key` in systemd's $CREDENTIALS_DIRECTORY, read by each process for itself."""
from __future__ import annotations


import pytest

from sandesh.domain.settings import ConfigurationError
from sandesh.scripts.service.cli import key_from_file

KEY = "k" * 40


def test_the_key_is_read_from_the_named_file_or_the_credentials_directory(tmp_path):
    (tmp_path / "secret_key").write_text(KEY + "\n")
    assert key_from_file({"SANDESH_SECRET_KEY_FILE": str(tmp_path / "secret_key")})["SANDESH_SECRET_KEY"] == KEY
    assert key_from_file({"CREDENTIALS_DIRECTORY": str(tmp_path)})["SANDESH_SECRET_KEY"] == KEY
    assert "SANDESH_SECRET_KEY" not in key_from_file({"CREDENTIALS_DIRECTORY": str(tmp_path / "none")})
    assert key_from_file({"SANDESH_SECRET_KEY": KEY, "CREDENTIALS_DIRECTORY": str(tmp_path)})["SANDESH_SECRET_KEY"] == KEY


def test_a_missing_file_or_two_keys_that_differ_are_a_configuration_error(tmp_path):
    with pytest.raises(ConfigurationError, match="cannot read"):
        key_from_file({"SANDESH_SECRET_KEY_FILE": str(tmp_path / "missing")})
    (tmp_path / "secret_key").write_text(KEY)
    with pytest.raises(ConfigurationError, match="differ"):
        key_from_file({"SANDESH_SECRET_KEY": "x" * 40, "SANDESH_SECRET_KEY_FILE": str(tmp_path / "secret_key")})
