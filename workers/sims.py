"""Attaching registered SIMs to modem ports: a SIM is known by the ICCID its modem reports,
not by the port name (docs/operations.md, "SIMs and modems")."""
from __future__ import annotations

from typing import Any

from sandesh.projections import registry
from sandesh.projections.runtime import Runtime

from .modem import Identity, Modem


def attach(runtime: Runtime, sim: dict[str, Any], modem: Modem) -> Identity:
    """Initialise the modem and record the identity of the SIM in it."""
    identity = modem.init()
    if (identity.iccid, identity.imsi) != (sim.get("iccid"), sim.get("imsi")):
        runtime.app.identify_sim(sim["id"], identity.iccid, identity.imsi)
    return identity


def place(runtime: Runtime, name: str, port: str, actor: str, baud: int = 115200) -> dict[str, Any]:
    """Register the modem on `port` as SIM `name`, unless its SIM (by ICCID) or its name is
    registered already: then record that it is on `port` now."""
    modem = Modem(port, baud)
    modem.open()
    try:
        identity = modem.init()
    finally:
        modem.close()
    with runtime.connection() as conn:
        row = None
        if identity.iccid:
            row = registry.find_sim(conn, "iccid", identity.iccid)
        if row is None:
            row = registry.find_sim(conn, "name", name)
    sim = runtime.app.place_sim(row["id"] if row else None, name, port, baud, None, actor)
    runtime.app.identify_sim(sim.id, identity.iccid, identity.imsi)
    with runtime.connection() as conn:
        return registry.find_sim(conn, "id", sim.id)
