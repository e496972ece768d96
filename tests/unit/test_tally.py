"""A tally (projections/rows.py, `Tally`) answers the lowest and highest value of each group as
a plain multiset of the rows would, dense or spread out, and forgets a group once it is empty;
the filter of the keys a replay let go of (`_LetGo`) holds every one of them."""
from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from sandesh.projections.rows import Table, Tally
from sandesh.projections.engine.memory import MemoryRows, _Counts, _LetGo

TABLES = {"queue": Table("queue", ("id",), (Tally("turns", ("grp",), "turn"),
                                            Tally("waiting", ("grp",), "turn", where=lambda r: r["sim"] is None)))}

steps = st.lists(st.tuples(st.sampled_from(["add", "remove", "take", "release"]), st.integers(0, 40),
                           st.sampled_from(["g", "h"]), st.one_of(st.integers(0, 60), st.integers(0, 50_000))),
                 max_size=120)


@settings(max_examples=300, deadline=None)
@given(steps)
def test_a_tally_answers_as_the_rows_would(script):
    memory = MemoryRows(TABLES, {"queue": {"sim": None}})
    rows: dict[str, dict] = {}
    for action, n, grp, turn in script:
        key = f"m{n}"
        if action == "add" and key not in rows:
            rows[key] = {"id": key, "grp": grp, "turn": turn, "sim": None}
            memory.insert("queue", {"id": key, "grp": grp, "turn": turn})
        elif action == "remove" and key in rows:
            del rows[key]
            memory.delete("queue", (key,))
        elif action in ("take", "release") and key in rows:
            sim = "sim_a" if action == "take" else None
            rows[key]["sim"] = sim
            memory.update("queue", (key,), {"sim": sim})
        for group in ("g", "h"):
            every = [r["turn"] for r in rows.values() if r["grp"] == group]
            waiting = [r["turn"] for r in rows.values() if r["grp"] == group and r["sim"] is None]
            assert memory.highest("queue", "turns", (group,)) == (max(every) if every else None)
            assert memory.lowest("queue", "turns", (group,)) == (min(every) if every else None)
            assert memory.lowest("queue", "waiting", (group,)) == (min(waiting) if waiting else None)


def test_counts_stay_dense_while_values_lie_close_and_let_the_emptied_front_go():
    counts = _Counts(0)
    for value in range(100_000):
        counts.add(value)
    for value in range(90_000):
        counts.remove(value)
        assert counts.lowest() == value + 1
    assert counts.sparse is None and len(counts.counts) < 60_000  # the emptied front was let go
    assert (counts.lowest(), counts.highest()) == (90_000, 99_999)


def test_counts_spread_far_apart_are_kept_as_a_sorted_list():
    counts = _Counts(5)
    counts.add(5)
    counts.add(10_000_000)  # a dense array would hold ten million counts for two rows
    assert counts.sparse is not None and (counts.lowest(), counts.highest()) == (5, 10_000_000)
    counts.add(5)
    assert not counts.remove(5) and Counter(counts.sparse) == Counter([5, 10_000_000])
    assert not counts.remove(10_000_000) and counts.highest() == 5
    assert counts.remove(5)  # empty


def test_the_filter_of_keys_let_go_never_forgets_one_and_rarely_imagines_one():
    let_go = _LetGo()
    held = [(f"msg_{i}",) for i in range(200_000)]  # past the first layer: three layers
    for start in range(0, len(held), 10_000):
        let_go.add(held[start:start + 10_000])
    assert len(let_go.layers) >= 2 and all(let_go.may_hold(key) for key in held)
    others = sum(let_go.may_hold((f"other_{i}",)) for i in range(100_000))
    assert others < 100_000 * 0.05, others  # a few layers, each wrong for about one key in 70
