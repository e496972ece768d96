"""Where a SIM's device was last read up to (`device_cursors`) and which of its messages were
recorded (`device_messages`): a phone whose inbox cannot be emptied is read from its cursor on,
and a message it also posts to Sandesh is recorded once, across restarts.  Not a projection of
the log: the dispatcher and the API write them as they record what a device told."""
from __future__ import annotations

from typing import Any

DDL = """
CREATE TABLE IF NOT EXISTS device_cursors (sim_id text PRIMARY KEY, cursor text NOT NULL);
CREATE TABLE IF NOT EXISTS device_messages (sim_id text NOT NULL, key text NOT NULL, PRIMARY KEY (sim_id, key));
"""


def get(conn: Any, sim_id: str) -> str | None:
    row = conn.execute("SELECT cursor FROM device_cursors WHERE sim_id = %s", (sim_id,)).fetchone()
    return row["cursor"] if row else None


def put(conn: Any, sim_id: str, cursor: str) -> None:
    conn.execute("INSERT INTO device_cursors (sim_id, cursor) VALUES (%s, %s)"
                 " ON CONFLICT (sim_id) DO UPDATE SET cursor = EXCLUDED.cursor", (sim_id, cursor))


def seen(conn: Any, sim_id: str, key: str) -> bool:
    return conn.execute("SELECT 1 FROM device_messages WHERE sim_id = %s AND key = %s", (sim_id, key)).fetchone() \
        is not None


def mark(conn: Any, sim_id: str, key: str) -> None:
    conn.execute("INSERT INTO device_messages (sim_id, key) VALUES (%s, %s) ON CONFLICT DO NOTHING", (sim_id, key))
