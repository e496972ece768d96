"""Events are a contract with the past (docs/design.md, "Event versions"): every event class has
a version, its fields change only with a new version and an upcaster, every reader sees the
newest shape, and an event only a newer release can read stops the reader instead of being
misread."""
from __future__ import annotations

from typing import Any

import orjson
import pytest
from eventsourcing.domain import event
from eventsourcing.persistence import StoredEvent

from sandesh.domain import events
from sandesh.domain.aggregate import Aggregate
from sandesh.domain.errors import NeedsNewerRelease
from sandesh.domain.webhook import new_delivery
from sandesh.projections.storage.store import OrjsonTranscoder
from scripts.devtools import events as record

TOPIC = "sandesh.domain.webhook:WebhookDelivery.Created"


def mapper(finalized: str | None = None) -> events.VersionedMapper:
    made = events.VersionedMapper(OrjsonTranscoder())
    if finalized is not None:
        made.finalized = finalized
    return made


def stored(topic: str, state: dict[str, Any]) -> StoredEvent:
    full = {"timestamp": "2026-11-24T10:00:00+00:00", **state}
    return StoredEvent(originator_id="whd_1", originator_version=1, topic=topic, state=orjson.dumps(full))


def test_every_event_class_has_a_version_and_the_fields_recorded_for_it():
    """domain/events.json is the record: a class whose fields changed without a new version
    fails here (run `python -m scripts.devtools.events` for the remedy)."""
    assert all(isinstance(cls.class_version, int) and cls.class_version >= 1 for cls in events.persisted())
    assert record.problems(record.load(), events.catalogue()) == []


def test_every_aggregate_of_the_domain_is_listed_so_its_events_are_recorded():
    """events.AGGREGATES is where the record (and `persisted`) finds the event classes: an
    aggregate left out of it would write events that no version check covers."""
    import importlib
    import pkgutil

    import sandesh.domain

    defined = set()
    for module in pkgutil.walk_packages(sandesh.domain.__path__, "sandesh.domain."):
        for value in vars(importlib.import_module(module.name)).values():
            if isinstance(value, type) and issubclass(value, Aggregate) and value is not Aggregate \
                    and value.__module__.startswith("sandesh.domain."):
                defined.add(value)
    assert len(defined) >= 20
    assert sorted(cls.__name__ for cls in defined - set(events.AGGREGATES)) == []


def test_every_recorded_older_version_upcasts_to_the_fields_of_today():
    assert record.upcast_problems(record.load()) == []


class Parcel(Aggregate):
    """An aggregate of the tests' own, to change fields as a developer would."""

    @event("Packed")
    def __init__(self, weight: float):
        self.weight = weight


class ParcelV2(Aggregate):
    class Packed(Aggregate.Created):
        class_version = 2
        weight: float
        fragile: bool

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            state["fragile"] = False

    @event(Packed)
    def __init__(self, weight: float, fragile: bool):
        self.weight, self.fragile = weight, fragile


def test_a_field_added_without_a_new_version_is_refused_with_the_remedy():
    recorded = {"t:Packed": {"1": {"weight": "float"}}}
    changed = {"t:Packed": {"version": 1, "fields": {"weight": "float", "fragile": "bool"}}}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(record, "resolve_topic", lambda topic: Parcel.Packed)
        found = record.problems(recorded, changed)
    assert len(found) == 1 and "fields changed, but not its version" in found[0]
    assert "class_version = 2" in found[0] and "upcast_v1_v2" in found[0]


def test_a_new_version_is_recorded_beside_the_old_one_and_a_recorded_one_never_changes():
    recorded = {"t:Packed": {"1": {"weight": "float"}}}
    v2 = {"t:Packed": {"version": 2, "fields": {"weight": "float", "fragile": "bool"}}}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(record, "resolve_topic", lambda topic: ParcelV2.Packed)
        assert record.problems(recorded, v2, writing=True) == []
        assert "not recorded yet" in record.problems(recorded, v2)[0]
        assert record.written(recorded, v2) == {"t:Packed": {"1": {"weight": "float"},
                                                             "2": {"weight": "float", "fragile": "bool"}}}
        patch.setattr(record, "resolve_topic", lambda topic: Parcel.Packed)
        no_upcaster = record.problems(recorded, {"t:Packed": {"version": 2, "fields": {"weight": "float"}}})
        assert any("lacks upcast_v1_v2" in problem for problem in no_upcaster)
    assert "is gone from the code" in record.problems(recorded, {})[0]


def test_a_version_1_delivery_of_0_1_0_reads_as_today_s_with_no_redelivery():
    """0.1.0 wrote the delivery's Created without `sent_as` and `due`."""
    state = {"originator_topic": "sandesh.domain.webhook:WebhookDelivery", "client_id": "cl_1",
             "event_type": "message.status", "subject": "msg_1", "status": "sent", "body": "{}",
             "redelivery_of": None, "at": 5.0}
    created = mapper().to_domain_event(stored(TOPIC, state))
    assert (created.sent_as, created.due, created.at) == (None, None, 5.0)
    delivery = created.mutate(None)
    assert (delivery.next_at, delivery.delivery_header) == (5.0, "whd_1")


