"""A campaign: the messages a person sent at once from the dashboard's Send page, one text (or
template) to a list of recipients (docs/dashboard.md, "Sending").

Its messages, its record and their charge are one append, so a campaign is accepted whole or
not at all, like a batch.  Its id comes from the Send form's token, so a form posted twice (a
double click, a resubmitted page) sends once: the second append finds the id taken.  Its text is
sealed under the workspace's key of texts, and erasing the workspace's texts erases it too."""
from __future__ import annotations

import uuid

from eventsourcing.domain import event

from .aggregate import Aggregate

# The release whose finalized log every process reads a campaign in (domain/events.py).
CAMPAIGNS_FROM = "0.4.0"


def campaign_id(workspace_id: str, token: str) -> str:
    """The campaign of a Send form: the same form, the same campaign."""
    return "cmp_" + uuid.uuid5(uuid.NAMESPACE_URL, f"sandesh:campaign:{workspace_id}:{token}").hex


class Campaign(Aggregate):
    class Created(Aggregate.Created):
        written_from = CAMPAIGNS_FROM

        workspace_id: str
        client_id: str
        actor: str               # the person: user:<email>
        message_type: str
        text: str                # the text as typed, placeholders and all, sealed under the workspace's key
        template: str | None     # the name of the template it is, when it is one
        send_at: float | None    # when its messages leave, when later than their acceptance
        message_ids: list[str]
        refused: int             # lines or rows not sent, each for its reason
        cost: int                # paisa, the messages' costs together
        at: float

    @event(Created)
    def __init__(self, workspace_id: str, client_id: str, actor: str, message_type: str, text: str,
                 template: str | None, send_at: float | None, message_ids: list[str], refused: int, cost: int,
                 at: float):
        self.workspace_id, self.client_id, self.actor = workspace_id, client_id, actor
        self.message_type, self.text, self.template, self.send_at = message_type, text, template, send_at
        self.message_ids, self.refused, self.cost, self.created_at = message_ids, refused, cost, at
        self.canceled = 0

    class Canceled(Aggregate.Event):
        """What had not left was canceled and refunded; what left already was untouched."""
        written_from = CAMPAIGNS_FROM

        workspace_id: str
        canceled: int
        refunded: int
        actor: str
        at: float

    def cancel(self, canceled: int, refunded: int, actor: str, at: float) -> None:
        self._canceled(workspace_id=self.workspace_id, canceled=canceled, refunded=refunded, actor=actor, at=at)

    @event(Canceled)
    def _canceled(self, workspace_id: str, canceled: int, refunded: int, actor: str, at: float) -> None:
        self.canceled += canceled


def create(**created: object) -> Campaign:
    return Campaign._create(Campaign.Created, **created)
