"""Which release this code is, and how releases compare (docs/operations.md, "Upgrading").

Releases follow semantic versioning and each has a git tag `vX.Y.Z` and an entry in
CHANGELOG.md.  The database records the release that last migrated it and the release its log
is finalized at (the upgrade gate): events are written in the shapes every release from
`OLDEST_PEER` on reads until an operator finalizes the upgrade.
"""
from __future__ import annotations

VERSION = "0.4.0"

# The release whose processes may still run beside this one during a rolling upgrade (one
# release at a time): until the database is finalized at VERSION, this release writes nothing
# that OLDEST_PEER cannot read.
OLDEST_PEER = "0.3.0"


def parse(version: str) -> tuple[int, int, int]:
    """`"0.3.0"` -> (0, 3, 0); a version that is not MAJOR.MINOR.PATCH is a ValueError."""
    parts = version.strip().split(".")
    if len(parts) != 3 or not all(part.isdigit() for part in parts):
        raise ValueError(f"{version!r} is not a release version (MAJOR.MINOR.PATCH)")
    major, minor, patch = (int(part) for part in parts)
    return major, minor, patch


def older(version: str, than: str) -> bool:
    return parse(version) < parse(than)
