"""What ended a rank or a collective, named for the operator."""

from __future__ import annotations

import time

import pytest

from llmdiag.ncclbench import failures

# gloo's own words (torch 2.x), as a healthy rank sees them when a peer dies or stalls
READ_ERROR = ("[../third_party/gloo/gloo/transport/tcp/pair.cc:537] Read error [10.1.2.3]:41234: "
              "Connection reset by peer\nException raised from ... GLHF!")
TIMEOUT = "[../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 5000ms for recv operation"


@pytest.mark.parametrize("message,kind", [
    (READ_ERROR, failures.PEER_LEFT),
    ("Connection closed by peer [10.0.0.2]:5000", failures.PEER_LEFT),
    (TIMEOUT, failures.TIMED_OUT),
    ("Expected tensor of size [4] but got [8]", None),
    ("the method thereof", None),  # 'eof' inside a word is no end of file
])
def test_collective_failure_kinds(message, kind):
    assert failures.collective_failure(RuntimeError(message)) == kind


def test_signals_are_named_with_their_likely_cause():
    assert failures.describe_exit(3) == "exited with code 3"
    kill = failures.describe_exit(-9)
    assert kill.startswith("was killed by SIGKILL (signal 9): likely the kernel's OOM killer") and "dmesg" in kill
    assert "/dev/shm" in failures.describe_exit(-7)  # SIGBUS
    assert failures.describe_exit(-200) == "was killed by signal 200"


def test_first_line_is_short():
    assert failures.first_line(RuntimeError(READ_ERROR)).endswith("Connection reset by peer")
    assert len(failures.first_line(RuntimeError("x" * 1000))) == 300


def test_the_peer_that_left_is_named_from_its_address():
    from llmdiag.cluster.agent import Agent

    class Session:
        def join_info(self, ranks):
            return {0: {"node": "node-0", "address": "10.1.2.1"}, 1: {"node": "node-1", "address": "10.1.2.2"},
                    2: {"node": "node-2", "address": "10.1.2.3"}}

        dead = {1}

        def alive(self, rank):
            return rank not in self.dead

    class Roster:
        ranks = (0, 1, 2)

    class Ctx:
        node = "node-0"

    agent = Agent.__new__(Agent)
    agent.session, agent.roster, agent.ctx = Session(), Roster(), Ctx()
    agent.deadline = time.monotonic() + 30
    agent.session.dead = {1, 2}
    assert agent._who_left(READ_ERROR) == ["node-2"]
    # the peer named is still present (its side of the collective was cut at its own budget share): not "died"
    agent.session.dead = {1}
    assert agent._who_left(READ_ERROR) == ["node-2 (still alive: its side ended, e.g. cut at its share of the budget)"]
    # no address in the message: the node whose heartbeat stopped
    agent.world = type("W", (), {"node_rank": 0, "expected_name": staticmethod(lambda r: f"node rank {r}")})()
    assert agent._who_left("Connection reset by peer") == ["node-1"]
