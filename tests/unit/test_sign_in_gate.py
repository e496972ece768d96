"""The sign-in forms' first door (api/dashboard/gate.py): an address's and a network's allowance of
posts, counted in memory by GCRA (domain/signin.py)."""
from sandesh.api.dashboard.gate import Gate


def test_the_sign_in_gate_lets_sixty_posts_an_address_then_one_each_fifteen_seconds():
    now = [1000.0]
    gate = Gate(lambda: now[0])
    assert [gate.wait("198.51.100.1") for _ in range(60)] == [0] * 60
    assert gate.wait("198.51.100.1") == 15
    now[0] += 15
    assert gate.wait("198.51.100.1") == 0 and gate.wait("198.51.100.1") == 15
    assert gate.wait("::ffff:198.51.100.2") == 0, "an IPv4-mapped address is its IPv4 address"


def test_the_page_of_an_address_past_its_allowance_waits_as_its_post_would_and_counts_nothing():
    now = [1000.0]
    gate = Gate(lambda: now[0])
    assert gate.waiting("198.51.100.9") == 0
    for _ in range(60):
        gate.wait("198.51.100.9")
    assert gate.waiting("198.51.100.9") == gate.waiting("198.51.100.9") == 15
    now[0] += 15
    assert gate.waiting("198.51.100.9") == 0 and gate.wait("198.51.100.9") == 0
