"""Events appended before the package moved under `sandesh` carry topics of the old top-level
`domain` package (`domain.workspace:Workspace.Created`).  They still load, and the read models
that select events by topic still see them (domain/topics.py, docs/design.md "Packaging")."""
from __future__ import annotations

from eventsourcing.persistence import StoredEvent

from sandesh.domain.topics import topics_of
from sandesh.domain.types import default_rates
from sandesh.domain.workspace import Workspace
from sandesh.projections.engine import replay


def legacy(topic: str) -> str:
    assert topic.startswith("sandesh.domain.")
    return topic[len("sandesh."):]


def test_an_aggregate_stored_under_old_topics_loads_and_is_projected(runtime):
    app = runtime.sandesh
    workspace = Workspace(name="Before the move", types=["otp"], rates=default_rates(), actor="t", at=app.clock.now())
    workspace.activate(actor="t", at=app.clock.now())
    created, activated = workspace.collect_events()
    # as an old process wrote them: the old module in the stored topic and in the aggregate's topic
    old_created = type(created)(**{**created.__dict__, "originator_topic": legacy(created.originator_topic)})
    stored = [app.log.mapper.to_stored_event(e) for e in (old_created, activated)]
    stored = [StoredEvent(s.originator_id, s.originator_version, legacy(s.topic), s.state) for s in stored]
    app.log.recorder.insert_events(stored)

    with runtime.connection() as conn:
        topics = [r["topic"] for r in conn.execute(
            f'SELECT topic FROM "{app.log.recorder.events_table_name}" WHERE originator_id = %s ORDER BY originator_version',
            (workspace.id,))]
    assert topics == ["domain.workspace:Workspace.Created", "domain.workspace:Workspace.Activated"]

    loaded = app.log.repository.get(workspace.id)
    assert type(loaded) is Workspace and (loaded.name, loaded.status, loaded.version) == ("Before the move", "active", 2)

    selected = app.log.recorder.select_notifications(start=1, limit=10_000, topics=topics_of([Workspace.Activated]))
    assert workspace.id in {n.originator_id for n in selected}

    replay.replay(runtime, ["registry"])  # the registry is rebuilt from the log, old topics included
    with runtime.connection() as conn:
        row = conn.execute("SELECT name, status FROM workspaces WHERE id = %s", (workspace.id,)).fetchone()
    assert (row["name"], row["status"]) == ("Before the move", "active")
