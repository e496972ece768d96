"""`sandesh sim discover`: the serial ports of this host (or of a glob), what answers on each,
which registered SIM it is, and what `--apply` registers or moves (docs/operations.md,
"Discovering modems").

A port a running dispatcher of this host holds is never opened: the dispatcher's heartbeat and
its process report say so before anything touches the port; any other holder is found by the
port's lock (pyserial's `exclusive=True`), which refuses the open before anything is written.  Every other port is asked on a
thread of its own, so N silent ports (a stick's data and diagnostic ports) cost 2 s, not 2N s.
"""
from __future__ import annotations

import glob
import os
import re
import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from serial.tools import list_ports

from sandesh.domain.sim import discovered_name, split_secret
from sandesh.projections.storage.runtime import Runtime

from .sims import FAILED, HELD, IDENTIFIED, NO_ANSWER, PIN_REQUIRED, identify_any

BY_ID = "/dev/serial/by-id/*"  # udev's names: they survive re-plugging and reboots, /dev/ttyUSBn does not
HILINK_ADDRESS = "192.168.8.1"  # where a HiLink stick puts its web page
WILDCARD = re.compile(r"[*?[]")
ADD, MOVE = "add", "move"


@dataclass(frozen=True)
class Port:
    name: str                 # as shown and registered: the by-id link where there is one
    device: str               # the device it leads to
    named: bool               # the operator named exactly this port (a --ports without a wildcard)
    usb: dict[str, Any] | None
    address: str | None = None  # what is asked and registered when it holds a login the name does not show


def serial_ports() -> list[Port]:
    """Every serial device pyserial lists, by its /dev/serial/by-id name where udev made one."""
    links: dict[str, str] = {}
    for link in sorted(glob.glob(BY_ID)):
        links.setdefault(os.path.realpath(link), link)
    return [Port(links.get(info.device, info.device), info.device, False, _usb(info))
            for info in sorted(list_ports.comports())]


def matching(patterns: Iterable[str]) -> list[Port]:
    """The ports the patterns name (globs; symlinks as they are named), each device once."""
    known = {info.device: info for info in list_ports.comports()}
    ports: dict[str, Port] = {}
    for pattern in patterns:
        literal = not WILDCARD.search(pattern)
        for path in [pattern] if literal else sorted(glob.glob(pattern)):
            device = os.path.realpath(path)
            if device not in ports:
                ports[device] = Port(path, device, literal, _usb(known.get(device)))
    return list(ports.values())


def hilink_ports(hosts: Iterable[str] | None = None) -> list[Port]:
    """Where a HiLink stick or router may answer: `hosts` (each `[USER:PASSWORD@]HOST[:PORT]`, a
    router's login shown without its password), or its usual address and the gateways of this
    host's network interfaces (a stick is the gateway of the network card it makes)."""
    found = list(hosts) if hosts is not None else [HILINK_ADDRESS, *gateways()]
    ports = []
    for host in dict.fromkeys(found):
        public, secret = split_secret(f"hilink://{host}")
        ports.append(Port(public, public, False, None, f"hilink://{host}" if secret else None))
    return ports


def gateways(routes: str = "/proc/net/route") -> list[str]:
    """The default gateways of this host's interfaces, from the kernel's routing table."""
    try:
        lines = open(routes).read().splitlines()[1:]
    except OSError:
        return []
    found = []
    for line in lines:
        fields = line.split()
        if len(fields) > 2 and fields[1] == "00000000" and fields[2] != "00000000":
            found.append(".".join(str(b) for b in bytes.fromhex(fields[2])[::-1]))
    return found


def _usb(info: Any) -> dict[str, Any] | None:
    if info is None or info.vid is None:
        return None
    return {"manufacturer": info.manufacturer, "product": info.product, "serialNumber": info.serial_number,
            "interface": info.interface, "vid": f"{info.vid:04x}", "pid": f"{info.pid:04x}"}


def holders(pool: list[dict[str, Any]], processes: list[dict[str, Any]], host: str) -> dict[str, str]:
    """The devices a running dispatcher of this host holds open, each with who holds it: the port
    of an enabled SIM whose dispatcher reported within the route window that it has the port
    open, and whose process reports running on `host`.  A dispatcher that stopped removed its
    report; any other holder (a release before 0.3.0, another program) is found by the port's lock."""
    running = {p["id"]: p for p in processes if p["host"] == host}
    held = {}
    for sim in pool:
        process = running.get(sim["dispatcher"])
        if process is None or not (sim["enabled"] and sim["reported"] and sim["reachable"]):
            continue
        held[_device(sim)] = f"held by dispatcher {process['id']} on {host} (pid {process['pid']}) for SIM {sim['name']}"
    return held


