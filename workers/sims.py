"""Attaching registered SIMs to modem ports: a SIM is known by the ICCID its modem reports,
not by the port name (docs/operations.md, "SIMs and modems"); and probing a port before it is
registered (`sandesh sim probe`, docs/operations.md, "Modems")."""
from __future__ import annotations

from typing import Any

from sandesh.domain.operators import of_imsi
from sandesh.projections import registry
from sandesh.projections.runtime import Runtime

from .device import Device, StepFailed, negotiate
from .modem import Exchange, Modem, ModemError


def attach(runtime: Runtime, sim: dict[str, Any], modem: Modem) -> Device:
    """Initialise the modem (its PIN entered if the SIM asks) and record what it is."""
    device = negotiate(modem, runtime.app.sims.sim_pin(sim.get("pin_sealed")), pin_refused=bool(sim.get("pin_refused")))
    runtime.app.sims.identify_sim(sim["id"], device.iccid, device.imsi, device.learned())
    return device


def place(runtime: Runtime, name: str, port: str, actor: str, baud: int = 115200) -> dict[str, Any]:
    """Register the modem on `port` as SIM `name`, unless its SIM (by ICCID) or its name is
    registered already: then record that it is on `port` now."""
    modem = Modem(port, baud)
    modem.open()
    try:
        device = negotiate(modem)
    finally:
        modem.close()
    with runtime.connection() as conn:
        row = None
        if device.iccid:
            row = registry.find_sim(conn, "iccid", device.iccid)
        if row is None:
            row = registry.find_sim(conn, "name", name)
    sim = runtime.app.sims.place_sim(row["id"] if row else None, name, port, baud, None, actor)
    runtime.app.sims.identify_sim(sim.id, device.iccid, device.imsi, device.learned())
    with runtime.connection() as conn:
        return registry.find_sim(conn, "id", sim.id)


def probe(port: str, baud: int = 115200, pin: str | None = None) -> dict[str, Any]:
    """Identify and negotiate with the device on `port` as a dispatcher would, without registering
    it: what it is, what it supports, what Sandesh would use, and every exchange.  When a step
    fails, `failedStep` and `error` say which and why, and the dialogue shows the device's answer."""
    modem = Modem(port, baud)
    modem.transcript = []
    found: dict[str, Any] = {"port": port, "baud": baud, "ok": False}
    try:
        modem.open()
    except ModemError as error:
        return {**found, "failedStep": "open the port", "error": str(error), "dialogue": []}
    try:
        device = negotiate(modem, pin)
        health = modem.health()
        found.update(ok=True, manufacturer=device.manufacturer, model=device.model, firmware=device.firmware,
                     iccid=device.iccid, imsi=device.imsi, operator=of_imsi(device.imsi),
                     registered=health.registered, signalDbm=health.signal_dbm,
                     uses={"messageStore": device.store, "cnmi": device.cnmi, "reports": device.reports,
                           "inbound": device.inbound, "polls": device.polls, "family": device.family.name,
                           "ussd": "packed" if device.family.encoded_ussd else "text"})
    except ModemError as error:
        found.update(failedStep=error.step if isinstance(error, StepFailed) else _step_of(modem.transcript),
                     error=str(error))
    finally:
        modem.close()
    found["supports"] = {command: _answer(modem.transcript, command) for command in ("AT+CPMS=?", "AT+CNMI=?",
                                                                                   "AT+CSMS?")}
    found["dialogue"] = [{"command": e.command, "answer": e.answer, "final": e.final} for e in modem.transcript]
    return found


def _answer(transcript: list[Exchange], command: str) -> str | None:
    return next((" ".join(e.answer) or e.final for e in transcript if e.command == command), None)


def _step_of(transcript: list[Exchange]) -> str:
    return f"after {transcript[-1].command}" if transcript else "the modem answers"
