"""Connect classification, token-checking listeners, peer sampling, shared-path facts, clock skew (loopback)."""

from __future__ import annotations

import errno
import socket

import pytest

from llmdiag.cluster import clock, portmatrix, reach, sharedfs


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_open_and_refused_on_loopback():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    try:
        r = reach.probe_tcp("127.0.0.1", srv.getsockname()[1], 1.0)
        assert r.ok and r.outcome == "open" and r.address == "127.0.0.1"
    finally:
        srv.close()
    r = reach.probe_tcp("127.0.0.1", _free_port(), 1.0)
    assert r.outcome == "refused" and r.meaning.startswith("refused")
    assert reach.RUNBOOK["timeout"] == "cluster-firewall-drop"


def test_error_classes():
    assert reach.classify_error(socket.timeout()) == "timeout"
    assert reach.classify_error(ConnectionRefusedError()) == "refused"
    assert reach.classify_error(OSError(errno.EHOSTUNREACH, "x")) == "no-route"
    assert reach.classify_error(OSError(errno.ENETUNREACH, "x")) == "no-route"
    assert reach.classify_error(OSError(errno.ETIMEDOUT, "x")) == "timeout"
    assert reach.classify_error(OSError(errno.EPERM, "x")) == "error"


def test_wait_open_gives_up_by_its_deadline():
    import time

    t0 = time.monotonic()
    r = reach.wait_open("127.0.0.1", _free_port(), 0.6, 0.2, interval=0.1)
    assert r.outcome == "refused" and time.monotonic() - t0 < 1.5


def test_listeners_answer_only_the_token_and_report_busy_ports():
    p1, p2 = _free_port(), _free_port()
    holder = socket.socket()
    holder.bind(("0.0.0.0", p2))
    holder.listen()
    lis = portmatrix.Listeners([p1, p2], "secret", rank=3)
    try:
        assert lis.listening == [p1] and p2 in lis.busy
        assert portmatrix.check_one("127.0.0.1", p1, "secret", 0, 1.0).outcome == "open"
        wrong = portmatrix.check_one("127.0.0.1", p1, "other", 0, 1.0)
        assert wrong.outcome == "foreign"
        rows = portmatrix.probe_peers({3: "127.0.0.1"}, [p1, p2], {3: [p2]}, "secret", 0, 1.0)
        assert {(r["port"], r["outcome"]) for r in rows} == {(p1, "open"), (p2, "busy")}
    finally:
        lis.close()
        holder.close()
    assert reach.probe_tcp("127.0.0.1", p1, 0.5).outcome == "refused"  # closed when done


def test_peer_choice_is_bounded_and_the_same_everywhere():
    ranks = list(range(1000))
    a = portmatrix.choose_peers(ranks, 10, 2, "tok")
    assert len(a) == 4 and {9, 11} <= set(a) and 10 not in a
    assert a == portmatrix.choose_peers(ranks, 10, 2, "tok")
    assert {1, 999} <= set(portmatrix.choose_peers(ranks, 0, 2, "tok"))  # the ring wraps around
    assert portmatrix.choose_peers([0, 1, 2], 0, 2, "t") == [1, 2]
    assert len(portmatrix.choose_peers(list(range(20)), 5, 2, "t", full=True)) == 19
    assert portmatrix.choose_ports(29500, 29510, 16) == list(range(29500, 29511))
    assert len(portmatrix.choose_ports(20000, 30000, 16)) == 16