def discover(ports: list[Port], held: dict[str, str], baud: int = 115200,
             ask: Callable[[str, int], dict[str, Any]] = identify_any) -> list[dict[str, Any]]:
    """What answers on each port, asked all at once; a held port is not opened.  A HiLink
    address where nothing answers is left out: it is a guess, not a port of this host."""
    found: list[dict[str, Any] | None] = [None] * len(ports)

    def one(index: int, port: Port) -> None:
        try:
            found[index] = ask(port.address or port.name, baud)
        except Exception as error:  # noqa: BLE001 - one port's surprise is that port's answer, not the run's end
            found[index] = {"status": FAILED, "reason": f"{type(error).__name__}: {error}"}

    threads = []
    for index, port in enumerate(ports):
        if port.device in held:
            found[index] = {"status": HELD, "reason": held[port.device]}
            continue
        threads.append(threading.Thread(target=one, args=(index, port), name=f"discover {port.name}", daemon=True))
        threads[-1].start()
    for thread in threads:
        thread.join()
    return [{"port": port.name, "device": port.device, "usb": port.usb, **_blank(), **(answer or {})}
            for port, answer in zip(ports, found)
            if not (port.device.startswith("hilink://") and (answer or {}).get("status") == NO_ANSWER)]


def _blank() -> dict[str, Any]:
    return {"status": None, "reason": None, "manufacturer": None, "model": None, "iccid": None, "imsi": None,
            "operator": None, "signalDbm": None}


def plan(found: list[dict[str, Any]], pool: list[dict[str, Any]], held: dict[str, str],
         prefix: str | None = None) -> list[dict[str, Any]]:
    """Each port with the registered SIM it is (by ICCID; a held port's by its port) and what
    `--apply` does: `add` a SIM not registered, under a new `name`; `move` a registered one whose
    ICCID answers on another device.  A SIM that answers on two ports (some sticks have two AT
    ports) is planned on one: its registered port if it is among them, else the first; and a SIM
    whose registered port a dispatcher holds is never moved (the stick's other AT port answers)."""
    by_iccid = {s["iccid"]: s for s in pool if s["iccid"]}
    by_device = {os.path.realpath(s["port"]): s for s in pool if s["port"].startswith("/")}
    taken = {s["name"] for s in pool}
    chosen: dict[str, dict[str, Any]] = {}
    for row in found:
        iccid, sim = row["iccid"], by_iccid.get(row["iccid"] or "")
        if row["status"] not in (IDENTIFIED, PIN_REQUIRED) or not iccid:
            continue
        first = chosen.get(iccid)
        if first is None or (sim is not None and _device(sim) == row["device"] != first["device"]):
            chosen[iccid] = row
    for row in found:
        sim = by_iccid.get(row["iccid"] or "") if row["status"] != HELD else by_device.get(row["device"])
        row.update(sim=_shown(sim), action=None, name=sim["name"] if sim else None, movedFrom=None)
        first = chosen.get(row["iccid"] or "")
        if first is None or row["status"] == HELD:
            continue
        if first is not row:
            row["reason"] = f"the same SIM answers on {first['port']}"
        elif sim is not None and _device(sim) in held:
            row["reason"] = f"the same SIM answers on {sim['port']}, {held[_device(sim)]}"
        elif sim is None:
            row.update(action=ADD, name=discovered_name(row["operator"], row["iccid"], taken, prefix))
            taken.add(row["name"])
        elif _device(sim) != row["device"]:
            row.update(action=MOVE, movedFrom=sim["port"])
    return found


def _device(sim: dict[str, Any]) -> str:
    return os.path.realpath(sim["port"]) if sim["port"].startswith("/") else sim["port"]


def _shown(sim: dict[str, Any] | None) -> dict[str, Any] | None:
    return {"id": sim["id"], "name": sim["name"], "port": sim["port"]} if sim else None


def apply(runtime: Runtime, found: list[dict[str, Any]], ports: list[Port], baud: int, host: str | None,
          actor: str) -> None:
    """Register the SIMs to add (`sim.added`) and record the new port of those to move
    (`sim.port_changed`), each audited with `actor`; a router's login, given where to look, is
    sealed with it."""
    sims = runtime.sandesh.sims
    addresses = {port.name: port.address for port in ports if port.address}
    for row in found:
        if row["action"] == ADD:
            sim = sims.place_sim(None, row["name"], addresses.get(row["port"], row["port"]), baud, host, actor)
            sims.identify_sim(sim.id, row["iccid"], row["imsi"])
            row["sim"] = {"id": sim.id, "name": sim.name, "port": sim.port}
        elif row["action"] == MOVE:
            sim = sims.place_sim(row["sim"]["id"], row["name"], addresses.get(row["port"], row["port"]), baud, host,
                                 actor)
            row["sim"] = {"id": sim.id, "name": sim.name, "port": sim.port}
