"""Interface kinds read from sysfs, on real interfaces made in a namespace (names chosen to mislead)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.cluster import testbed
from tests.cluster.testbed import Testbed
from tests.conftest import cli_env

OK, WHY = testbed.available()
pytestmark = [pytest.mark.cluster, pytest.mark.skipif(not OK, reason=WHY or "test bed unavailable")]

CODE = ("import json; from pathlib import Path; from llmdiag.probes.nicselect import kind_of; "
        "print(json.dumps({d.name: kind_of(d.name, d) for d in Path('/sys/class/net').iterdir()}))")


def test_bridge_named_like_a_nic_and_tunnels_are_not_physical():
    with Testbed(1) as tb:
        ns = tb.ns(0)
        for cmd in (["link", "add", "eth7", "type", "bridge"], ["link", "add", "vethA", "type", "veth", "peer", "name", "nic3"],
                    ["tuntap", "add", "dev", "en9", "mode", "tun"], ["link", "set", "eth7", "up"]):
            subprocess.run(["ip", "-n", ns, *cmd], check=True, capture_output=True)
        out = tb.run(0, [sys.executable, "-c", CODE], env=cli_env(), timeout=60, hostname=False)
        assert out.returncode == 0, out.stderr
        kinds = json.loads(out.stdout)
        net = tb.run(0, [sys.executable, "-m", "llmdiag", "preflight", "--probe", "network", "-f", "json"],
                     env=cli_env(NCCL_SOCKET_IFNAME="eth7"), timeout=60, hostname=False)
    assert kinds["eth7"] == "bridge" and kinds["en9"] == "tun"
    assert kinds["nic3"] == kinds["vethA"] == "veth" and kinds["lo"] == "loopback"
    assert kinds["eth0"] == "veth"  # the test bed host's own NIC is a veth pair's end
    doc = json.loads(net.stdout)
    sel = [r for r in doc["results"] if r["check"] == "nccl_ifname"][0]
    assert sel["status"] == "warn" and "a bridge interface" in sel["summary"], sel
    assert "=eth7" not in (sel["remediation"] or "")  # the fix never names a bridge
