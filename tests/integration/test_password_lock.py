"""Password checks run on a child process that holds the machine's lock (projections/storage/passwords.py)."""


def test_the_machines_password_lock_is_a_file_of_the_runtime_directory_only_its_owner_opens(tmp_path):
    """Not /tmp, where any local user could hold the lock and stop every sign-in."""
    from sandesh.projections.storage.passwords import Argon2Hasher

    hasher = Argon2Hasher(str(tmp_path / "run"))
    try:
        assert hasher.verify(hasher.hash("correct horse"), "correct horse")
    finally:
        hasher.close()
    lock = tmp_path / "run" / "passwords.lock"
    assert lock.exists() and lock.stat().st_mode & 0o777 == 0o600
