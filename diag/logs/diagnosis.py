"""Events and anomalies → findings, one per root event, with cause, next step and runbook;
then the ``log-analysis`` document with metrics and ranked root-cause candidates.

Echoes collapse: every rank's watchdog message of the same hang is one ``nccl_timeout``
finding whose facts list the reporting ranks and each rank's SeqNum; the rank that is
behind (lowest last-completed / SeqNum) or absent is the likely culprit.
"""

from __future__ import annotations

import math
import re
import statistics
from collections import Counter, defaultdict

from llmdiag.documents import SCHEMA_VERSION
from llmdiag.logs import catalogue, signatures
from llmdiag.logs.signatures import Event

ERROR, WARNING = catalogue.ERROR, catalogue.WARNING
#: kind -> (severity, runbook, probable cause, next step): from the catalogue (llmdiag.logs.catalogue)
KINDS: dict[str, tuple[str, str, str, str]] = catalogue.kinds()
#: root-cause priority: hardware first, then resources, communication, launcher, symptoms
PRIORITY = ["ecc_xid", "host_oom_kill", "cuda_oom", "disk_full", "sigbus", "dataloader_worker_killed", "cuda_error",
            "pod_evicted", "dataloader_timeout",
            "nccl_unhandled_cuda_error", "ib_completion_error", "nccl_system_error", "nccl_invalid_usage",
            "nccl_invalid_argument", "rendezvous_address_in_use", "rendezvous_timeout", "segfault", "sigkill",
            "nan_loss", "nan_grad_norm", "zero_loss", "grad_norm_explosion", "python_exception",
            "slurm_cancelled", "launcher_stopped",
            "slurm_time_limit", "collective_hang", "nccl_heartbeat_stuck", "nccl_timeout", "gloo_timeout",
            "nccl_remote_error", "nccl_internal_error", "connection_reset", "peer_lost", "hang_no_progress",
            "nccl_communicator_aborted", "sigabrt", "child_failed", "loss_spike", "grad_overflow",
            "grad_norm_spike", "throughput_drop", "nccl_warn"]
#: kinds every rank reports after another rank failed: their rank is a victim, not the first failure
#: a rank's report that a collective ran past its timeout
_TIMEOUT_KINDS = ("nccl_timeout", "gloo_timeout", "collective_hang")
#: reports whose suspects are the ranks that printed lines but never reported them: a timeout, a lost gloo peer
_SUSPECT_KINDS = (*_TIMEOUT_KINDS, "peer_lost")
_VICTIM_KINDS = {"nccl_timeout", "gloo_timeout", "nccl_communicator_aborted", "nccl_remote_error", "connection_reset",
                 "peer_lost",
                 "sigabrt", "nccl_heartbeat_stuck", "nccl_warn"}
#: a rank's exception that only says its gloo peer went away
_PEER_GONE = re.compile(r"gloo/transport/tcp/pair\.cc:\d+\].*?(?:Connection (?:closed|reset) by peer|Broken pipe|Read error)")
#: torchrun's agent told to stop (SIGTERM, SIGINT, SIGHUP)
_STOP_SIGNAL = re.compile(r"got signal: (15|2|1)\b")
#: a torch shared-memory segment ("</torch_2312_3563512745_0>") or a path under /dev/shm
_SHM_FILE = re.compile(r"</?torch_\d+_\d+(?:_\d+)?>|/dev/shm/\S*")
#: the kinds a rank's own watchdog reports (each rank its own line): the first reporter is a fact
_WATCHDOG_KINDS = {"nccl_heartbeat_stuck", "nccl_communicator_aborted", "gloo_timeout", "collective_hang"}
#: a rank's own report that its collective hung or its communicator was taken down
_HANG_KINDS = {"nccl_timeout", "nccl_timeout_status", "nccl_communicator_aborted", "nccl_heartbeat_stuck"}
#: an exception that only reports that a peer went away
_ECHO_EXC = re.compile(r"(?i)connection (?:reset|closed|refused)|broken pipe|closed by peer|peer .* (?:exited|died)")
#: NCCL's error kinds by return code
NCCL_RC_KINDS = {v[1]: n for n, v in catalogue.NCCL_RETURN_CODES.items() if v[1]}


def _chain_kinds(rcs: list[Event]) -> dict[str, list[Event]]:
    """NCCL return-code chains (``NCCL INFO file.cc:N -> rc`` lines of one thread, in order): a chain is
    named by the code it ends in, and a 2 anywhere in it means a system call failed (README vocabulary)."""
    by_thread: dict = defaultdict(list)
    for e in sorted(rcs, key=lambda e: (e.file, e.line)):
        by_thread[(e.file, e.facts.get("thread") or e.host)].append(e)
    out: dict[str, list[Event]] = defaultdict(list)
    for evs in by_thread.values():
        chain: list[Event] = []
        for i, e in enumerate(evs):
            chain.append(e)
            nxt = evs[i + 1] if i + 1 < len(evs) else None
            if nxt is None or nxt.line - e.line > 20:
                codes = [c.facts["nccl_return_code"] for c in chain]
                out[catalogue.NCCL_RETURN_CODES[codes[-1]][1]].append(chain[-1])
                if 2 in codes and codes[-1] != 2:
                    out["nccl_system_error"].append(next(c for c in chain if c.facts["nccl_return_code"] == 2))
                chain = []
    return out


def _base(kind: str, ev: Event | None = None, **kw) -> dict:
    sev, rb, cause, nxt = KINDS[kind]
    d = {"kind": kind, "severity": sev, "rank": None, "step": None, "line": None, "file": None, "message": "",
         "facts": {}, "runbook": rb, "cause": cause, "next_step": nxt, "ts": None, "count": 1}
    if ev is not None:
        d.update(rank=ev.rank, line=ev.line, file=ev.file, message=ev.message, ts=ev.ts, facts=dict(ev.facts))
        if ev.host:
            d["facts"].setdefault("host", ev.host)
    d.update(kw)
    return d


def progress_straggler(progress: dict, reporting: list[int], world: int | None = None) -> tuple[list[int], str]:
    """The rank(s) whose own progress ends behind every other rank's: the straggler of a hang.

    ``progress`` maps a rank to the last step its own lines reached. A hang stops every rank at the
    collective of one step; a rank whose log ends earlier never got there. Compared only when the
    ranks with progress are every rank (0..N-1, N the world size when known, else the highest rank
    seen + 1, at least two) and the ranks behind are fewer than those ahead: an excerpt that lacks a
    rank's lines, or ranks that all stop at different steps, name nobody.
    """
    ranks = {r: s for r, s in progress.items() if isinstance(r, int) and isinstance(s, (int, float))}
    if len(ranks) < 2:
        return [], ""
    upto = world if isinstance(world, int) and world > 0 else max(ranks) + 1
    if set(ranks) != set(range(upto)):
        return [], ""
    top = max(ranks.values())
    behind = sorted(r for r, s in ranks.items() if s < top)
    ahead = [r for r in ranks if ranks[r] == top]
    if not behind or len(behind) >= len(ahead):
        return [], ""
    ends = ", ".join(f"rank {r}'s log ends at step {ranks[r]}" for r in behind)
    why = f"{ends}, the others at {top}"
    silent = [r for r in behind if r not in reporting]
    if reporting and silent:
        why += f"; rank(s) {silent} never reported the timeout: they never reached the collective"
    return behind, why


def _name_suspects(f: dict, reporting: list[int], extra: dict, culprits: list[int] | None = None,
                   why: str = "", what: str = "the timeout") -> list[int]:
    """The rank(s) a collective timeout waited for, into ``f`` (facts, cause, next step).

    ``culprits``: those the timeout's own fields single out, if any. Else each rank's progress
    (``progress_straggler``); else the ranks that printed lines but never reported the timeout,
    when the log covers every rank (0..N-1, N the world size, else the highest rank seen + 1) and
    they are no more than those that reported it (an excerpt that lost most ranks' reports names
    nobody; of two ranks, the one that printed lines but not the timeout is named). A rank absent from the excerpt is only listed as such.
    """
    facts = f["facts"]
    world = extra.get("world_size")
    seen = set(extra.get("ranks_seen", ())) | set(reporting)
    if not culprits:
        culprits, why = progress_straggler(extra.get("rank_progress") or {}, reporting, world)
    if reporting:
        upto = world if isinstance(world, int) else max(seen) + 1
        absent = [r for r in range(upto) if r not in reporting]
        covers_all = seen >= set(range(upto)) and (isinstance(world, int) or len(absent) <= len(reporting))
        if absent and covers_all and not culprits:
            culprits = absent
            why = f"rank(s) {absent} never reported {what}, though the log covers them (their own lines or " \
                  f"the launcher's summary): they were not waiting in the collective"
        not_covered = sorted(r for r in absent if r not in seen)
        if not_covered:
            facts["ranks_not_in_excerpt"] = not_covered
    if culprits:
        facts["suspect_ranks"] = culprits
        facts["suspect_reason"] = why
        f["cause"] = why + "; the reporting ranks are likely victims"
        f["next_step"] = f"check rank {culprits[0]}'s node first (its log, GPU, network links)"
    elif reporting:
        f["next_step"] = ("no rank stands out in this excerpt: collect the logs of every rank (or Flight Recorder "
                          "dumps, --fr) to find the one that did not reach the collective")
    return culprits


