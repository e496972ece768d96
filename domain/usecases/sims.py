"""The SIM pool's use cases: what operators register and change (`sandesh sim`), and what the
dispatcher records about a SIM (its identity, its device, its credit, its quarantines)."""
from __future__ import annotations

from typing import Callable

from ..clock import Clock
from ..errors import InvalidInput, NameTaken
from ..ports import Sealer
from ..sim import CLEAR, Sim, check_pin, check_sim_name, join_secret, signing_key, split_secret
from ..steps import Steps, retried, run
from .log import Log


class Sims:
    def __init__(self, log: Log, clock: Clock, sealer: Sealer):
        self.log, self.clock, self.sealer = log, clock, sealer

    def add_sim(self, name: str, port: str, baud: int, host: str | None, actor: str,
                settings: dict[str, object] | None = None) -> Sim:
        """Register a modem port as a SIM, with its plan's limits and balance query (`settings`,
        domain/sim.py SETTINGS) when given."""
        if not port.strip():
            raise InvalidInput("--port must name a serial device or pyserial URL")
        public, secret = split_secret(port.strip())
        sim = Sim(name=check_sim_name(name), port=public, baud=baud, host=host, actor=actor, at=self.clock.now())
        if secret is not None:
            sim.set_port_secret(self.sealer.seal(secret), actor=actor, at=self.clock.now())
        extra = {k: v for k, v in (settings or {}).items() if v is not None}
        if extra:
            sim.update(extra, actor=actor, at=self.clock.now())
        try:
            self.log.save(sim)
        except NameTaken as taken:
            raise NameTaken(f"a SIM named {name!r} exists already") from taken
        return sim

    def place_sim(self, sim_id: str | None, name: str, port: str, baud: int, host: str | None, actor: str) -> Sim:
        """Register a SIM, or record that a registered one (`sim_id`) is now on `port`."""
        if sim_id is None:
            return self.add_sim(name, port, baud, host, actor)
        sim = self._sim(sim_id)
        self._place(sim, port, actor)
        return self._saved(sim)

    def _place(self, sim: Sim, port: str, actor: str) -> None:
        """`port` as the log keeps it, its secrets sealed apart (split_secret)."""
        public, secret = split_secret(port.strip())
        sim.move(public, actor=actor, at=self.clock.now())
        kept = self.sealer.open(sim.port_secret_sealed) if sim.port_secret_sealed else None
        if secret != kept:
            sim.set_port_secret(self.sealer.seal(secret) if secret is not None else None, actor=actor,
                                at=self.clock.now())

    def identify_sim(self, sim_id: str, iccid: str | None, imsi: str | None,
                     device: dict[str, str | None] | None = None, holder_id: str | None = None) -> Sim:
        """What the modem says the SIM is, and what the device is with the modes chosen for it.

        `holder_id` is the SIM registered with this ICCID now, if another one is.  A disabled
        holder is an old registration of the same card (re-registered under another name or
        port): it gives the ICCID up, in the same append.  An enabled one is refused with
        NameTaken naming it: two enabled registrations of one card, an operator disables one."""
        sim = self._sim(sim_id)
        sim.identify(iccid, imsi, at=self.clock.now())
        if device is not None:
            sim.learn(device, at=self.clock.now())
        before: list[Sim] = []
        if holder_id is not None and holder_id != sim_id:
            holder = self._sim(holder_id)
            if holder.enabled:
                raise NameTaken(f"ICCID {iccid} is registered as SIM {holder.name!r}, which is enabled: "
                                f"disable one of the two (`sandesh sim disable`)")
            holder.identify(None, None, at=self.clock.now())
            before.append(holder)  # its ICCID is given up before this SIM's is recorded
        try:
            self.log.save(*before, sim)
        except NameTaken as taken:
            raise NameTaken(f"another SIM is registered with ICCID {iccid}") from taken
        return sim

    def enable_sim(self, sim_id: str, actor: str) -> Sim:
        sim = self._sim(sim_id)
        sim.enable(actor=actor, at=self.clock.now())
        return self._saved(sim)

    def disable_sim(self, sim_id: str, actor: str) -> Sim:
        sim = self._sim(sim_id)
        sim.disable(actor=actor, at=self.clock.now())
        return self._saved(sim)

    def release_sim(self, sim_id: str, actor: str) -> Sim:
        """An operator lifts a quarantine."""
        sim = self._sim(sim_id)
        sim.release(actor=actor, at=self.clock.now())
        return self._saved(sim)

    def update_sim(self, sim_id: str, port: str | None, actor: str, settings: dict[str, object] | None = None,
                   pin: str | None = None, clear_pin: bool = False) -> Sim:
        """A new port, settings (domain/sim.py SETTINGS; None leaves one as it is, a value of
        `CLEAR` removes it) or PIN for a registered SIM (`sandesh sim update`)."""
        sim = self._sim(sim_id)
        now = self.clock.now()
        if port is not None:
            self._place(sim, port, actor)
        changes = {k: (None if v is CLEAR else v) for k, v in (settings or {}).items() if v is not None}
        if pin is not None or clear_pin:
            sim.set_pin(None if clear_pin else self.sealer.seal(check_pin(pin)), actor=actor, at=now)
        if changes or (port is None and pin is None and not clear_pin):
            sim.update(changes, actor=actor, at=now)
        return self._saved(sim)

    def sim_port(self, port: str, secret_sealed: str | None) -> str:
        """The port URL a dispatcher opens: the one the registry shows with its sealed secrets."""
        return join_secret(port, self.sealer.open(secret_sealed) if secret_sealed else None)

    def sim_signing_key(self, secret_sealed: str | None) -> str | None:
        """The key a device signs what it posts with, opened from its port's sealed secrets."""
        return signing_key(self.sealer.open(secret_sealed)) if secret_sealed else None

    def sim_pin(self, sealed: str | None) -> str | None:
        """The PIN a dispatcher enters, opened from the sealed form the registry keeps."""
        return self.sealer.open(sealed) if sealed else None

    def record_sim_credit(self, sim_id: str, amount: int | None, reply: str, actor: str) -> str | None:
        """A balance query's answer, with the quarantine for credit it starts or ends; returns the
        SIM's quarantine after it."""
        def record(sim: Sim, now: float) -> bool:
            sim.credit_checked(amount, reply, actor=actor, at=now)
            return True

        sim, _ = self._decision(sim_id, record)
        return sim.quarantine

    def quarantine_sim(self, sim_id: str, kind: str, reason: str, actor: str) -> bool:
        """The dispatcher takes a SIM out of the pool; False when it was out already."""
        _, decided = self._decision(sim_id, lambda sim, now: sim.quarantine_for(kind, reason, actor=actor, at=now))
        return decided

    def quarantine_for_pin(self, sim_id: str, tried: str | None, reason: str, actor: str) -> bool:
        """The dispatcher found the SIM asking for a PIN, or refusing the one it read (`tried`,
        sealed); False when it was out already or a new PIN was set in the meantime."""
        _, decided = self._decision(sim_id, lambda sim, now: sim.quarantine_for_pin(tried, reason, actor=actor, at=now))
        return decided

    def recover_sim(self, sim_id: str, kind: str, reason: str, actor: str) -> bool:
        """The dispatcher found the cause of a self-healing quarantine gone."""
        _, decided = self._decision(sim_id, lambda sim, now: sim.recover(kind, reason, actor=actor, at=now))
        return decided

    def _decision(self, sim_id: str, decide: Callable[[Sim, float], bool]) -> tuple[Sim, bool]:
        """Decide on the SIM as the log has it now and append what was decided; the dispatcher and
        an operator may both write to a SIM, so a version conflict reads it again."""
        def attempt() -> Steps[tuple[tuple[Sim, ...], tuple[Sim, bool]]]:
            sim = self._sim(sim_id)
            decided = decide(sim, self.clock.now())
            return ((sim,) if decided else ()), (sim, decided)
            yield  # a generator: its reads are plain calls (the dispatcher and the `sandesh` command)

        return run(retried(attempt, f"a decision on SIM {sim_id}"), self.log.save)

    def _sim(self, sim_id: str) -> Sim:
        return self.log.get(sim_id, Sim, "SIM")

    def _saved(self, sim: Sim) -> Sim:
        self.log.save(sim)
        return sim

