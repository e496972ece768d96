"""Attaching registered SIMs to modem ports: a SIM is known by the ICCID its modem reports,
not by the port name (docs/operations.md, "SIMs and modems"); probing a port before it is
registered (`sandesh sim probe`, docs/operations.md, "Modems"); and identifying what answers on
a port within seconds (`sandesh sim discover`, docs/operations.md, "Discovering modems")."""
from __future__ import annotations

import errno
from typing import Any

from sandesh.domain.operators import of_imsi
from sandesh.domain.sim import split_secret
from sandesh.projections import registry
from sandesh.projections.storage.runtime import Runtime

from .device import Dialogue, StepFailed, maker, negotiate, pin_state, sim_iccid, sim_imsi
from .links import Attached, Link, link_for, scheme_of
from .modem import CommandTimeout, Exchange, Modem, ModemError, PortGone, Timeouts


def attach(runtime: Runtime, sim: dict[str, Any], link: Link) -> Attached:
    """Open the SIM's device (its PIN entered if the SIM asks) and record what it is.  Raises
    NameTaken when its ICCID is another enabled SIM's (Sims.identify_sim)."""
    found = link.open(runtime.sandesh.sims.sim_pin(sim.get("pin_sealed")), bool(sim.get("pin_refused")))
    holder = None
    if found.iccid:
        with runtime.connection() as conn:
            holder = registry.find_sim(conn, "iccid", found.iccid)
    runtime.sandesh.sims.identify_sim(sim["id"], found.iccid, found.imsi, found.learned,
                                      holder["id"] if holder else None)
    return found


def place(runtime: Runtime, name: str, port: str, actor: str, baud: int = 115200) -> dict[str, Any]:
    """Register the modem on `port` as SIM `name`, unless its SIM (by ICCID) or its name is
    registered already: then record that it is on `port` now."""
    link = link_for(port, baud)
    try:
        found = link.open(None, False)
    finally:
        link.close()
    with runtime.connection() as conn:
        row = None
        if found.iccid:
            row = registry.find_sim(conn, "iccid", found.iccid)
        if row is None:
            row = registry.find_sim(conn, "name", name)
    sim = runtime.sandesh.sims.place_sim(row["id"] if row else None, name, port, baud, None, actor)
    runtime.sandesh.sims.identify_sim(sim.id, found.iccid, found.imsi, found.learned)
    with runtime.connection() as conn:
        return registry.find_sim(conn, "id", sim.id)


def probe(port: str, baud: int = 115200, pin: str | None = None) -> dict[str, Any]:
    """Identify and negotiate with the device on `port` as a dispatcher would, without registering
    it: what it is, what it supports, what Sandesh would use, and every exchange.  When a step
    fails, `failedStep` and `error` say which and why, and the dialogue shows the device's answer."""
    if scheme_of(port) != "serial":
        return _probe_network(port)
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


def _probe_network(port: str) -> dict[str, Any]:
    """`probe` of a device on the network (HiLink, Android): what it is and how it is, through
    its link; the port shown without its password."""
    shown, _ = split_secret(port)
    found: dict[str, Any] = {"port": shown, "ok": False, "dialogue": []}
    try:
        link = link_for(port, 0)
    except ValueError as error:
        return {**found, "failedStep": "read the port", "error": str(error)}
    try:
        attached = link.open(None, False)
        health = link.health()
    except ModemError as error:
        return {**found, "failedStep": "open the port", "error": str(error)}
    finally:
        link.close()
    return {**found, "ok": True, "manufacturer": attached.learned.get("manufacturer"),
            "model": attached.learned.get("model"), "firmware": attached.learned.get("firmware"),
            "iccid": attached.iccid, "imsi": attached.imsi, "operator": of_imsi(attached.imsi),
            "registered": health.registered, "signalDbm": health.signal_dbm,
            "uses": {k: attached.learned.get(k) for k in ("reports", "inbound", "message_store")}}


def _answer(transcript: list[Exchange], command: str) -> str | None:
    return next((" ".join(e.answer) or e.final for e in transcript if e.command == command), None)


def _step_of(transcript: list[Exchange]) -> str:
    return f"after {transcript[-1].command}" if transcript else "the modem answers"