def _only_lost_peers(f: dict) -> bool:
    """A launcher's summary whose failed ranks all raised that their gloo peer went away."""
    exs = f["facts"].get("exceptions_by_rank") if f["kind"] == "child_failed" else None
    return bool(exs) and all(_PEER_GONE.search(v or "") for v in exs.values())


def _first_reporter_of(events: list) -> int | None:
    """The rank that reported first: by the clock where every report has a time; by position only within
    one file (line numbers of different files say nothing about which came first); None on a tie across files."""
    ranked = [e for e in events if e.rank is not None]
    when = None
    if ranked and all(e.ts is not None for e in ranked):
        when = lambda e: e.ts  # noqa: E731
    elif ranked and all(e.clock is not None for e in ranked):  # glog's time of day (torch's own C++ lines)
        when = lambda e: e.clock  # noqa: E731
    elif len({e.file for e in ranked}) == 1:
        when = lambda e: 0.0  # noqa: E731 - one file: its lines' order
    if when is None:
        return None
    earliest = min(when(e) for e in ranked)
    tied = [e for e in ranked if when(e) == earliest]
    if len({e.file for e in tied}) != 1:  # a tie across files (the same second in two files) names nobody
        return None
    return min(tied, key=lambda e: e.line).rank


def _timeouts(evs: list[Event], extra: dict | None = None) -> dict | None:
    works = [e for e in evs if e.kind == "nccl_timeout"]
    status = [e for e in evs if e.kind == "nccl_timeout_status"]
    if not works and not status:
        return None
    first = (works or status)[0]
    f = _base("nccl_timeout", first)
    facts = f["facts"]
    reporting: list[int] = []
    per_rank: dict[int, dict] = {}
    for e in works + status:
        if e.rank is not None:
            if e.rank not in reporting:
                reporting.append(e.rank)
            pr = per_rank.setdefault(e.rank, {})
            for k, v in e.facts.items():
                pr.setdefault(k, v)
    # the first reporter by the clock where every report has a time; by position only within one file (line
    # numbers of different files say nothing about which came first)
    first_rank = _first_reporter_of(works + status)
    if first_rank is not None:
        facts["first_reporting_rank"] = first_rank
    facts["ranks_reporting"] = reporting
    facts["reports"] = len(works)
    for src in works[1:] + status:
        own = _same_process(first, src)
        for k, v in src.facts.items():
            if own or k not in _OWN_FACTS:
                facts.setdefault(k, v)
    op_types = list(dict.fromkeys(e.facts["op_type"] for e in works if "op_type" in e.facts))
    if op_types:
        facts["op_types"] = op_types
    seqs = {r: p["seq_num"] for r, p in per_rank.items() if isinstance(p.get("seq_num"), int)}
    for r, p in sorted(per_rank.items()):
        if "seq_num" in p:
            facts[f"rank{r}_seq_num"] = p["seq_num"]
        if "op_type" in p:
            facts[f"rank{r}_op_type"] = p["op_type"]
        if "last_completed_work" in p:
            facts[f"rank{r}_last_completed_work"] = p["last_completed_work"]
        if "last_enqueued_work" in p:
            facts[f"rank{r}_last_enqueued_work"] = p["last_enqueued_work"]
    culprits, why = [], ""
    completed = {r: p["last_completed_work"] for r, p in per_rank.items() if "last_completed_work" in p}
    enqueued = {r: p["last_enqueued_work"] for r, p in per_rank.items() if "last_enqueued_work" in p}
    if len(set(completed.values())) > 1:
        low = min(completed.values())
        culprits = sorted(r for r, v in completed.items() if v == low)
        why = f"rank(s) {culprits} completed the fewest collectives ({low})"
    elif len(set(enqueued.values())) > 1 and (work := max(seqs.values(), default=None)) is not None \
            and min(enqueued.values()) < work:
        low = min(enqueued.values())
        culprits = sorted(r for r, v in enqueued.items() if v == low)
        why = f"rank(s) {culprits} had not yet enqueued collective {work} (last enqueued {low}): they never reached it"
    # the same collective (SeqNum) but a different op or size on some ranks: their code paths diverged
    at_seq: dict[int, dict[tuple, list[int]]] = defaultdict(lambda: defaultdict(list))
    for r, p in per_rank.items():
        if isinstance(p.get("seq_num"), int) and "op_type" in p:
            at_seq[p["seq_num"]][(p["op_type"], p.get("numel_in"))].append(r)
    split = next(((q, sides) for q, sides in at_seq.items() if len(sides) > 1), None)
    if split is not None and not culprits:
        q, sides = split
        ordered = sorted(sides.items(), key=lambda kv: (len(kv[1]), kv[1]))
        facts["collective_mismatch"] = [{"op_type": op, "numel_in": n, "ranks": sorted(rs)} for (op, n), rs in
                                        sorted(sides.items(), key=lambda kv: kv[1])]
        culprits = sorted(ordered[0][1])
        desc = "; ".join(f"rank(s) {sorted(rs)} in {op}" + (f" ({n} elements)" if n is not None else "")
                         for (op, n), rs in sorted(sides.items(), key=lambda kv: kv[1]))
        why = (f"the ranks wait in different collectives at the same SeqNum {q} ({desc}): their code paths "
               f"diverged")
    if not culprits and len(set(seqs.values())) > 1:
        common = Counter(seqs.values()).most_common(1)[0][0]
        odd = sorted(r for r, v in seqs.items() if v != common)
        others = sorted(r for r in seqs if r not in odd)
        if others:
            facts["other_ranks_seq_num"] = common
        culprits = odd
        why = f"rank(s) {odd} wait in a different collective (SeqNum {[seqs[r] for r in odd]}) than the others " \
              f"({common}): the ranks are out of step"
    culprits = _name_suspects(f, reporting, extra or {}, culprits, why)
    f["count"] = len(works) + len(status)
    op = facts.get("op_type", "?")
    f["message"] = (f"NCCL watchdog timeout in {op} (SeqNum {facts.get('seq_num', '?')}, "
                    f"timeout {facts.get('timeout_ms', '?')} ms) reported by {len(reporting) or 1} rank(s)")
    if culprits:
        f["message"] += f"; suspect rank(s) {culprits}: {why}"
    if facts.get("ranks_not_in_excerpt"):
        f["message"] += f"; rank(s) {facts['ranks_not_in_excerpt']} are not in this excerpt"
    return f


#: facts of one process (its host, pid, device, the peer it talked to, its own last error): a finding
#: that collapses several ranks' lines takes them from its own (first) line's rank and file only
_OWN_FACTS = frozenset(("host", "pid", "local_rank", "peer", "thread", "last_error"))


def _same_process(a: Event, b: Event) -> bool:
    """Lines of one process as far as the log tells: the same file, and no rank or host that differs."""
    return (a.file == b.file and (a.rank is None or b.rank is None or a.rank == b.rank)
            and (a.host is None or b.host is None or a.host == b.host))


def _collapse(kind: str, evs: list[Event], message: str | None = None) -> dict:
    f = _base(kind, evs[0])
    for e in evs[1:]:
        own = _same_process(evs[0], e)
        for k, v in e.facts.items():
            if f["facts"].get(k) is None and (own or k not in _OWN_FACTS):
                f["facts"][k] = v
    ranks = list(dict.fromkeys(e.rank for e in evs if e.rank is not None))
    if ranks:
        f["facts"].setdefault("ranks", ranks)
    f["count"] = len(evs)
    if message:
        f["message"] = message
    return f


