"""One node's cluster preflight, from reachability of the rendezvous to the cluster report.

The order, and why: local probes start at once in the background (they need no network);
meanwhile the agent checks that ``MASTER_ADDR:MASTER_PORT`` answers (classified, so a DROP
is named before anything can hang on it), joins the store, and takes part in the cluster
stages — clock, shared paths, port matrix — whose parameters come from rank 0's roster,
so every node runs the same stages even with different local flags. Then probes that use
the process group run one at a time (collectives from two probes at once would interleave),
the node report goes to rank 0 (and to ``--node-report-dir``), and rank 0 builds the
cluster report. Every wait is bounded by one deadline (``cluster.timeout_s``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from llmdiag.cluster import clock, facts, gather, groupbackend, merge, portmatrix, presence, reach, sharedfs
from llmdiag.cluster.rendezvous import RankTaken, Roster, StoreSession
from llmdiag.cluster.world import World
from llmdiag.registry import is_group_probe
from llmdiag.result import ClusterReport, Evidence, NodeReport, Result, Status

@dataclasses.dataclass(frozen=True)
class AgentOptions:
    timeout_s: float = 60.0
    connect_timeout_s: float = 3.0
    port_range: tuple[int, int] = (29500, 29510)
    max_ports: int = 16
    sample_peers: int = 2
    full_matrix: bool = False
    share_wait_s: float = 5.0
    node_report_dir: str | None = None
    skew_warn_ms: float = 100.0
    strict: bool = False
    process_group: bool | None = None  # None: only when a selected probe uses it


@dataclasses.dataclass
class AgentOutcome:
    """What the CLI prints: the cluster report on rank 0, the node report elsewhere."""

    node_doc: dict[str, Any]
    cluster: ClusterReport | None = None
    timings: dict[str, float] = dataclasses.field(default_factory=dict)
    sent: bool = False  # the node report reached rank 0's store


def _import_torch_distributed() -> None:
    try:
        import torch.distributed  # noqa: F401
    except Exception:  # noqa: BLE001 - a broken torch is reported where the store is opened
        pass


def bounded(probes: Sequence, seconds: float, note: str | None = None) -> list:
    """``probes`` with their deadlines capped at ``seconds`` (the cluster budget's share, which
    ``note`` explains in a timeout message)."""
    from llmdiag.runner import with_timeout

    cap = max(1.0, seconds)
    return [p if p.timeout_s <= cap else with_timeout(p, cap, note) for p in probes]


class _GroupGuard:
    """A group probe whose collective fails because a peer left (or the group's timeout passed)
    gives a result that says so and names the node that left, instead of "probe raised
    RuntimeError ... report it" on every healthy node: the node that died is the finding, and
    it is reported as such by rank 0 (its report never came)."""

    def __init__(self, probe, who_left: Callable[[str], list[str]]) -> None:
        self._probe = probe
        self._who_left = who_left

    def __getattr__(self, name):
        return getattr(self._probe, name)

    def run(self, ctx):
        from llmdiag.ncclbench import failures

        try:
            yield from self._probe.run(ctx)
        except RuntimeError as exc:
            kind = failures.collective_failure(exc)
            if kind is None:
                raise
            line = failures.first_line(exc)
            if kind == failures.PEER_LEFT:
                left = self._who_left(str(exc))
                who = ", ".join(left) if left else "a node"
                why = "" if left and all("still alive" in n for n in left) else " (its process or host died)"
                summary = f"not completed: {who} left the group mid-collective{why}: {line}"
            else:
                summary = f"not completed: a collective passed the group's timeout (a peer stalled): {line}"
            yield Result(probe=self._probe.name, check="group", node=ctx.node, status=Status.SKIP, summary=summary,
                         runbook="cluster-node-died", data={"group_failure": kind},
                         remediation="The node named is the finding (see its entry); rerun once it is back.")


class Agent:
    def __init__(self, world: World, ctx, probes: Sequence, options: AgentOptions, *,
                 load_errors=(), log: Callable[[str], None] = lambda s: None):
        self.world = world
        self.ctx = ctx
        self.opts = options
        self.log = log
        self.load_errors = load_errors
        self.local_probes = [p for p in probes if not is_group_probe(p)]
        self.group_probes = [p for p in probes if is_group_probe(p)]
        self.results: list[Result] = []
        self.meta: dict[str, Any] = {"world": world.to_dict(), "launcher": world.launcher}
        self.timings: dict[str, float] = {}
        self.session: StoreSession | None = None
        self.roster: Roster | None = None
        self.start = time.monotonic()
        self.deadline = self.start + options.timeout_s
        self._cleanup: list[Callable[[], None]] = []
        self.group_cut = False  # a group probe was cut mid-collective
        self.group_failed = False  # the process group was tried and did not form
        self._death_store = None  # rank 0: the store connection presence deaths are written on
        self._workers: dict[int, Any] = {}  # local rank -> the process of this node's extra group rank
        if getattr(ctx, "services", None) is not None:
            ctx.services["cluster_agent"] = True  # ports this process holds are the job's own (ports probe)

    # -- helpers -------------------------------------------------------------------------
    def left(self, margin: float = 0.0) -> float:
        return max(0.0, self.deadline - margin - time.monotonic())

    def add(self, check: str, status: str, summary: str, *, evidence=(), remediation=None, runbook=None,
            data=None) -> None:
        self.results.append(Result(
            probe="cluster", check=check, node=self.ctx.node, status=Status(status), summary=summary,
            evidence=tuple(Evidence(*e) for e in evidence), remediation=remediation, runbook=runbook, data=data or {}))

    def mark(self, stage: str, t0: float) -> None:
        self.timings[stage] = round(time.monotonic() - t0, 4)

    # -- the run -------------------------------------------------------------------------
    def run(self) -> AgentOutcome:
        from llmdiag.runner import run_probes

        box: dict[str, NodeReport] = {}
        # Local probes share the run's budget: they end in time for the group probes' share
        # (when there are any) and for the report to reach rank 0.
        group_share = 0.4 * self.opts.timeout_s if self.group_probes else 0.0
        total = self.opts.timeout_s
        local_probes = bounded(self.local_probes, total - self.reserve_s - group_share,
                               f"the local probes' share of cluster.timeout_s = {total:g} s: less {self.reserve_s:.1f} s "
                               "to send the report" + (f" and {group_share:.1f} s for the group probes" if group_share
                                                       else ""))
        done: dict[str, list[Result]] = {}  # what each finished probe found, as it finishes

        def progress(event: str, name: str, res) -> None:
            if event == "done":
                done[name] = list(res)

        local = threading.Thread(target=lambda: box.setdefault("r", run_probes(
            local_probes, self.ctx, load_errors=self.load_errors, progress=progress)),
            name="llmdiag-local-probes", daemon=True)
        # torch takes seconds to import: do it while the rendezvous is probed, not after.
        threading.Thread(target=_import_torch_distributed, name="llmdiag-import", daemon=True).start()
        iface = facts.job_interface(self.world.master_addr)
        self.meta["interface"] = iface
        try:
            try:
                # The store host comes first: every other node waits on it, and the local probes
                # (a torch subprocess among them) would only slow down its start.
                hosted = self._host_store() if self.hosts_store else True
                local.start()
                if hosted and self._rendezvous(iface):
                    self._stages()
            except Exception as exc:  # noqa: BLE001 - a lost store must still leave a node report
                if os.environ.get("LLMDIAG_DEBUG"):
                    import traceback
                    traceback.print_exc()
                self.add("rendezvous", "fail", f"lost the rendezvous store mid-run: {str(exc).splitlines()[0][:200]}",
                         runbook="cluster-node-died",
                         remediation="Rank 0 exited or became unreachable; read rank 0's report and stderr.")
            if not local.is_alive() and not local.ident:
                local.start()
            local.join(max(1.0, max((p.timeout_s for p in local_probes), default=1.0) + 2))
            node_report = box.get("r") or self._unfinished_report(local_probes, dict(done))
            group_results = self._group_probes()
            return self._finish(node_report, group_results, iface)
        finally:
            self.cleanup()

    def _unfinished_report(self, probes: Sequence, done: dict[str, list[Result]]) -> NodeReport:
        """The local probes did not all end in time (a starved node): what finished, and a finding
        for each probe that did not, instead of a report with nothing in it."""
        results = [r for p in probes for r in done.get(p.name, ())]
        for p in probes:
            if p.name not in done:
                results.append(Result(probe=p.name, check="probe", node=self.ctx.node, status=Status.FAIL,
                                      summary=f"did not finish before this node's report was due "
                                              f"(cluster.timeout_s = {self.opts.timeout_s:g} s)",
                                      runbook="probe-timeout",
                                      remediation="Find what slows this node (CPU load, a hung mount or driver "
                                                  "call); raise cluster.timeout_s, or --skip the probe."))
        return NodeReport(node=self.ctx.node, node_rank=self.world.node_rank, results=tuple(results))

    def cleanup(self) -> None:
        """Close listeners and servers, remove token files, leave the store (idempotent)."""
        fns, self._cleanup = self._cleanup, []
        for fn in reversed(fns):
            try:
                fn()
            except Exception:  # noqa: BLE001 - cleanup goes on
                pass
        if self.session:
            self.session.close()

    @property
    def hosts_store(self) -> bool:
        return self.world.is_root and not self.world.agent_store

    def _host_store(self) -> bool:
        t0 = time.monotonic()
        self._raise_fd_limit()
        ok = self._open_store()
        self.mark("host_store", t0)
        return ok

    def _raise_fd_limit(self) -> None:
        """The store holds two connections per node: lift rank 0's soft open-file limit to fit.

        The common soft default (1024) would stop a store of about 500 nodes; the hard limit is
        what the admin allows, and only a shortfall against it is a finding.
        """
        import resource

        need = 2 * self.world.nnodes + 256
        try:
            soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            if soft != resource.RLIM_INFINITY and soft < need:
                target = need if hard == resource.RLIM_INFINITY else min(need, hard)
                resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
                soft = target
        except (ValueError, OSError):
            return
        if soft != resource.RLIM_INFINITY and soft < need:
            self.add("store-fd-limit", "warn", f"rank 0 may open {soft} files, the store of {self.world.nnodes} nodes "
                     f"needs about {need}", evidence=[("open files limit", soft, f">= {need}", "")],
                     runbook="nofile-low",
                     remediation="Raise the hard open-files limit on rank 0 (limits.conf nofile, or the container's "
                                 "--ulimit nofile) or let another host with a higher limit be rank 0.")

    def _open_store(self) -> bool:
        """Host (rank 0) or connect to the c10d store; a failure becomes a rendezvous result."""
        w = self.world
        self.session = StoreSession(w, log=self.log)
        try:
            self.session.open(max(1.0, self.left(1.0)))
        except RuntimeError as exc:
            in_use = "in use" in str(exc).lower()
            self.add("rendezvous", "fail", str(exc), runbook="rendezvous-address-in-use" if in_use else
                     "cluster-rendezvous-unreachable",
                     remediation=(f"Free port {w.master_port} on rank 0 (ss -ltnp | grep {w.master_port}) or pick "
                                  "another MASTER_PORT." if in_use else
                                  f"Check that {w.master_addr}:{w.master_port} is the store rank 0 hosts."))
            self.session = None
            return False
        if self.hosts_store:
            # the ports probe sees MASTER_PORT held by this process: this job's store, not a leftover
            self.ctx.services["own_ports"] = {w.master_port: "rank 0's rendezvous store, in this process"}
        return True

    def _rendezvous(self, iface: dict) -> bool:
        w, o = self.world, self.opts
        # Nodes may join as long as the stages after the rendezvous still fit before the
        # deadline (reserve: the token wait, two connect timeouts and the gather).
        reserve = min(0.4 * o.timeout_s, o.share_wait_s + 2 * o.connect_timeout_s + 2.0)
        join_deadline = self.deadline - reserve
        t0 = time.monotonic()
        target = f"{w.master_addr}:{w.master_port}"
        if not w.is_root or w.agent_store:
            r = reach.wait_open(w.master_addr, w.master_port, max(0.1, join_deadline - time.monotonic()),
                                o.connect_timeout_s, progress=self._reach_progress(target, join_deadline))
            self.meta["master_reach"] = r.to_dict()
            self.mark("reach", t0)
            if not r.ok:
                self.add("rendezvous-reach", "fail", f"the rendezvous {target} is not reachable from here: {r.meaning}",
                         evidence=[("connect", r.outcome, "open", ""), ("detail", r.detail, None, "")],
                         runbook="cluster-rendezvous-unreachable",
                         remediation=f"From this node: nc -vz {w.master_addr} {w.master_port}; check MASTER_ADDR, "
                                     "that rank 0 started, and the firewall between the nodes.",
                         data={"outcome": r.outcome})
                return False
            self.add("rendezvous-reach", "pass", f"rendezvous {target} is open ({r.elapsed_s * 1000:.0f} ms)")
        if self.session is None and not self._open_store():
            return False
        self._presence(join_deadline)
        self.session.start_heartbeat()
        try:
            self.session.join({"node": self.ctx.node, "hostname": socket.gethostname(),
                               "address": iface.get("address"), "pid": os.getpid(), "time": time.time(),
                               "devices": groupbackend.node_devices() if self.wants_group else None})
        except RankTaken as exc:
            h = exc.holder
            self.add("node-rank", "fail", f"node rank {w.node_rank} is already held by {h.get('node')} "
                     f"({h.get('address') or h.get('hostname')}, pid {h.get('pid')}): two nodes were started with "
                     f"the same node rank, so this one left the run", runbook="launcher-variables",
                     remediation="Give every node its own NODE_RANK (0 .. NNODES-1); with torchrun, "
                                 "--node-rank or the c10d rendezvous (--rdzv-backend c10d) assigns them.",
                     data={"node_rank": w.node_rank, "held_by": h})
            return False
        self.log(f"{self.ctx.node} joined the rendezvous at {target} as node rank {w.node_rank} of {w.nnodes}")
        if w.is_root:
            ts = clock.TimeServer(token="pending")
            self._cleanup.append(ts.close)
            plan = {"clock_port": ts.port, "ports": portmatrix.choose_ports(*o.port_range, o.max_ports),
                    "sample": o.sample_peers, "full": o.full_matrix, "share_wait_s": o.share_wait_s,
                    "master_port": w.master_port}
            self.roster = self.session.wait_joins(join_deadline, extra=lambda: dict(
                plan, left_s=round(self.left(), 3), group=self._choose_group() if self.wants_group else None))
            ts.token = self.roster.token.encode()
        else:
            self.roster = self.session.wait_roster(self.deadline - 1.0)
            left = (self.roster.extra or {}).get("left_s") if self.roster is not None else None
            if left is not None:
                # one budget for the cluster: end with rank 0 (a node started late must not
                # still run when rank 0 gathers the reports)
                self.deadline = min(self.deadline, time.monotonic() + float(left) - 0.25)
        self.mark("rendezvous", t0)
        if self.roster is None:
            self.add("rendezvous", "fail", "joined the store but rank 0 never published the list of nodes",
                     runbook="cluster-node-died", remediation="Rank 0 died or is stuck: read its report and stderr.")
            return False
        if w.node_rank not in self.roster.ranks:
            self.add("rendezvous", "fail", "joined after rank 0 stopped waiting for nodes",
                     runbook="cluster-node-missing",
                     remediation="Start every node's agent within the first half of cluster.timeout_s, or raise it.")
            return False
        missing = self.roster.missing
        self.add("rendezvous", "pass", f"joined as node rank {w.node_rank}; {len(self.roster.ranks)} of {w.nnodes} "
                 f"nodes joined" + (f" (missing: {', '.join(w.expected_name(r) for r in missing)})" if missing else ""))
        return True

    def _presence(self, until: float) -> None:
        """Rank 0 serves the presence port; the others connect to it before they join, so a node
        whose process dies is known dead at once, and one whose host goes silent (power, network)
        within the keepalive window (:class:`presence.Keepalive`, a tenth of the budget), for every
        stage, instead of after its heartbeat lapses (10 s) while each stage waits on it. Without
        it (a firewall, an old rank 0) the heartbeat alone decides."""
        w, s = self.world, self.session
        keepalive = presence.Keepalive.for_budget(self.opts.timeout_s)
        self.meta["presence_window_s"] = keepalive.window_s
        if w.is_root:
            self._death_store = s.second_connection()  # deaths are written from the server's threads
            srv = presence.PresenceServer(self._node_died, keepalive=keepalive)
            self._cleanup.append(srv.close)
            s.put("presence", {"port": srv.port})
            return
        box: dict[str, presence.Presence] = {}
        store = s.second_connection()  # the main thread goes on using the first

        def connect() -> None:
            # rank 0 publishes the port as soon as it has the store; under torchrun its agent may
            # start after this one, so the wait goes on (beside the join) up to the join deadline
            try:
                while not store.check(["presence"]):
                    if time.monotonic() >= until:
                        return
                    time.sleep(0.1)
                box["me"] = presence.Presence(w.master_addr, int(json.loads(store.get("presence"))["port"]),
                                              w.node_rank, os.getpid(), self.opts.connect_timeout_s,
                                              keepalive=keepalive, on_lost=self._root_lost)
            except Exception as exc:  # noqa: BLE001 - the store or rank 0 went away: the heartbeat remains
                self.log(f"rank 0's presence port did not answer ({exc}); a dead node is found by its heartbeat only")

        t = threading.Thread(target=connect, name="llmdiag-presence-connect", daemon=True)
        t.start()
        # Connected before joining: this node's store is open, so rank 0 is up and publishes the port at once.
        # A join announced before the connection (a slow rank 0, a loaded machine) leaves a cut-off host to the
        # heartbeat: 10 s and no cause, where keepalive says "host stopped answering" within its window. The
        # thread's own steps are bounded (the port's poll by ``until``, the connect by connect_timeout_s).
        t.join(max(0.0, min(until - time.monotonic(), 2 * self.opts.connect_timeout_s + 5.0)))
        self._cleanup.append(lambda: box["me"].bye() if "me" in box else None)

    def _gone_why(self, cause: str, whose: str = "its") -> str:
        """The words for how a presence connection ended (``whose``: whose process or host)."""
        window = self.meta.get("presence_window_s")
        if cause == presence.HOST_SILENT:
            return (f"{whose} host stopped answering: no reply to TCP keepalive for {window} s "
                    "(power lost, network down, or a firewall now drops it)")
        return f"{whose} process ended mid-run (the presence connection between it and rank 0 closed)"

    def _node_died(self, rank: int, pid: int, cause: str = presence.PROCESS_ENDED) -> None:
        """Rank 0: ``rank``'s presence connection ended without a goodbye: its process or host is gone."""
        s, store = self.session, self._death_store
        why = self._gone_why(cause)
        try:
            if s is None or not store.check([f"join/{rank}"]) or json.loads(store.get(f"join/{rank}")).get("pid") != pid:
                return  # not a node of this run (or it never joined: then it is missing, not dead)
            s.mark_dead(rank, store, why)
        except Exception:  # noqa: BLE001 - the store is gone: the run is ending anyway
            return
        self.log(f"{self.world.expected_name(rank)} died: {why}")

    def _root_lost(self, cause: str, address: str) -> None:
        """A node: its presence connection to rank 0 ended before this node said goodbye. The store
        went with rank 0: its connections are shut down, so no store call waits on it any longer."""
        if self.session is None:
            return
        self.session.mark_gone(0, self._gone_why(cause, "rank 0's"))
        n = self.session.abandon_store(address)
        self.log(f"lost rank 0 ({address}): {self.session.dead_why[0]}; its {n} store connection(s) closed here, "
                 "this node's report stays on this node")

    def _reach_progress(self, target: str, until: float):
        """Tell the user at once what the rendezvous does (refused, dropped), then every 10 s."""
        state = {"outcome": None, "next": 0.0}

        def progress(r, tries: int, waited: float) -> None:
            now = time.monotonic()
            if r.outcome == state["outcome"] and now < state["next"]:
                return
            state["outcome"], state["next"] = r.outcome, now + 10.0
            why = {reach.REFUSED: "refused: nothing listens there yet (rank 0 not started?) or a firewall REJECT",
                   reach.TIMEOUT: "no answer: packets dropped (a firewall DROP?) or the host is down"}.get(
                       r.outcome, r.meaning)
            self.log(f"rendezvous {target} {why}; tried {tries} time(s) in {waited:.0f} s, retrying for "
                     f"{max(0.0, until - now):.0f} s more")

        return progress

    @property
    def wants_group(self) -> bool:
        """Whether this run builds the process group (a selected probe needs it, or it was asked for)."""
        return bool(self.group_probes and self.opts.process_group is not False or self.opts.process_group)

    def _choose_group(self) -> dict[str, Any]:
        """Rank 0: the group's backend from the joined nodes' devices (:mod:`groupbackend`)."""
        joins = self.session.join_info(self.session.joined())
        return groupbackend.choose({j.get("node") or r: j.get("devices") for r, j in joins.items()},
                                   self.ctx.config.get("cluster", "nproc_per_node"))

    def budget_left(self) -> float:
        """Seconds a stage may still use before the report must go to rank 0."""
        return self.left(self.reserve_s)

    @property
    def reserve_s(self) -> float:
        """Kept at the end of ``cluster.timeout_s`` to send the node report and gather them."""
        return 2.0 + 0.05 * self.opts.timeout_s

    # -- cluster stages ------------------------------------------------------------------
    def _stages(self) -> None:
        plan = self.roster.extra
        t0 = time.monotonic()
        if not self.world.is_root:
            self.meta["clock"] = clock.measure(self.world.master_addr, int(plan["clock_port"]), self.roster.token,
                                               timeout=min(2.0, self.left(1.0) or 0.1))
        else:
            self.meta["clock"] = {"skew_ms": 0.0, "rtt_ms": 0.0, "reference": True}
        self.mark("clock", t0)
        self.log("checking clocks, shared paths and the port matrix with the other nodes")
        t0 = time.monotonic()
        self._shared_paths(float(plan.get("share_wait_s") or 5.0))
        self.mark("shared_fs", t0)
        t0 = time.monotonic()
        self._port_matrix(plan)
        self.mark("port_matrix", t0)
        if self.wants_group:
            t0 = time.monotonic()
            self._process_group()
            self.mark("process_group", t0)

    def _shared_paths(self, wait_s: float) -> None:
        items = self.ctx.config.get("filesystem", "paths") or []
        s, ranks = self.session, self.roster.ranks
        per_path = max(0.5, min(5.0, self.left(2.0) / max(1, len(items) * 2)))
        out: dict[str, dict] = {}
        for item in items:
            f = sharedfs.path_facts(item["path"], per_path)
            f["shared"] = bool(item.get("shared"))
            f["must_write"] = bool(item.get("writable"))
            out[os.path.abspath(item["path"])] = f
        self.meta.setdefault("facts", {})["paths"] = out
        # The token test follows rank 0's list, so every node takes part in the same barriers.
        if self.world.is_root:
            written = {}
            for i, (path, f) in enumerate(out.items()):
                if f["shared"] and f.get("exists") and f.get("writable"):
                    # registered before it exists: removed whatever happens (the probes' own
                    # cleanup runs mid-stage, so the agent keeps its own list)
                    track = lambda n: self._cleanup.append(lambda: sharedfs.remove_token(n))  # noqa: E731
                    if sharedfs.write_token(path, self.roster.token, i, track, per_path):
                        written[path] = i
            s.put("share/tokens", written)
        arrived = self._stage_barrier("share-written", "shared-paths")
        if arrived is None or 0 not in arrived:
            return
        tokens = s.get("share/tokens") if s.has("share/tokens") else {}
        if not self.world.is_root:
            for path, i in tokens.items():
                seen = sharedfs.see_token(path, self.roster.token, i, min(wait_s, self.left(3.0)))
                if path in out:
                    out[path]["token_seen"] = seen["seen"]
                    out[path]["token_waited_s"] = seen.get("waited_s", seen.get("after_s"))
        else:
            for path in tokens:
                out[path]["token_seen"] = True
        s.barrier("share-seen", ranks, self.deadline - 2.0)

    def _port_matrix(self, plan: dict) -> None:
        s, roster, me = self.session, self.roster, self.world.node_rank
        ports = [int(p) for p in plan["ports"]]
        skip = [int(plan["master_port"])] if me == 0 else []
        listeners = portmatrix.Listeners(ports, roster.token, me, skip=skip)
        self._cleanup.append(listeners.close)
        s.put(f"listening/{me}", {"busy": sorted(listeners.busy), "skip": skip})
        arrived = self._stage_barrier("listen", "port-matrix", need_s=self.opts.connect_timeout_s)
        if arrived is None:
            return  # the listeners stay open until this node ends, for peers still probing
        peers = portmatrix.choose_peers(list(roster.ranks), me, int(plan["sample"]), roster.token, bool(plan["full"]))
        peers = [p for p in peers if p in arrived]
        joins = s.join_info(peers)
        targets = {p: joins[p].get("address") or joins[p].get("hostname") for p in peers}
        busy = {}
        for p in peers:
            info = s.get(f"listening/{p}") if s.has(f"listening/{p}") else {}
            busy[p] = list(info.get("busy", [])) + list(info.get("skip", []))
        rows = portmatrix.probe_peers(targets, ports, busy, roster.token, me,
                                      min(self.opts.connect_timeout_s, max(0.1, self.left(3.0))))
        rows = [r for r in rows if not (r["outcome"] == portmatrix.BUSY and r["port"] in
                                        (int(plan["master_port"]),) and r["dst_rank"] == 0)]
        mode = "all pairs" if plan["full"] else f"ring + {plan['sample']} sampled peers"
        self.meta["matrix"] = {"ports": ports, "mode": mode, "peers": peers, "tested": len(rows),
                               "open": sum(r["outcome"] == reach.OPEN for r in rows),
                               "problems": [r for r in rows if r["outcome"] != reach.OPEN]}
        s.barrier("matrix-done", roster.ranks, self.deadline - 2.0)
        listeners.close()

    def _stage_barrier(self, name: str, stage: str, need_s: float = 0.0) -> set[int] | None:
        """The nodes to run ``stage`` with: those that reached barrier ``name`` and are alive; or
        None, with a "not run" result, when the barrier closed on the deadline (a live node never
        came) or too little time is left. A stage run then would test peers that already gave
        up and closed their side (a healthy node got "refused" on every port that way)."""
        ranks = set(self.roster.ranks)
        arrived, died = self.session.barrier(name, ranks, self.deadline - 2.0)
        late = ranks - arrived - died
        if late or self.left(2.0) < need_s or self.left(2.0) <= 0:
            waited = f" (still waiting for {', '.join(self.world.expected_name(r) for r in sorted(late))})" if late else ""
            self.add(stage, "skip", f"not run: budget used up: cluster.timeout_s = {self.opts.timeout_s:g} s ran out "
                     f"before the nodes met for it{waited}", runbook="probe-timeout",
                     remediation="The nodes named missing or dead are the finding; once they are fixed this stage "
                                 "runs. Raise cluster.timeout_s if every node is healthy but slow.",
                     data={"not_run": "budget used up", "late": sorted(late), "died": sorted(died)})
            return None
        return arrived - died

    def _process_group(self) -> None:
        import datetime

        import torch.distributed as dist

        from llmdiag.cluster import groupworker

        ranks = list(self.roster.ranks)
        choice = (self.roster.extra or {}).get("group") or {"backend": "gloo", "reason": "rank 0 chose none"}
        backend = choice["backend"]
        per_node = int(choice.get("ranks_per_node") or 1)
        self.meta["group"] = choice
        iface = self.meta["interface"].get("interface")
        if iface and not os.environ.get("GLOO_SOCKET_IFNAME"):
            os.environ["GLOO_SOCKET_IFNAME"] = iface  # gloo must use the interface that reaches the peers
        me, world_size = groupworker.layout(ranks.index(self.world.node_rank), per_node, len(ranks))
        timeout = max(5.0, self.left(5.0) / 2)
        # the other local ranks start first: joining the group waits for every rank
        self._start_workers(me, world_size, per_node, backend, timeout)
        try:
            from torch.distributed import PrefixStore

            if backend == "nccl":
                import torch

                torch.cuda.set_device(0)  # this node's local rank 0 drives its first visible GPU
            # gloo's full-mesh connect does not keep to the group's timeout when one pair's packets are silently
            # dropped (40 s against an 8 s timeout, measured): the join runs in a thread of its own and is given up
            # at the timeout, within the budget; a group that did not form is never used
            box: dict[str, BaseException] = {}

            def form() -> None:
                try:
                    dist.init_process_group(backend, store=PrefixStore(groupworker.PG_PREFIX, self.session._server),
                                            rank=me, world_size=world_size,
                                            timeout=datetime.timedelta(seconds=timeout))
                except BaseException as exc:  # noqa: BLE001
                    box["error"] = exc

            t = threading.Thread(target=form, name="llmdiag-group-join", daemon=True)
            t.start()
            t.join(max(1.0, min(timeout + 2.0, self.left(3.0))))
            if t.is_alive():
                self.group_cut = True  # half-formed: never destroyed nor waited on
                raise TimeoutError(f"joining it did not finish within {max(1.0, min(timeout + 2.0, self.left(3.0))):.0f}"
                                   " s (a pair of nodes that cannot connect: see the port matrix)")
            if "error" in box:
                raise box["error"]
        except Exception as exc:  # noqa: BLE001
            self.group_failed = True
            gone = [f"local rank {k} exited with code {p.returncode}" for k, p in self._workers.items()
                    if p.poll() not in (None, 0)]
            self.add("process-group", "warn", f"the {backend} group over {len(ranks)} nodes could not form: "
                     f"{str(exc).splitlines()[0][:200]}" + (f" ({', '.join(gone)}; its error is on this node's "
                                                            "stderr)" if gone else ""), runbook="nccl-timeout",
                     remediation="Set NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME to the interface the nodes reach each "
                                 "other by; NCCL_DEBUG=INFO shows why an NCCL group fails.")
            return
        layout = f"{per_node} rank(s) per node ({choice.get('ranks_reason', 'one per node')}), {world_size} in all"
        self.add("process-group", "pass", f"group probes measure {backend} over {len(ranks)} node(s), {layout}: "
                 f"{choice['reason']}", data={"backend": backend, "choice": choice, "world_size": world_size,
                                              "ranks_per_node": per_node, "first_rank": me})
        self._cleanup.append(lambda: None if self.group_cut else dist.destroy_process_group())
        self.ctx.services["process_group"] = dist.group.WORLD
        self.ctx.services["world"] = {"rank": me, "world_size": world_size, "local_ranks": list(range(me, me + per_node)),
                                      "node_rank": self.world.node_rank, "nnodes": self.world.nnodes,
                                      "master_addr": self.world.master_addr, "master_port": self.world.master_port,
                                      "run_token": self.roster.token}

    def _start_workers(self, first: int, world_size: int, per_node: int, backend: str, timeout: float) -> None:
        """Local ranks 1..per_node-1 of this node's share of the group (:mod:`groupworker`)."""
        from llmdiag.cluster import groupworker

        if per_node <= 1:
            return
        cfg = groupworker.explicit_config(self.ctx.config)
        env = dict(os.environ)
        for local in range(1, per_node):
            spec = groupworker.worker_spec(
                master_addr=self.world.master_addr, master_port=self.world.master_port, rank=first + local,
                world_size=world_size, local_rank=local, backend=backend, timeout_s=timeout,
                budget_s=max(1.0, self.budget_left()), node=self.ctx.node,
                probes=[p.name for p in self.group_probes], config=cfg)
            proc = self._workers[local] = groupworker.start(spec, env)
            self._cleanup.append(lambda proc=proc: groupworker.stop(proc))
        self.log(f"started {per_node - 1} more local rank(s) for the group (ranks {first}..{first + per_node - 1} "
                 f"of {world_size})")

    def _group_probes(self) -> list[Result]:
        if not self.group_probes:
            return []
        from llmdiag.runner import run_probes

        if self.group_failed:
            return [Result(probe=p.name, check="probe", node=self.ctx.node, status=Status.SKIP,
                           summary="not run: the process group over the nodes did not form (see process-group and "
                                   "the port matrix)", runbook="nccl-timeout") for p in self.group_probes]
        if "process_group" not in self.ctx.services:
            return list(run_probes(self.group_probes, self.ctx, parallel=1).results)
        # One at a time, in the same order on every node (concurrent collectives would
        # interleave), each within what is left of the budget: a probe that overruns is cut and
        # reported as timed out, and this node's report still reaches rank 0 in time.
        out: list[Result] = []
        for p in self.group_probes:
            left = self.budget_left()
            if self.group_cut:
                out.append(Result(probe=p.name, check="probe", node=self.ctx.node, status=Status.SKIP,
                                  summary="not run: the group broke during an earlier group probe (a peer left or "
                                          "a collective was cut)", runbook="cluster-node-died"))
                continue
            if left < 1.0:
                out.append(Result(probe=p.name, check="probe", node=self.ctx.node, status=Status.FAIL,
                                  summary=f"not run: cluster.timeout_s = {self.opts.timeout_s:g} s was used up "
                                          "before it", runbook="probe-timeout",
                                  remediation="Raise cluster.timeout_s (or --timeout), or --skip the probe."))
                continue
            self.log(f"running the group probe {p.name} across {len(self.roster.ranks)} nodes "
                     f"(at most {min(p.timeout_s, left):.0f} s)")
            note = (f"what was left of cluster.timeout_s = {self.opts.timeout_s:g} s for this group probe, "
                    f"{self.reserve_s:.1f} s kept to send the report")
            guarded = _GroupGuard(bounded([p], left, note)[0], self._who_left)
            res = list(run_probes([guarded], self.ctx, parallel=1).results)
            out += res
            if any(r.check == "probe" and r.runbook == "probe-timeout" or r.data.get("group_failure") for r in res):
                self.group_cut = True  # its collective may still be running: never wait on the group again
        return out

    def _who_left(self, message: str) -> list[str]:
        """The nodes a collective error points at: gloo names the peer's address in it
        (``Read error [10.0.0.3]:41234``); else the nodes whose heartbeat has stopped."""
        import re

        joins = self.session.join_info(self.roster.ranks) if self.session and self.roster else {}
        by_addr = {j.get("address"): (r, j.get("node") or f"node rank {r}") for r, j in joins.items()
                   if j.get("address")}
        named = [by_addr[a] for a in dict.fromkeys(re.findall(r"(\d{1,3}(?:\.\d{1,3}){3})", message))
                 if a in by_addr and by_addr[a][1] != self.ctx.node]
        if named:
            # a peer still present (its presence connection and heartbeat) did not die: its side of the collective
            # ended (cut at its own share of the budget, or it failed there); only a confirmed death says "died"
            s = self.session
            if s is not None:  # a death reaches rank 0's presence connection within moments of the peer's error
                end = time.monotonic() + min(1.0, max(0.0, self.left(1.0)))
                while time.monotonic() < end and all(s.alive(r) for r, _ in named):
                    time.sleep(0.1)
            return [name if s is None or not s.alive(r) else
                    f"{name} (still alive: its side ended, e.g. cut at its share of the budget)" for r, name in named]
        return [joins.get(r, {}).get("node") or self.world.expected_name(r) for r in self.roster.ranks
                if r != self.world.node_rank and not self.session.alive(r)] if self.session and self.roster else []

    # -- the end -------------------------------------------------------------------------
    def _root_gone(self) -> str | None:
        """Why rank 0 is known gone on this node (its presence connection ended), or None."""
        s = self.session
        return None if s is None or self.world.is_root else s.dead_why.get(0)

    def _finish(self, node_report: NodeReport, group_results: list[Result], iface: dict) -> AgentOutcome:
        root_gone = self._root_gone()
        if root_gone:
            self.add("rank0-lost", "fail", f"lost rank 0 mid-run: {root_gone}; this report did not reach it",
                     runbook="cluster-node-died",
                     remediation=f"Check {self.world.master_addr} (is it up, does it answer ping from here?) and "
                                 "this node's own link; rank 0's report names the nodes it lost.")
        results = list(node_report.results) + group_results + self.results
        self.meta.setdefault("facts", {}).update(facts.node_facts([r.to_dict() for r in results], self.ctx.env, iface))
        self.meta["timings"] = self.timings
        self.meta["elapsed_s"] = round(time.monotonic() - self.start, 3)  # this node's run, on its monotonic clock
        nr = NodeReport(node=self.ctx.node, node_rank=self.world.node_rank, results=tuple(results),
                        started_at=node_report.started_at, finished_at=time.time(), meta=self.meta)
        doc = nr.to_dict()
        if self.opts.node_report_dir:
            try:
                gather.write_node_file(self.opts.node_report_dir, doc)
            except OSError as exc:
                self.log(f"could not write the node report to {self.opts.node_report_dir}: {exc}")
        outcome = AgentOutcome(node_doc=doc, timings=self.timings)
        s = self.session
        if s is None or self.roster is None:
            if self.world.is_root:  # rank 0 without a store: a report of itself and nothing else
                outcome.cluster = merge.build_report([doc], nnodes=self.world.nnodes, hosts=self.world.hosts,
                                                     lost={}, skew_warn_ms=self.opts.skew_warn_ms, strict=self.opts.strict,
                                                     duration_s=time.monotonic() - self.start)
            return outcome
        if root_gone:
            return outcome  # its store is unreachable: a send would block until the store's timeout
        t0 = time.monotonic()
        try:
            gather.send_report(s, doc)
            outcome.sent = True
        except Exception as exc:  # noqa: BLE001
            self.log(f"could not send the node report to rank 0: {exc}")
        if not self.world.is_root:
            return outcome
        others = [r for r in self.roster.ranks if r != 0]
        docs, lost = gather.collect_reports(s, others, self.deadline - 0.5)
        self.mark("gather", t0)
        t0 = time.monotonic()
        for r in self.roster.missing:
            lost.setdefault(r, "never joined the rendezvous")
        try:
            launch = merge.launch_checks(s.claims(), self.world.nnodes)
        except Exception as exc:  # noqa: BLE001 - the store may be going away: the rest of the report stands
            self.log(f"could not read the nodes' launcher claims: {exc}")
            launch = []
        outcome.cluster = merge.build_report([doc] + [docs[r] for r in sorted(docs)], nnodes=self.world.nnodes,
                                             lost=lost, hosts=self.world.hosts, skew_warn_ms=self.opts.skew_warn_ms,
                                             strict=self.opts.strict, duration_s=time.monotonic() - self.start,
                                             extra_results=launch)
        self.mark("aggregate", t0)
        return outcome
