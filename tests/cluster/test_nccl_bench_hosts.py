"""nccl-bench and the preflight `nccl` probe across namespace hosts, one host's link slowed with tc.

Every host (a network namespace with its own eth0 and hostname node-k, see testbed.py) runs
one gloo rank over eth0, meeting at host 0. Host 2's egress is shaped with
`tbf rate 40mbit burst 64kb latency 50ms` (5 MB/s, against hundreds of MB/s on the healthy
veth links), and `--pairwise` must name node-2 and nothing else; a shaped direct cable between
two healthy hosts must be named as a link. The test bed deletes its
namespaces, and with them the qdisc, when the `with` block ends, also on failure.
"""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from tests.cluster import testbed
from tests.cluster.testbed import Testbed
from tests.conftest import cli_env, llmdiag_argv
from tests.distributed.nccl_ranks import rank_argv, rank_env, wait_all, write_config

OK, WHY = testbed.available(tc=True)
pytestmark = [pytest.mark.cluster, pytest.mark.skipif(not OK, reason=WHY or "test bed unavailable")]

PORT = 29500
# 2 MiB per exchange, 3 exchanges per pair: 0.4 s per exchange on the shaped link. Healthy veth
# links on a busy 2-core machine vary by up to 2x, the shaped one is 10-100x slower: 0.25.
PAIRWISE = dict(pairwise_bytes="2M", pairwise_iters=3, pairwise_low_fraction=0.25)


