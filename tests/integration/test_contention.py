"""A statement the database turns away for another transaction's sake (a lock not granted in
time, a deadlock: what a migration under traffic can cause, docs/operations.md,
"One release at a time, one process at a time") is not an outage: that request answers 503
with Retry-After and may be made again at once, and the process goes on answering the others
(docs/reliability.md, "The API")."""
from __future__ import annotations

from typing import Any, Iterator

import psycopg
import pytest
import requests

from tests.conftest import Server


@pytest.fixture(scope="module")
def impatient(env: dict[str, str], database_url: str) -> Iterator[Server]:
    """`sandesh serve` on a database whose sessions wait 0.3 s at most for a lock."""
    name = psycopg.conninfo.conninfo_to_dict(database_url)["dbname"]
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(f"ALTER DATABASE \"{name}\" SET lock_timeout = '300ms'")
    server = Server(env, workers=1)
    yield server
    server.stop()


def test_a_send_whose_lock_is_not_granted_answers_503_and_the_process_answers_on(impatient: Server, database_url: str,
                                                                                 active_client: dict[str, Any],
                                                                                 route: Any):
    headers = {"x-api-key": active_client["key"]}
    send = {"to": "9779841000001", "text": "Your parcel is on its way"}
    with psycopg.connect(database_url) as holder:  # another transaction holds the workspace's row
        holder.execute("SELECT 1 FROM workspaces WHERE id = %s FOR UPDATE", (active_client["workspace"],))
        refused = requests.post(impatient.url + "/v1/sms/send", json=send,
                                headers={**headers, "Idempotency-Key": "held-1"}, timeout=10)
        assert refused.status_code == 503, refused.text
        assert refused.headers["Retry-After"] == "1" and refused.json()["code"] == "unavailable"
        assert "busy with another change" in refused.json()["error"]
        balance = requests.get(impatient.url + "/v1/sms/balance", headers=headers, timeout=5)
        assert balance.status_code == 200 and balance.json()["balance"]["amount"] == 100_000, "nothing was charged"
    accepted = requests.post(impatient.url + "/v1/sms/send", json=send,
                             headers={**headers, "Idempotency-Key": "held-1"}, timeout=10)
    assert accepted.status_code == 202 and "Idempotent-Replayed" not in accepted.headers
    after = requests.get(impatient.url + "/v1/sms/balance", headers=headers, timeout=5)
    assert after.json()["balance"]["amount"] == 99_900, after.text
    assert "database unavailable" not in impatient.output(), "the database was there all along"
