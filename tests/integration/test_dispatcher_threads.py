"""The state a dispatcher's loop and its SIM threads share has one owner each (docs/design.md,
"The dispatcher's threads"): for STRESS_SECONDS, SIM threads record parts, finish messages, learn
their card's identity and nudge the loop while the loop reads every SIM's room and the pool's
usable SIMs, hands out work, refreshes every SIM's settings from the pool, and the pool is changed
under them.  No thread meets an exception, no count is torn, no identity is lost, and every nudge
reaches the loop."""
from __future__ import annotations

import itertools
import threading
import traceback

from sandesh.domain.pacing import WINDOW_SECONDS
from sandesh.domain.sim_plan import Usage, day_start, month_start
from sandesh.workers.dispatcher import Dispatcher
from sandesh.workers.sim_worker import SimWorker

STRESS_SECONDS = 10.0
SIMS = 8


def sim_row(n: int) -> dict:
    return {"id": f"sim_stress_{n}", "name": f"stress-{n}", "quarantine": None, "port": f"loop://{n}", "baud": 115200,
            "operator": "ntc", "daily_cap": None, "monthly_cap": 10**9, "pace": None, "pin_sealed": None,
            "pin_refused": None, "balance_ussd": None, "min_credit": None, "balance_every": None}


def test_the_loop_and_the_sim_threads_share_nothing_unowned(runtime):
    dispatcher = Dispatcher(runtime)
    workers = [SimWorker(dispatcher, sim_row(n)) for n in range(SIMS)]
    now = runtime.clock.now()
    for worker in workers:
        worker.ready = True  # as if its port were open (no thread of its own runs here)
        worker.load.opened([], Usage(day_start(now), 0, month_start(now), 0))
    dispatcher.sims = {w.id: w for w in workers}
    stop, failures = threading.Event(), []
    nudged, taken = [], set()
    parts = {w.id: 0 for w in workers}
    identities = {w.id: 0 for w in workers}

    def guarded(body):
        def run():
            try:
                while not stop.is_set():
                    body()
            except Exception:  # noqa: BLE001 - the test's finding
                failures.append(traceback.format_exc())
                stop.set()
        return threading.Thread(target=run, daemon=True)

    tokens = itertools.count()

    def sim_thread(worker):
        def body():  # what _send and _serve_one do for each part and each message
            # at the window's edge, so the loop trims the window while the thread appends to it
            worker.load.part_accepted(now - WINDOW_SECONDS)
            parts[worker.id] += 1
            worker.load.done()
            # what _open does once the modem answers: the card it holds.  No one else writes it, so
            # the one it wrote last must still be there, whatever the loop refreshed meanwhile.
            learned = f"8997701{identities[worker.id]:012d}" if identities[worker.id] else None
            assert worker.sim.get("iccid") == learned, "the ICCID the thread learned was lost"
            identities[worker.id] += 1
            worker.sim.identified(f"8997701{identities[worker.id]:012d}", "429010000000001", "ntc")
            token = f"nudge-{next(tokens)}"
            nudged.append(token)
            dispatcher._wakeups.add(token)
        return body

    def loop_reads():  # what tick does: every SIM's room, the pool's usable SIMs, then hand out
        for worker in dispatcher.sims.values():
            worker.left(now)
            worker.resting(now)
        dispatcher.usable_sims()
        for worker in dispatcher.sims.values():
            if not worker.busy:
                worker.load.give(1)

    def loop_wakeups():
        dispatcher._wakeups.wait(0.01)
        taken.update(dispatcher._wakeups.take())

    def pool_changes():  # what sync_pool does at every read, and when SIMs are disabled and enabled again
        for n, worker in enumerate(workers):
            worker.sim.refresh(sim_row(n))
        for gone in workers:
            dispatcher.sims = {w.id: w for w in workers if w is not gone}
        dispatcher.sims = {w.id: w for w in workers}

    threads = [guarded(sim_thread(w)) for w in workers[:4]]
    threads += [guarded(loop_reads), guarded(loop_wakeups), guarded(pool_changes)]
    for thread in threads:
        thread.start()
    stop.wait(STRESS_SECONDS)
    stop.set()
    for thread in threads:
        thread.join(timeout=10)
    taken.update(dispatcher._wakeups.take())

    assert not failures, failures[0]
    assert len(nudged) > 10_000, "the threads did not run"
    assert set(nudged) <= taken, f"{len(set(nudged) - taken)} nudges never reached the loop"
    for worker in workers:  # every part counted once, none torn between the two threads
        assert worker.load.used() == (parts[worker.id], parts[worker.id])
        worker.load.done()
        assert worker.left(now) == 30, "the window trimmed every part at its edge"
