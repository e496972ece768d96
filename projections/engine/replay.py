"""`sandesh replay`: rebuild read models from the log beside the live ones, then swap.

One pass reads the log: each event is decoded once and handed to every projection being
rebuilt, whose handlers run on rows in memory (engine/memory.py, `MemoryRows`); each projection's
tables are then made in a scratch schema and filled with COPY.  The swap catches up the events
appended since with the same handlers on SQL (`SqlRows`) and moves the tables in, in one
transaction that holds what the live writer holds: for a followed projection its position row;
for the inline one (the registry) its tables and then the events table lock (the order live
appends take them), so no event is missed or applied twice while the API runs.
"""
from __future__ import annotations

import gc
import operator
import os
import queue
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Iterable, Iterator

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from sandesh.domain.release import VERSION
from sandesh.domain.topics import topics_of

from . import checkpoints
from .. import follower, registry
from ..contract import Projection
from .sql import SqlRows
from .memory import MemoryRows, SpillingRows
from ..storage.runtime import Runtime

PROJECTIONS: dict[str, Projection] = {registry.PROJECTION.name: registry.PROJECTION, **follower.FOLLOWED}
NAMES = tuple(PROJECTIONS)


class Progress:
    """A bar with count, rate and ETA on a terminal (tqdm); plain lines otherwise."""

    def __init__(self, name: str, total: int, verb: str = "replay", unit: str = "events"):
        self.name, self.total, self.done, self.started, self.last_line = name, total, 0, time.monotonic(), 0.0
        self.verb, self.unit = verb, unit
        self.bar = None
        if sys.stderr.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc=f"{verb} {name}", unit=unit, file=sys.stderr)

    def advance(self, count: int) -> None:
        self.done += count
        if self.bar is not None:
            self.bar.update(count)
        elif time.monotonic() - self.last_line >= 1.0:
            self.last_line = time.monotonic()
            self._line()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        elif self.done or self.total:  # a swap with nothing to catch up says nothing
            self._line()

    def _line(self) -> None:
        elapsed = max(time.monotonic() - self.started, 1e-6)
        rate = self.done / elapsed
        eta = (self.total - self.done) / rate if rate and self.total > self.done else 0
        sys.stderr.write(f"{self.verb} {self.name}: {self.done}/{self.total} {self.unit}, {rate:,.0f}/s, ETA {eta:.0f} s\n")
        sys.stderr.flush()


def _apply_batch(runtime: Runtime, conn: Any, schema: str, view: Projection, after: int,
                 upto: int | None = None) -> tuple[int, int]:
    """Apply the next batch of events after `after` (not past `upto`) into `schema` with SQL;
    returns (new position, count).  Used for the events appended after the one pass."""
    batch = follower.read_batch(runtime, view.topics(), after, upto=upto)
    if not batch:
        return after, 0
    with conn.cursor() as cur:
        cur.execute(f'SET LOCAL search_path = "{schema}"')
        rows = SqlRows(cur, view.tables)
        for notification in batch:
            view.apply(rows, runtime.sandesh.log.mapper.to_domain_event(notification), notification.id)
        cur.execute("SET LOCAL search_path = public")
    return batch[-1].id, len(batch)


READ_BATCH = 10_000
MEMORY_BUDGET = 1 << 30  # bytes a replay's process may hold, whatever the log's length (`--memory-mb`)


