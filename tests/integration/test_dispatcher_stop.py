"""A dispatcher stopped as an operator stops it (SIGTERM, `Dispatcher.close`), over a real
pseudo-terminal: what its SIMs had read from their modems is recorded, not dropped."""
import threading
import time

from sandesh.domain.sending import parse_send
from sandesh.scripts.service.emulator import Emulator
from sandesh.scripts.service.commands import register_emulated
from sandesh.workers.dispatcher import Dispatcher
from tests.conftest import wait_for_status
from tests.helpers import funded_workspace

TO = "9779812345678"


def test_a_status_report_read_while_its_sim_sends_the_next_part_is_recorded_when_the_dispatcher_stops(runtime):
    # The network takes 3 s to accept each part, and a report comes 0.05 s after the part's
    # +CMGS: the first message's report is read while the SIM's thread waits on the second's
    # +CMGS, and waits behind it in the SIM's queue.  The dispatcher is stopped then (the 3 s
    # leave a loaded machine's late look at the first's status inside that wait).
    app = runtime.sandesh
    workspace = funded_workspace(app, "Stop", 10**6, "t")
    client = app.operators.create_client(workspace, "S", None, 1000, "t")[0].id
    with Emulator(sims=1, report_delay=0.05, cmgs_seconds=3.0) as emulator:
        register_emulated(runtime, emulator.devices(), "test")
        request, problems = parse_send({"to": TO, "text": "Your parcel is on its way"})
        assert not problems
        first, second = (app.sending.send(client, workspace, request, 100).id for _ in range(2))
        dispatcher = Dispatcher(runtime)
        dispatcher.start()
        thread = threading.Thread(target=dispatcher.run, daemon=True)
        thread.start()
        try:
            wait_for_status(runtime, [first], {"sent"}, timeout=15)
            time.sleep(0.3)  # its report has come, and the second message is in the modem's hands
            assert emulator.modems[0].reports and app.history.message(second).status == "submitted"
            assert app.history.message(first).status == "sent", "recorded only once the SIM's thread is free"
        finally:
            dispatcher.close()
            thread.join(timeout=10)
        assert app.history.message(first).status == "delivered"
        assert app.history.message(second).status in ("sent", "delivered")  # its +CMGS came as the SIM stopped


def test_a_pool_read_that_crosses_the_close_starts_no_thread_that_keeps_a_port(runtime):
    # The loop's pool read (sync_pool) runs on its own thread: when it ends after `close` has
    # retired the SIMs it knew, a SIM it starts then must not open its port and keep it.
    from sandesh.workers.modem import Modem

    with Emulator(sims=1) as emulator:
        register_emulated(runtime, emulator.devices(), "test")
        dispatcher = Dispatcher(runtime)
        assert dispatcher.close() == []  # it knew no SIM yet
        dispatcher.sync_pool()  # the loop's read, finishing after the close
        assert [w.name for w in dispatcher.sims.values()] == [emulator.modems[0].name]
        try:
            time.sleep(0.5)  # time enough to open the port, were it to
            port = Modem(emulator.modems[0].device)
            port.open()  # nobody holds it
            port.close()
        finally:
            assert dispatcher.close() == []
