"""Every event class the log holds, with its version and fields: the contract with the logs
that earlier releases wrote (docs/design.md, "Event versions").

An event's fields change only with a new `class_version` and an `upcast_vN_vN+1` static method
that turns the previous version's state into the new one; every reader (aggregates, the three
executors of the projections, history, audit, the webhook builder) then sees the newest shape
only.  `domain/events.json` is the description as it was checked in, every earlier version's
fields included; `python -m scripts.devtools.events` compares it with `catalogue()` and
`--write` records a new version (tests/unit/test_event_versions.py).

A version may wait for the upgrade gate: `written_from = "X.Y.Z"` on the class says that its
newest version is written only once the database is finalized at release X.Y.Z or later
(`sandesh upgrade finalize`); until then `written_version` picks the previous version, and the
class's `downcast_vN_vN-1` gives its shape, so that processes of the previous release, still
running during a rolling upgrade, never meet an event they cannot read.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

from eventsourcing.domain import DecoratedFuncCaller
from eventsourcing.persistence import Cipher, Compressor, Mapper, MapperDeserialisationError, StoredEvent, Transcoder
from eventsourcing.utils import TopicError, get_topic, resolve_topic

from . import release
from .alerts import Alert, Destination, Digest, Tuning
from .batch import Batch
from .campaign import Campaign
from .contacts import ContactList, Template
from .client import Client
from .errors import NeedsNewerRelease
from .inbound import Reply
from .message import Message
from .optout import HelpSent, OptOut
from .otp import Otp
from .person import Person
from .redelivery import Redelivery
from .sim import Sim, SmsSwitch
from .webhook import WebhookDelivery
from .workspace import Workspace

AGGREGATES = (Workspace, Client, Person, Sim, SmsSwitch, Message, Batch, Otp, Reply, OptOut, WebhookDelivery,
              Redelivery, Campaign, ContactList, Template, HelpSent, Alert, Destination, Tuning, Digest)


def persisted() -> list[type]:
    """The event classes the aggregates record: each one's created event and the events of its
    decorated methods (not the bases `X.Event` and unused `X.Created`)."""
    found: list[type] = []
    for aggregate in AGGREGATES:
        created = _created_class(aggregate)
        for name in sorted(vars(aggregate)):
            value = vars(aggregate)[name]
            if not isinstance(value, type) or name == "Event":
                continue
            if issubclass(value, DecoratedFuncCaller) or value is created:
                found.append(value)
    return found


def _created_class(aggregate: type) -> type:
    """The event class `aggregate(...)` records (the library keeps it per aggregate class)."""
    from eventsourcing.domain import _created_event_classes  # noqa: PLC0415 - no public accessor in 9.5

    (created,) = _created_event_classes[aggregate]
    return created


def fields(cls: type) -> dict[str, str]:
    """The event's own fields (not the library's originator id, version, timestamp and topic)
    with their annotations as written."""
    common = {"originator_id", "originator_version", "timestamp", "originator_topic"}
    return {f.name: str(f.type) for f in dataclasses.fields(cls) if f.name not in common}


def catalogue() -> dict[str, dict[str, Any]]:
    """topic -> {"version": its class_version, "fields": {name: annotation}}, sorted by topic."""
    described = {get_topic(cls): {"version": cls.class_version, "fields": fields(cls)} for cls in persisted()}
    return dict(sorted(described.items()))


def written_version(cls: type, finalized: str) -> int | None:
    """The version of `cls` to write while the database is finalized at release `finalized`:
    its own, or the previous one while its `written_from` release is not yet finalized.  None for
    an event type that no running release may yet read (one with version 1 that waits for the
    gate): its use case must not record it before the upgrade is finalized."""
    since = getattr(cls, "written_from", None)
    if since is None or not release.older(finalized, since):
        return cls.class_version
    return cls.class_version - 1 or None


def upcast(cls: type, state: dict[str, Any], version: int) -> None:
    """Turn `state`, of `version`, into the class's own version, in place, one step at a time."""
    while version < cls.class_version:
        getattr(cls, f"upcast_v{version}_v{version + 1}")(state)
        version += 1