def test_fingerprint_token_and_missing(tmp_path):
    (tmp_path / "a").write_text("1")
    f1 = sharedfs.path_facts(str(tmp_path), 2.0)
    assert f1["exists"] and f1["writable"] and f1["fstype"] and f1["fingerprint"]["entries"] == 1
    removed = []
    name = sharedfs.write_token(str(tmp_path), "t" * 32, 0, removed.append, 2.0)
    assert removed == [name]
    assert sharedfs.path_facts(str(tmp_path), 2.0)["fingerprint"] == f1["fingerprint"]  # token files ignored
    assert sharedfs.see_token(str(tmp_path), "t" * 32, 0, 1.0)["seen"] is True
    assert sharedfs.see_token(str(tmp_path), "u" * 32, 0, 0.3)["seen"] is False
    sharedfs.remove_token(name)
    assert list(tmp_path.iterdir()) == [tmp_path / "a"]
    (tmp_path / "a").write_text("2")  # same size, other content
    assert sharedfs.path_facts(str(tmp_path), 2.0)["fingerprint"]["digest"] != f1["fingerprint"]["digest"]
    assert sharedfs.path_facts(str(tmp_path / "nope"), 2.0) == {"exists": False}


def test_clock_skew_against_a_real_server():
    with clock.TimeServer("tok") as ts:
        m = clock.measure("127.0.0.1", ts.port, "tok")
        assert abs(m["skew_ms"]) < 5 and m["rtt_ms"] >= 0
        assert "error" in clock.measure("127.0.0.1", ts.port, "wrong", timeout=0.5)
    assert "error" in clock.measure("127.0.0.1", _free_port(), "tok", timeout=0.5)


@pytest.mark.distributed
def test_store_session_barrier_gives_up_on_a_dead_node():
    import time

    from llmdiag.cluster.rendezvous import StoreSession
    from llmdiag.cluster.world import World

    port = _free_port()
    w0 = World(node_rank=0, nnodes=3, master_addr="127.0.0.1", master_port=port)
    s0 = StoreSession(w0, heartbeat_s=0.1, stale_s=0.6)
    s0.open(5)
    s0.start_heartbeat()
    s1 = StoreSession(World(node_rank=1, nnodes=3, master_addr="127.0.0.1", master_port=port), heartbeat_s=0.1)
    s1.open(5)
    s1.start_heartbeat()
    s0.join({"node": "a"})
    s1.join({"node": "b"})
    roster = s0.wait_joins(time.monotonic() + 0.5)
    assert roster.ranks == (0, 1) and roster.missing == [2]
    assert s1.wait_roster(time.monotonic() + 1).token == roster.token
    s1.stop_heartbeat()  # node 1 "dies" before the barrier
    t0 = time.monotonic()
    arrived, died = s0.barrier("stage", roster.ranks, time.monotonic() + 10)
    assert arrived == {0} and died == {1} and time.monotonic() - t0 < 3
    s1.close()
    s0.close()


@pytest.mark.distributed
def test_a_node_rank_is_claimed_once_and_every_claim_is_logged():
    """Two nodes started with NODE_RANK=1: the second is refused (RankTaken, naming the holder), both claims are
    in the log rank 0 cross-checks, and the join count is of distinct ranks."""
    from llmdiag.cluster.rendezvous import RankTaken, StoreSession
    from llmdiag.cluster.world import World

    port = _free_port()
    s0 = StoreSession(World(node_rank=0, nnodes=3, master_addr="127.0.0.1", master_port=port))
    s0.open(5)
    a = StoreSession(World(node_rank=1, nnodes=3, master_addr="127.0.0.1", master_port=port))
    b = StoreSession(World(node_rank=1, nnodes=4, master_addr="127.0.0.1", master_port=port))
    a.open(5)
    b.open(5)
    s0.join({"node": "n0", "pid": 1})
    a.join({"node": "n1", "pid": 2})
    with pytest.raises(RankTaken) as taken:
        b.join({"node": "n2", "pid": 3})
    assert taken.value.holder["node"] == "n1"
    claims = s0.claims()
    assert [(c["node"], c["rank"], c["nnodes"]) for c in claims] == [("n0", 0, 3), ("n1", 1, 3), ("n2", 1, 4)]
    assert s0.joined() == [0, 1]
    for s in (a, b, s0):
        s.close()
