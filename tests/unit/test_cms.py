"""+CMS ERROR classes (docs/design.md, "Failures of a send"), signal and registration readings."""
import pytest

from sandesh.domain.cms import Action, classify, registered, signal_dbm


@pytest.mark.parametrize("code, action", [
    (1, Action.REJECT), (28, Action.REJECT), (30, Action.REJECT),
    (8, Action.QUARANTINE), (10, Action.QUARANTINE), (29, Action.QUARANTINE), (50, Action.QUARANTINE),
    (310, Action.QUARANTINE), (318, Action.QUARANTINE),
    (38, Action.RETRY_ELSEWHERE), (41, Action.RETRY_ELSEWHERE), (42, Action.RETRY_ELSEWHERE),
    (47, Action.RETRY_ELSEWHERE), (330, Action.RETRY_ELSEWHERE), (331, Action.RETRY_ELSEWHERE),
    (332, Action.RETRY_ELSEWHERE),
    (304, Action.ALERT), (322, Action.CLEAR_STORE), (500, Action.RETRY), (999, Action.RETRY),
])
def test_cms_error_codes_are_classified_as_decisions_3_says(code, action):
    """The table of docs/design.md, "Failures of a send"."""
    assert classify(code) == action


@pytest.mark.parametrize("rssi, dbm", [(0, -113), (20, -73), (31, -51), (99, None)])
def test_csq_rssi_reads_as_dbm(rssi, dbm):
    assert signal_dbm(rssi) == dbm


def test_home_and_roaming_count_as_registered():
    assert [registered(s) for s in range(6)] == [False, True, False, False, False, True]