def _read(runtime: Runtime, topics: list[str], after: int = 0, upto: int | None = None) -> Iterator[list[Any]]:
    """The log's stored events of these topics after `after` (up to `upto`; without it, up to
    the head, followed while it moves) in batches of tuples (id, originator id, version, topic,
    state), read ahead by a thread on a connection of its own while the last batch is folded
    (the server's work and the network wait overlap the folding).

    Each query reads one window of READ_BATCH notification ids, whatever the table's statistics
    say: asked for "the next READ_BATCH after `after`" with no upper bound, a planner that
    misjudged the range sorted every event after `after` for each batch (docs/performance.md,
    "Replay")."""
    table = f'public."{runtime.sandesh.log.recorder.events_table_name}"'
    query = (f"SELECT notification_id, originator_id, originator_version, topic, state FROM {table}"
             " WHERE notification_id > %s AND notification_id <= %s AND topic = ANY(%s) ORDER BY notification_id")
    head = f"SELECT coalesce(max(notification_id), 0) FROM {table}"
    ahead: queue.Queue[Any] = queue.Queue(maxsize=2)
    stop = threading.Event()

    def reader() -> None:
        nonlocal after
        try:
            with psycopg.connect(runtime.settings.database_url, autocommit=True) as conn:
                cur = conn.cursor(binary=True)
                last = upto if upto is not None else cur.execute(head).fetchone()[0]
                while not stop.is_set():
                    if after >= last:
                        moved = cur.execute(head).fetchone()[0] if upto is None else last
                        if moved <= last:
                            ahead.put([])
                            return
                        last = moved
                    window = min(after + READ_BATCH, last)
                    batch = cur.execute(query, (after, window, topics), prepare=True).fetchall()
                    if batch:
                        ahead.put(batch)
                    after = window
        except BaseException as error:  # handed to the folding thread, which raises it
            ahead.put(error)

    thread = threading.Thread(target=reader, name="replay-reader", daemon=True)
    thread.start()
    try:
        while True:
            batch = ahead.get()
            if isinstance(batch, BaseException):
                raise batch
            if not batch:
                return
            yield batch
    finally:
        stop.set()
        while thread.is_alive():  # let a reader blocked on a full queue finish
            try:
                ahead.get_nowait()
            except queue.Empty:
                thread.join(0.05)


def _fold(runtime: Runtime, views: dict[str, Projection], memory: MemoryRows, progress: Progress,
          starts: dict[str, int], upto: int | None = None) -> tuple[int, dict[str, int]]:
    """Every event of the log after each view's start (0, or its checkpoint's position) and up
    to `upto`, decoded once, through the views' handlers on the rows in `memory`.  Returns the
    position reached and how many events each view handled."""
    handlers: dict[type, list[tuple[str, Any, int]]] = {}  # each view's handler of each class, looked up once
    for name, view in views.items():
        for cls, handler in view.handlers.items():
            handlers.setdefault(cls, []).append((name, handler, starts[name]))
    counts = dict.fromkeys(views, 0)
    decode = runtime.sandesh.log.mapper.decode
    position = first = min(starts.values())
    uneven = len(set(starts.values())) > 1  # views from checkpoints at different positions
    spilling = isinstance(memory, SpillingRows)
    for batch in _read(runtime, topics_of(handlers), first, upto):
        if spilling and memory.limit is not None:
            memory.take_back(_continued(batch))
        for notification_id, originator_id, version, topic, state in batch:
            event = decode(originator_id, version, topic, state)
            memory.position = notification_id  # where the event lies in the log (rows.Rows)
            for name, handler, start in handlers[type(event)]:
                if uneven and notification_id <= start:
                    continue
                handler(memory, event)
                counts[name] += 1
        position = batch[-1][0]
        progress.advance(len(batch))
    return max(position, *starts.values()), counts


def _continued(batch: list[Any]) -> list[str]:
    """The aggregates a batch of the log continues rather than starts (their first event in it
    is not their first): those whose rows may have been spilled."""
    first: dict[str, int] = {}
    for _, originator_id, version, _, _ in batch:
        first.setdefault(originator_id, version)
    return [originator_id for originator_id, version in first.items() if version > 1]


def _create(conn: Any, schema: str, view: Projection) -> list[str]:
    """The view's tables in a fresh `schema`, unlogged (the rows copied in, and the pages of
    their keys' indexes as these grow past the server's buffers, write no WAL; `_load` makes
    the tables that are kept logged, in one pass each), with their keys but without their other
    indexes, which cost more per row as rows are copied in than built once at the end: returns
    the statements that make those (`_Indexer` runs them)."""
    conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    conn.execute(f'CREATE SCHEMA "{schema}"')
    with conn.transaction():
        conn.execute(f'SET LOCAL search_path = "{schema}"')
        conn.execute(view.ddl)
        for table in view.tables:
            conn.execute(f'ALTER TABLE "{schema}"."{table}" SET UNLOGGED')
        later = conn.execute(
            "SELECT c.relname AS indexname, pg_get_indexdef(i.indexrelid) AS indexdef FROM pg_index i"
            " JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = %s AND NOT i.indisunique", (schema,)).fetchall()
        for index in later:
            conn.execute(f'DROP INDEX "{schema}"."{index["indexname"]}"')
    return [index["indexdef"] for index in later]


