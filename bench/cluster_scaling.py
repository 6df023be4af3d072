"""How cluster preflight scales with the number of nodes.

Part 1 (needs root, iproute2): real ``llmdiag preflight`` agents on 2, 4, 8 and 16 network-
namespace hosts of the test bed (tests/cluster/testbed.py), one agent per host, rank 0's wall
time to the cluster report. All hosts share this machine's cores, so every agent's own start
(Python, importing torch: about 1-2 CPU-seconds each) queues behind the others'; a real cluster
runs those in parallel on separate machines. The script therefore prints three numbers per N:

- ``wall``: start of all agents to rank 0's exit (what this machine shows);
- ``after-join``: rank 0's time from "every node has joined" to the report (the coordination
  the design is responsible for: clock, shared paths, port matrix, gather, aggregation);
- ``agent CPU``: median CPU seconds of one agent process (flat when no node does O(N) work).

Part 1b runs the same agents forked from one process that has imported torch already, with
the local probes skipped: the coordination alone, with its per-agent CPU (from wait4).

Part 2: 64 to 256 lightweight agents (threads spread over worker processes) against one real
c10d TCPStore on loopback, each with a realistic node report: join + roster, one barrier,
gather of the reports, and rank 0's aggregation; printed against N with the report size.

Usage: sudo python bench/cluster_scaling.py [--nodes 2,4,8,16] [--agents 64,128,256] [--runs 1]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.cluster.helpers import CONFIG  # noqa: E402 - the test bed's agent config (4 ports, short waits)


# -- part 1: namespace hosts ---------------------------------------------------------------
def namespace_run(n: int, timeout: float) -> dict:
    from tests.cluster.testbed import Testbed

    tmp = Path(tempfile.mkdtemp(prefix="llmdiag-scale-"))
    cfg = tmp / "llmdiag.toml"
    cfg.write_text(CONFIG)
    shared = tmp / "shared"
    shared.mkdir()
    (shared / "weights.bin").write_bytes(b"w" * 4096)
    env = dict(os.environ, PYTHONPATH=str(REPO), GLOO_SOCKET_IFNAME="eth0", NO_COLOR="1")
    with Testbed(n) as tb:
        procs = {}
        start = time.monotonic()
        for k in range(n):
            argv = ["/usr/bin/time", "-f", "%U %S", sys.executable, "-m", "llmdiag", "preflight", "-c", str(cfg),
                    "--nnodes", str(n), "--node-rank", str(k), "--master-addr", tb.addr(0), "--master-port", "29500",
                    "--timeout", f"{timeout:g}", "--probe", "system", "--shared-path", str(shared), "-f", "json"]
            procs[k] = tb.popen(k, argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        outs = {}
        for k, p in procs.items():
            o, e = p.communicate(timeout=timeout + 30)
            outs[k] = (p.returncode, o, e)
            if k == 0:
                wall = time.monotonic() - start
    doc = json.loads(outs[0][1])
    cpu = []
    for _, _, e in outs.values():
        last = e.strip().splitlines()[-1].split() if e.strip() else []
        try:
            cpu.append(float(last[0]) + float(last[1]))
        except (IndexError, ValueError):
            pass
    t0 = next(nd for nd in doc["nodes"] if nd.get("node_rank") == 0)["meta"]["timings"]
    after_join = sum(t0.get(k, 0.0) for k in ("clock", "shared_fs", "port_matrix", "gather", "aggregate"))
    return {"n": n, "wall_s": wall, "after_join_s": after_join, "agent_cpu_s": statistics.median(cpu) if cpu else None,
            "status": doc["status"], "nodes": len(doc["nodes"]), "report_bytes": len(outs[0][1]),
            "tested_connections": doc["sections"]["port_matrix"]["tested"]}


ALL_PROBES = ("software", "launcher", "gpu", "system", "network", "ports", "filesystem", "memory", "nccl",
              "smoke-train")


def warm_run(n: int, timeout: float) -> dict:
    """The same agents, forked from one process that imported torch already, local probes off.

    Each child enters its host's network namespace (setns) and its own UTS namespace (its
    hostname), then runs ``llmdiag preflight`` in-process. What is left is the coordination
    alone, which is what grows with N: rendezvous, clock, shared paths, port matrix, gather,
    aggregation. On a real cluster the torch import is paid once per node, in parallel.
    """
    import ctypes
    import socket

    import torch.distributed  # noqa: F401 - paid once, before the fork

    import llmdiag.cli  # noqa: F401
    from llmdiag.cluster import agent, merge  # noqa: F401
    from tests.cluster.testbed import Testbed

    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    tmp = Path(tempfile.mkdtemp(prefix="llmdiag-scale-"))
    cfg = tmp / "llmdiag.toml"
    cfg.write_text(CONFIG)
    shared = tmp / "shared"
    shared.mkdir()
    skips = [a for p in ALL_PROBES for a in ("--skip", p)]
    with Testbed(n) as tb:
        pids = {}
        start = time.monotonic()
        for k in range(n):
            argv = ["preflight", "-c", str(cfg), "--nnodes", str(n), "--node-rank", str(k), "--master-addr",
                    tb.addr(0), "--master-port", "29500", "--timeout", f"{timeout:g}", "--shared-path", str(shared),
                    "-f", "json", "-o", str(tmp / f"out-{k}.json"), *skips]
            pid = os.fork()
            if pid == 0:  # the child: become host k, run the agent, never return
                code = 3
                try:
                    fd = os.open(f"/var/run/netns/{tb.ns(k)}", os.O_RDONLY)
                    if libc.setns(fd, 0x40000000) != 0 or libc.unshare(0x04000000) != 0:  # NEWNET, NEWUTS
                        os._exit(97)
                    socket.sethostname(tb.hostname(k))
                    os.environ["GLOO_SOCKET_IFNAME"] = "eth0"
                    devnull = os.open(os.devnull, os.O_WRONLY)
                    os.dup2(devnull, 2)
                    llmdiag.cli.cli.main(args=argv, prog_name="llmdiag", standalone_mode=False)
                    code = 0
                except SystemExit as exc:
                    code = exc.code if isinstance(exc.code, int) else 1
                except BaseException:  # noqa: BLE001
                    code = 3
                finally:
                    os._exit(code)
            pids[k] = pid
        cpu = []
        _, status, ru = os.wait4(pids[0], 0)
        wall = time.monotonic() - start
        cpu.append(ru.ru_utime + ru.ru_stime)
        for k, pid in pids.items():
            if k:
                _, _, ru = os.wait4(pid, 0)
                cpu.append(ru.ru_utime + ru.ru_stime)
    doc = json.loads((tmp / "out-0.json").read_text())
    t0 = next(nd for nd in doc["nodes"] if nd.get("node_rank") == 0)["meta"]["timings"]
    after_join = sum(t0.get(k, 0.0) for k in ("clock", "shared_fs", "port_matrix", "gather", "aggregate"))
    return {"n": n, "wall_s": wall, "after_join_s": after_join, "status": doc["status"], "nodes": len(doc["nodes"]),
            "agent_cpu_s": statistics.median(cpu), "timings": t0,
            "tested_connections": doc["sections"]["port_matrix"]["tested"],
            "report_bytes": (tmp / "out-0.json").stat().st_size}


# -- part 2: lightweight agents on one real store -------------------------------------------
def _fake_node_doc(rank: int) -> dict:
    """A node report shaped like a real one (30 results, facts, timings): ~8 KB of JSON."""
    results = [{"probe": "software", "check": f"check-{i}", "node": f"node-{rank}", "status": "pass",
                "summary": f"check {i} on node-{rank} is fine with a realistic sentence of text", "evidence": [],
                "remediation": None, "runbook": None, "data": {}, "duration_s": 0.01, "scope": "node"}
               for i in range(30)]
    facts = {"probes": {"software": {"python": "3.11.7", "torch": "2.13.0+cpu", "nccl": "2.21.5",
                                     "driver": "550.54.15", "cuda": "12.4"}},
             "env": {"NCCL_SOCKET_IFNAME": "eth0"}, "network": {"interface": "eth0", "address": f"10.0.{rank // 250}.{rank % 250}",
                                                                  "mtu": 1500},
             "paths": {}}
    return {"schema_version": "1.0", "kind": "node", "node": f"node-{rank}", "node_rank": rank, "results": results,
            "started_at": time.time(), "finished_at": time.time(),
            "meta": {"facts": facts, "clock": {"skew_ms": 0.1 * (rank % 7), "rtt_ms": 0.2},
                     "matrix": {"ports": [29501], "mode": "ring + 2 sampled peers", "peers": [], "tested": 3,
                                "open": 3, "problems": []},
                     "timings": {}, "world": {"node_rank": rank}}}


def _agent_thread(rank: int, n: int, port: int, deadline: float, out: dict) -> None:
    from llmdiag.cluster import gather
    from llmdiag.cluster.rendezvous import StoreSession
    from llmdiag.cluster.world import World

    w = World(node_rank=rank, nnodes=n, master_addr="127.0.0.1", master_port=port)
    s = StoreSession(w, heartbeat_s=max(0.5, n / 1000))
    s.open(30)
    s.start_heartbeat()
    s.join({"node": f"node-{rank}", "address": "127.0.0.1"})
    roster = s.wait_roster(deadline)
    assert roster is not None, f"rank {rank}: no roster"
    s.barrier("stage", roster.ranks, deadline)
    out[rank] = gather.send_report(s, _fake_node_doc(rank))
    s.close()


def _worker(ranks: list[int], n: int, port: int, deadline_wall: float, q) -> None:
    import threading

    deadline = time.monotonic() + (deadline_wall - time.time())
    out: dict[int, int] = {}
    threads = [threading.Thread(target=_agent_thread, args=(r, n, port, deadline, out)) for r in ranks]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    q.put(sum(out.values()))


def _hammer(port: int, threads: int, seconds: float, q) -> None:
    import threading
    from datetime import timedelta

    from torch.distributed import TCPStore

    counts = []

    def loop() -> None:
        st = TCPStore("127.0.0.1", port, None, False, timedelta(seconds=30))
        n, end = 0, time.monotonic() + seconds
        while time.monotonic() < end:
            st.add("hb/x", 1)
            n += 1
        counts.append(n)

    ts = [threading.Thread(target=loop) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    q.put(sum(counts))


def store_capacity(workers: int, threads: int = 4, seconds: float = 2.0) -> float:
    """Requests per second one c10d TCPStore answers (small ``add``s from many clients)."""
    import socket
    from datetime import timedelta

    from torch.distributed import TCPStore

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = TCPStore("127.0.0.1", port, None, True, timedelta(seconds=30), wait_for_workers=False)
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    procs = [ctx.Process(target=_hammer, args=(port, threads, seconds, q)) for _ in range(workers)]
    for p in procs:
        p.start()
    total = sum(q.get(timeout=60) for _ in procs)
    for p in procs:
        p.join(timeout=30)
    del server
    return total / seconds


def store_run(n: int, workers: int, timeout: float = 120.0) -> dict:
    import socket

    import torch  # noqa: F401 - imported once here so workers fork with it loaded

    from llmdiag.cluster import gather, merge
    from llmdiag.cluster.rendezvous import StoreSession
    from llmdiag.cluster.world import World

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    w0 = World(node_rank=0, nnodes=n, master_addr="127.0.0.1", master_port=port)
    s0 = StoreSession(w0, heartbeat_s=max(0.5, n / 1000))
    s0.open(30)
    s0.start_heartbeat()
    s0.join({"node": "node-0", "address": "127.0.0.1"})
    deadline_wall = time.time() + timeout
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    others = list(range(1, n))
    chunks = [others[i::workers] for i in range(workers)]
    t_start = time.monotonic()
    procs = [ctx.Process(target=_worker, args=(c, n, port, deadline_wall, q)) for c in chunks if c]
    for p in procs:
        p.start()
    roster = s0.wait_joins(time.monotonic() + timeout)
    t_joined = time.monotonic()
    arrived, _ = s0.barrier("stage", roster.ranks, time.monotonic() + timeout)
    t_barrier = time.monotonic()
    gather.send_report(s0, _fake_node_doc(0))
    docs, lost = gather.collect_reports(s0, others, time.monotonic() + timeout)
    t_gather = time.monotonic()
    report = merge.build_report([_fake_node_doc(0)] + [docs[r] for r in sorted(docs)], nnodes=n, lost=lost)
    body = json.dumps(report.to_dict(), separators=(",", ":"))
    t_agg = time.monotonic()
    wire = sum(q.get(timeout=timeout) for _ in procs)
    for p in procs:
        p.join(timeout=30)
    s0.close()
    return {"n": n, "joined": len(roster.ranks), "barrier": len(arrived), "gathered": len(docs) + 1,
            "rendezvous_s": t_joined - t_start, "barrier_s": t_barrier - t_joined, "gather_s": t_gather - t_barrier,
            "aggregate_s": t_agg - t_gather, "report_kb": len(body) / 1024, "wire_kb": wire / 1024}


def _private_network() -> str:
    """Move this process into a fresh network namespace with only loopback (root only).

    c10d looks names up for every store connection; this machine's resolver answers some of
    those lookups only after its 5 s timeout, which would put 5 s steps into the numbers that
    have nothing to do with llmdiag. A namespace has no resolver to wait for.
    """
    import ctypes

    if os.geteuid() != 0:
        return "(not root: measured in this machine's network namespace; slow DNS shows up as 5 s steps)"
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    if libc.unshare(0x40000000) != 0:  # CLONE_NEWNET
        return f"(unshare failed, errno {ctypes.get_errno()}: measured in this machine's network namespace)"
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True, timeout=10)
    return "(in a private network namespace: loopback only, no resolver)"


def main() -> None:
    sys.stdout.reconfigure(line_buffering=True)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", default="2,4,8,16", help="namespace cluster sizes ('' to skip part 1)")
    ap.add_argument("--agents", default="64,128,256", help="lightweight agent counts ('' to skip part 2)")
    ap.add_argument("--workers", type=int, default=8, help="processes the lightweight agents are spread over")
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--runs", type=int, default=1, help="runs per size (median reported)")
    args = ap.parse_args()

    sizes = [int(x) for x in args.nodes.split(",") if x.strip()]
    if sizes:
        from tests.cluster.testbed import available

        ok, why = available()
        if not ok:
            print(f"part 1 skipped: {why}")
            sizes = []
    rows = []
    if sizes:
        print("part 1: llmdiag preflight agents on network-namespace hosts (one machine, "
              f"{os.cpu_count()} cores shared by all hosts)")
        print(f"{'nodes':>5} {'wall s':>8} {'after-join s':>13} {'agent CPU s':>12} {'conns':>6} "
              f"{'report KB':>10} status")
        for n in sizes:
            runs = [namespace_run(n, args.timeout) for _ in range(args.runs)]
            med = lambda k: statistics.median(r[k] for r in runs)  # noqa: E731
            row = {"n": n, "wall_s": med("wall_s"), "after_join_s": med("after_join_s"),
                   "agent_cpu_s": med("agent_cpu_s"), "status": runs[-1]["status"],
                   "tested": runs[-1]["tested_connections"], "report_kb": runs[-1]["report_bytes"] / 1024}
            rows.append(row)
            print(f"{n:>5} {row['wall_s']:>8.2f} {row['after_join_s']:>13.2f} {row['agent_cpu_s']:>12.2f} "
                  f"{row['tested']:>6} {row['report_kb']:>10.1f} {row['status']}", flush=True)
        if len(rows) > 1:
            a, b = rows[0], rows[-1]
            print(f"growth {b['n']} vs {a['n']} nodes: wall {b['wall_s'] / a['wall_s']:.2f}x (CPU-bound here: "
                  f"{b['n']} torch imports share {os.cpu_count()} cores), after-join "
                  f"{b['after_join_s'] / max(a['after_join_s'], 1e-9):.2f}x, agent CPU "
                  f"{b['agent_cpu_s'] / a['agent_cpu_s']:.2f}x")
        print()
        print("part 1b: the same agents forked after one torch import, local probes skipped "
              "(coordination only)")
        print(f"{'nodes':>5} {'wall s':>8} {'after-join s':>13} {'agent CPU s':>12} {'conns':>6} {'report KB':>10} "
              "status")
        warm = []
        for n in sizes:
            runs = [warm_run(n, args.timeout) for _ in range(args.runs)]
            med = lambda k: statistics.median(r[k] for r in runs)  # noqa: E731
            row = {"n": n, "wall_s": med("wall_s"), "after_join_s": med("after_join_s"), "status": runs[-1]["status"],
                   "agent_cpu_s": med("agent_cpu_s"), "tested": runs[-1]["tested_connections"],
                   "report_kb": runs[-1]["report_bytes"] / 1024}
            warm.append(row)
            print(f"{n:>5} {row['wall_s']:>8.2f} {row['after_join_s']:>13.2f} {row['agent_cpu_s']:>12.3f} "
                  f"{row['tested']:>6} {row['report_kb']:>10.1f} {row['status']}", flush=True)
        if len(warm) > 1:
            a, b = warm[0], warm[-1]
            r, c = b["wall_s"] / a["wall_s"], b["agent_cpu_s"] / a["agent_cpu_s"]
            floor = b["n"] * b["agent_cpu_s"] / (os.cpu_count() or 1)
            print(f"growth {b['n']} vs {a['n']} nodes: warm wall {r:.2f}x (goal under 1.5x: "
                  f"{'OK' if r < 1.5 else 'MISSED'}; {b['n']} agents x {b['agent_cpu_s']:.3f} CPU-s on "
                  f"{os.cpu_count()} cores cannot finish in under {floor:.2f} s here), per-agent CPU {c:.2f}x "
                  f"(goal under 1.5x: {'OK' if c < 1.5 else 'MISSED'})")
    counts = [int(x) for x in args.agents.split(",") if x.strip()]
    if counts:
        print()
        print(_private_network())
        print(f"part 2: lightweight agents on one real c10d TCPStore (loopback, {args.workers} worker processes)")
        print(f"{'agents':>6} {'rendezvous s':>13} {'barrier s':>10} {'gather s':>9} {'aggregate s':>12} "
              f"{'report KB':>10} {'on the wire KB':>15}")
        for n in counts:
            r = store_run(n, args.workers, args.timeout)
            assert r["joined"] == r["barrier"] == r["gathered"] == n, r
            print(f"{n:>6} {r['rendezvous_s']:>13.2f} {r['barrier_s']:>10.3f} {r['gather_s']:>9.3f} "
                  f"{r['aggregate_s']:>12.3f} {r['report_kb']:>10.0f} {r['wire_kb']:>15.0f}", flush=True)
        cap = store_capacity(args.workers)
        print(f"store capacity: {cap:,.0f} requests/s ({args.workers} processes x 4 clients doing add(); "
              f"{os.cpu_count()} cores shared by clients and server)")


if __name__ == "__main__":
    main()