def test_0_2_0_s_unversioned_delivery_with_the_new_fields_keeps_them():
    state = {"originator_topic": "sandesh.domain.webhook:WebhookDelivery", "client_id": "cl_1",
             "event_type": "message.status", "subject": "msg_1", "status": "sent", "body": "{}",
             "redelivery_of": "whd_0", "at": 5.0, "sent_as": "whd_0", "due": 2.0}
    created = mapper().to_domain_event(stored(TOPIC, state))
    assert (created.sent_as, created.due) == ("whd_0", 2.0)


def test_an_event_is_written_with_its_version_and_read_back_the_same():
    delivery = new_delivery("cl_1", "message.status", "msg_1", "sent", {"id": "msg_1"}, at=5.0)
    (created,) = delivery.collect_events()
    written = mapper().to_stored_event(created)
    assert orjson.loads(written.state)["class_version"] == 2
    assert mapper().to_domain_event(written).__dict__ == created.__dict__


def test_an_event_of_a_version_newer_than_the_class_stops_the_reader_naming_the_release_needed():
    state = {"client_id": "cl_1", "class_version": 3}
    with pytest.raises(NeedsNewerRelease) as raised:
        mapper("0.4.0").to_domain_event(stored(TOPIC, state))
    assert "version 3 of sandesh.domain.webhook:WebhookDelivery.Created" in str(raised.value)
    assert "run Sandesh 0.4.0 or newer" in str(raised.value)


def test_an_event_of_an_unknown_type_stops_the_reader():
    with pytest.raises(NeedsNewerRelease, match="an event of type sandesh.domain.sim:Sim.Teleported"):
        mapper().to_domain_event(stored("sandesh.domain.sim:Sim.Teleported", {}))


class Crate(Aggregate):
    """Version 2 adds `sealed`, written only once the log is finalized at 9.0.0."""

    @staticmethod
    def create_id(**_: object) -> str:
        return "crate_1"

    class Packed(Aggregate.Created):
        class_version = 2
        written_from = "9.0.0"
        weight: float
        sealed: bool

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            state["sealed"] = False

        @staticmethod
        def downcast_v2_v1(state: dict[str, Any]) -> None:
            del state["sealed"]

    @event(Packed)
    def __init__(self, weight: float, sealed: bool):
        self.weight, self.sealed = weight, sealed

    class Opened(Aggregate.Event):
        written_from = "9.0.0"

    @event(Opened)
    def open(self) -> None:
        self.sealed = False


def test_until_the_gate_is_finalized_the_previous_version_is_written():
    crate = Crate(weight=2.0, sealed=True)
    (packed,) = crate.collect_events()
    before = orjson.loads(mapper("8.9.0").to_stored_event(packed).state)
    assert "sealed" not in before and "class_version" not in before
    after = orjson.loads(mapper("9.0.0").to_stored_event(packed).state)
    assert (after["sealed"], after["class_version"]) == (True, 2)


def test_a_new_event_type_waiting_for_the_gate_is_never_written_before_it():
    crate = Crate(weight=2.0, sealed=True)
    crate.open()
    opened = crate.collect_events()[-1]
    with pytest.raises(RuntimeError, match="written only once the upgrade is finalized at 9.0.0"):
        mapper("8.9.0").to_stored_event(opened)
    assert mapper("9.0.0").to_stored_event(opened).topic.endswith("Crate.Opened")


def test_a_re_added_persons_authenticator_is_reset_only_once_the_upgrade_is_finalized():
    """Person.Rejoined version 2 (`authenticator_reset`) waits for the gate at 0.3.0: before it,
    0.2.0's processes may read the log, and would take the reset for nothing."""
    from sandesh.domain.person import Person

    person = Person(email="asha@example.com", name="Asha", workspace_id="ws_1", role="owner", token_hash="h",
                    token_expires=9.0, actor="t", at=1.0)
    person.remove(actor="t", at=2.0)
    person.rejoin("Asha", "ws_1", "viewer", "person_x.token", actor="t", at=3.0)
    rejoined = person.collect_events()[-1]
    before = mapper("0.2.0").to_stored_event(rejoined)
    assert "authenticator_reset" not in orjson.loads(before.state)
    assert mapper("0.2.0").to_domain_event(before).authenticator_reset is False
    after = mapper("0.3.0").to_stored_event(rejoined)
    assert orjson.loads(after.state)["class_version"] == 2
    assert mapper("0.3.0").to_domain_event(after).authenticator_reset is True


def test_no_reader_takes_an_event_field_with_a_getattr_default():
    """A field an old event lacks gets its value in the upcaster; `getattr(e, "field", None)` in a
    reader would hide a field that a version forgot (docs/design.md, "Event versions")."""
    import ast
    from pathlib import Path

    import sandesh

    found = []
    for folder in ("domain", "projections", "workers", "api"):
        for path in sorted((Path(list(sandesh.__path__)[0]) / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
                        and isinstance(node.args[0], ast.Name) and node.args[0].id in ("e", "event")):
                    found.append(f"{path.name}:{node.lineno}")
    assert found == []