def _columns(conn: Any, schema: str, table: str) -> list[dict[str, Any]]:
    return conn.execute("SELECT column_name, column_default, data_type, udt_name FROM information_schema.columns"
                        " WHERE table_schema = %s AND table_name = %s ORDER BY ordinal_position",
                        (schema, table)).fetchall()


def column_defaults(conn: Any, schema: str, view: Projection) -> dict[str, dict[str, Any]]:
    """Each table's column DEFAULTs in `schema`, evaluated by the server, as the rows in memory start."""
    found = {}
    for table in view.tables:
        columns = _columns(conn, schema, table)
        given = [c for c in columns if c["column_default"] is not None]
        values = conn.execute("SELECT " + ", ".join(f'{c["column_default"]} AS "{c["column_name"]}"'
                                                      for c in given)).fetchone() if given else {}
        found[table] = {c["column_name"]: values.get(c["column_name"]) for c in columns}
    return found


def _copy(conn: Any, schema: str, table: str, rows: Iterable[dict[str, Any]],
          columns: list[dict[str, Any]] | None = None) -> None:
    """COPY rows as the handlers left them into `schema`.`table` (whose `columns` are looked up
    unless given), in the binary format where psycopg knows every column's type: the server
    parses no text, and psycopg's C dumpers format the values faster than as text."""
    columns = columns or _columns(conn, schema, table)
    names = [c["column_name"] for c in columns]
    json = [i for i, c in enumerate(columns) if c["data_type"] in ("jsonb", "json")]
    listed = ", ".join(f'"{n}"' for n in names)
    values = operator.itemgetter(*names) if len(names) > 1 else lambda row: (row[names[0]],)
    types = _binary_types(conn, columns)
    binary = " (FORMAT BINARY)" if types else ""
    with conn.cursor() as cur, cur.copy(f'COPY "{schema}"."{table}" ({listed}) FROM STDIN{binary}') as copy:
        if types:
            copy.set_types(types)
        write = copy.write_row
        if not json:
            for row in rows:
                write(values(row))
            return
        for row in rows:
            found = list(values(row))
            for i in json:
                if found[i] is not None:
                    found[i] = Jsonb(found[i])
            write(found)


def _binary_types(conn: Any, columns: list[dict[str, Any]]) -> list[int] | None:
    """The type OIDs of the columns for a binary COPY (an array's `udt_name` is its element's
    with a leading `_`), or None when psycopg does not know one of them."""
    oids = []
    for column in columns:
        udt = column["udt_name"]
        info = conn.adapters.types.get(udt[1:] if udt.startswith("_") else udt)
        if info is None:
            return None
        oids.append(info.array_oid if udt.startswith("_") else info.oid)
    return oids


