"""What `sandesh sim discover` plans for each port it asked, and the names `--apply` gives the
SIMs it adds (docs/operations.md, "Discovering modems")."""
import pytest

from sandesh.domain.errors import InvalidInput
from sandesh.domain.sim import discovered_name
from sandesh.workers.discover import holders, plan

NTC_ICCID, NCELL_ICCID = "8997701000000004821", "8997701000000007356"


def test_a_new_sim_is_named_after_its_operator_and_the_last_four_digits_of_its_iccid():
    assert discovered_name("ntc", NTC_ICCID, set()) == "ntc-4821"
    assert discovered_name(None, NTC_ICCID, set()) == "sim-4821"


def test_a_name_taken_gets_more_digits_then_a_number():
    assert discovered_name("ntc", NTC_ICCID, {"ntc-4821"}) == "ntc-004821"
    assert discovered_name("ntc", NTC_ICCID, {"ntc-4821", "ntc-004821", f"ntc-{NTC_ICCID}"}) == f"ntc-{NTC_ICCID}-2"


def test_a_prefix_numbers_new_sims_from_the_first_free_number():
    assert discovered_name("ntc", NTC_ICCID, {"pool-1", "pool-3"}, "pool-") == "pool-2"
    with pytest.raises(InvalidInput):
        discovered_name("ntc", NTC_ICCID, set(), "sim_")


def found(port, iccid, status="identified", operator="ntc"):
    return {"port": port, "device": port, "status": status, "reason": None, "iccid": iccid, "imsi": None,
            "operator": operator}


def sim(name, port, iccid, **heartbeat):
    return {"id": f"sim_{name}", "name": name, "port": port, "iccid": iccid, "enabled": True, "reported": True,
            "reachable": True, "dispatcher": "dispatcher-1", **heartbeat}


def test_unregistered_sims_are_added_and_one_on_a_new_port_is_moved():
    rows = plan([found("/dev/ttyUSB0", NTC_ICCID), found("/dev/ttyUSB3", NCELL_ICCID, operator="ncell")],
                [sim("ncell-a", "/dev/ttyUSB1", NCELL_ICCID)], {})
    assert [(r["action"], r["name"], r["movedFrom"]) for r in rows] == [("add", "ntc-4821", None),
                                                                          ("move", "ncell-a", "/dev/ttyUSB1")]


def test_a_sim_answering_on_two_ports_is_planned_once_at_its_registered_port():
    """Some sticks have two AT ports: both answer with the SIM's ICCID."""
    rows = plan([found("/dev/ttyUSB0", NTC_ICCID), found("/dev/ttyUSB2", NTC_ICCID)],
                [sim("ntc-a", "/dev/ttyUSB2", NTC_ICCID)], {})
    assert [r["action"] for r in rows] == [None, None]
    assert rows[0]["reason"] == "the same SIM answers on /dev/ttyUSB2"
    new = plan([found("/dev/ttyUSB0", NTC_ICCID), found("/dev/ttyUSB2", NTC_ICCID)], [], {})
    assert [r["action"] for r in new] == ["add", None]


def test_a_sim_whose_registered_port_a_dispatcher_holds_is_not_moved():
    held = {"/dev/ttyUSB0": "held by dispatcher dispatcher-1 on rack (pid 7) for SIM ntc-a"}
    rows = plan([found("/dev/ttyUSB2", NTC_ICCID)], [sim("ntc-a", "/dev/ttyUSB0", NTC_ICCID)], held)
    assert rows[0]["action"] is None and "held by dispatcher" in rows[0]["reason"]


def test_only_a_running_dispatcher_of_this_host_holds_a_port():
    processes = [{"id": "dispatcher-1", "host": "rack", "pid": 7}, {"id": "dispatcher-2", "host": "other", "pid": 8}]
    pool = [sim("a", "/dev/ttyUSB0", None), sim("b", "/dev/ttyUSB1", None, dispatcher="dispatcher-2"),
            sim("c", "/dev/ttyUSB2", None, reported=False), sim("d", "/dev/ttyUSB3", None, dispatcher="gone"),
            sim("e", "/dev/ttyUSB4", None, reachable=False)]
    assert holders(pool, processes, "rack") == {"/dev/ttyUSB0": "held by dispatcher dispatcher-1 on rack (pid 7) "
                                                                "for SIM a"}
