"""Finding a SIM again on another port of its host (`SANDESH_MODEM_PORTS`; docs/operations.md,
"SIMs and modems"): a SIM whose port has been gone for REFIND_AFTER seconds is looked for, by
its ICCID, on the free ports that match the glob.

A USB stick that resets or is plugged into another socket comes back under another name, and
shows several ports of which only one answers AT: each port is asked for at most PROBE_SECONDS
before it is skipped, and a port that did not answer with the ICCID looked for is asked again
only after PROBE_AGAIN_AFTER seconds.
"""
from __future__ import annotations

import glob
import logging
import os
import threading
import time
from typing import Callable, Iterable

from .device import Dialogue, maker, sim_iccid
from .modem import Modem, ModemError, PortGone, Timeouts

logger = logging.getLogger("sandesh.dispatcher")

REFIND_AFTER = 30.0        # seconds of the service clock a SIM's port is gone before other ports are asked
PROBE_SECONDS = 2.0        # a port silent this long is skipped: a stick's data and diagnostic ports never answer
PROBE_AGAIN_AFTER = 60.0   # seconds before a port that answered another ICCID, or none, is asked again


def iccid_on(port: str, baud: int) -> str | None:
    """The ICCID of the SIM behind `port`, read as initialisation reads it (the family's command,
    AT+CCID, then AT+CRSM); None when the port is silent or does not say.  Raises PortGone when
    the port cannot be opened: it is gone, or another process holds it (the exclusive lock)."""
    modem = Modem(port, baud, timeouts=Timeouts(command=PROBE_SECONDS))
    modem.open()
    try:
        modem.sync(attempts=1)
        talk = Dialogue(modem, busy_for=PROBE_SECONDS)
        talk.maybe("ATE0")
        return sim_iccid(talk, maker(talk).family)
    except ModemError:
        return None
    finally:
        modem.close()


def same_device(port: str, sims: Iterable[dict]) -> dict | None:
    """The first of `sims` whose port leads to the device `port` leads to (symlinks resolved,
    as /dev/serial/by-id names are), with that device as `device`; None when none does or
    `port` is no path here (a pyserial URL, a device not plugged in)."""
    if not os.path.exists(port):
        return None
    device = os.path.realpath(port)
    for sim in sims:
        if os.path.exists(sim["port"]) and os.path.realpath(sim["port"]) == device:
            return {**sim, "device": device}
    return None


class PortSearch:
    """The ports of one glob and what each answered: one per dispatcher, shared by its SIM threads.

    Locking: `_answers` (port -> when it was asked, on the monotonic clock, and the ICCID it
    gave) and `_asking` (the ports being asked now) are read and written only under `_lock`.  A
    port is asked outside the lock, by the one thread that marked it in `_asking`; another
    thread skips it meanwhile."""

    def __init__(self, pattern: str, ask: Callable[[str, int], str | None] = iccid_on,
                 clock: Callable[[], float] = time.monotonic):
        self.pattern, self.ask, self.clock = pattern, ask, clock
        self._lock = threading.Lock()
        self._answers: dict[str, tuple[float, str | None]] = {}
        self._asking: set[str] = set()

    def find(self, iccid: str, baud: int, held: Iterable[str], stop: threading.Event | None = None) -> str | None:
        """A port of the glob that answers with `iccid`, among those not `held` (the registered
        ports of the SIMs in use, compared by the device they lead to); None when none does."""
        taken = {os.path.realpath(port) for port in held}
        for port in sorted(glob.glob(self.pattern)):
            if stop is not None and stop.is_set():
                return None
            if os.path.realpath(port) in taken or not self._claim(port, iccid):
                continue
            found, asked = None, False
            try:
                found, asked = self.ask(port, baud), True
            except PortGone:  # gone since the glob, or held by another process: not asked, not remembered
                continue
            finally:
                self._release(port, found, remember=asked)
            logger.info("asked %s for a SIM's ICCID: %s", port, found or "no answer")
            if found == iccid:
                return port
        return None

    def _claim(self, port: str, iccid: str) -> bool:
        """Whether this thread may ask `port` now: nobody is asking it, and it was not asked
        recently, unless it answered with the ICCID looked for."""
        with self._lock:
            if port in self._asking:
                return False
            asked = self._answers.get(port)
            if asked is not None and self.clock() - asked[0] < PROBE_AGAIN_AFTER and asked[1] != iccid:
                return False
            self._asking.add(port)
            return True

    def _release(self, port: str, found: str | None, remember: bool) -> None:
        with self._lock:
            self._asking.discard(port)
            if remember:
                self._answers[port] = (self.clock(), found)
