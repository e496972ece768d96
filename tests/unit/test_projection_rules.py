"""What someone changing a projection must know, checked on every projection the package ships
(docs/design.md, "Changing a projection"): rules that the executors rely on and that a handler
could break without any other test noticing until a replay or a busy day."""
from __future__ import annotations

import ast
import inspect
import textwrap
import types
from typing import Any, Iterator

import pytest

from sandesh.projections.contract import ReadModel
from sandesh.projections.engine.replay import PROJECTIONS
from sandesh.projections.rows import Ordered, Rows, Table


def _calls_on_rows(function: Any, rows: str, seen: set[Any]) -> Iterator[tuple[str, ast.Call, Any]]:
    """Each call `<rows>.<method>(...)` in `function`, and in every function of ours it hands `rows` to."""
    if function in seen or not isinstance(function, types.FunctionType):
        return
    seen.add(function)
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    names = {**function.__globals__, **inspect.getclosurevars(function).nonlocals}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        if isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) \
                and node.func.value.id == rows:
            yield node.func.attr, node, function
            continue
        passed = [i for i, arg in enumerate(node.args) if isinstance(arg, ast.Name) and arg.id == rows]
        if not passed:
            continue
        callee = _resolve(node.func, names)
        if isinstance(callee, types.FunctionType):
            yield from _calls_on_rows(callee, inspect.getfullargspec(callee).args[passed[0]], seen)


def _resolve(func: ast.expr, names: dict[str, Any]) -> Any:
    if isinstance(func, ast.Name):
        return names.get(func.id)
    if isinstance(func, ast.Attribute):
        owner = _resolve(func.value, names)
        return getattr(owner, func.attr, None) if owner is not None else None
    return None


def _operations(handler: Any) -> list[tuple[str, ast.Call, Any]]:
    return list(_calls_on_rows(handler, inspect.getfullargspec(handler).args[0], set()))


def _reads(projection: ReadModel) -> list[str]:
    return sorted({f"{fn.__module__}.{fn.__qualname__} line {fn.__code__.co_firstlineno + call.lineno - 1}"
                   for handler in set(projection.handlers.values())
                   for method, call, fn in _operations(handler) if method == "get"})


INLINE = [p for p in PROJECTIONS.values() if p.inline]


def test_the_rules_are_checked_on_the_projections_there_are():
    assert {p.name for p in INLINE} == {"registry"} and len(PROJECTIONS) > 5
    assert sum(len(_operations(h)) for p in PROJECTIONS.values() for h in p.handlers.values()) > 100
    assert _trimmed(PROJECTIONS["registry"]) == {"otp_issues"} and WITH_ORDERED == [PROJECTIONS["registry"]]


@pytest.mark.parametrize("projection", INLINE, ids=lambda p: p.name)
def test_an_inline_handler_only_writes(projection):
    """Live, an inline projection's handlers run inside the append's one script (AppendRows): a
    read would need an answer from the server in the middle of it, so `rows.get` raises there.
    A handler that reads belongs to a followed projection."""
    assert _reads(projection) == []


def _positions(function: Any, rows: str, seen: set[Any]) -> Iterator[str]:
    """Where `function`, or a function of ours it hands `rows` to, reads `<rows>.position`."""
    if function in seen or not isinstance(function, types.FunctionType):
        return
    seen.add(function)
    names = {**function.__globals__, **inspect.getclosurevars(function).nonlocals}
    for node in ast.walk(ast.parse(textwrap.dedent(inspect.getsource(function)))):
        if isinstance(node, ast.Attribute) and node.attr == "position" and isinstance(node.value, ast.Name) \
                and node.value.id == rows:
            line = function.__code__.co_firstlineno + node.lineno - 1
            yield f"{function.__module__}.{function.__qualname__} line {line}"
        elif isinstance(node, ast.Call):
            passed = [i for i, arg in enumerate(node.args) if isinstance(arg, ast.Name) and arg.id == rows]
            callee = _resolve(node.func, names) if passed else None
            if isinstance(callee, types.FunctionType):
                yield from _positions(callee, inspect.getfullargspec(callee).args[passed[0]], seen)


