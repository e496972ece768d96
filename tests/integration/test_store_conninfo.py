"""The event store connects with DATABASE_URL as given: the parameters the eventsourcing
library has no setting for (`target_session_attrs` of a primary and its standbys, above all)
reach every connection of its pool, so that after a failover no process writes to a server
that is not the primary."""
import pytest
from psycopg.conninfo import make_conninfo

from sandesh.domain.settings import Settings
from sandesh.projections.storage.health import DatabaseUnavailable
from sandesh.scripts.service.bootstrap import bootstrap
from tests.conftest import SECRET_KEY


def _runtime(url: str):
    return bootstrap(Settings.from_env({"DATABASE_URL": url, "SANDESH_SECRET_KEY": SECRET_KEY}), pool_size=1)


def test_the_event_stores_connections_keep_every_parameter_of_the_url(database_url):
    url = make_conninfo(database_url, target_session_attrs="read-write", application_name="sandesh-store-check")
    runtime = _runtime(url)
    try:
        with runtime.connection() as conn:  # a connection of the event store's own pool
            assert conn.info.get_parameters()["target_session_attrs"] == "read-write"
            assert conn.execute("SELECT current_setting('application_name') AS name").fetchone()["name"] == \
                "sandesh-store-check"
    finally:
        runtime.close()


def test_a_url_that_asks_for_a_standby_is_refused_by_a_primary(database_url):
    """The attribute is in force, not only carried: this server is a primary, so libpq finds no
    server that is read-only and the store does not connect; with any server allowed, the same
    URL connects (the store would also connect if it dropped the attribute)."""
    _runtime(make_conninfo(database_url, target_session_attrs="any")).close()
    with pytest.raises(DatabaseUnavailable):
        _runtime(make_conninfo(database_url, target_session_attrs="read-only")).close()
