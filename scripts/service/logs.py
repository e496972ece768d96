"""How every process logs: `SANDESH_LOG_FORMAT=text` (the default: time, level, logger,
message) or `json` (one JSON object per line: time, level, logger, message, and the request,
workspace, client, message and SIM the line is about, from domain/log_context.py or from a
log call's `extra`).  Lines carry identifiers only; no key, secret, code or text is ever
logged (docs/design.md, "Logs")."""
from __future__ import annotations

import logging
from datetime import datetime, timezone

import orjson

from sandesh.domain.log_context import FIELDS, current
from sandesh.domain.settings import Settings

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
_NAMES = {"request_id": "requestId", "workspace_id": "workspaceId", "client_id": "clientId",
          "message_id": "messageId", "sim_id": "simId"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = {"time": datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds")
                .replace("+00:00", "Z"), "level": record.levelname, "logger": record.name,
                "message": record.getMessage()}
        line.update(getattr(record, "access", ()))  # an access line's method, route, status, ms, bytes
        context = current()
        for field in FIELDS:
            value = getattr(record, field, None) or context.get(field)
            if value is not None:
                line[_NAMES[field]] = value
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(line).decode()


def configure_logging(settings: Settings) -> None:
    """The root logger of this process, as the settings say (replaces an earlier setup)."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if settings.log_format == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(settings.log_level)