def _describe(f: dict) -> dict:
    """The message and cause of a finding from what its lines say (status numbers, signals, pids)."""
    fa, kind = f["facts"], f["kind"]
    if kind == "ib_completion_error" and "ib_status" in fa:
        f["message"] = (f"InfiniBand completion error: status {fa['ib_status']} ({fa.get('ib_status_name')})"
                        + (f", vendor err {fa['vendor_err']}" if "vendor_err" in fa else "")
                        + (f" from peer {fa['peer']}" if "peer" in fa else "") + (f" on {fa['host']}" if "host" in fa
                                                                                else ""))
        f["cause"] = f"the transport reported: {fa.get('ib_status_meaning')}"
    elif kind == "host_oom_kill":
        f["message"] = (f"the kernel OOM killer killed pid {fa.get('killed_pid', '?')} ({fa.get('process', '?')})"
                        + (f", {fa['anon_rss_kb'] / 2**20:.1f} GiB resident" if isinstance(fa.get("anon_rss_kb"), int)
                           else ""))
    elif kind == "dataloader_worker_killed":
        sig = fa.get("worker_signal")
        f["message"] = "a DataLoader worker died" + (f" (signal: {sig})" if sig else " unexpectedly")
        low = (sig or "").lower()
        if "bus" in low:
            f["cause"] = "a DataLoader worker died of a bus error: shared memory (/dev/shm) ran out"
            f["next_step"] = "give the container a larger /dev/shm (--shm-size / --ipc=host) or fewer workers"
        elif "kill" in low:
            f["cause"] = "a DataLoader worker was killed (SIGKILL): most often the host OOM killer"
            f["next_step"] = "lower num_workers / prefetch_factor and the per-worker memory; check dmesg for oom-kill"
        elif "segmentation" in low:
            f["cause"] = "a DataLoader worker crashed in native code (a bad sample or a decoding library)"
            f["next_step"] = "rerun with num_workers=0 to get the traceback of the failing sample"
    elif kind == "disk_full":
        line = f["message"]
        f["message"] = fa.get("disk_error", "No space left on device") + (
            f" (errno {fa['errno']})" if "errno" in fa else "")
        # torch's shared-memory segments (a DataLoader worker's batch, a tensor sent between processes) are files
        # in /dev/shm named "/torch_<pid>_<n>_<n>": the device that ran out is shared memory, not a disk
        shm = _SHM_FILE.search(line) or _SHM_FILE.search(str(fa.get("path", "")))
        if shm:
            fa["shared_memory"] = shm[0].strip("<>")
            f["message"] += f" writing the shared-memory segment {fa['shared_memory']}"
            f["cause"] = "shared memory (/dev/shm) is full: a DataLoader worker's batch or a tensor shared between " \
                         "processes did not fit"
            f["next_step"] = "give the container a larger /dev/shm (docker --shm-size / --ipc=host, a memory-backed " \
                             "emptyDir on Kubernetes), or fewer DataLoader workers / a smaller prefetch_factor"
            f["runbook"] = "shm-too-small"
    elif kind == "sigkill" and "progress_step" in fa:
        f["message"] = (f"the process was killed (SIGKILL, signal 9) at progress {fa['progress_step']}/"
                        f"{fa.get('progress_total', '?')}: a bare 'Killed' from the shell, most often the host OOM "
                        "killer")
    elif kind == "sigbus":
        f["message"] = "a process died of SIGBUS (signal 7, bus error)"
    elif kind == "connection_reset":
        f["message"] = f"the c10d store connection broke ({fa.get('reset', 'connection reset')})"
    elif kind == "cuda_error" and "cuda_error_cause" in fa:
        f["message"] = f"CUDA error: {fa.get('cuda_error')} ({fa.get('cuda_error_name')})"
        f["cause"] = fa["cuda_error_cause"]
    elif kind == "ecc_xid" and "xid" in fa:
        origin = fa.get("xid_origin")
        xids = fa.get("xids") or [fa["xid"]]
        shown = fa["xid"]
        if len(xids) > 1:  # the worst origin decides: hardware over driver over application
            rank_of = {"hardware": 0, "driver": 1, "application": 2}
            worst = min(xids, key=lambda x: rank_of.get(catalogue.XIDS.get(x, ("", "driver", ""))[1], 1))
            known = catalogue.XIDS.get(worst)
            shown = worst
            if known:
                fa["xid_name"], origin, fa["xid_action"] = known
                fa["xid_origin"] = origin
            fa["xid_origins"] = {str(x): catalogue.XIDS.get(x, ("", "unknown", ""))[1] for x in xids}
        f["message"] = (f"NVIDIA Xid {', '.join(map(str, xids))}" + (f" (worst: {fa['xid_name']}, {origin})" if
                        origin and len(xids) > 1 else f" ({fa['xid_name']}, {origin})" if origin else ""))
        if origin == "application":
            f["cause"] = (f"Xid {', '.join(map(str, xids))} ({fa.get('xid_name')}) usually comes from the application's own kernel "
                          "(an illegal address), not from faulty hardware")
            f["next_step"] = fa.get("xid_action", KINDS[kind][3])
        elif origin:
            f["cause"] = f"Xid {shown} ({fa.get('xid_name')}): a {origin} fault" + (
                f"; the others ({', '.join(str(x) for x in xids if x != shown)}) follow from it or from the job"
                if len(xids) > 1 else "")
            f["next_step"] = fa.get("xid_action", KINDS[kind][3])
    return f