def _position_reads(projection: ReadModel) -> list[str]:
    return sorted({found for handler in set(projection.handlers.values())
                   for found in _positions(handler, inspect.getfullargspec(handler).args[0], set())})


@pytest.mark.parametrize("projection", INLINE, ids=lambda p: p.name)
def test_an_inline_handler_reads_no_position(projection):
    """An append's events get their place in the log only when it commits, after its inline
    writer ran: `rows.position` raises there.  A handler that needs it belongs to a followed
    projection, whose executors set it before each event, live and in a replay."""
    assert _position_reads(projection) == []


def test_the_check_finds_a_position_read_however_deep():
    model = ReadModel(tables={"t": Table("t", ("id",))}, ddl="")

    def helper(into: Rows, e: Any) -> None:
        into.insert("t", {"id": e, "at": into.position})

    @model.on(int)
    def _handler(rows: Rows, e: int) -> None:
        helper(rows, e)

    assert _position_reads(model) == [f"{__name__}.{helper.__qualname__} line {helper.__code__.co_firstlineno + 1}"]
    assert any(_position_reads(p) for p in PROJECTIONS.values() if not p.inline)  # the feed's order


def test_the_check_finds_a_read_however_deep():
    model = ReadModel(tables={"t": Table("t", ("id",))}, ddl="")

    def helper(into: Rows, e: Any) -> None:
        into.insert("t", {"id": into.get("t", (e,), "id")})

    @model.on(int)
    def _handler(rows: Rows, e: int) -> None:
        helper(rows, e)

    assert _reads(model) == [f"{__name__}.{helper.__qualname__} line {helper.__code__.co_firstlineno + 1}"]


def _trimmed(projection: ReadModel) -> set[str]:
    return {call.args[0].value for handler in set(projection.handlers.values())
            for method, call, _ in _operations(handler)
            if method == "delete_upto" and isinstance(call.args[0], ast.Constant)}


def _kept_whole(projection: ReadModel) -> set[str]:
    """Its tables with an `Ordered` index: a replay keeps them in memory whole."""
    return {name for name, table in projection.tables.items()
            if any(isinstance(index, Ordered) for index in table.ordered)}


WITH_ORDERED = [p for p in PROJECTIONS.values() if _kept_whole(p)]


@pytest.mark.parametrize("projection", WITH_ORDERED, ids=lambda p: p.name)
def test_a_table_kept_whole_in_a_replays_memory_is_trimmed(projection):
    """A table with an `Ordered` index is never let go to disk during a replay (engine/memory.py,
    `SpillingRows`): it must stay the size of a window, trimmed by `delete_upto`, or a long log
    would exceed the replay's memory."""
    assert _kept_whole(projection) <= _trimmed(projection)


def test_the_check_finds_a_table_kept_whole_and_never_trimmed():
    model = ReadModel(tables={"w": Table("w", ("id",), ordered=(Ordered("by_at", (), "at"),))}, ddl="")

    @model.on(int)
    def _handler(rows: Rows, e: int) -> None:
        rows.insert("w", {"id": e, "at": e})

    assert _kept_whole(model) == {"w"} and not _kept_whole(model) <= _trimmed(model)


@pytest.mark.parametrize("projection", PROJECTIONS.values(), ids=lambda p: p.name)
def test_every_operation_names_a_table_of_its_projection(projection):
    """A handler writes only its own projection's tables: a replay rebuilds those and no other."""
    named = {call.args[0].value for handler in set(projection.handlers.values())
             for method, call, _ in _operations(handler)
             if method in {"insert", "update", "delete", "delete_upto", "get"} and isinstance(call.args[0], ast.Constant)}
    assert named and named <= set(projection.tables)
