"""What happened: a message's whole life from the log (`sandesh message show`), and the
operators' audit trail (`sandesh audit`)."""
from __future__ import annotations

from typing import Any, Callable, Iterator

from ..audit import ACTIONS, audit_line, operator_change
from ..client import Client
from ..clock import iso
from ..errors import NotFound
from ..history import entries
from ..message import Message
from ..ports import Texts
from ..topics import topics_of
from ..webhook import WEBHOOK_STATUS, WebhookDelivery, delivery_id
from .log import Log


class History:
    def __init__(self, log: Log, texts: Texts):
        self.log, self.texts = log, texts

    def message(self, message_id: str) -> Message | None:
        """The message as the log has it now."""
        return self.log.find(message_id, Message)

    def message_history(self, message_id: str, reply_ids: list[str],
                        webhook_url_of: Callable[[str], str | None]) -> dict[str, Any]:
        """The message's whole life from the log, oldest first (domain/history.py): its own
        events, every webhook delivery of it and its attempts, and the replies attributed to it
        (`reply_ids`, from the replies read model).  `webhook_url_of(client_id)`: the client's
        webhook URL, for the host of each attempt."""
        message = self.log.find(message_id, Message)
        if message is None:
            raise NotFound(f"no message {message_id!r}")
        deliveries = []
        to_read = [delivery_id(message_id, status) for status in sorted(set(WEBHOOK_STATUS.values()))]
        while to_read:  # each status's delivery, then every redelivery an operator asked for
            delivery = self.log.find(to_read.pop(0), WebhookDelivery)
            if delivery is None:
                continue
            events = self.log.events_of(delivery.id)
            deliveries.append((delivery, events))
            to_read += [e.redelivered_as for e in events if isinstance(e, WebhookDelivery.Redelivered)]
        replies = [self.log.events_of(reply_id) for reply_id in reply_ids]
        return {"messageId": message.id, "workspaceId": message.workspace_id, "clientId": message.client_id,
                "events": entries(self.log.events_of(message_id), deliveries, replies,
                                  webhook_url_of(message.client_id), self.texts.open)}

    def operator_events(self) -> Iterator[Any]:
        """Every event an operator's change may be, oldest first."""
        return self.log.notifications(topics_of(ACTIONS))

    def audit(self, workspace_id: str | None = None, client_id: str | None = None,
              since: float | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        """The operators' changes, oldest first, of a workspace or a client when given, since a time."""
        workspace_of_client: dict[str, str] = {}
        lines = []
        for event in self.operator_events():
            if isinstance(event, Client.Created):
                workspace_of_client[event.originator_id] = event.workspace_id
            if not operator_change(event):
                continue
            line = audit_line(event, workspace_of_client.get)
            if workspace_id and line["workspaceId"] != workspace_id:
                continue
            if client_id and line["clientId"] != client_id:
                continue
            if since is not None and line["at"] < since:
                continue
            lines.append({**line, "at": iso(line["at"])})
        return lines[-limit:] if limit else lines