def findings_from_events(events: list[Event], extra: dict) -> list[dict]:
    by: dict[str, list[Event]] = defaultdict(list)
    for e in events:
        by[e.kind].append(e)
    out: list[dict] = []
    t = _timeouts(by.pop("nccl_timeout", []) + by.pop("nccl_timeout_status", []), extra)
    if t:
        out.append(t)
    warns = by.pop("nccl_warn", [])
    last_errors = by.pop("nccl_last_error", [])
    for w in warns:
        cf = w.facts.get("cuda_failure")
        if cf is not None:
            by["cuda_oom" if "out of memory" in cf.lower() else "nccl_unhandled_cuda_error"].append(w)
    if warns:
        f = _collapse("nccl_warn", warns, f"{len(warns)} NCCL WARN line(s); first: {warns[0].facts['warn_text'][:160]}")
        f["facts"]["nccl_warn_lines"] = len(warns)
        locs = sorted({w.facts["local_rank"] for w in warns if "local_rank" in w.facts})
        if locs:
            f["facts"]["ranks_local"] = locs
        for k in ("cuda_failure", "warn_text", "pid", "local_rank"):
            f["facts"].pop(k, None)
        out.append(f)
    rcs = by.pop("nccl_rc", [])
    tests = by.pop("nccl_test_failure", [])
    pids = by.pop("nccl_test_pid", [])
    for kind, evs in _chain_kinds(rcs).items():
        by[kind].extend(evs)
    for kind in NCCL_RC_KINDS:
        evs = sorted(by.pop(kind, []), key=lambda e: (e.file, e.line))
        if not evs:
            continue
        f = _collapse(kind, evs)
        fa = f["facts"]
        if kind == "nccl_unhandled_cuda_error" and any("cuda_failure_code" in e.facts for e in evs):
            fa["cuda_failure_code"] = next(e.facts["cuda_failure_code"] for e in evs if "cuda_failure_code" in e.facts)
        fa["nccl_return_code"] = NCCL_RC_KINDS[kind]
        fa["nccl_return_code_name"] = catalogue.NCCL_RETURN_CODES[NCCL_RC_KINDS[kind]][0]
        for k in ("thread", "site", "from_rank"):
            fa.pop(k, None)
        for e in rcs:
            if "proxy_retcode" in e.facts:
                fa.setdefault("proxy_retcode", e.facts["proxy_retcode"])
        # the peer of this finding's own process (a WARN of another file or host is another process's)
        for w in warns:
            if "peer" in w.facts and _same_process(evs[0], w):
                fa.setdefault("peer", w.facts["peer"])
        if evs[0].host:
            fa["host"] = evs[0].host
        fa.pop("pid", None)
        fa.pop("local_rank", None)
        f["message"] = (f"{kind.replace('_', ' ')} (NCCL return code {fa['nccl_return_code']}, "
                        f"{fa['nccl_return_code_name']}) on {len(evs)} line(s)"
                        + (f"; peer {fa['peer']}" if fa.get("peer") else "")
                        + (f": {fa['net_error']}" if fa.get("net_error") else ""))
        shm = next((w.facts["warn_text"] for w in warns if "/dev/shm" in w.facts.get("warn_text", "")), None)
        if kind == "nccl_system_error" and shm:
            fa["shm_error"] = shm[:200]
            f["cause"] = ("NCCL could not create its shared-memory segment in /dev/shm: /dev/shm is too small "
                          "(a container's default is 64 MiB)")
            f["next_step"] = "give the container a larger /dev/shm (--shm-size / --ipc=host); NCCL_SHM_DISABLE=1 " \
                             "as a stopgap"
        out.append(f)
    if tests or pids:
        if not any(f["kind"].startswith("nccl_") and f["kind"].endswith("error") for f in out):
            out.append(_collapse("nccl_internal_error", tests or pids))
        tgt = next(f for f in out if f["kind"].startswith("nccl_") and f["kind"].endswith("error"))
        if tests:
            tgt["facts"].setdefault("test_failure_site", tests[0].facts["test_failure_site"])
            if tests[0].host:
                tgt["facts"]["host"] = tests[0].host
        if pids:
            tgt["facts"]["failing_pids"] = list(dict.fromkeys(e.facts["pid"] for e in pids))
            tgt["facts"].setdefault("host", pids[0].facts["host"])
    ooms = by.pop("cuda_oom", [])
    if ooms:
        sized = [e for e in ooms if e.facts.get("oom_tried_to_allocate_gib") is not None]
        f = _collapse("cuda_oom", sized + [e for e in ooms if e not in sized])
        if not sized:
            f["facts"]["oom_tried_to_allocate_gib"] = None
        if f["facts"].get("fragmentation"):
            f["cause"] = "the GPU ran out of memory, and much memory is reserved but unallocated (fragmentation)"
            f["next_step"] = "set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, then reduce memory use"
        for k in ("local_rank", "cuda_failure", "warn_text"):
            f["facts"].pop(k, None)
        fa = f["facts"]
        others = fa.get("oom_other_processes") or []
        if len(others) >= 2:
            gpu = fa.get("oom_gpu_index", "?")
            f["cause"] = (f"{len(others) + 1} processes hold memory on GPU {gpu}: several ranks were placed on one GPU "
                          "(a device-selection bug), so none of them has the whole GPU")
            f["next_step"] = ("call torch.cuda.set_device(int(os.environ['LOCAL_RANK'])) before any CUDA work, and "
                              "pass device_ids/to(device) consistently; do not lower the batch size for this")
        elif others and fa.get("oom_process_in_use_gib") is not None:
            used = sum(p["gib"] or 0 for p in others)
            if used > fa["oom_process_in_use_gib"]:
                f["cause"] = (f"another process uses {used:.2f} GiB of this GPU, more than this process "
                              f"({fa['oom_process_in_use_gib']:.2f} GiB)")
                f["next_step"] = "find and stop the other process (nvidia-smi), or give this job its own GPU"
        size = fa.get("oom_tried_to_allocate_gib")
        f["message"] = ("CUDA out of memory" + (f" (tried to allocate {size:.2f} GiB)" if size else "")
                        + (f" on GPU {fa['oom_gpu_index']}" if "oom_gpu_index" in fa else ""))
        out.append(f)
    cf = by.pop("child_failed", [])
    if cf:
        # one summary per node's agent (multi-node): each names the first failure on its own node; the job's
        # first failure is the root cause with the earliest time (then the first in the file)
        cf.sort(key=lambda e: ("first_failing_rank" not in e.facts, e.facts.get("time") or "~", e.file, e.line))
        f = _collapse("child_failed", cf)
        roots = list(dict.fromkeys(e.facts["first_failing_rank"] for e in cf if "first_failing_rank" in e.facts))
        if len(roots) > 1:
            f["facts"]["root_cause_ranks"] = roots
            f["facts"]["failed_ranks"] = sorted({r for e in cf for r in e.facts.get("failed_ranks", ())})
        fa = f["facts"]
        if "first_failing_rank" in fa:
            f["rank"] = fa["first_failing_rank"]
        who = (f"root cause rank {fa['first_failing_rank']}" if "first_failing_rank" in fa else
               f"failed rank(s) {fa['failed_ranks']}" if fa.get("failed_ranks") else "root cause rank ?")
        f["message"] = (f"torchrun ChildFailedError: {who} exit code {fa.get('exitcode', '?')}"
                        + (f" ({fa['signal']})" if fa.get("signal") else ""))
        out.append(f)
        code = fa.get("exitcode")
        sk = signatures.SIGNAL_KIND.get(-code) if isinstance(code, int) else None
        if sk and not by.get(sk):
            by[sk].append(Event(sk, f["file"], f["line"], f"worker exited with {fa.get('signal')}",
                                fa.get("first_failing_rank", fa.get("failed_rank")), fa.get("host"), f["ts"],
                                {k: fa[k] for k in ("exitcode", "signal", "root_cause_pid", "host") if k in fa}))
        for other in fa.pop("other_signals", ()):
            # a worker listed beside the root cause that a signal ended (after the root cause: the launcher's
            # stop escalated to SIGKILL); named once per kind, on its own rank
            sk = signatures.SIGNAL_KIND.get(-other["exitcode"])
            if sk and not by.get(sk):
                sig = signatures.SIGNALS.get(-other["exitcode"])
                facts = {"exitcode": other["exitcode"], "signal": sig, "listed_beside_root_cause": True}
                facts.update({k: other[k] for k in ("pid", "host", "time") if k in other})
                by[sk].append(Event(sk, f["file"], f["line"], f"worker exited with {sig}", other.get("rank"),
                                    other.get("host"), f["ts"], facts))
    ovs = by.pop("overflow", [])
    if ovs:
        f = _collapse("grad_overflow", ovs)
        fa = f["facts"]
        fa["overflow_messages"] = len(ovs)
        att = [e.facts["attempted_loss_scale"] for e in ovs if "attempted_loss_scale" in e.facts]
        new = [e.facts["new_loss_scale"] for e in ovs if "new_loss_scale" in e.facts]
        if att:
            fa["loss_scale_first"] = att[0]
        if new:
            fa["loss_scale_last"] = new[-1]
            fa["loss_scale_min"] = min(new)
        fa["hysteresis_message"] = any(e.facts.get("hysteresis") for e in ovs)
        for k in ("attempted_loss_scale", "new_loss_scale", "hysteresis"):
            fa.pop(k, None)
        f["message"] = f"{len(ovs)} fp16 overflow message(s); loss scale {fa.get('loss_scale_first', '?')} -> " \
                       f"{fa.get('loss_scale_last', '?')}"
        if any(e.facts.get("loss_scale_at_minimum") for e in ovs):
            # the scaler could not go lower and ended the run: the overflow killed the job
            fa["loss_scale_at_minimum"] = True
            f["severity"] = ERROR
            f["message"] += "; the loss scale reached its minimum and the run was ended"
        elif any(e.facts.get("overflow_ended_run") for e in ovs):
            fa["overflow_ended_run"] = True  # the trainer's own overflow monitor stopped the run
            f["severity"] = ERROR
            f["message"] += "; the trainer ended the run after overflow after overflow"
        elif pinned_overflows(ovs):
            # "Attempted loss scale: 1, reducing to 1" again and again: the scaler is at its floor and every
            # step is skipped; the job runs on without training (a dead run, not a warning)
            fa["loss_scale_pinned"] = True
            f["severity"] = ERROR
            f["message"] += (f"; the loss scale is pinned at its minimum ({new[-1]:g}): every step is skipped, "
                             "the model no longer trains")
        out.append(f)
    exc = by.pop("exception", [])
    cancels = by.pop("slurm_cancel_plain", [])
    worker_failed = by.pop("worker_failed", [])
    stops = by.pop("worker_stop", [])
    aborts = by.pop("nccl_async_abort", [])
    task_exits = sorted(by.pop("srun_task_exit", []), key=lambda e: (e.file, e.line))
    # the launcher's "SignalException: Process N got signal: 15" is torchrun told to stop from outside: never an
    # error of the training script; when Slurm cancelled the step it is the cancel's echo
    stopped = [e for e in exc if e.facts.get("exception_type", "").endswith("SignalException")
               and _STOP_SIGNAL.search(e.facts.get("exception_message", ""))]
    exc = [e for e in exc if e not in stopped]
    by.pop("traceback", None)
    for kind, evs in by.items():
        if kind in KINDS and evs:
            f = _collapse(kind, sorted(evs, key=lambda e: e.line))
            xids = list(dict.fromkeys(e.facts["xid"] for e in evs if "xid" in e.facts))
            if kind == "ecc_xid" and xids:
                f["facts"]["xids"] = xids
            if kind in _WATCHDOG_KINDS:
                first_rank = _first_reporter_of(evs)  # the ranks' own watchdogs: the one that spoke first
                if first_rank is not None:
                    f["facts"].setdefault("first_reporting_rank", first_rank)
            out.append(_describe(f))
    for f in out:
        if f["kind"] in _SUSPECT_KINDS and f["kind"] != "nccl_timeout" and "suspect_ranks" not in f["facts"]:
            # gloo and other backends' timeouts, a gloo peer gone: the ranks that reported it, against every rank's
            # lines
            reporting = list(f["facts"].get("ranks") or ([f["rank"]] if f["rank"] is not None else []))
            what = "a lost peer" if f["kind"] == "peer_lost" else "the timeout"
            if reporting and _name_suspects(f, reporting, extra, what=what):
                f["facts"].setdefault("first_reporting_rank", reporting[0])
        if f["kind"] in ("rendezvous_address_in_use", "rendezvous_timeout"):
            for k in ("rdzv_backend", "launcher_cmd"):
                if k in extra:
                    f["facts"].setdefault(k, extra[k])
    errors = [f for f in out if f["severity"] == ERROR]
    if exc:
        # one exception per rank (its first); a peer's "connection reset" is an echo of the rank that died
        by_rank: dict = {}
        for e in exc:
            by_rank.setdefault(e.rank, e)
        per_rank = {str(r): f"{e.facts['exception_type']}: {e.facts['exception_message']}"[:200]
                    for r, e in by_rank.items() if r is not None}
        causes = [e for e in by_rank.values() if not _ECHO_EXC.search(e.facts.get("exception_message", ""))]
        last = exc[-1] if len(by_rank) <= 1 else min(causes or list(by_rank.values()), key=lambda e: (e.file, e.line))
        # a gloo peer that went away explains nothing by itself: the exception of the rank that went is the cause
        if not [f for f in errors if f["kind"] != "peer_lost"] and \
                (not errors or not _ECHO_EXC.search(last.facts.get("exception_message", ""))):
            f = _base("python_exception", last)
            if len(per_rank) > 1:
                f["facts"]["exceptions_by_rank"] = per_rank
            f["message"] = f"{last.facts['exception_type']}: {last.facts['exception_message']}"[:300]
            out.append(f)
        else:
            # each rank's last exception tells the error it reports: of the same rank (or none known), at or
            # before it
            last_of: dict = {}
            for e in exc:
                last_of[e.rank] = e
            for ex in sorted(last_of.values(), key=lambda e: (e.file, e.line)):
                near = [f for f in errors if f.get("file") == ex.file and (f.get("line") or 0) <= ex.line
                        and (f.get("rank") is None or ex.rank is None or f.get("rank") == ex.rank)]
                tgt = max(near, key=lambda f: f.get("line") or 0) if near else errors[0]
                if not near and tgt.get("file") not in (None, ex.file):
                    # another process's file: its error is not this exception's, unless it lists this rank
                    if not any(ex.rank is not None and ex.rank in f["facts"].get("ranks", ()) for f in errors) \
                            and not any(f.get("file") == ex.file for f in errors) \
                            and not _ECHO_EXC.search(ex.facts.get("exception_message", "")):
                        own = _base("python_exception", ex)  # the only error of its own file: its failure
                        own["message"] = f"{ex.facts['exception_type']}: {ex.facts['exception_message']}"[:300]
                        out.append(own)
                    continue
                if tgt.get("rank") is None or ex.rank is None or tgt.get("rank") == ex.rank:
                    tgt["facts"].setdefault("exception_type", ex.facts["exception_type"])
                    tgt["facts"].setdefault("exception_message", ex.facts["exception_message"])
                    if "failing_call" in ex.facts:
                        tgt["facts"].setdefault("failing_call", ex.facts["failing_call"])
            if len(per_rank) > 1:
                errors[0]["facts"].setdefault("exceptions_by_rank", per_rank)
    if worker_failed and not any(f["severity"] == ERROR for f in out):
        # the launcher says a worker exited with an error code and nothing else in the excerpt explains it (the
        # worker's own error is above the excerpt, or went to another file): the job died, report the exit
        f = _collapse("child_failed", worker_failed)
        fa = f["facts"]
        f["message"] = (f"a worker (local rank {fa.get('failed_local_rank', '?')}) exited with code "
                        f"{fa.get('exitcode', '?')} and the launcher stopped the job; its own error is not in "
                        "the excerpt")
        out.append(f)
    if task_exits:
        # srun kills the step's other tasks after one exits with an error: those kills follow from it
        first = task_exits[0]
        for f in out:
            if f["kind"] == "sigkill" and f["file"] == first.file and (f["line"] or 0) > first.line:
                f["facts"]["first_failed_task"] = first.facts["tasks"]
                f["facts"]["first_failed_task_exitcode"] = first.facts["exitcode"]
                f["cause"] = (f"srun killed the step's remaining tasks after task {first.facts['tasks']} exited with "
                              f"code {first.facts['exitcode']}: that task's own error is the cause")
                f["next_step"] = f"read the log of srun task {first.facts['tasks']} (its first error)"
    if aborts and not any(f["severity"] == ERROR for f in out):
        # the watchdog is taking the process down, and the excerpt lacks the line that says why: most often the
        # collective timeout that precedes this notice (an NCCL error would name itself)
        f = _collapse("nccl_timeout", aborts)
        f["message"] = ("the NCCL watchdog is taking the process down: 'Some NCCL operations have failed or timed "
                        "out' (the timeout or error line itself is not in the excerpt)")
        out.append(f)
    if stopped and not cancels:
        f = _base("launcher_stopped", stopped[0])
        sig = _STOP_SIGNAL.search(stopped[0].facts.get("exception_message", ""))
        f["facts"]["signal"] = int(sig[1])
        f["message"] = (f"the launcher received signal {sig[1]} from outside and stopped the workers: a time limit, "
                        "a kill or the scheduler ended the job")
        for k in ("exception_type", "exception_message", "has_traceback", "failing_call", "traceback_line"):
            f["facts"].pop(k, None)
        out.append(f)  # the agent's SIGTERM to its workers below is this stop's echo
    if stops and not cancels and not any(f["severity"] == ERROR for f in out):
        # the agent sends the survivors SIGTERM only when a worker failed (or it was stopped itself): the job is
        # dying even though the failure is not in the excerpt
        f = _collapse("child_failed", stops)
        pids = list(dict.fromkeys(e.facts["stopped_pid"] for e in stops))
        f["facts"]["stopped_pids"] = pids
        f["facts"].pop("stopped_pid", None)
        f["message"] = (f"torchrun is stopping {len(pids)} worker(s) with {stops[0].facts['stop_signal']}: a worker "
                        "failed (or the agent was told to stop); the failure itself is not in the excerpt")
        out.append(f)
    if cancels and not any(f["severity"] == ERROR for f in out):
        # Slurm cancelled the job and nothing else failed: scancel (or a reason the excerpt lacks); after
        # another error the same line is srun ending the step, an echo of that error
        f = _base("slurm_cancelled", cancels[0])
        f["message"] = f"Slurm cancelled job {f['facts'].get('slurm_job_id')} at {f['facts'].get('cancelled_at')}"
        f["cause"] = "the job was cancelled (scancel by a user or an administrator) before it finished"
        out.append(f)
    _attach_last_errors(out, last_errors)
    return out


