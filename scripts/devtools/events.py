"""The checked-in description of every event class (domain/events.json) against the code.

    python -m scripts.devtools.events            # compare; exit 1 with what differs
    python -m scripts.devtools.events --write    # record new event types and new versions

domain/events.json holds, per topic, the fields of every version the log may hold.  A version
once recorded never changes: an event class whose fields differ from its recorded version
needs a new `class_version` and an `upcast_vN_vN+1` (docs/design.md, "Event versions"), and
`--write` refuses anything else.  tests/unit/test_event_versions.py runs the comparison.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from eventsourcing.utils import resolve_topic

from sandesh.domain import events

# The record in the checkout, the one `--write` adds to and git keeps (the installed copy is built from it).
RECORDED = Path(__file__).resolve().parents[2] / "domain" / "events.json"

Recorded = dict[str, dict[str, dict[str, str]]]  # topic -> version ("1", "2", ...) -> field -> annotation


def load(path: Path = RECORDED) -> Recorded:
    return json.loads(path.read_text()) if path.exists() else {}


def problems(recorded: Recorded, current: dict[str, dict[str, Any]], *, writing: bool = False) -> list[str]:
    """What keeps the code from matching the record.  Writing, a new event type (version 1)
    or the next version of a recorded one is fine; checking, it is a problem too."""
    found = []
    for topic in sorted(recorded.keys() - current.keys()):
        found.append(f"{topic} is gone from the code, but logs of earlier releases hold it: keep its class, "
                     "or register its old topic where it moved (eventsourcing's register_topic)")
    for topic, now in current.items():
        versions = recorded.get(topic, {})
        newest = max(map(int, versions), default=0)
        version, fields = now["version"], now["fields"]
        cls = resolve_topic(topic)
        missing = [f"upcast_v{v}_v{v + 1}" for v in range(1, version) if not hasattr(cls, f"upcast_v{v}_v{v + 1}")]
        if missing:
            found.append(f"{topic} version {version} lacks {', '.join(missing)}")
        if version == newest:
            if versions[str(version)] != fields:
                found.append(f"{topic}: its fields changed, but not its version ({version}): give the class "
                             f"class_version = {version + 1} and a static method upcast_v{version}_v{version + 1} "
                             f"that turns a version {version} state into the new one, then run --write")
        elif version == newest + 1 and (newest or version == 1):
            if not writing:
                found.append(f"{topic} version {version} is not recorded yet: run python -m scripts.devtools.events --write")
        elif newest == 0:
            found.append(f"{topic} is a new event type: it starts at version 1, not {version}")
        else:
            found.append(f"{topic} is version {version} in the code but {newest} in the record: "
                         "versions go up one at a time and never back")
    return found


def written(recorded: Recorded, current: dict[str, dict[str, Any]]) -> Recorded:
    """The record with the code's new types and versions added; every recorded version kept."""
    result = {topic: dict(versions) for topic, versions in recorded.items()}
    for topic, now in current.items():
        result.setdefault(topic, {})[str(now["version"])] = now["fields"]
    return dict(sorted(result.items()))


def upcast_problems(recorded: Recorded) -> list[str]:
    """Each recorded older version, upcast to the class's version, has exactly its fields."""
    found = []
    for topic, versions in recorded.items():
        cls = resolve_topic(topic)
        target = set(events.fields(cls))
        for version, fields in versions.items():
            if int(version) >= cls.class_version:
                continue
            state = {name: _sample(annotation) for name, annotation in fields.items()}
            try:
                events.upcast(cls, state, int(version))
            except Exception as error:  # noqa: BLE001 - reported with the topic
                found.append(f"{topic}: upcasting version {version} failed: {type(error).__name__}: {error}")
                continue
            if set(state) != target:
                found.append(f"{topic}: version {version} upcast has fields {sorted(state)}, not {sorted(target)}")
    return found


def _sample(annotation: str) -> Any:
    """A value of the annotated type, to run an upcaster on."""
    first = annotation.split("|")[0].strip()
    return {"str": "x", "int": 1, "float": 1.0, "bool": True}.get(first.split("[")[0], None if first == "None" else {})


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m scripts.devtools.events",
                                description="Compare the event classes with domain/events.json, or record their "
                                            "new types and versions in it.")
    p.add_argument("--write", action="store_true",
                   help="add new event types and new versions to domain/events.json (never changes a recorded one)")
    args = p.parse_args(argv)
    recorded, current = load(), events.catalogue()
    found = problems(recorded, current, writing=args.write)
    if not found and args.write:
        RECORDED.write_text(json.dumps(written(recorded, current), indent=1) + "\n")
        found = upcast_problems(load())
    elif not found:
        found = upcast_problems(recorded)
    for problem in found:
        print(problem, file=sys.stderr)
    if not found:
        print(f"{len(current)} event classes match {RECORDED.name}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