# What `identify` finds on a port (docs/operations.md, "Discovering modems").
IDENTIFIED, PIN_REQUIRED, NO_ANSWER, HELD, FAILED = "identified", "PIN required", "no answer", "held", "failed"
IDENTIFY_NETWORK_SECONDS = 2.0  # a HiLink address with nothing on it costs this much
IDENTIFY_BUSY_FOR = 5.0  # seconds of busy answers waited out: a modem plugged in just now may still boot


def identify(port: str, baud: int = 115200) -> dict[str, Any]:
    """Who made the device on `port`, its SIM's ICCID and IMSI (with the operator), and its signal,
    read without entering a PIN or choosing a mode.  A port that does not answer AT with OK
    within 2 s (Modem.sync: a stick's data and diagnostic ports never do) is `no answer`; one
    another process holds (pyserial's exclusive lock) is `held`, and nothing is written to it.
    A PIN is never entered: a wrong one costs one of the SIM's three tries, and the dispatcher
    enters the registered one when it opens the port; so a SIM that asks for one shows its
    ICCID where the modem reads it without the PIN (most do), and no IMSI."""
    found: dict[str, Any] = {"status": FAILED, "reason": None, "manufacturer": None, "model": None, "iccid": None,
                             "imsi": None, "operator": None, "signalDbm": None}
    modem = Modem(port, baud, timeouts=Timeouts(command=IDENTIFY_BUSY_FOR))
    try:
        modem.open()
    except PortGone as error:
        if _locked(error):
            return {**found, "status": HELD, "reason": "another process holds the port open (its exclusive lock)"}
        return {**found, "reason": str(error)}
    try:
        modem.sync(attempts=1)
    except CommandTimeout:
        modem.close()
        return {**found, "status": NO_ANSWER, "reason": "no OK to AT within 2 s"}
    try:
        _read_identity(modem, found)
    except ModemError as error:
        found["reason"] = found["reason"] or str(error)
    finally:
        modem.close()
    return found


def identify_any(port: str, baud: int = 115200) -> dict[str, Any]:
    """`identify` for a serial port; for a HiLink device's URL, the same fields from its web API,
    or `no answer` within IDENTIFY_NETWORK_SECONDS."""
    if scheme_of(port) == "serial":
        return identify(port, baud)
    from .hilink import Hilink

    found: dict[str, Any] = {"status": NO_ANSWER, "reason": None, "manufacturer": None, "model": None, "iccid": None,
                             "imsi": None, "operator": None, "signalDbm": None}
    from huawei_lte_api.exceptions import ResponseErrorException

    device = Hilink(port, timeout=IDENTIFY_NETWORK_SECONDS)
    try:
        identity = device.open()
        signal = device.health().signal_dbm
    except PortGone as error:
        return {**found, "reason": str(error)}
    except (ModemError, ResponseErrorException) as error:  # a router that asks for its login, say
        return {**found, "status": FAILED, "reason": f"{error}: a router with a login is found with "
                                                      "sim discover --hilink USER:PASSWORD@HOST"}
    finally:
        device.close()
    return {**found, "status": IDENTIFIED, "manufacturer": identity.manufacturer, "model": identity.model,
            "iccid": identity.iccid, "imsi": identity.imsi, "operator": of_imsi(identity.imsi), "signalDbm": signal}


def _read_identity(modem: Modem, found: dict[str, Any]) -> None:
    talk = Dialogue(modem, IDENTIFY_BUSY_FOR)
    talk.maybe("ATE0")
    talk.maybe("AT+CMEE=1")
    made = maker(talk)
    found.update(manufacturer=made.manufacturer, model=made.model, iccid=sim_iccid(talk, made.family))
    state = pin_state(talk)
    if state == "READY":
        imsi = sim_imsi(talk)
        found.update(status=IDENTIFIED, imsi=imsi, operator=of_imsi(imsi))
    elif state == "SIM PIN":
        found.update(status=PIN_REQUIRED, reason="the SIM asks for its PIN")
    else:
        found["reason"] = f"SIM not ready: {state}"
    found["signalDbm"] = modem.health().signal_dbm


def _locked(error: PortGone) -> bool:
    """Whether the port could not be opened because another process holds its lock (pyserial's
    `exclusive=True` is an flock, refused with EWOULDBLOCK)."""
    cause = error.__cause__
    return isinstance(cause, OSError) and cause.errno in (errno.EWOULDBLOCK, errno.EAGAIN)