def run_bench(tb, n: int, tmp, *args: str, timeout: float = 90) -> tuple[list[tuple[int, str]], dict, float]:
    cfg = write_config(tmp, **PAIRWISE, timeout_s=60.0)
    start = time.monotonic()
    procs = [tb.popen(k, rank_argv(cfg, tmp / f"doc{k}.json", *args),
                      env=rank_env(k, n, tb.addr(0), PORT, GLOO_SOCKET_IFNAME="eth0"),
                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for k in range(n)]
    results = wait_all(procs, timeout)
    doc_path = tmp / "doc0.json"
    assert doc_path.exists(), results
    return results, json.loads(doc_path.read_text()), time.monotonic() - start


def links(doc):
    return [(lk["a"], lk["b"], lk["phase"], round(lk["gbps"], 4)) for lk in doc["pairwise"]["links"]]


def test_pairwise_names_exactly_the_slowed_host(tmp_path):
    with Testbed(4) as tb:
        tb.slow_link(2, "40mbit")  # tbf rate 40mbit burst 64kb latency 50ms on node-2's eth0
        results, doc, wall = run_bench(tb, 4, tmp_path, "--pairwise")
    assert [rc for rc, _ in results] == [1, 1, 1, 1], results
    assert doc["world"]["hosts"] == ["node-0", "node-1", "node-2", "node-3"]
    pw = doc["pairwise"]
    assert [n["node"] for n in pw["slow_nodes"]] == ["node-2"], links(doc)
    assert pw["slow_links"] == [], links(doc)
    slow = pw["slow_nodes"][0]
    assert {lk["peer"] for lk in slow["links"]} >= {"node-1", "node-3"}  # both ring neighbours
    assert slow["median_gbps"] < 0.01  # 40 Mbit/s is 0.005 GB/s
    (finding,) = [f for f in doc["findings"] if f["status"] == "fail" and f["check"].startswith("pairwise")]
    assert finding["node"] == "node-2" and finding["runbook"] == "slow-link"
    print(f"4 hosts, node-2 at 40mbit: named in {wall:.1f} s; links {links(doc)}")


def slow_cable(tb, a: int, b: int, rate: str = "40mbit") -> None:
    """A direct veth "cable" between hosts a and b, routed for their two addresses only and shaped
    at a's end: one slow link, both hosts healthy otherwise. (This kernel has no classful qdiscs
    such as prio/htb to shape one destination on eth0.) It goes away with the namespaces."""
    def run(*argv):
        p = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        assert p.returncode == 0, f"{' '.join(argv)}: {p.stderr}"

    run("ip", "-n", tb.ns(a), "link", "add", "cable", "type", "veth", "peer", "name", "cable", "netns", tb.ns(b))
    for k, peer in ((a, b), (b, a)):
        run("ip", "-n", tb.ns(k), "link", "set", "cable", "up")
        run("ip", "-n", tb.ns(k), "route", "add", f"{tb.addr(peer)}/32", "dev", "cable", "src", tb.addr(k))
    run("ip", "netns", "exec", tb.ns(a), "tc", "qdisc", "add", "dev", "cable", "root", "tbf", "rate", rate, "burst",
        "64kb", "latency", "50ms")


def test_pairwise_names_a_slow_link_between_healthy_hosts(tmp_path):
    with Testbed(4) as tb:
        slow_cable(tb, 1, 2)
        results, doc, wall = run_bench(tb, 4, tmp_path, "--pairwise")
    assert [rc for rc, _ in results] == [1, 1, 1, 1], results
    pw = doc["pairwise"]
    assert pw["slow_nodes"] == [], links(doc)  # both ends are fine with their other peers
    assert [(lk["a"], lk["b"]) for lk in pw["slow_links"]] == [("node-1", "node-2")], links(doc)
    assert pw["slow_links"][0]["gbps"] < 0.01
    (finding,) = [f for f in doc["findings"] if f["check"] == "pairwise/link"]
    assert finding["status"] == "fail" and finding["runbook"] == "slow-link"
    print(f"4 hosts, cable node-1 <-> node-2 at 40mbit: named in {wall:.1f} s; links {links(doc)}")


def test_healthy_hosts_pass(tmp_path):
    with Testbed(3) as tb:
        results, doc, wall = run_bench(tb, 3, tmp_path, "--pairwise", "-C", "all_reduce", "-C", "sendrecv")
    assert [rc for rc, _ in results] == [0, 0, 0], (results, links(doc))
    assert doc["pairwise"]["slow_nodes"] == [] and doc["pairwise"]["slow_links"] == []
    assert doc["out_of_bounds"] == 0 and doc["world"]["nodes"] == 3
    print(f"3 healthy hosts: pass in {wall:.1f} s; links {links(doc)}")


PREFLIGHT = """
[network]
port_range = "29500-29503"
connect_timeout_s = 1.0

[cluster]
share_wait_s = 2.0

[nccl_bench]
probe_max_bytes = "64K"
probe_iters = 3
expected_busbw_gbps = 0.05
"""


def test_preflight_probe_runs_pairwise_and_blames_the_slow_host(tmp_path):
    """Low plateau in the cluster's process group → auto pairwise → a finding on node-2 with a runbook."""
    cfg = tmp_path / "llmdiag.toml"
    cfg.write_text(PREFLIGHT + "".join(f"{k} = {json.dumps(v)}\n" for k, v in PAIRWISE.items()))
    n = 3
    with Testbed(n) as tb:
        tb.slow_link(2, "40mbit")
        procs = [tb.popen(k, llmdiag_argv("preflight", "-c", str(cfg), "--nnodes", str(n), "--node-rank", str(k),
                                          "--master-addr", tb.addr(0), "--master-port", str(PORT), "--timeout", "60",
                                          "--probe", "nccl", "-f", "json"),
                          env=cli_env(GLOO_SOCKET_IFNAME="eth0"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) for k in range(n)]
        try:
            out, err = procs[0].communicate(timeout=100)
        except subprocess.TimeoutExpired:
            tb.kill(procs[0])
            out, err = procs[0].communicate()
        wait_all(procs[1:], 20)
    assert procs[0].returncode == 1, err[-2000:]
    try:
        results = [r for r in json.loads(out)["results"] if r["probe"] == "nccl"]
    except json.JSONDecodeError:
        raise AssertionError(f"rank 0 printed no JSON; stderr:\n{err[-2000:]}") from None
    failing = {(r["node"], r["check"], r["runbook"]) for r in results if r["status"] == "fail"}
    assert ("node-2", "pairwise/node", "slow-link") in failing, results
    # the low busbw has a named cause: it is node-2's finding only, healthy nodes are not blamed
    assert ("node-2", "all_reduce/busbw", "nccl-low-bandwidth") in failing, results
    assert {n for n, _, _ in failing} == {"node-2"}, failing
    assert [r["node"] for r in results if r["check"] == "pairwise/node"] == ["node-2"]
