"""A node's process that dies is known at once through its presence connection; one that ends says bye.

Both ends run TCP keepalive sized from the budget, so a silent host is found in seconds (the
namespace-host test cuts a host's link: tests/cluster/test_faults_midrun.py); a process that is
merely stopped is no death, because its kernel still answers the probes."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time

from llmdiag.cluster.presence import PROCESS_ENDED, Keepalive, Presence, PresenceServer
from tests.conftest import cli_env

_NODE = ("import sys, time; from llmdiag.cluster.presence import Presence; "
         "p = Presence('127.0.0.1', int(sys.argv[1]), 2, 4242, 5.0); print('ready', flush=True); "
         "time.sleep(60) if sys.argv[2] == 'hang' else p.bye()")


def _server(keepalive=None):
    deaths, seen = [], threading.Event()
    srv = PresenceServer(lambda rank, pid, cause: (deaths.append((rank, pid, cause)), seen.set()), host="127.0.0.1",
                         keepalive=keepalive)
    return srv, deaths, seen


def test_a_killed_node_is_reported_dead_at_once():
    srv, deaths, seen = _server()
    try:
        p = subprocess.Popen([sys.executable, "-c", _NODE, str(srv.port), "hang"], env=cli_env(),
                             stdout=subprocess.PIPE, text=True)
        assert p.stdout.readline().strip() == "ready"
        t0 = time.monotonic()
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        # the kernel closes its socket: seen in well under the heartbeat's 10 s, even on a loaded machine
        assert seen.wait(5.0), deaths
        assert deaths == [(2, 4242, PROCESS_ENDED)] and time.monotonic() - t0 < 5.0
    finally:
        srv.close()


def test_a_node_that_ends_says_bye_and_is_not_dead():
    srv, deaths, seen = _server()
    try:
        p = subprocess.run([sys.executable, "-c", _NODE, str(srv.port), "bye"], env=cli_env(),
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        assert not seen.wait(1.0), deaths
    finally:
        srv.close()


def test_a_connection_without_a_hello_is_ignored():
    srv, deaths, seen = _server()
    try:
        socket.create_connection(("127.0.0.1", srv.port), timeout=2).close()  # nothing said: a port scan, not a node
        assert not seen.wait(1.0), deaths
    finally:
        srv.close()


def test_keepalive_window_follows_the_budget_within_bounds():
    short, default, long = (Keepalive.for_budget(t) for t in (5, 60, 3600))
    assert short.window_s == 3 and default.window_s == 6 and long.window_s == 8, (short, default, long)
    assert all(k.probes >= 2 and k.idle_s >= 1 for k in (short, default, long))
    # below the heartbeat's 10 s, or it would only repeat what the heartbeat finds
    assert long.window_s < 10


def test_keepalive_options_are_set_on_both_ends():
    srv, deaths, seen = _server(Keepalive(idle_s=2, probes=3))
    lost = []
    try:
        p = Presence("127.0.0.1", srv.port, 1, os.getpid(), 5.0, keepalive=Keepalive(idle_s=2, probes=3),
                     on_lost=lambda c, a: lost.append(c))
        s = p._sock
        assert s.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
        assert s.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE) == 2
        assert s.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT) == 3
        assert s.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT) == 5000
        p.bye()
        assert not seen.wait(1.0) and not lost, (deaths, lost)
    finally:
        srv.close()


def test_a_stopped_process_is_not_dead_its_kernel_answers_the_probes():
    """SIGSTOP (a node frozen in a debugger, or starved) for longer than the keepalive window:
    the kernel acknowledges keepalive probes without the process, so no death is reported."""
    srv, deaths, seen = _server(Keepalive(idle_s=1, probes=2))
    try:
        node = _NODE.replace("5.0)", "5.0, keepalive=Keepalive(idle_s=1, probes=2))").replace(
            "import Presence", "import Keepalive, Presence")
        p = subprocess.Popen([sys.executable, "-c", node, str(srv.port), "hang"], env=cli_env(),
                             stdout=subprocess.PIPE, text=True)
        try:
            assert p.stdout.readline().strip() == "ready"
            os.kill(p.pid, signal.SIGSTOP)
            assert not seen.wait(5.0), deaths  # over the 3 s window
            os.kill(p.pid, signal.SIGCONT)
        finally:
            p.kill()
            p.wait()
        assert seen.wait(5.0) and deaths == [(2, 4242, PROCESS_ENDED)], deaths
    finally:
        srv.close()


def test_the_node_side_learns_that_rank_0_ended_and_not_after_its_own_bye():
    lsock = socket.create_server(("127.0.0.1", 0))
    try:
        for leave_first in (False, True):
            lost, got = [], threading.Event()
            p = Presence("127.0.0.1", lsock.getsockname()[1], 1, os.getpid(), 5.0,
                         on_lost=lambda c, a: (lost.append((c, a)), got.set()))
            conn, _ = lsock.accept()
            if leave_first:
                p.bye()
            conn.close()  # rank 0's process ending closes its side
            assert got.wait(2.0) != leave_first, lost
            assert lost == ([] if leave_first else [(PROCESS_ENDED, "127.0.0.1")])
    finally:
        lsock.close()


def test_a_node_known_dead_stays_died_when_rank_0_gathers_at_its_deadline():
    """A loaded rank 0 reached the gather at its deadline: the node its presence found gone is
    'died' with how it was found, not 'hung' (a healthy but slow node would be 'hung')."""
    from llmdiag.cluster import gather

    class Session:  # rank 0's view: no report arrived; rank 2 was recorded gone by its presence
        rank, poll_max = 0, 0.1
        dead_why = {2: "its host stopped answering: no reply to TCP keepalive for 3 s"}

        def has(self, key):
            return False

        def known_dead(self, r):
            return r in self.dead_why

        def alive(self, r):
            return r not in self.dead_why

        def last_beat_age(self, r):
            return None

    docs, lost = gather.collect_reports(Session(), [2, 3], deadline=time.monotonic())
    assert docs == {} and lost[2] == "died: its host stopped answering: no reply to TCP keepalive for 3 s", lost
    assert lost[3].startswith("hung"), lost
