"""A node's process that dies is known at once through its presence connection; one that ends says bye."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time

from llmdiag.cluster.presence import PresenceServer
from tests.conftest import cli_env

_NODE = ("import sys, time; from llmdiag.cluster.presence import Presence; "
         "p = Presence('127.0.0.1', int(sys.argv[1]), 2, 4242, 5.0); print('ready', flush=True); "
         "time.sleep(60) if sys.argv[2] == 'hang' else p.bye()")


def _server():
    deaths, seen = [], threading.Event()
    srv = PresenceServer(lambda rank, pid: (deaths.append((rank, pid)), seen.set()), host="127.0.0.1")
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
        assert deaths == [(2, 4242)] and time.monotonic() - t0 < 5.0
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