def _attach_last_errors(findings: list[dict], lasts: list[Event]) -> None:
    """Each rank's NCCL "Last error:" (its own words: a socket call, an address) goes to the error it
    explains: the nearest error finding above it in its own file and of its rank, else one that
    lists its rank. The finding's own rank and file give ``last_error`` and ``peer``; several ranks'
    differing errors are kept per rank."""
    errors = [f for f in findings if f["severity"] == ERROR]
    for le in lasts:
        def here(f: dict) -> bool:
            return (f.get("file") == le.file and (f.get("line") or 0) <= le.line
                    and (f.get("rank") is None or le.rank is None or f.get("rank") == le.rank))
        near = [f for f in errors if here(f)]
        tgt = max(near, key=lambda f: (f["kind"].startswith(("nccl_", "ib_")), f.get("line") or 0)) if near else \
            next((f for f in errors if le.rank is not None and le.rank in f["facts"].get("ranks", ())), None)
        if tgt is None:
            continue
        fa = tgt["facts"]
        if le.rank is not None:
            fa.setdefault("last_error_by_rank", {})[str(le.rank)] = le.facts["last_error"]
            if "peer" in le.facts:
                fa.setdefault("peer_by_rank", {})[str(le.rank)] = le.facts["peer"]
        if here(tgt) and "last_error" not in fa:
            fa["last_error"] = le.facts["last_error"]
            if "peer" in le.facts:
                fa["peer"] = le.facts["peer"]  # its own words win over a WARN line's
    for f in errors:  # one rank's error: its own fields say it already
        for k in ("last_error_by_rank", "peer_by_rank"):
            if len(f["facts"].get(k, ())) == 1 and "last_error" in f["facts"]:
                del f["facts"][k]