class _Spill:
    """The tables a replay builds, as the place its rows in memory spill to (memory.py,
    `SpillingRows`): COPY out by a thread on a connection of its own, while the fold goes on
    (the server takes the rows in on its own core), and a row taken back by its key with
    DELETE ... RETURNING: at once when no COPY under way holds one of the keys asked for,
    else once every COPY handed over has ended."""

    def __init__(self, conn: Any, schemas: dict[str, str], tables: dict[str, Any], database_url: str):
        self.conn, self.schemas = conn, schemas
        self._take = {name: (f'DELETE FROM "{schemas[name]}"."{name}" WHERE '
                             + " AND ".join(f'"{c}" = %s' for c in spec.key) + " RETURNING *")
                      for name, spec in tables.items() if spec.key}
        self._take_many = {name: f'DELETE FROM "{schemas[name]}"."{name}" WHERE "{spec.key[0]}" = ANY(%s) RETURNING *'
                           for name, spec in tables.items() if len(spec.key) == 1}
        self._handed: queue.Queue[tuple[str, list[dict[str, Any]]] | None] = queue.Queue(maxsize=1)
        self._flying: list[tuple[str, set[Any]]] = []  # the table and keys of each COPY handed over, until it ended
        self._flying_lock = threading.Lock()
        self._failed: BaseException | None = None
        self._copier = threading.Thread(target=self._copy_out, args=(database_url,), name="replay-spill", daemon=True)
        self._copier.start()

    def _copy_out(self, database_url: str) -> None:
        conn = None
        columns: dict[str, list[dict[str, Any]]] = {}
        try:
            conn = psycopg.connect(database_url, autocommit=True, row_factory=dict_row)
        except BaseException as error:  # raised by the next put, take or close
            self._failed = error
        try:
            while True:
                handed = self._handed.get()
                try:
                    if handed is None:
                        return
                    if conn is not None and self._failed is None:
                        table, rows = handed
                        if table not in columns:
                            columns[table] = _columns(conn, self.schemas[table], table)
                        _copy(conn, self.schemas[table], table, rows, columns[table])
                except BaseException as error:
                    self._failed = error
                finally:
                    if handed is not None:
                        with self._flying_lock:
                            del self._flying[0]  # handed over and copied in order
                    self._handed.task_done()
        finally:
            if conn is not None:
                conn.close()

    def _check(self) -> None:
        if self._failed is not None:
            raise self._failed

    def put(self, table: str, rows: list[dict[str, Any]], keys: list[tuple[Any, ...]]) -> None:
        self._check()
        with self._flying_lock:
            self._flying.append((table, set(keys)))
        self._handed.put((table, rows))

    def _landed(self, table: str, keys: Iterable[tuple[Any, ...]]) -> None:
        """Wait until the rows of these keys the fold let go of are in the table (and raise what
        a COPY raised): at once when no COPY under way holds one of them."""
        with self._flying_lock:
            flying = [held for name, held in self._flying if name == table]
        if any(not held.isdisjoint(keys) for held in flying):
            self.settle()
        self._check()

    def settle(self) -> None:
        """Wait until every COPY handed over has ended."""
        self._handed.join()
        self._check()

    def take(self, table: str, key: tuple[Any, ...]) -> dict[str, Any] | None:
        self._landed(table, (key,))
        with self.conn.cursor(row_factory=dict_row) as cur:
            return cur.execute(self._take[table], key, prepare=True).fetchone()

    def take_many(self, table: str, keys: list[Any]) -> list[dict[str, Any]]:
        self._landed(table, [(key,) for key in keys])
        with self.conn.cursor(row_factory=dict_row) as cur:
            return cur.execute(self._take_many[table], (keys,), prepare=True).fetchall()

    def close(self) -> None:
        """Wait for the COPYs handed over, and end the thread."""
        self._handed.put(None)
        self._copier.join()
        self._check()


def _peak() -> int:
    """This process's peak resident memory, in KiB (Linux).  Not `ru_maxrss`: a process started by
    one that held more keeps that one's figure, while the high-water mark is of its own memory."""
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))


