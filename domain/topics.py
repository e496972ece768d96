"""The names events are stored under in the log (their "topics").

A topic is `module:Class.Event`.  Until 2026-11 the domain was installed as a top-level
`domain` package, so events appended then carry topics such as `domain.message:Message.Accepted`;
since then the package is `sandesh.domain` (docs/design.md, "Packaging").  Old topics resolve to
the same classes, and a reader that selects events by topic asks for both names.
"""
from __future__ import annotations

import importlib
from typing import Iterable

from eventsourcing.utils import get_topic, register_topic

PACKAGE = "sandesh.domain"
LEGACY_PACKAGE = "domain"

register_topic(LEGACY_PACKAGE, importlib.import_module(PACKAGE))


def topics_of(classes: Iterable[type]) -> list[str]:
    """Every topic the events of these classes may be stored under, today's and the legacy one."""
    topics = []
    for cls in classes:
        topic = get_topic(cls)
        topics.append(topic)
        if topic.startswith(PACKAGE + "."):
            topics.append(LEGACY_PACKAGE + topic[len(PACKAGE):])
    return topics