#: what an elastic agent (torchrun, accelerate launch) prints of its workers (these kinds, or a worker's exit
#: by local rank): with an agent per node under srun, srun's tasks are the agents and a task number is a
#: node's, not a rank
_AGENT_KINDS = frozenset({"child_failed", "worker_failed", "worker_stop"})


def _srun_task_ranks(findings: list[dict], an) -> None:
    """srun reports a task's end by its task number (``srun: error: node-3: task 1: Killed``); when srun
    starts the trainer's processes itself (one task per rank: no elastic agent in the log), the task
    number is the global rank (SLURM_PROCID), so the finding belongs to that rank."""
    if "launcher_cmd" in an.extra or any(e.kind in _AGENT_KINDS or "failed_local_rank" in e.facts
                                         for e in an.events):
        return
    for f in findings:
        tasks = str(f["facts"].get("tasks", ""))
        if f["rank"] is None and tasks.isdigit():
            f["rank"] = int(tasks)
            f["facts"].setdefault("rank_from", "srun task number (SLURM_PROCID)")


def _raised_before_the_root(cf: dict, events: list[Event], findings: list[dict]) -> int | None:
    """torchrun's Root Cause is the worker that *exited* first. A rank that only lost its peer (gloo's "Connection
    closed by peer", then an abort on its way out) can exit before the peer that raised finishes: when the Root
    Cause rank's own exception is such an echo and exactly one other rank raised an exception of its own, that
    rank failed first. Its exception becomes a finding, the Root Cause rank's signal a consequence; the
    summary's Root Cause stays in the child_failed finding."""
    first: dict[int, Event] = {}
    for e in events:
        if e.kind == "exception" and isinstance(e.rank, int):
            first.setdefault(e.rank, e)
    own = first.get(cf["rank"])
    if own is None or not _ECHO_EXC.search(str(own.facts.get("exception_message", ""))):
        return None
    others = [r for r, e in first.items()
              if r != cf["rank"] and not _ECHO_EXC.search(str(e.facts.get("exception_message", "")))]
    if others:
        if len(others) != 1:
            return None
        culprit, how = others[0], " raised first"
    else:
        # no other rank raised: a rank of the summary that printed no exception died by its own signal (an
        # abort, a kill) and the Root Cause rank, aborting on its way out, only exited a moment before it
        silent = [r for r in cf["facts"].get("failed_ranks", []) if r != cf["rank"] and r not in first]
        if len(silent) != 1:
            return None
        culprit, how = silent[0], ", which raised nothing, died of its own"
    cf["facts"]["root_cause_only_lost_its_peer"] = True
    cf["cause"] = (f"torchrun's Root Cause (rank {cf['rank']}, the first to exit) only reports that its peer went "
                   f"away; rank {culprit}{how}")
    for f in findings:
        if f["rank"] == cf["rank"] and f["kind"] in signatures.SIGNAL_KIND.values():
            f["facts"]["listed_beside_root_cause"] = True  # the lost peer's abort on its way out
    if culprit in first and not any(f["rank"] == culprit and f["severity"] == ERROR for f in findings):
        ex = first[culprit]
        f = _base("python_exception", ex)
        f["message"] = f"{ex.facts['exception_type']}: {ex.facts['exception_message']}"[:300]
        findings.append(f)
    return culprit


def _secondary(f: dict) -> bool:
    """A finding that follows another failure (after the rank's own timeout, or a worker the launcher's stop
    ended beside the root cause): it ranks after the failures that are not."""
    return bool(f["facts"].get("after_own_timeout") or f["facts"].get("listed_beside_root_cause"))


def _mark_consequences(findings: list[dict], events: list[Event]) -> None:
    """An error that a rank reports after its own collective timed out or its communicator was aborted is a
    consequence of that hang (the process is being taken down, buffers may be corrupt: an absurd allocation, an
    illegal access), not its cause: mark it so that it ranks after the hang. An error on a rank that never
    reported the hang, however late in the file, stays a candidate root cause (the rank that died first)."""
    first_hang: dict = {}
    for e in events:
        if e.kind in _HANG_KINDS:
            key = (e.file, e.rank)
            if key not in first_hang or e.line < first_hang[key]:
                first_hang[key] = e.line
    if not first_hang:
        return
    for f in findings:
        if f["severity"] != ERROR or f["kind"] in _VICTIM_KINDS or f["kind"] in ("child_failed", "sigabrt"):
            continue
        hang = first_hang.get((f["file"], f["rank"]))
        if hang is not None and f["line"] is not None and f["line"] > hang:
            f["facts"]["after_own_timeout"] = True
            f["cause"] = (f"{f['cause']}; reported after this rank's own NCCL timeout/abort, so most likely a "
                          "consequence of the hang, not its cause" if f.get("cause") else
                          "reported after this rank's own NCCL timeout/abort: most likely a consequence of the hang")


def _metrics(an, ser, rank) -> dict:
    from llmdiag.logs.series import RankMetrics

    t = an.table
    m: dict = {"num_steps_with_loss": an.unique_steps.get(rank, 0), "num_lines_with_loss": an.lines_with_loss,
               "ranks_with_progress": [r for r in t.ranks() if r is not None]}
    m.update((ser.metrics if ser is not None else RankMetrics()).summary())
    if an.optimizer_step_lines:
        m["optimizer_step_lines"] = an.optimizer_step_lines
    if an.evals:
        e = an.evals[-1]
        m.update(eval_step=e["step"], eval_train_loss=e["train_loss"], eval_val_loss=e["val_loss"])
    for k in ("train_iters", "global_batch_size"):
        if k in an.extra:
            m[k] = an.extra[k]
    if an.epochs.placed:  # the records printed an epoch, and a Trainer summary placed them on steps (epochs.py)
        last = an.epochs.placed[-1]
        m["steps_per_epoch"] = round(last["steps_per_epoch"], 6)
        m["steps_from_epoch"] = "inferred" if any(p["inferred"] for p in an.epochs.placed) else "exact"
    return m


def stream_progress(last_key: dict, files: list[str], events: list[Event], world: int | None = None) -> dict[int, int]:
    """rank -> the last step (else iteration) that rank's own progress lines reached.

    ``last_key`` maps (file id, rank or NONE) to a stream's last step (``StepStore.last_key``). A file
    whose progress lines name no rank is one rank's own log when its other lines name exactly one
    (a watchdog's ``[Rank 3]``): its progress is that rank's. One such file left that names no rank
    at all (the silent straggler says nothing) is the one rank still missing from 0..N-1, N the world
    size, else the number of ranks' files. A rank in several files keeps the furthest step.
    """
    from llmdiag.logs.columns import NONE

    named: dict[str, set] = defaultdict(set)
    for e in events:
        if e.rank is not None:
            named[e.file].add(e.rank)
    out: dict[int, int] = {}
    ranked_files = {files[fid] for fid, r in last_key if r != NONE}
    anon: dict[str, int] = {}
    for (fid, r), last in last_key.items():
        f = files[fid]
        if r == NONE:
            if f in ranked_files:
                continue  # rank-less rows beside ranked ones: the launcher's, not a rank's
            if len(named[f]) != 1:
                anon[f] = last
                continue
            r = next(iter(named[f]))
        out[r] = max(out.get(r, last), last)
    if len(anon) == 1 and out:
        upto = world if isinstance(world, int) and world > 0 else len(out) + 1
        missing = [r for r in range(upto) if r not in out]
        if len(missing) == 1:
            out[missing[0]] = next(iter(anon.values()))
    return out


def _recovered_by_restart(an, findings: list[dict]) -> None:
    """torchrun restarted its workers after a failure (``--max-restarts``) and training went on: its agent logged
    ``failed (exitcode: N)`` and gave no ChildFailedError summary, and progress records follow that line in the
    same file. The failures before it were survived: each becomes a warning that says so (the job did not die
    of them), a later failure stays an error."""
    if any(e.kind == "child_failed" for e in an.events):
        return
    fails: dict[str, int] = {}
    for e in an.events:
        if e.kind == "worker_failed":
            fails[e.file] = max(fails.get(e.file, 0), e.line)
    for file, line in fails.items():
        progress = an.last_progress.get(file)
        if progress is None or progress[0] <= line:
            continue
        for f in findings:
            if f["severity"] == ERROR and f.get("file") == file and (f.get("line") or 0) < line:
                f["severity"] = WARNING
                f["facts"]["recovered_by_restart"] = True
                f["message"] += f"; the launcher restarted the workers and training went on (to line {progress[0]})"


