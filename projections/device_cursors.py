"""Where a SIM's device was last read up to (`device_cursors`): a phone whose inbox cannot be
emptied is read from its cursor on.  Not a projection of the log: the dispatcher writes it as it
records what a device told.  (A message read twice is recorded once by its reply's id:
domain/inbound.py, `keyed_reply_id`.)"""
from __future__ import annotations

from typing import Any

DDL = """
CREATE TABLE IF NOT EXISTS device_cursors (sim_id text PRIMARY KEY, cursor text NOT NULL);
DROP TABLE IF EXISTS device_messages;
"""


def get(conn: Any, sim_id: str) -> str | None:
    row = conn.execute("SELECT cursor FROM device_cursors WHERE sim_id = %s", (sim_id,)).fetchone()
    return row["cursor"] if row else None


def put(conn: Any, sim_id: str, cursor: str) -> None:
    conn.execute("INSERT INTO device_cursors (sim_id, cursor) VALUES (%s, %s)"
                 " ON CONFLICT (sim_id) DO UPDATE SET cursor = EXCLUDED.cursor", (sim_id, cursor))
