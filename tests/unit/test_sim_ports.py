"""A device's port URL is split into what the log shows and what is sealed (domain/sim.py)."""
import json

import pytest

from sandesh.domain.sim import join_secret, split_secret


@pytest.mark.parametrize("port, public, secret", [
    ("/dev/ttyUSB0", "/dev/ttyUSB0", None),
    ("loop://", "loop://", None),
    ("hilink://192.168.8.1", "hilink://192.168.8.1", None),
    ("hilink://admin:p%40ss:w@192.168.1.1:8080", "hilink://admin@192.168.1.1:8080", {"password": "p%40ss:w"}),
    ("android://sms:Xy12@10.0.0.5:8080?signing_key=k3y", "android://sms@10.0.0.5:8080",
     {"password": "Xy12", "signing_key": "k3y"}),
    ("android://sms@10.0.0.5?signing_key=k3y", "android://sms@10.0.0.5", {"signing_key": "k3y"}),
    ("hilink://admin:Xy12/p%40ss?#@192.168.8.1", "hilink://admin@192.168.8.1", {"password": "Xy12/p%40ss?#"}),
    ("android://sms:Xy12/a@b?c@10.0.0.5?signing_key=k3y@", "android://sms@10.0.0.5",
     {"password": "Xy12/a@b?c", "signing_key": "k3y@"}),
    ("android://10.0.0.5?signing_key=k3y@x", "android://10.0.0.5", {"signing_key": "k3y@x"}),
])
def test_the_secrets_are_taken_out_and_put_back(port, public, secret):
    shown, sealed = split_secret(port)
    assert shown == public and (json.loads(sealed) if sealed else None) == secret
    assert "Xy12" not in shown and "k3y" not in shown and "p%40ss" not in shown
    again = join_secret(shown, sealed)
    assert split_secret(again) == (shown, sealed)


def test_a_hosts_gateways_are_read_from_the_kernels_routing_table(tmp_path):
    from sandesh.workers.discover import gateways, hilink_ports

    routes = tmp_path / "route"
    routes.write_text("Iface\tDestination\tGateway \tFlags\n"
                      "eth0\t00000000\t0101A8C0\t0003\n"     # default via 192.168.1.1
                      "eth1\t00000000\t0108A8C0\t0003\n"     # default via 192.168.8.1 (a stick)
                      "eth0\t0001A8C0\t00000000\t0001\n")    # the local network: no gateway
    assert gateways(str(routes)) == ["192.168.1.1", "192.168.8.1"]
    assert gateways(str(tmp_path / "absent")) == []
    assert [p.name for p in hilink_ports(["192.168.8.1", "10.0.0.1", "192.168.8.1"])] == [
        "hilink://192.168.8.1", "hilink://10.0.0.1"]


def test_a_routers_login_is_asked_with_and_shown_without_its_password():
    from sandesh.workers.discover import hilink_ports

    router, stick = hilink_ports(["admin:pa:ss@10.0.0.1:8080", "192.168.8.1"])
    assert (router.name, router.device, router.address) == (
        "hilink://admin@10.0.0.1:8080", "hilink://admin@10.0.0.1:8080", "hilink://admin:pa:ss@10.0.0.1:8080")
    assert (stick.name, stick.address) == ("hilink://192.168.8.1", None)
