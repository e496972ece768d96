"""The projection contract (projections/contract.py): one handler per event class, typed with the
events it is registered for; every table in one projection; and an append's executor
(`AppendRows`) that only groups what the handlers state, without reading the database."""
from __future__ import annotations

import typing

import pytest

from sandesh.projections import (alerts, contacts, dispatch, idempotency, inbound, optouts, otp_limits, people, registry,
                                 webhooks)
from sandesh.projections.contract import Handlers, Projection, ReadModel
from sandesh.projections.engine.replay import NAMES, PROJECTIONS
from sandesh.projections.rows import Add, Batching, Table
from sandesh.projections.engine.sql import AppendRows


def test_each_handler_takes_the_events_it_is_registered_for():
    """A handler's event parameter names its events' classes (or a base of them)."""
    wrong = []
    for projection in PROJECTIONS.values():
        for cls, handler in projection.handlers.items():
            annotation = typing.get_type_hints(handler).get("e")
            accepted = typing.get_args(annotation) or (annotation,)
            if not any(isinstance(a, type) and issubclass(cls, a) for a in accepted):
                wrong.append(f"{projection.name}: {handler.__qualname__} is registered for {cls.__qualname__}"
                             f" but takes {annotation}")
    assert wrong == []


def test_an_event_class_has_one_handler():
    handlers = Handlers()

    @handlers.on(int)
    def first(rows, e: int) -> None: ...

    with pytest.raises(ValueError, match="handled already"):
        @handlers.on(str, int)
        def second(rows, e: int | str) -> None: ...
    with pytest.raises(ValueError, match="handled already"):
        Handlers(handlers, {int: first})


def test_the_inline_projection_is_every_inline_read_model():
    """The registry's projection holds each inline module's tables and handlers, and no table
    belongs to two projections."""
    models = (registry.OWN, idempotency.MODEL, dispatch.MODEL, inbound.MODEL, otp_limits.MODEL, webhooks.MODEL,
              optouts.MODEL, people.MODEL, contacts.MODEL, alerts.MODEL)
    projection = registry.PROJECTION
    assert projection.inline and NAMES[0] == projection.name
    assert sorted(projection.tables) == sorted(t for m in models for t in m.tables)
    assert all(projection.handlers[cls] is handler for m in models for cls, handler in m.handlers.items())
    tables = [t for p in PROJECTIONS.values() for t in p.tables]
    assert len(tables) == len(set(tables))
    assert [p.inline for p in PROJECTIONS.values()].count(True) == 1


class Recorded:
    def __init__(self):
        self.statements = []

    def execute(self, query, params=None):
        self.statements.append(" ".join(str(query).split()))


def _many(cur, rows):
    cur.execute(f"MANY {[r['id'] for r in rows]}")


def _sums(cur, sums):
    cur.execute(f"SUMS {sorted((key, columns['n']) for key, columns in sums.items())}")


TABLES = {"queue": Table("queue", ("id",), batching=Batching(lock="LOCK queue", insert_many=_many, many_from=3)),
          "money": Table("money", ("id",), batching=Batching(add_many=_sums)),
          "other": Table("other", ("id",))}


def test_an_append_takes_its_locks_first_and_writes_its_sums_last():
    cur = Recorded()
    rows = AppendRows(cur, TABLES)
    rows.update("money", ("b",), {"n": Add(-5)})
    rows.insert("other", {"id": 1})
    rows.insert("queue", {"id": "q1"})
    rows.update("money", ("a",), {"n": Add(-1)})
    rows.update("money", ("b",), {"n": Add(2)})
    rows.insert("queue", {"id": "q2"})
    rows.insert("queue", {"id": "q3"})
    assert cur.statements == []  # nothing reaches the append's cursor before `finish`
    rows.finish()
    assert cur.statements[0] == "LOCK queue"
    assert cur.statements[1].startswith("INSERT INTO other")
    assert cur.statements[2:] == ["MANY ['q1', 'q2', 'q3']", "SUMS [(('a',), -1), (('b',), -3)]"]


def test_waiting_inserts_go_before_anything_that_may_see_them_and_alone_below_the_threshold():
    cur = Recorded()
    rows = AppendRows(cur, TABLES)
    rows.insert("queue", {"id": "q1"})
    rows.delete("queue", ("q0",))
    rows.insert("queue", {"id": "q2"})
    rows.guard("SELECT guard")
    rows.update("money", ("a",), {"n": Add(1), "note": "not only an addition"})
    rows.update("money", ("a",), {"n": Add(4)})
    rows.finish()
    assert [s.split(" (")[0].split(" WHERE")[0] for s in cur.statements] == [
        "LOCK queue", 'INSERT INTO queue', "DELETE FROM queue", "INSERT INTO queue", "SELECT guard",
        'UPDATE money SET "n" = "n" + %s, "note" = %s', 'UPDATE money SET "n" = "n" + %s']


def test_an_append_reads_nothing_back():
    with pytest.raises(TypeError):
        AppendRows(Recorded(), TABLES).get("queue", ("q1",), "id")


def test_an_appends_events_have_no_position_yet():
    """The notification ids of an append's events are given when it commits, after its writer ran."""
    with pytest.raises(TypeError):
        AppendRows(Recorded(), TABLES).position


def test_a_followed_projection_has_no_inline_writer_and_the_inline_one_is_not_followed():
    followed = Projection(name="f", tables={}, ddl="")
    with pytest.raises(AssertionError):
        followed.inline_writer([])
    with pytest.raises(AssertionError):
        registry.PROJECTION.follow(None, [])
    assert isinstance(followed, ReadModel)
