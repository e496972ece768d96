"""Which ports a dispatcher asks for a lost SIM's ICCID (workers/ports.py PortSearch): the
free ports of the glob, each at most once per PROBE_AGAIN_AFTER unless it answered with the
ICCID looked for.  The ports are files; what each answers is a table."""
import pytest

from sandesh.workers.modem import PortGone
from sandesh.workers.ports import PROBE_AGAIN_AFTER, PortSearch

MINE, OTHER = "8997701000000000514", "8997701000000000522"


@pytest.fixture
def ports(tmp_path):
    for name in ("usb-a", "usb-b", "usb-c"):
        (tmp_path / name).touch()
    return tmp_path


class Ports:
    """What each port answers (an ICCID, None for silence, PortGone for a lock held elsewhere),
    and every port asked, in order."""

    def __init__(self, answers):
        self.answers, self.asked, self.now = answers, [], 0.0

    def ask(self, port, baud):
        self.asked.append(port.rsplit("/", 1)[1])
        answer = self.answers[port.rsplit("/", 1)[1]]
        if answer is PortGone:
            raise PortGone(f"cannot open {port}")
        return answer


def search(ports, fake):
    return PortSearch(str(ports / "usb-*"), ask=fake.ask, clock=lambda: fake.now)


def test_the_port_that_answers_with_the_iccid_is_found(ports):
    fake = Ports({"usb-a": OTHER, "usb-b": None, "usb-c": MINE})
    assert search(ports, fake).find(MINE, 115200, held=()) == str(ports / "usb-c")
    assert fake.asked == ["usb-a", "usb-b", "usb-c"]


def test_a_port_another_sim_holds_is_never_asked(ports):
    """Held means registered to a SIM in use, compared by the device the name leads to."""
    (ports / "usb-d").symlink_to(ports / "usb-c")
    fake = Ports({"usb-a": OTHER, "usb-b": None, "usb-c": MINE, "usb-d": MINE})
    assert search(ports, fake).find(MINE, 115200, held=[str(ports / "usb-d")]) is None
    assert fake.asked == ["usb-a", "usb-b"]


def test_a_port_with_another_iccid_or_none_is_asked_again_only_after_the_interval(ports):
    fake = Ports({"usb-a": OTHER, "usb-b": None, "usb-c": PortGone})
    finder = search(ports, fake)
    assert finder.find(MINE, 115200, held=()) is None
    fake.now += PROBE_AGAIN_AFTER - 1
    assert finder.find(MINE, 115200, held=()) is None
    assert fake.asked == ["usb-a", "usb-b", "usb-c", "usb-c"]  # a lock held elsewhere costs nothing to try
    fake.now += 1
    assert finder.find(MINE, 115200, held=()) is None
    assert fake.asked[4:] == ["usb-a", "usb-b", "usb-c"]


def test_a_port_that_answered_one_sims_iccid_is_asked_at_once_by_that_sim(ports):
    """Two SIMs lost together: what one of them learnt of a port does not hide it from the other."""
    fake = Ports({"usb-a": OTHER, "usb-b": None, "usb-c": MINE})
    finder = search(ports, fake)
    assert finder.find(MINE, 115200, held=()) == str(ports / "usb-c")
    assert finder.find(OTHER, 115200, held=[str(ports / "usb-c")]) == str(ports / "usb-a")