def _resident() -> int:
    """This process's resident memory, in bytes (Linux)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


# Memory a process needs beside the rows it holds, and that the limit on rows must leave free
# when it is set: what grows with the log while the limit holds (the queue's tallies, the filters
# of keys let go of, the batches in flight).  Half a budget, in a replay split in two, leaves
# too little at four fifths (docs/performance.md, "Replay").
HEADROOM = 192 << 20


def _high(budget: int) -> float:
    """The share of `budget` at which the rows held are limited: four fifths, or less where that
    would leave less than HEADROOM, but never below half."""
    return min(0.8, max(0.5, 1 - HEADROOM / budget))


INDEX_MEMORY = "256MB"  # maintenance_work_mem while a replay makes its tables' indexes


def _load(conn: Any, schema: str, view: Projection, memory: SpillingRows) -> int:
    """COPY the view's rows still in memory into its scratch tables (those spilled are there
    already); returns how many rows the tables hold."""
    total = 0
    for table in view.tables:
        _copy(conn, schema, table, memory.rows[table].values())
        total += len(memory.rows[table]) + memory.spilled.get(table, 0)
    return total


class _Indexer:
    """Makes the loaded tables logged (`kept`), their other indexes and statistics, two views at
    a time, each on a connection of its own, while the main connection copies the next view's
    rows in."""

    def __init__(self, database_url: str):
        self.database_url = database_url
        self.pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="replay-indexer")
        self.done: list[Future[float]] = []

    def submit(self, schema: str, view: Projection, indexes: list[str], kept: bool) -> None:
        logged = [f'ALTER TABLE "{schema}"."{table}" SET LOGGED' for table in view.tables] if kept else []
        statements = [*logged, *indexes, *(f'ANALYZE "{schema}"."{table}"' for table in view.tables)]
        self.done.append(self.pool.submit(self._run, statements))

    def _run(self, statements: list[str]) -> float:
        began = time.monotonic()
        with psycopg.connect(self.database_url, autocommit=True) as conn:
            conn.execute(f"SET maintenance_work_mem = '{INDEX_MEMORY}'")
            for statement in statements:
                conn.execute(statement)
        return time.monotonic() - began

    def wait(self) -> float:
        """Seconds spent making them, once all are made; raises what one of them raised."""
        try:
            return sum(future.result() for future in self.done)
        finally:
            self.pool.shutdown(cancel_futures=True)


def _checkpoints(conn: Any, names: list[str]) -> dict[str, dict[str, Any]]:
    """The checkpoints of the named projections; NoCheckpoint when one has none, or one made by
    another release."""
    found = checkpoints.read(conn)
    missing = [name for name in names if name not in found]
    if missing:
        raise NoCheckpoint(f"no checkpoint of {', '.join(missing)}: make one with `sandesh checkpoint`")
    other = [f"{name} (Sandesh {found[name]['release']})" for name in names if found[name]["release"] != VERSION]
    if other:
        raise NoCheckpoint(f"the checkpoints of {', '.join(other)} were made by another release, whose tables may "
                           f"differ: make new ones with `sandesh checkpoint --from-zero`")
    return found


def _pass(runtime: Runtime, conn: Any, prefix: str, views: dict[str, Projection], memory: SpillingRows,
          from_checkpoint: bool, upto: int | None) -> tuple[int, dict[str, int]]:
    """The one pass: each view's checkpoint loaded (`from_checkpoint`), then the log folded into
    `memory`.  Returns the position reached and how many events each view handled."""
    names = list(views)
    starts = dict.fromkeys(names, 0)
    if from_checkpoint:
        found = _checkpoints(conn, names)
        for name in names:
            starts[name] = found[name]["position"]
            checkpoints.load(conn, name, views[name], memory, f"{prefix}{name}")
    head = upto if upto is not None else runtime.sandesh.log.recorder.max_notification_id() or 0
    progress = Progress("log" if len(names) > 1 else names[0], max(0, head - min(starts.values())))
    collecting = gc.isenabled()
    gc.disable()  # the rows held make no cycles, and a full collection would walk every one of them
    try:
        position, counts = _fold(runtime, views, memory, progress, starts, upto)
    finally:
        if collecting:
            gc.enable()
    progress.close()
    return position, counts


def _build(runtime: Runtime, conn: Any, prefix: str, names: list[str], *, kept: bool,
           from_checkpoint: bool = False, upto: int | None = None,
           memory_budget: int = MEMORY_BUDGET) -> dict[str, Any]:
    """Each named projection's tables made in schema `prefix + name` from the whole log (from
    its checkpoint on, `from_checkpoint`; up to `upto`), in one pass on `SpillingRows`; logged
    in the end when they are `kept` (swapped in, or a checkpoint), else left unlogged to be
    dropped.  Returns the position reached and per view its events, rows and seconds."""
    views = {name: PROJECTIONS[name] for name in names}
    defaults: dict[str, dict[str, Any]] = {}
    indexes: dict[str, list[str]] = {}
    for name, view in views.items():
        indexes[name] = _create(conn, f"{prefix}{name}", view)
        defaults.update(column_defaults(conn, f"{prefix}{name}", view))
    tables = {table: spec for view in views.values() for table, spec in view.tables.items()}
    schemas = {table: f"{prefix}{name}" for name, view in views.items() for table in view.tables}
    spill = _Spill(conn, schemas, tables, runtime.settings.database_url)
    try:
        memory = SpillingRows(tables, defaults, spill, memory_budget, _resident, _high(memory_budget))
        started = time.monotonic()
        position, counts = _pass(runtime, conn, prefix, views, memory, from_checkpoint, upto)
    finally:
        spill.close()
    read = time.monotonic() - started
    built = {}
    indexer = _Indexer(runtime.settings.database_url)
    try:
        for name, view in views.items():
            began = time.monotonic()
            with conn.transaction():
                rows = _load(conn, f"{prefix}{name}", view, memory)
            indexer.submit(f"{prefix}{name}", view, indexes[name], kept)
            built[name] = {"events": counts[name], "rows": rows, "seconds": time.monotonic() - began}
    finally:
        waited = time.monotonic()
        indexing = indexer.wait()
    return {"position": position, "readSeconds": read, "projections": built, "memory": _memory(memory),
            "indexSeconds": round(indexing, 3), "indexWaitSeconds": round(time.monotonic() - waited, 3)}


def _memory(memory: SpillingRows) -> dict[str, Any]:
    """What the pass held: the process's peak resident memory, and the rows it let go of and took back."""
    return {"peakMB": round(_peak() / 1024),
            "budgetMB": memory.budget >> 20, "rowsSpilled": sum(memory.spilled.values()),
            "rowsTakenBack": memory.taken_back,
            "spilledByTable": {table: count for table, count in sorted(memory.spilled.items()) if count}}


