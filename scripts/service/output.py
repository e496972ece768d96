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


def table(header: list[str], rows: list[list[str]]) -> None:
    """Columns for a person at a terminal (a command that offers one also speaks JSON: --json)."""
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows)]
    for row in [header, *rows]:
        sys.stdout.write("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() + "\n")
    sys.stdout.flush()
