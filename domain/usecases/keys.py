"""Secrets due for replacement after the root key leaked (docs/operations.md, "A leaked key").

`sandesh key rotate --compromised` marks the data keys of before it; a secret sealed under one
of them is one that whoever holds the old key and a copy of the database can read: a client's
webhook secret, a person's authenticator app, a SIM's PIN, the password and signing key of a SIM's port.  Each is replaced by its own use
case (the owner rotates the client's secret, the person sets up their app again at their next
sign-in, an operator sets the SIM's new PIN, or its port with the device's new password), and is no longer due once sealed anew."""
from __future__ import annotations

from typing import Iterable

from ..client import Client
from ..person import Person
from ..ports import Sealer
from ..sim import Sim
from .log import Log

# What holds sealed secrets, by the kind the read models list their ids under.
KINDS: dict[str, type] = {"client": Client, "sim": Sim, "person": Person}


class Secrets:
    def __init__(self, log: Log, sealer: Sealer):
        self.log, self.sealer = log, sealer

    def sealed_due(self, sealed: str | None) -> bool:
        return self.sealer.compromised(sealed)

    def webhook_secret_due(self, client: Client) -> bool:
        return self.sealer.compromised(client.secret_sealed)

    def app_due(self, person: Person) -> bool:
        return self.sealer.compromised(person.totp_sealed)

    def pin_due(self, sim: Sim) -> bool:
        return self.sealer.compromised(sim.pin_sealed)

    def port_secret_due(self, sim: Sim) -> bool:
        return self.sealer.compromised(sim.port_secret_sealed)

    def due_for_replacement(self, holders: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
        """Of the (kind, id) that may hold a sealed secret, those whose secret is due, by kind:
        clients' ids (webhook secrets), people's emails (authenticator apps), SIMs' names (PINs)."""
        due: dict[str, list[str]] = {"webhookSecrets": [], "authenticatorApps": [], "simPins": [],
                                     "simPortSecrets": []}
        for kind, aggregate_id in holders:
            found = self.log.find(aggregate_id, KINDS[kind])
            if isinstance(found, Client) and self.webhook_secret_due(found):
                due["webhookSecrets"].append(found.id)
            elif isinstance(found, Person) and not found.removed and self.app_due(found):
                due["authenticatorApps"].append(found.email)
            elif isinstance(found, Sim):
                if self.pin_due(found):
                    due["simPins"].append(found.name)
                if self.port_secret_due(found):
                    due["simPortSecrets"].append(found.name)
        return due