class NoCheckpoint(Exception):
    """A replay from a checkpoint that was never made; the message says what to run."""


def rebuild_all(runtime: Runtime, names: list[str], *, from_checkpoint: bool = False,
                memory_budget: int = MEMORY_BUDGET) -> dict[str, Any]:
    """Rebuild the named projections from one pass over the log (over what follows their
    checkpoints, `from_checkpoint`), and swap each in."""
    with runtime.connection() as conn:
        built = _build(runtime, conn, "rebuild_", names, kept=True, from_checkpoint=from_checkpoint,
                       memory_budget=memory_budget)
        results = {}
        for name in names:
            began = time.monotonic()
            progress = Progress(f"{name} (swap)", 0)
            position = _swap(runtime, conn, f"rebuild_{name}", PROJECTIONS[name], built["position"], progress)
            done = built["projections"][name]
            results[name] = {"events": done["events"] + progress.done, "rows": done["rows"],
                             "seconds": round(done["seconds"] + time.monotonic() - began, 3), "position": position}
    return {"readSeconds": round(built["readSeconds"], 3), "projections": results, "position": built["position"],
            "memory": built["memory"], "indexSeconds": built["indexSeconds"],
            "indexWaitSeconds": built["indexWaitSeconds"]}


EXAMPLES = 3  # differing rows shown per table and side


def check(runtime: Runtime, names: list[str], *, since_checkpoint: bool = False,
          memory_budget: int = MEMORY_BUDGET) -> dict[str, Any]:
    """`sandesh replay --check`: rebuild beside the live tables (from the checkpoints on,
    `since_checkpoint`) and compare them row for row, without swapping anything.  `ok` is false
    when any table differs."""
    started = time.monotonic()
    with runtime.connection() as conn:
        try:
            built = _build(runtime, conn, "check_", names, kept=False, from_checkpoint=since_checkpoint,
                           memory_budget=memory_budget)
            results = {name: _check_one(runtime, conn, name, built["position"]) for name in names}
        finally:
            for name in names:
                conn.execute(f'DROP SCHEMA IF EXISTS "check_{name}" CASCADE')
    ok = all(t["differ"] == 0 for r in results.values() for t in r["tables"].values())
    return {"ok": ok, "seconds": round(time.monotonic() - started, 3), "projections": results,
            "memory": built["memory"]}


