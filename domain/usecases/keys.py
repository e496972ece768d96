"""Sealed secrets moved to the key that writes now, after a rotation of the server key
(docs/operations.md, "Rotating the key"): the webhook secrets of clients, the PINs of SIMs and
the authenticator secrets of people.  Each is the same secret, sealed again, recorded as an
event of its aggregate, so that the log stays the only truth and a replay rebuilds it."""
from __future__ import annotations

from typing import Any, Callable

from ..client import Client
from ..clock import Clock
from ..person import Person
from ..ports import Sealer
from ..sim import Sim
from ..steps import Steps, retried, run
from .log import Log

# What holds sealed secrets, by the kind the read models list their ids under.
KINDS: dict[str, type] = {"client": Client, "sim": Sim, "person": Person}


class Secrets:
    def __init__(self, log: Log, clock: Clock, sealer: Sealer):
        self.log, self.clock, self.sealer = log, clock, sealer

    def stale(self, kind: str, aggregate_id: str) -> bool:
        """Whether the aggregate holds a secret sealed under a key that no longer writes."""
        found = self.log.find(aggregate_id, KINDS[kind])
        return found is not None and bool(self._stale_values(found))

    def reseal(self, kind: str, aggregate_id: str) -> bool:
        """Seal the aggregate's secrets again under the key that writes now; False when there was
        nothing to do.  A concurrent change reads the aggregate again."""
        def attempt() -> Steps[tuple[tuple[Any, ...], bool]]:
            found = self.log.find(aggregate_id, KINDS[kind])
            if found is None or not self._stale_values(found):
                return (), False
            self._reseal(found)
            return (found,), True
            yield  # a generator: its reads are plain calls (the `sandesh key` commands)

        return run(retried(attempt, f"resealing the secrets of {aggregate_id}"), self.log.save)

    def _stale_values(self, aggregate: Any) -> list[str]:
        if isinstance(aggregate, Client):
            values = [aggregate.secret_sealed, aggregate.previous_secret_sealed]
        elif isinstance(aggregate, Sim):
            values = [aggregate.pin_sealed]
        else:
            values = [aggregate.totp_sealed]
        return [v for v in values if v is not None and not self.sealer.current(v)]

    def _reseal(self, aggregate: Any) -> None:
        again: Callable[[str | None], Any] = lambda v: None if v is None else self.sealer.seal(self.sealer.open(v))
        now = self.clock.now()
        if isinstance(aggregate, Client):
            aggregate.reseal(again(aggregate.secret_sealed), again(aggregate.previous_secret_sealed), at=now)
        elif isinstance(aggregate, Sim):
            aggregate.reseal_pin(again(aggregate.pin_sealed), at=now)
        else:
            aggregate.reseal_totp(again(aggregate.totp_sealed), at=now)