#: a rank whose batches take this long to load (ms, median of its latest records) and this many times longer
#: than every other rank's is the one the others wait for
DATA_STRAGGLER_MS = 100.0
DATA_STRAGGLER_RATIO = 5.0


def data_straggler(t) -> tuple[int, str] | None:
    """The rank whose own data-loading time stands out among several ranks' (``data_time`` fields), and why: in
    data-parallel training every rank's step waits for the slowest at the gradient all-reduce, so the step
    times rise together and only the straggler's own part of the step shows where the time goes."""
    from llmdiag.logs.columns import NONE

    per = {int(r): statistics.median(list(ser.data_times)[-16:]) for r, ser in t.series.items()
           if r != NONE and len(ser.data_times) >= 3}
    if len(per) < 2:
        return None
    top = max(per, key=per.get)
    rest = max(v for r, v in per.items() if r != top)
    if per[top] < DATA_STRAGGLER_MS or per[top] < DATA_STRAGGLER_RATIO * max(rest, 1.0):
        return None
    return top, (f"rank {top}'s batches take {per[top]:.0f} ms to load against at most {rest:.0f} ms on the "
                 "other ranks: they wait for it at every step")


def _earliest_nan(t, primary):
    """The NaN detector of the rank whose loss or grad norm went NaN first (several ranks' records: one rank's
    NaN reaches the others a step later, through the gradient all-reduce), else the primary rank's."""
    def first(d) -> tuple | None:  # the loss's first NaN, then the grad norm's
        if d.nan_first is None and d.gn_first is None:
            return None
        return tuple((a["x_name"] != "step", a["x"]) if a is not None else (True, math.inf)
                     for a in (d.nan_first, d.gn_first))

    best, key = primary, first(primary) if primary is not None else None
    for d in (s.nan for s in t.series.values()):
        k = first(d)
        if k is not None and (key is None or k < key):
            best, key = d, k
    return best


def _first_reporter(timeout: dict | None, findings: list[dict]) -> int | None:
    """The rank that reported a collective timeout first (its own report), else None."""
    if timeout is not None:
        # None where the reports are in several files without times: which came first is not known
        return timeout["facts"].get("first_reporting_rank")
    return next((f["rank"] for f in findings if f["kind"] in _TIMEOUT_KINDS and f["rank"] is not None), None)


def build_document(an, stats, settings, elapsed_s: float = 0.0) -> dict:
    from llmdiag.logs import prefixes

    an.flush()
    t = an.table
    rank = t.primary_rank()
    ser = t.series_of(rank)
    seen = {e.rank for e in an.events if e.rank is not None} | {r for r in t.ranks() if r is not None}
    # a launcher's failure summary lists its own workers, whose output shares the launcher's console
    # (torchrun's default): a listed rank that printed nothing is covered by the log all the same
    seen |= {r for e in an.events if e.kind == "child_failed" for r in e.facts.get("failed_ranks", ())
             if isinstance(r, int)}
    progress = stream_progress(t.last_key, t.files, an.events, an.extra.get("world_size"))
    seen |= set(progress)
    # a rank's own lines, even ones no rule reads (a per-rank file with any line, a prefixed line): the log covers it
    seen |= {r for r in an.ranks_seen if isinstance(r, int)}
    seen |= {r for f in stats.files if stats.file_lines.get(f) and isinstance(r := an.rank_of_file(f), int)}
    findings = findings_from_events(an.events, {**an.extra, "ranks_seen": seen, "rank_progress": progress})
    roots_by_pid = {f["facts"]["root_cause_pid"]: f["rank"] for f in findings
                    if f["kind"] == "child_failed" and f["rank"] is not None and "root_cause_pid" in f["facts"]}
    for f in findings:
        # the agent's "failed (exitcode: -9) local_rank: 1 (pid: N)" names a local rank; the summary's Root Cause
        # with the same pid gives its global rank
        if f["rank"] is None and f["facts"].get("pid") in roots_by_pid and f["kind"] in signatures.SIGNAL_KIND.values():
            f["rank"] = roots_by_pid[f["facts"]["pid"]]
    if any(f["severity"] == ERROR and f["kind"] != "peer_lost" and not _only_lost_peers(f) for f in findings):
        # a gloo peer that went away is the echo of the failure the log already names (the signal, the peer's own
        # exception): named on its own only when nothing else explains the death; the launcher's summary does
        # not explain it when every rank it lists failed only because its peer went away (a rank that returned
        # early and cleanly is in no summary: torchrun lists the ranks that exited non-zero)
        findings = [f for f in findings if f["kind"] != "peer_lost"]
    _recovered_by_restart(an, findings)
    anoms: list[dict] = []
    nan = t.all_nan if rank is None else (ser.nan if ser is not None else None)
    if rank is not None and len(t.series) > 1:
        nan = _earliest_nan(t, nan)
    if nan is not None:
        anoms += nan.result()
        if an.extra.get("objective") == "reinforcement":
            # a policy-gradient objective (GRPO: β·KL plus advantages that average to zero) prints 0.0 as its
            # normal value: an exactly-zero loss says nothing there (a NaN still does)
            anoms = [f for f in anoms if f["kind"] != "zero_loss"]
    if ser is not None:
        spikes = ser.spikes.result()
        anoms += spikes + ser.grad.result({f["line"] for f in spikes}) + ser.drop.result()
        if not any(f["kind"] == "grad_overflow" for f in findings):
            c = ser.scale.result()
            if c:
                anoms.append(c)
    errors = [f for f in findings if KINDS[f["kind"]][0] == ERROR]
    if not errors and ser is not None:
        last_ts = None
        noise_after = False
        for file, (line, _ts) in an.last_progress.items():
            tail = stats.last_line.get(file)
            if tail:
                last_ts = prefixes.split_prefix(tail).ts or prefixes.find_timestamp(tail)
                noise_after = True
        hang = ser.stall.result(settings, last_ts, noise_after)
        if not hang:
            last_file = t.files[ser.last_file]
            tracker = ser.tails[ser.last_file]
            after = stats.file_lines.get(last_file, 0) - ser.last_line
            if not tracker.any_ts:  # with timestamps, time decides
                hang = tracker.result(after)
        anoms += hang
    for a in anoms:
        f = _base(a["kind"])
        f.update({k: a[k] for k in ("rank", "step", "line", "file", "message", "facts", "ts")})
        if a.get("severity"):
            f["severity"] = a["severity"]
        findings.append(f)
    _precision_advice(findings, an.extra.get("dtype"), ser)
    for f in findings:
        f["facts"] = {k: _clean(v) for k, v in f["facts"].items()}
    findings.sort(key=lambda f: (f["ts"] is None, f["ts"] or 0, f["file"] or "", f["line"] or 0))
    metrics = {k: _clean(v) for k, v in _metrics(an, ser, rank).items()}
    _mark_consequences(findings, an.events)
    _srun_task_ranks(findings, an)
    cf = next((f for f in findings if f["kind"] == "child_failed" and f["rank"] is not None), None)
    culprit = _raised_before_the_root(cf, an.events, findings) if cf is not None else None
    roots = sorted(findings, key=lambda f: (_secondary(f), PRIORITY.index(f["kind"])))
    root_causes = [{"kind": f["kind"], "rank": f["rank"], "line": f["line"], "file": f["file"],
                    "summary": f["message"], "cause": f["cause"], "runbook": f["runbook"]} for f in roots[:5]]
    # the rank that failed first: the Root Cause of a torchrun summary, else the first error on a known rank
    # that is not a victim's report (every rank reports a timeout or an abort; the first to do so is
    # only the first to report)
    first_fail = cf or next((f for f in findings if f["severity"] == ERROR and f["rank"] is not None
              and f["kind"] not in _VICTIM_KINDS and not _secondary(f)), None)
    first_rank = first_fail["rank"] if first_fail else None
    if culprit is not None:
        first_rank = culprit
    # the collective timeout whose suspects the document names: NCCL's, else another backend's
    timeout = next((f for f in findings if f["kind"] == "nccl_timeout"), None) or \
        next((f for f in findings if f["kind"] in _SUSPECT_KINDS and f["facts"].get("suspect_ranks")), None)
    status = "fail" if any(f["severity"] == ERROR for f in findings) else "warn" if findings else "pass"
    facts: dict = dict(metrics)
    for k in ("torch_version", "dtype", "nccl_version"):
        if k in an.extra:
            facts.setdefault(k, an.extra[k])
    for f in roots:
        for k, v in f["facts"].items():
            facts.setdefault(k, v)
    first_reporter = _first_reporter(timeout, findings)
    if first_reporter is not None:  # the collective timeout's first reporter, not another root's (a heartbeat)
        facts["first_reporting_rank"] = first_reporter
    # the document's rank answers are facts too, whichever finding gave them
    if first_rank is not None:
        facts["first_failing_rank"] = first_rank
    if timeout is not None and timeout["facts"].get("suspect_ranks"):
        facts["suspect_ranks"] = timeout["facts"]["suspect_ranks"]
    # the curve's peak, where no spike named its own
    if metrics.get("loss_max") is not None and "max_loss" not in facts:
        facts["max_loss"] = metrics["loss_max"]
        if metrics.get("loss_max_step") is not None:
            facts.setdefault("max_loss_step", metrics["loss_max_step"])
    warnings = input_warnings(stats, len(t), an.unplaced) + an.epochs.warnings(t.files)
    if status == "pass" and any(w["kind"] in _UNVOUCHED for w in warnings):
        status = "warn"  # nothing was read to vouch for the run (inferred steps are a caveat, not a doubt)
    steps = t.head  # already JSON-clean (table.head_rows)
    suspects = timeout["facts"].get("suspect_ranks", []) if timeout else []
    suspect_reason = timeout["facts"].get("suspect_reason") if timeout else None
    slow_kinds = ("throughput_drop", "hang_no_progress", "launcher_stopped") + _TIMEOUT_KINDS
    slow = data_straggler(t) if not suspects and any(f["kind"] in slow_kinds for f in findings) else None
    if slow is not None:
        # no rank stopped; one rank's own batch loading carries the slow steps every rank shows
        suspects, suspect_reason = [slow[0]], slow[1]
        facts["suspect_ranks"] = suspects
        for f in findings:
            if f["kind"] in slow_kinds:
                f["facts"].setdefault("straggler_rank", slow[0])
                f["facts"].setdefault("straggler_reason", slow[1])
    return {
        "schema_version": SCHEMA_VERSION, "command": "analyze-log", "kind": "log-analysis", "status": status,
        "files": stats.files, "findings": findings, "metrics": metrics, "root_causes": root_causes,
        "first_failing_rank": first_rank,
        "first_reporting_rank": first_reporter,
        "suspect_ranks": suspects,
        "suspect_reason": suspect_reason,
        "ranks_not_in_excerpt": timeout["facts"].get("ranks_not_in_excerpt", []) if timeout else [],
        "facts": facts, "steps": steps, "steps_total": len(t), "warnings": warnings,
        "read": {"bytes": stats.bytes_read, "lines": stats.lines, "candidate_lines": stats.candidate_lines,
                 "problems": stats.problems, "elapsed_s": round(elapsed_s, 3)},
    }