def _check_one(runtime: Runtime, conn: Any, name: str, position: int) -> dict[str, Any]:
    """The live tables are read in one REPEATABLE READ snapshot, together with how far into the
    log they are (the log's head for an inline projection, whose rows commit with their events;
    the position row for a followed one); the rebuilt tables are caught up to exactly that
    point inside the same transaction and compared.  The live path is never blocked: nothing is
    locked but the rows the snapshot reads."""
    view = PROJECTIONS[name]
    schema = f"check_{name}"
    if not view.inline:  # a live follower behind the pass is moved on, by the step its worker takes
        while follower.read_position(conn, name) < position and follower.step(runtime, view):
            pass
    with conn.transaction(force_rollback=True):
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        upto = _log_head(runtime, conn) if view.inline else follower.read_position(conn, name)
        count = 1
        while count and position < upto:
            position, count = _apply_batch(runtime, conn, schema, view, position, upto=upto)
        now = runtime.clock.now()
        tables = {table: _compare(conn, schema, table, view.working_columns.get(table, ()),
                                  view.retained[table](now) if table in view.retained else "true")
                  for table in view.tables}
    return {"position": upto, "tables": tables}


def _log_head(runtime: Runtime, conn: Any) -> int:
    table = runtime.sandesh.log.recorder.events_table_name
    return conn.execute(f'SELECT coalesce(max(notification_id), 0) AS head FROM public."{table}"').fetchone()["head"]


def _compare(conn: Any, schema: str, table: str, working: tuple[str, ...], where: str) -> dict[str, Any]:
    """Rows compared and rows that differ, as a multiset over the columns the log decides
    (`working` columns, a worker's leases, are left out), among the rows `where` keeps."""
    columns = [r["column_name"] for r in conn.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = 'public' AND table_name = %s"
        " ORDER BY ordinal_position", (table,)).fetchall() if r["column_name"] not in working]
    listed = ", ".join(f'"{c}"' for c in columns)
    live, rebuilt = f"public.{table}", f'"{schema}".{table}'

    def only_in(a: str, b: str) -> tuple[int, list[Any]]:
        difference = f"SELECT {listed} FROM {a} WHERE {where} EXCEPT ALL SELECT {listed} FROM {b} WHERE {where}"
        count = conn.execute(f"SELECT count(*) AS n FROM ({difference}) d").fetchone()["n"]
        examples = [r["row"] for r in conn.execute(
            f"SELECT row_to_json(d) AS row FROM ({difference}) d LIMIT {EXAMPLES}").fetchall()]
        return count, examples

    only_live, live_examples = only_in(live, rebuilt)
    only_rebuilt, rebuilt_examples = only_in(rebuilt, live)
    rows = conn.execute(f"SELECT count(*) AS n FROM {live} WHERE {where}").fetchone()["n"]
    return {"rows": rows, "differ": only_live + only_rebuilt, "onlyLive": live_examples,
            "onlyReplayed": rebuilt_examples}


SWAP_ATTEMPTS = 30
SWAP_LOCK_TIMEOUT = "200ms"  # below the server's deadlock_timeout (1 s): the swap is the one that yields


def _swap(runtime: Runtime, conn: Any, schema: str, view: Projection, position: int, progress: Progress) -> int:
    """Catch up, then catch up the rest under the live writer's locks and move the tables in.

    The events appended during the pass are applied first without any lock, so the locked
    part is short.  A live append takes the registry tables in the order its events need them,
    so the swap can meet one holding a table it wants while waiting for one the swap holds:
    the swap waits at most SWAP_LOCK_TIMEOUT for a lock, gives up, rolls back entirely and
    tries again, so it is never the live append that the server aborts as a deadlock."""
    count = 1
    while count:
        with conn.transaction():
            position, count = _apply_batch(runtime, conn, schema, view, position)
        progress.advance(count)
    for attempt in range(1, SWAP_ATTEMPTS + 1):
        try:
            with conn.transaction():
                conn.execute(f"SET LOCAL lock_timeout = '{SWAP_LOCK_TIMEOUT}'")
                caught_up, applied = _swap_once(runtime, conn, schema, view, position)
            progress.advance(applied)  # counted once it committed
            return caught_up
        except (psycopg.errors.DeadlockDetected, psycopg.errors.LockNotAvailable):
            if attempt == SWAP_ATTEMPTS:
                raise
            time.sleep(min(0.05 * attempt, 0.5))
    raise AssertionError("unreachable")


