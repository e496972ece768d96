"""How the `sandesh` command speaks: one JSON object on stdout, messages on stderr
(docs/design.md, "Decisions: the sandesh command")."""
from __future__ import annotations

import sys
from typing import Any

import orjson


def emit(value: Any) -> None:
    option = orjson.OPT_INDENT_2 if sys.stdout.isatty() else 0
    sys.stdout.write(orjson.dumps(value, option=option).decode() + "\n")
    sys.stdout.flush()


def emit_line(value: Any) -> None:
    sys.stdout.write(orjson.dumps(value).decode() + "\n")


def fail(message: str, status: int = 2) -> int:
    sys.stderr.write(f"sandesh: {message}\n")
    return status
