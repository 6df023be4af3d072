"""Events and anomalies → findings, one per root event, with cause, next step and runbook;
then the ``log-analysis`` document with metrics and ranked root-cause candidates.

Echoes collapse: every rank's watchdog message of the same hang is one ``nccl_timeout``
finding whose facts list the reporting ranks and each rank's SeqNum; the rank that is
behind (lowest last-completed / SeqNum) or absent is the likely culprit.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict

from llmdiag.logs.signatures import Event

ERROR, WARNING = "error", "warning"
#: kind -> (severity, runbook, probable cause, next step)
KINDS: dict[str, tuple[str, str, str, str]] = {
    "nccl_timeout": (ERROR, "nccl-timeout", "a rank stopped joining collectives (straggler, hang, dead link) "
                     "and the others waited past the timeout", "find the culprit rank below and check its node, "
                     "GPU and links; rerun with TORCH_NCCL_TRACE_BUFFER_SIZE=2000"),
    "nccl_heartbeat_stuck": (ERROR, "nccl-heartbeat-stuck", "the NCCL watchdog thread itself hung (a CUDA/NCCL "
                             "call blocked)", "collect py-spy/gdb stacks of the stuck rank; check GPU health"),
    "nccl_communicator_aborted": (ERROR, "nccl-communicator-aborted", "the communicator was aborted after an "
                                  "earlier error on this or another rank", "look for the first error before it"),
    "nccl_internal_error": (ERROR, "nccl-internal-error", "NCCL hit an internal error (often bootstrap or "
                            "network plugin trouble)", "rerun with NCCL_DEBUG=INFO and read the first WARN"),
    "nccl_system_error": (ERROR, "nccl-system-error", "a socket or system call inside NCCL failed (network, "
                          "interface, firewall)", "check NCCL_SOCKET_IFNAME and connectivity between the nodes"),
    "nccl_unhandled_cuda_error": (ERROR, "nccl-unhandled-cuda-error", "a CUDA call made by NCCL failed",
                                  "check the GPU (nvidia-smi, dmesg Xid) and the driver/CUDA versions"),
    "nccl_warn": (WARNING, "nccl-warn", "NCCL printed warnings", "read the first NCCL WARN line"),
    "cuda_oom": (ERROR, "cuda-oom", "the GPU ran out of memory", "lower the micro batch / sequence length, "
                 "enable activation checkpointing, or shard more (llmdiag estimate-memory)"),
    "cuda_error": (ERROR, "cuda-error", "a CUDA runtime error (kernel fault, driver problem)",
                   "rerun with CUDA_LAUNCH_BLOCKING=1; check dmesg for Xid"),
    "ecc_xid": (ERROR, "ecc-xid", "a GPU hardware fault (ECC / Xid)", "drain the node and run the vendor diagnostics"),
    "rendezvous_address_in_use": (ERROR, "rendezvous-address-in-use", "the store port is taken (another job or "
                                  "a leftover process)", "pick a free MASTER_PORT or kill the old process"),
    "rendezvous_timeout": (ERROR, "rendezvous-timeout", "workers could not reach the rendezvous store in time",
                           "check MASTER_ADDR/port reachability (llmdiag preflight) and that all nodes started"),
    "gloo_timeout": (ERROR, "nccl-timeout", "a gloo collective timed out waiting for a peer rank (a rank "
                     "stopped participating, or the network between them is blocked)",
                     "find the rank that did not reach the collective (its log ends first)"),
    "child_failed": (ERROR, "child-failed", "a worker process failed and torchrun stopped the job",
                     "read the root-cause rank's own log (its first error)"),
    "sigkill": (ERROR, "worker-sigkill", "a worker was killed with SIGKILL (often the host OOM killer)",
                "check `dmesg | grep -i oom` and host memory use"),
    "sigabrt": (ERROR, "worker-sigabrt", "a worker aborted (often after an NCCL watchdog error or a C++ "
                "exception)", "look for the error printed just before the abort"),
    "segfault": (ERROR, "worker-segfault", "a worker crashed with a segmentation fault",
                 "get a core dump / faulthandler stack; check extension and library versions"),
    "slurm_time_limit": (ERROR, "slurm-time-limit", "Slurm cancelled the job at its time limit",
                         "raise --time or resume from the last checkpoint"),
    "python_exception": (ERROR, "python-exception", "the training script raised an exception",
                         "read the exception and the last frames of its traceback"),
    "nan_loss": (ERROR, "nan-loss", "the loss became NaN/Inf (divergence or fp16 overflow)",
                 "restart from the last good checkpoint with a lower LR / clipping; inspect the batch"),
    "nan_grad_norm": (ERROR, "nan-loss", "the gradient norm became NaN/Inf", "enable anomaly detection on the "
                      "failing steps; check fp16 loss scaling"),
    "zero_loss": (ERROR, "zero-loss", "the loss is exactly zero (steps skipped or labels masked out)",
                  "check the labels / loss mask and the skipped-step counters"),
    "loss_spike": (WARNING, "loss-spike", "the loss jumped well above its recent baseline",
                   "inspect the data around the spike; consider lower LR or tighter clipping"),
    "grad_norm_explosion": (ERROR, "grad-norm-explosion", "the gradient norm grew by orders of magnitude",
                            "lower the LR, clip gradients, check for bad batches"),
    "grad_norm_spike": (WARNING, "grad-norm-explosion", "the gradient norm jumped well above its median",
                        "watch the loss; inspect the batches at those steps"),
    "grad_overflow": (WARNING, "grad-overflow", "fp16 gradients overflowed and steps were skipped",
                      "prefer bf16, or check the loss scaler's settings and the LR"),
    "throughput_drop": (WARNING, "throughput-drop", "steps became much slower during steady training",
                        "check for a straggler node, thermal throttling, data loading or checkpoint I/O"),
    "hang_no_progress": (ERROR, "hang-no-progress", "training output stopped without an error",
                         "dump the stacks of every rank (py-spy dump); look for the rank that is not in a collective"),
}
#: root-cause priority: hardware first, then resources, communication, launcher, symptoms
PRIORITY = ["ecc_xid", "cuda_oom", "cuda_error", "nccl_unhandled_cuda_error", "nccl_system_error",
            "nccl_internal_error", "rendezvous_address_in_use", "rendezvous_timeout", "segfault", "sigkill",
            "nan_loss", "nan_grad_norm", "zero_loss", "grad_norm_explosion", "python_exception",
            "slurm_time_limit", "nccl_heartbeat_stuck", "nccl_timeout", "gloo_timeout", "hang_no_progress",
            "nccl_communicator_aborted", "sigabrt", "child_failed", "loss_spike", "grad_overflow",
            "grad_norm_spike", "throughput_drop", "nccl_warn"]


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


def _timeouts(evs: list[Event]) -> dict | None:
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
    rs = sorted(works + status, key=lambda e: e.line)
    order = [e.rank for e in rs if e.rank is not None]
    if order:
        facts["first_reporting_rank"] = order[0]
    facts["ranks_reporting"] = reporting
    facts["reports"] = len(works)
    for src in works[1:] + status:
        for k, v in src.facts.items():
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
    elif len(set(seqs.values())) > 1:
        common = Counter(seqs.values()).most_common(1)[0][0]
        odd = sorted(r for r, v in seqs.items() if v != common)
        others = sorted(r for r in seqs if r not in odd)
        if others:
            facts["other_ranks_seq_num"] = common
        culprits = odd
        why = f"rank(s) {odd} wait in a different collective (SeqNum {[seqs[r] for r in odd]}) than the others " \
              f"({common}): the ranks are out of step"
    if reporting:
        world = max(reporting) + 1
        absent = [r for r in range(world) if r not in reporting]
        if absent and not culprits:
            culprits = absent
            why = f"rank(s) {absent} never reported the timeout: they were not waiting in the collective"
    if culprits:
        facts["suspect_ranks"] = culprits
        f["cause"] = why + "; the reporting ranks are likely victims"
        f["next_step"] = f"check rank {culprits[0]}'s node first (its log, GPU, network links)"
    f["count"] = len(works) + len(status)
    op = facts.get("op_type", "?")
    f["message"] = (f"NCCL watchdog timeout in {op} (SeqNum {facts.get('seq_num', '?')}, "
                    f"timeout {facts.get('timeout_ms', '?')} ms) reported by {len(reporting) or 1} rank(s)")
    return f


def _collapse(kind: str, evs: list[Event], message: str | None = None) -> dict:
    f = _base(kind, evs[0])
    for e in evs[1:]:
        for k, v in e.facts.items():
            if f["facts"].get(k) is None:
                f["facts"][k] = v
    ranks = list(dict.fromkeys(e.rank for e in evs if e.rank is not None))
    if ranks:
        f["facts"].setdefault("ranks", ranks)
    f["count"] = len(evs)
    if message:
        f["message"] = message
    return f


def findings_from_events(events: list[Event], extra: dict) -> list[dict]:
    by: dict[str, list[Event]] = defaultdict(list)
    for e in events:
        by[e.kind].append(e)
    out: list[dict] = []
    t = _timeouts(by.pop("nccl_timeout", []) + by.pop("nccl_timeout_status", []))
    if t:
        out.append(t)
    warns = by.pop("nccl_warn", [])
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
    if rcs:
        code = Counter(e.facts["nccl_return_code"] for e in rcs).most_common(1)[0][0]
        kind = {1: "nccl_unhandled_cuda_error", 2: "nccl_system_error", 3: "nccl_internal_error"}[code]
        by[kind].extend(e for e in rcs if e.facts["nccl_return_code"] == code)
    for kind in ("nccl_internal_error", "nccl_system_error", "nccl_unhandled_cuda_error"):
        evs = sorted(by.pop(kind, []), key=lambda e: (e.file, e.line))
        if not evs:
            continue
        f = _collapse(kind, evs)
        fa = f["facts"]
        if kind == "nccl_unhandled_cuda_error" and any("cuda_failure_code" in e.facts for e in evs):
            fa["cuda_failure_code"] = next(e.facts["cuda_failure_code"] for e in evs if "cuda_failure_code" in e.facts)
        fa.setdefault("nccl_return_code", {"nccl_internal_error": 3, "nccl_system_error": 2,
                                           "nccl_unhandled_cuda_error": 1}[kind])
        for w in warns:
            if "peer" in w.facts:
                fa.setdefault("peer", w.facts["peer"])
        hosts = [e.host for e in evs if e.host]
        if hosts:
            fa["host"] = hosts[0]
        fa.pop("pid", None)
        fa.pop("local_rank", None)
        f["message"] = f"{kind.replace('_', ' ')} (NCCL return code {fa['nccl_return_code']}) on {len(evs)} line(s)"
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
        size = fa.get("oom_tried_to_allocate_gib")
        f["message"] = ("CUDA out of memory" + (f" (tried to allocate {size:.2f} GiB)" if size else "")
                        + (f" on GPU {fa['oom_gpu_index']}" if "oom_gpu_index" in fa else ""))
        out.append(f)
    cf = by.pop("child_failed", [])
    if cf:
        f = _collapse("child_failed", cf)
        fa = f["facts"]
        if "first_failing_rank" in fa:
            f["rank"] = fa["first_failing_rank"]
        f["message"] = (f"torchrun ChildFailedError: root cause rank {fa.get('first_failing_rank', '?')}"
                        f" exit code {fa.get('exitcode', '?')}" + (f" ({fa['signal']})" if fa.get("signal") else ""))
        out.append(f)
        code = fa.get("exitcode")
        sk = {-9: "sigkill", -6: "sigabrt", -11: "segfault"}.get(code)
        if sk and not by.get(sk):
            by[sk].append(Event(sk, f["file"], f["line"], f"worker exited with {fa.get('signal')}",
                                fa.get("first_failing_rank"), fa.get("host"), f["ts"],
                                {k: fa[k] for k in ("exitcode", "signal", "root_cause_pid", "host") if k in fa}))
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
        fa["hysteresis_message"] = any(e.facts.get("hysteresis") for e in ovs)
        for k in ("attempted_loss_scale", "new_loss_scale", "hysteresis"):
            fa.pop(k, None)
        f["message"] = f"{len(ovs)} fp16 overflow message(s); loss scale {fa.get('loss_scale_first', '?')} -> " \
                       f"{fa.get('loss_scale_last', '?')}"
        out.append(f)
    exc = by.pop("exception", [])
    by.pop("traceback", None)
    for kind, evs in by.items():
        if kind in KINDS and evs:
            out.append(_collapse(kind, sorted(evs, key=lambda e: e.line)))
    for f in out:
        if f["kind"] in ("rendezvous_address_in_use", "rendezvous_timeout"):
            for k in ("rdzv_backend", "launcher_cmd"):
                if k in extra:
                    f["facts"].setdefault(k, extra[k])
    errors = [f for f in out if f["severity"] == ERROR]
    if exc:
        last = exc[-1]
        if not errors:
            f = _base("python_exception", last)
            f["message"] = f"{last.facts['exception_type']}: {last.facts['exception_message']}"[:300]
            out.append(f)
        else:
            # the error the exception reports: of the same rank (or none known), at or before it
            near = [f for f in errors if f.get("file") == last.file and (f.get("line") or 0) <= last.line
                    and (f.get("rank") is None or last.rank is None or f.get("rank") == last.rank)]
            tgt = max(near, key=lambda f: f.get("line") or 0) if near else errors[0]
            if tgt.get("rank") is None or last.rank is None or tgt.get("rank") == last.rank:
                tgt["facts"].setdefault("exception_type", last.facts["exception_type"])
                tgt["facts"].setdefault("exception_message", last.facts["exception_message"])
    return out


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
    return m


def build_document(an, stats, settings, elapsed_s: float = 0.0) -> dict:
    from llmdiag.logs import prefixes

    an.flush()
    t = an.table
    rank = t.primary_rank()
    ser = t.series_of(rank)
    findings = findings_from_events(an.events, an.extra)
    anoms: list[dict] = []
    nan = t.all_nan if rank is None else (ser.nan if ser is not None else None)
    if nan is not None:
        anoms += nan.result()
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
        findings.append(f)
    for f in findings:
        f["facts"] = {k: _clean(v) for k, v in f["facts"].items()}
    findings.sort(key=lambda f: (f["ts"] is None, f["ts"] or 0, f["file"] or "", f["line"] or 0))
    metrics = {k: _clean(v) for k, v in _metrics(an, ser, rank).items()}
    roots = sorted((f for f in findings), key=lambda f: PRIORITY.index(f["kind"]))
    root_causes = [{"kind": f["kind"], "rank": f["rank"], "line": f["line"], "file": f["file"],
                    "summary": f["message"], "cause": f["cause"], "runbook": f["runbook"]} for f in roots[:5]]
    first_fail = next((f for f in findings if f["kind"] == "child_failed" and f["rank"] is not None), None) or \
        next((f for f in findings if f["severity"] == ERROR and f["rank"] is not None), None)
    status = "fail" if any(f["severity"] == ERROR for f in findings) else "warn" if findings else "pass"
    facts: dict = dict(metrics)
    for f in roots:
        for k, v in f["facts"].items():
            facts.setdefault(k, v)
    steps = t.head  # already JSON-clean (table.head_rows)
    return {
        "schema_version": 1, "command": "analyze-log", "kind": "log-analysis", "status": status,
        "files": stats.files, "findings": findings, "metrics": metrics, "root_causes": root_causes,
        "first_failing_rank": first_fail["rank"] if first_fail else None,
        "facts": facts, "steps": steps, "steps_total": len(t),
        "read": {"bytes": stats.bytes_read, "lines": stats.lines, "candidate_lines": stats.candidate_lines,
                 "problems": stats.problems, "elapsed_s": round(elapsed_s, 3)},
    }


def _clean(v):
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    if isinstance(v, list):
        return [_clean(x) for x in v]
    return v
