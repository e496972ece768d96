"""What a page of the dashboard's Audit log costs when the trail is long: each filter's query
(projections/audit.py, `query`) under EXPLAIN ANALYZE, on N generated lines spread over W
workspaces in a scratch database.

    .venv/bin/python -m scripts.bench.audit_page N [--workspaces W]

Prints one JSON line per page asked: the median execution time of 20 runs, the rows its reads
of `audit_lines` returned and filtered out, and whether every one of them is an index scan.
"""
from __future__ import annotations

import argparse
import json
import statistics
from typing import Any, Iterator

import psycopg

from sandesh.api.dashboard.paging import PAGE
from sandesh.projections import audit

from .common import scratch_database

ACTIONS = ("client.key_rotated", "client.updated", "person.added", "workspace.credited", "optout.added")
START = 1_750_000_000.0


def fill(conn: Any, lines: int, workspaces: int) -> None:
    """`lines` audit lines, one a second, dealt to the workspaces in turn; each workspace's lines
    take five actions in turn, three clients and ten people (one line in five by a person), then
    ANALYZE."""
    conn.execute(
        "INSERT INTO audit_lines SELECT 'gen_' || g, 1, %(start)s + g,"
        " CASE WHEN g / %(ws)s %% 5 = 1 THEN 'user:p' || (g %% (%(ws)s * 10)) || '@example.com' ELSE 'operator' END,"
        " (%(actions)s::text[])[g / %(ws)s %% 5 + 1], 'ws_' || (g %% %(ws)s), 'cl_' || (g %% (%(ws)s * 3)), NULL,"
        " jsonb_build_object('email', 'p' || (g %% (%(ws)s * 10)) || '@example.com')"
        " FROM generate_series(1, %(lines)s) g",
        {"start": START, "ws": workspaces, "actions": list(ACTIONS), "lines": lines})
    conn.execute("ANALYZE audit_lines")


def pages(lines: int, workspaces: int) -> dict[str, tuple[Any, ...]]:
    """The pages measured, of workspace ws_7, as `audit.query`'s arguments."""
    middle = START + lines // 2
    client, person = f"cl_{7 + workspaces}", f"p{7 + workspaces}@example.com"  # both of ws_7
    return {"newest": (None, None, None, None, None, None),
            "older, from the middle": (None, None, None, None, None, ("before", (middle, "gen_x", 1))),
            "action": ("client.updated", None, None, None, None, None),
            "client": (None, client, None, None, None, None),
            "person": (None, None, person, None, None, None),
            "dates": (None, None, None, middle - 86_400, middle, None)}


def scans(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The plan's reads of audit_lines."""
    if plan.get("Relation Name") == "audit_lines":
        yield plan
    for child in plan.get("Plans", []):
        yield from scans(child)


def measured(conn: Any, name: str, args: tuple[Any, ...], runs: int = 20) -> dict[str, Any]:
    action, client, person, since, until, page = args
    sql, params = audit.query("ws_7", action, client, person, since, until, page, PAGE + 1)
    times, plan = [], {}
    for _ in range(runs):
        plan = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params).fetchone()["QUERY PLAN"][0]
        times.append(plan["Execution Time"])
    read = list(scans(plan["Plan"]))
    return {"page": name, "ms": round(statistics.median(times), 3), "rows": sum(s["Actual Rows"] for s in read),
            "filteredOut": sum(s.get("Rows Removed by Filter", 0) for s in read),
            "indexScans": all(s["Node Type"] in ("Index Scan", "Index Only Scan") for s in read)}


def main(argv: list[str]) -> int:
    args = _arguments(argv)
    with scratch_database() as env:
        with psycopg.connect(env["DATABASE_URL"], autocommit=True, row_factory=psycopg.rows.dict_row) as conn:
            fill(conn, args.lines, args.workspaces)
            for name, page in pages(args.lines, args.workspaces).items():
                print(json.dumps({"lines": args.lines, "workspaces": args.workspaces, **measured(conn, name, page)}),
                      flush=True)
    return 0


def _arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("lines", metavar="N", type=int, help="audit lines in all")
    parser.add_argument("--workspaces", type=int, default=1000)
    return parser.parse_args(argv)


if __name__ == "__main__":
    import sys

    raise SystemExit(main(sys.argv[1:]))
