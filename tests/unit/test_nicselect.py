"""NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME selection rules."""

import pytest

from llmdiag.probes.nicselect import kind_of, parse_spec, select_gloo, select_nccl

IFS = ["lo", "eth0", "eth1", "ib0", "ib1", "docker0", "ens5", "br-abc"]


@pytest.mark.parametrize("value,expected", [
    ("eth", ("eth0", "eth1")),                 # prefix
    ("eth0", ("eth0",)),
    ("=eth", ()),                              # exact: no interface is called "eth"
    ("=eth1", ("eth1",)),
    ("eth,ib", ("eth0", "eth1", "ib0", "ib1")),  # comma list, candidate order kept
    ("^docker,lo", ("eth0", "eth1", "ib0", "ib1", "ens5", "br-abc")),
    ("^=eth0", ("lo", "eth1", "ib0", "ib1", "docker0", "ens5", "br-abc")),
    ("^eth,ib,docker,lo,br", ("ens5",)),
    (" ens , ib1 ", ("ib1", "ens5")),  # spaces ignored; prefix "ib1" matches only ib1
    ("nosuch", ()),
])
def test_nccl_explicit(value, expected):
    assert select_nccl(value, IFS).names == expected


def test_nccl_defaults_prefer_ib_then_skip_docker_and_lo():
    assert select_nccl(None, IFS).names == ("ib0", "ib1")
    assert select_nccl(None, ["lo", "docker0", "eth0"]).names == ("eth0",)
    assert select_nccl("", ["lo", "docker0", "eth0"]).names == ("eth0",)
    assert select_nccl(None, ["lo", "docker0"]).names == ("docker0",)
    assert select_nccl(None, ["lo"]).names == ("lo",)
    assert select_nccl(None, []).names == ()


def test_parse_spec():
    s = parse_spec("^=a,b")
    assert (s.exclude, s.exact, s.names) == (True, True, ("a", "b"))
    s = parse_spec("=^a")  # "=" first: "^a" is an exact name
    assert (s.exclude, s.exact, s.names) == (False, True, ("^a",))


def test_gloo_exact_names_only():
    assert select_gloo("eth", IFS).names == ()
    assert select_gloo("eth1,ib0", IFS).names == ("eth1", "ib0")


def test_kinds():
    assert kind_of("lo") == "loopback"
    # without sysfs, the name is all there is
    assert kind_of("docker0") == kind_of("br-1a2b") == kind_of("lxdbr0") == "bridge"
    assert kind_of("veth12") == "virtual"
    assert kind_of("eth0") == kind_of("ib0") == "physical"


def test_this_machines_interfaces_from_sysfs():
    from pathlib import Path

    base = Path("/sys/class/net")
    for d in base.iterdir():
        kind = kind_of(d.name, d)
        if (d / "bridge").is_dir():
            assert kind == "bridge", d.name
        elif (d / "device").exists() and not (d / "bonding").is_dir():
            assert kind in ("physical", "vlan"), d.name
    assert kind_of("lo", base / "lo") == "loopback"