def _swap_once(runtime: Runtime, conn: Any, schema: str, view: Projection, position: int) -> tuple[int, int]:
    if view.inline:
        tables = ", ".join(f"public.{t}" for t in view.tables)
        conn.execute(f"LOCK TABLE {tables} IN ACCESS EXCLUSIVE MODE")
        conn.execute(f"LOCK TABLE public.{runtime.sandesh.log.recorder.events_table_name} IN EXCLUSIVE MODE")
    else:
        follower.lock_position(conn, view.name)
    count, applied = 1, 0
    while count:  # the events appended since, under the lock
        position, count = _apply_batch(runtime, conn, schema, view, position)
        applied += count
    for table in view.tables:
        conn.execute(f"DROP TABLE IF EXISTS public.{table}")
        conn.execute(f'ALTER TABLE "{schema}".{table} SET SCHEMA public')
    if not view.inline:
        follower.set_position(conn, view.name, position)
    else:  # the registry: the API processes' caller caches read its tables (projections/callers.py)
        conn.execute(registry.NOTIFY_CALLER)
        conn.execute(registry.NOTIFY_ROUTE)
    conn.execute(f'DROP SCHEMA "{schema}"')
    return position, applied


def replay(runtime: Runtime, names: list[str], *, from_checkpoint: bool = False,
           memory_budget: int = MEMORY_BUDGET) -> dict[str, Any]:
    started = time.monotonic()
    done = rebuild_all(runtime, names, from_checkpoint=from_checkpoint, memory_budget=memory_budget)
    return {"events": done["position"], "seconds": round(time.monotonic() - started, 3),
            "readSeconds": done["readSeconds"], "indexSeconds": done["indexSeconds"],
            "indexWaitSeconds": done["indexWaitSeconds"], "projections": done["projections"], "memory": done["memory"]}


def checkpoint(runtime: Runtime, names: list[str], *, from_zero: bool = False,
               memory_budget: int = MEMORY_BUDGET) -> dict[str, Any]:
    """`sandesh checkpoint`: fold the log into a checkpoint of each named projection, from its
    previous checkpoint on when every one has one (else, or `from_zero`, from zero), up to the log's head.  One
    made from the previous checkpoint is first compared, row for row, with a fresh fold from
    zero to the same position; it replaces the previous one only when they are equal."""
    started = time.monotonic()
    with runtime.connection() as conn:
        conn.execute(checkpoints.DDL)
        previous = checkpoints.read(conn)
        onward = not from_zero and all(name in previous and previous[name]["release"] == VERSION for name in names)
        try:
            built = _build(runtime, conn, "checkpoint_new_", names, kept=True, from_checkpoint=onward,
                           memory_budget=memory_budget)
            verified = "a fresh fold from zero"
            if onward:
                _build(runtime, conn, "checkpoint_fresh_", names, kept=False, upto=built["position"],
                       memory_budget=memory_budget)
                differ = {}
                for name in names:
                    tables = checkpoints.differences(conn, PROJECTIONS[name], f"checkpoint_new_{name}",
                                                     f"checkpoint_fresh_{name}")
                    if any(tables.values()):
                        differ[name] = {table: n for table, n in tables.items() if n}
                if differ:
                    return {"ok": False, "position": built["position"], "differ": differ,
                            "seconds": round(time.monotonic() - started, 3)}
                verified = "equal to a fresh fold from zero"
            with conn.transaction():
                for name in names:
                    done = built["projections"][name]
                    checkpoints.keep(conn, name, f"checkpoint_new_{name}", built["position"], done["rows"],
                                     round(time.monotonic() - started, 3), verified)
        finally:
            for name in names:
                conn.execute(f'DROP SCHEMA IF EXISTS "checkpoint_new_{name}" CASCADE')
                conn.execute(f'DROP SCHEMA IF EXISTS "checkpoint_fresh_{name}" CASCADE')
    return {"ok": True, "position": built["position"], "from": "the previous checkpoint" if onward else "zero",
            "verified": verified, "seconds": round(time.monotonic() - started, 3),
            "projections": {name: {"rows": built["projections"][name]["rows"]} for name in names}}