#: overflow messages in a row at the same scale that say the scaler is at its floor
PINNED_OVERFLOWS = 3


def pinned_overflows(ovs: list[Event]) -> bool:
    """The last ``PINNED_OVERFLOWS`` overflow messages could not lower the scale (attempted == new)."""
    tail = [e.facts for e in ovs[-PINNED_OVERFLOWS:]]
    return len(tail) == PINNED_OVERFLOWS and all(
        "new_loss_scale" in t and t.get("attempted_loss_scale", t["new_loss_scale"]) == t["new_loss_scale"]
        for t in tail) and len({t["new_loss_scale"] for t in tail}) == 1


#: records that no reader could place, before a log without a curve says so
UNPLACED_MIN = 3


#: warnings that keep a run without findings from passing: the input held nothing, or its records were not read
_UNVOUCHED = ("empty_input", "unread_progress")


def input_warnings(stats, steps: int, unplaced: dict) -> list[dict]:
    """What keeps the document from vouching for the run although nothing failed: an input without a line,
    or a log whose progress records are in a syntax no reader placed (a PASS would only say "not read")."""
    out = []
    if stats.files and stats.lines == 0 and stats.bytes_read == 0:
        out.append({"kind": "empty_input", "message": "the input is empty: there is nothing to analyse "
                    "(was the job's output redirected elsewhere, or the file not yet written?)"})
    if unplaced["count"] >= UNPLACED_MIN and unplaced["count"] > steps:
        ex = unplaced["example"]
        out.append({"kind": "unread_progress", "count": unplaced["count"], **ex,
                    "message": f"{unplaced['count']} line(s) print a loss among numeric fields in a syntax the "
                    f"progress readers could not place (first: {ex['file']}:{ex['line']}); the training curve "
                    "was not checked"})
    return out


def precision_of(dtype: str | None, overflowed: bool, scale) -> str | None:
    """The run's precision from the evidence: a printed dtype; else fp16 when the loss scaler overflowed or its
    scale moved; a scale that stays at 1 is what Megatron and DeepSpeed print without a scaler (bf16 or fp32:
    ``"unscaled"``); None when nothing says."""
    if dtype:
        return dtype
    if overflowed:
        return "float16"
    if scale is None or scale.first is None:
        return None
    if scale.top == scale.low == 1.0 and scale.skip_first is None:
        return "unscaled"
    return "float16"


def _precision_advice(findings: list[dict], dtype: str | None, ser) -> None:
    """NaN advice that fits the run's precision: a loss scaler only exists with fp16."""
    overflowed = any(f["kind"] == "grad_overflow" for f in findings)
    precision = precision_of(dtype, overflowed, ser.scale if ser is not None else None)
    for f in findings:
        if f["kind"] not in ("nan_loss", "nan_grad_norm"):
            continue
        if precision and precision != "unscaled":
            f["facts"].setdefault("dtype", precision)
        if precision in ("bfloat16", "unscaled"):
            run = ("the run is bf16, which has fp32's range" if precision == "bfloat16" else
                   "the run has no loss scaling (its loss scale stays at 1: bf16 or fp32)")
            f["cause"] = (KINDS[f["kind"]][2] + f"; {run}: not a loss-scaling overflow but divergence (learning "
                          "rate, a bad batch) or an inf/NaN produced by an op")
            f["next_step"] = ("restart from the last good checkpoint with a lower LR or tighter clipping; find the "
                              "batch at that step; enable anomaly detection on it")
        elif precision == "float16":
            f["cause"] = KINDS[f["kind"]][2] + "; the run is fp16: most likely an overflow the loss scaler did not catch"
            f["next_step"] = ("check the loss scaler (initial scale, hysteresis, min scale) or switch to bf16; lower "
                              "the LR if the scale keeps falling")


def join_flight_recorder(doc: dict, fr: dict, directory: str) -> None:
    """Put a Flight Recorder analysis (llmdiag.logs.flight) into the log's document: its suspects become
    the timeout's suspects (the dumps see every rank, the log excerpt may not)."""
    fr = dict(fr, dir=directory)
    doc["flight_recorder"] = fr
    if not fr.get("suspect_ranks"):
        return
    note = "Flight Recorder: " + fr["reason"] + (
        f" (partial: no dump from rank(s) {fr['ranks_missing']})" if fr.get("partial") and fr["ranks_missing"]
        != fr["suspect_ranks"] else "")
    target = next((f for f in doc["findings"] if f["kind"] in ("nccl_timeout", "gloo_timeout", "hang_no_progress")),
                  None)
    if target is None:
        target = _base("collective_hang", message=note, file=directory)
        doc["findings"].append(target)
        doc["status"] = "fail"
    else:
        target["message"] += "; " + note
    target["facts"]["suspect_ranks"] = fr["suspect_ranks"]
    target["facts"]["suspect_reason"] = note
    target["cause"] = note
    target["next_step"] = f"check rank {fr['suspect_ranks'][0]}: its stack and code path at that collective"
    doc["suspect_ranks"], doc["suspect_reason"] = fr["suspect_ranks"], note
    doc["facts"].setdefault("suspect_ranks", fr["suspect_ranks"])
    roots = sorted(doc["findings"], key=lambda f: PRIORITY.index(f["kind"]))
    doc["root_causes"] = [{"kind": f["kind"], "rank": f["rank"], "line": f["line"], "file": f["file"],
                           "summary": f["message"], "cause": f["cause"], "runbook": f["runbook"]} for f in roots[:5]]


def _clean(v):
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    if isinstance(v, list):
        return [_clean(x) for x in v]
    return v
