"""The namespace test bed itself: addresses, hostnames, faults, bind mounts, cleanup."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tests.cluster import testbed
from tests.cluster.testbed import Testbed

OK, WHY = testbed.available(iptables=True, tc=True)
pytestmark = [pytest.mark.cluster, pytest.mark.skipif(not OK, reason=WHY or "test bed unavailable")]

# A one-line TCP server/client pair, run inside the namespaces.
SERVER = "import socket,sys;s=socket.socket();s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1);" \
         "s.bind(('0.0.0.0',int(sys.argv[1])));s.listen();print('up',flush=True);c,_=s.accept();c.sendall(b'hi');c.close()"
CLIENT = "import socket,sys\ntry:\n s=socket.create_connection((sys.argv[1],int(sys.argv[2])),timeout=1.5);" \
         "print(s.recv(2).decode())\nexcept Exception as e:\n print(type(e).__name__)"


def _serve(tb, k, port):
    p = tb.popen(k, [sys.executable, "-c", SERVER, str(port)], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "up"
    return p


def _connect(tb, frm, to, port):
    return tb.run(frm, [sys.executable, "-c", CLIENT, tb.addr(to), str(port)], timeout=10).stdout.strip()


def test_hosts_have_addresses_hostnames_and_connectivity():
    with Testbed(3) as tb:
        assert len({tb.addr(k) for k in range(3)}) == 3
        for k in range(3):
            assert tb.run(k, ["hostname"], timeout=5).stdout.strip() == f"node-{k}"
            assert tb.addr(k) in tb.run(k, ["ip", "-4", "addr", "show", "eth0"], timeout=5).stdout
        _serve(tb, 2, 29555)
        assert _connect(tb, 0, 2, 29555) == "hi"
        with pytest.raises(IndexError):
            tb.addr(3)


def test_drop_times_out_reject_refuses_and_nothing_listening_refuses():
    with Testbed(2) as tb:
        tb.drop_port(1, 29556)
        tb.reject_port(1, 29557)
        _serve(tb, 1, 29556)
        t0 = time.monotonic()
        assert _connect(tb, 0, 1, 29556) == "TimeoutError"
        assert time.monotonic() - t0 >= 1.4
        assert _connect(tb, 0, 1, 29557) == "ConnectionRefusedError"
        assert _connect(tb, 0, 1, 29558) == "ConnectionRefusedError"
        tb.clear_firewall(1)
        assert _connect(tb, 0, 1, 29556) == "hi"


def test_mtu_slow_link_and_bind_mount(tmp_path):
    shared, local = tmp_path / "shared", tmp_path / "local"
    shared.mkdir()
    local.mkdir()
    (shared / "token").write_text("x")
    with Testbed(2) as tb:
        tb.set_mtu(1, 1400)
        assert "mtu 1400" in tb.run(1, ["ip", "link", "show", "eth0"], timeout=5).stdout
        assert "mtu 1500" in tb.run(0, ["ip", "link", "show", "eth0"], timeout=5).stdout
        tb.slow_link(0, "40mbit")
        assert "tbf" in tb.run(0, ["tc", "qdisc", "show", "dev", "eth0"], timeout=5).stdout
        ls = [sys.executable, "-c", f"import os;print(sorted(os.listdir({str(shared)!r})))"]
        assert tb.run(0, ls, timeout=5).stdout.strip() == "['token']"
        assert tb.run(1, ls, timeout=5, binds={str(shared): str(local)}).stdout.strip() == "[]"
    # the bind mount lived in a private mount namespace only
    assert (shared / "token").exists()


def test_kill_takes_the_whole_process_group():
    with Testbed(1) as tb:
        p = tb.popen(0, ["sh", "-c", "sleep 60 & sleep 60; wait"])
        time.sleep(0.2)
        tb.kill(p)
        assert p.wait(timeout=5) != 0
        assert testbed.wait_until(lambda: not subprocess.run(
            ["ip", "netns", "pids", tb.ns(0)], capture_output=True, text=True).stdout.strip(), 5)


def test_cleanup_even_on_failure_and_stale_sweep():
    names = []
    with pytest.raises(RuntimeError, match="boom"):
        with Testbed(2) as tb:
            names = [tb.hub, tb.ns(0), tb.ns(1)]
            tb.popen(0, ["sleep", "60"])
            raise RuntimeError("boom")
    left = testbed._list_netns()
    assert not set(names) & set(left)

    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = f"{testbed.PREFIX}{dead.pid}-zz-n0"
    subprocess.run(["ip", "netns", "add", stale], check=True)
    try:
        assert stale in testbed.sweep_stale()
        assert stale not in testbed._list_netns()
    finally:
        subprocess.run(["ip", "netns", "del", stale], capture_output=True)
