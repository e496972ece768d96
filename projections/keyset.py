"""Keyset pages, newest first: the dashboard's Messages and Audit log (docs/dashboard.md,
"Messages").  A page link carries the ordering columns of the row it starts after, and a page
reads `limit` rows from there on an index that leads with the equality filters and then those
columns, so it costs the same on the first page and a year back."""
from __future__ import annotations

from typing import Any, Sequence

Conditions = tuple[Sequence[str], Sequence[Any]]
EVERY_ROW: Conditions = ((), ())


def newest_first_query(table: str, order: tuple[str, ...], where: Conditions, since: float | None,
                       until: float | None, page: tuple[str, tuple[Any, ...]] | None, limit: int,
                       either: Sequence[Conditions] = (EVERY_ROW,)) -> tuple[str, list[Any]]:
    """The SQL and parameters of a page of `table`'s rows matching `where` and one of `either`
    (disjoint alternatives, each read on its own index and merged), with the first of `order`
    (a time) in [since, until).  `page` is ("before", key) for the rows older than a row's
    `order` key, ("after", key) for the newer, read oldest first; without it, the newest."""
    conditions, params = list(where[0]), list(where[1])
    if since is not None:
        conditions.append(f"{order[0]} >= %s")
        params.append(since)
    if until is not None:
        conditions.append(f"{order[0]} < %s")
        params.append(until)
    newer = page is not None and page[0] == "after"
    if page is not None:
        conditions.append(f"({', '.join(order)}) {'>' if newer else '<'} ({', '.join(['%s'] * len(order))})")
        params.extend(page[1])
    direction = "ASC" if newer else "DESC"
    ordering = ", ".join(f"{column} {direction}" for column in order)
    selects, values = [], []
    for alternative, extra in either:
        selects.append(f"SELECT * FROM {table} WHERE {' AND '.join([*conditions, *alternative]) or 'true'}"
                       f" ORDER BY {ordering} LIMIT %s")
        values += [*params, *extra, limit]
    if len(selects) == 1:
        return selects[0], values
    merged = " UNION ALL ".join(f"({select})" for select in selects)
    return f"SELECT * FROM ({merged}) either_one ORDER BY {ordering} LIMIT %s", [*values, limit]


def read_page(conn: Any, query: tuple[str, list[Any]], page: tuple[str, tuple[Any, ...]] | None) -> list[dict[str, Any]]:
    """The rows of a `newest_first_query`, newest first."""
    rows = conn.execute(*query).fetchall()
    return rows[::-1] if page is not None and page[0] == "after" else rows
