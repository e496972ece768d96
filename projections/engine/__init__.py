"""The engine behind the projections (docs/design.md, "One handler, two executors"): the
executors that run a handler's row operations live as SQL (`sql.py`) and in a replay on rows in
memory, let go to disk past a budget (`memory.py`); `sandesh replay` itself (`replay.py`) and
the checkpoints it can start from (`checkpoints.py`).  A projection author needs none of it:
projections/rows.py is their part."""