def downcast(cls: type, state: dict[str, Any], version: int) -> None:
    """Turn `state`, of the class's own version, into the older `version`, in place."""
    for step in range(cls.class_version, version, -1):
        getattr(cls, f"downcast_v{step}_v{step - 1}")(state)


class VersionedMapper(Mapper[str]):
    """The library's mapper, with versions checked both ways.  Writing, an event takes the
    version the upgrade gate allows (`written_version`).  Reading, an event of a type or a
    version this release does not know, which only a newer release can have written, raises
    NeedsNewerRelease: the library alone would load it with the new fields unused and misread
    it in silence.  Both ways run for every event of a send and of a replay, so what they learn
    of a class is kept (docs/performance.md, "Replay")."""

    def __init__(self, transcoder: Transcoder, compressor: Compressor | None = None, cipher: Cipher | None = None):
        super().__init__(transcoder, compressor=compressor, cipher=cipher)
        # The release the log is finalized at: the wiring keeps the database's here
        # (projections/storage/releases.py, `Watch`).
        self.finalized = release.VERSION
        # Told before NeedsNewerRelease is raised: a worker stops on it (workers/supervisor.py).
        self.on_newer: Callable[[str], None] | None = None
        self._classes: dict[str, tuple[type, int]] = {}  # topic -> (class, its version)
        self._written: dict[type, int] = {}  # class -> the version written (0: none yet), at...
        self._written_at = self.finalized    # ...this finalized release

    def to_stored_event(self, domain_event: Any) -> StoredEvent:
        cls = type(domain_event)
        if self._written_at != self.finalized:
            self._written, self._written_at = {}, self.finalized
        version = self._written.get(cls)
        if version is None:
            version = self._written[cls] = written_version(cls, self.finalized) or 0
        if version == cls.class_version:
            return super().to_stored_event(domain_event)
        if not version:
            raise RuntimeError(f"{get_topic(cls)} is written only once the upgrade is finalized at "
                               f"{cls.written_from}: its use case must not record it before")
        state = dict(vars(domain_event))
        originator_id, originator_version = state.pop("originator_id"), state.pop("originator_version")
        downcast(cls, state, version)
        if version > 1:
            state["class_version"] = version
        data = self.transcoder.encode(state)
        if self.compressor:
            data = self.compressor.compress(data)
        return StoredEvent(originator_id=originator_id, originator_version=originator_version, topic=get_topic(cls),
                           state=self.cipher.encrypt(data) if self.cipher else data)

    def to_domain_event(self, stored_event: StoredEvent) -> Any:
        return self.decode(stored_event.originator_id, stored_event.originator_version, stored_event.topic,
                           stored_event.state)

    def decode(self, originator_id: str, originator_version: int, topic: str, stored_state: bytes) -> Any:
        """The domain event of a stored one, given its columns (a replay reads them as tuples)."""
        known = self._classes.get(topic)
        if known is None:
            try:
                cls = resolve_topic(topic)
            except TopicError:
                raise self._newer(f"an event of type {topic}") from None
            known = self._classes[topic] = (cls, cls.class_version)
        cls, current = known
        try:
            data = stored_state
            if self.cipher:
                data = self.cipher.decrypt(data)
            if self.compressor:
                data = self.compressor.decompress(data)
            state: dict[str, Any] = self.transcoder.decode(data)
        except Exception as error:
            raise MapperDeserialisationError(
                f"Failed to deserialise state of stored event with topic '{topic}', originator_id "
                f"'{originator_id}' and originator_version {originator_version}: {error}"
            ) from error
        state["originator_id"] = originator_id
        state["originator_version"] = originator_version
        version = state.pop("class_version", 1)
        if version != current:
            if version > current:
                raise self._newer(f"version {version} of {topic} (this release reads up to "
                                  f"version {current})")
            upcast(cls, state, version)
        event = object.__new__(cls)
        object.__setattr__(event, "__dict__", state)
        return event

    def _newer(self, what: str) -> NeedsNewerRelease:
        message = (f"the log holds {what}, which a newer release wrote; this is Sandesh {release.VERSION} and the "
                   f"database is finalized at {self.finalized}: run Sandesh {self.finalized} or newer "
                   f"(docs/operations.md, \"Upgrading\")")
        if self.on_newer is not None:
            self.on_newer(message)
        return NeedsNewerRelease(message)
