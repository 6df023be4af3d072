"""One GPU validation run: llmdiag's NVML, NCCL, trainer and memory paths on real hardware.

    python bench/gpu_validate.py OUTDIR [--quick] [--budget SECONDS]

Writes ``OUTDIR/gpu-validation.json`` (every check: status pass / fail / skip, the reason,
seconds, numbers, details) and ``OUTDIR/gpu-validation.md`` (the same for people, with the
memory-truth table), plus, on a GPU, ``nvidia-smi-q.xml`` and ``nvml-record.json`` (this
machine's readings, to become test fixtures). Exit code 0 when no check failed, 1 when one
did, 2 on bad arguments.

Each check is a function that returns a :class:`Check`, runs in its own thread under its own
time budget (subprocesses are killed with their process group when it runs out) and never
raises: a check that overruns or crashes is reported as failed and the next one runs. The
whole run stops starting new work when ``--budget`` (default 450 s, 300 s with ``--quick``)
is spent, so it ends inside the 8 minutes the runbook (docs/gpu-validation.md) allows.

Without a GPU the same command runs what a CPU can show (the nvidia-smi comparison on the
recorded H200 fixtures, the GPU probe's skip, a host-only monitor with its Prometheus output
parsed, a CPU DDP run with checkpoint, resume and an injected fault that analyze-log must
diagnose, the memory worker on a tiny model and the estimate for the first grid point) and
marks each GPU part skipped with the reason. CI runs it with ``--quick``.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(BENCH))

import gpu_memtruth as MT  # noqa: E402
import gpu_nvsmi as NS  # noqa: E402

STATUSES = ("pass", "fail", "skip")
SCHEMA = "gpu-validation/1"
FIXTURES = REPO / "tests" / "fixtures" / "nvidia-smi"


@dataclasses.dataclass
class Check:
    """One check's outcome. ``skip`` always carries the reason; ``numbers`` are measurements."""

    name: str
    status: str
    summary: str
    seconds: float = 0.0
    budget_s: float = 0.0
    numbers: dict[str, Any] = dataclasses.field(default_factory=dict)
    details: Any = None

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")
        if self.status == "skip" and not self.summary:
            raise ValueError("a skip needs its reason")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


class Budget:
    """The time one check may take; subprocesses get what is left of it."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return max(0.0, self.end - time.monotonic())


@dataclasses.dataclass
class Run:
    """What every check may use: the machine's facts, the output and work directories."""

    outdir: Path
    work: Path
    quick: bool
    gpus: int
    no_gpu_reason: str
    facts: dict[str, Any]
    #: the NVML adapter factory and the nvidia-smi binary (None: the real ones; tests replay records)
    nvml_factory: Callable[[], Any] | None = None
    nvidia_smi: str | None = None

    @property
    def gpu(self) -> bool:
        return self.gpus > 0


@dataclasses.dataclass
class Proc:
    argv: list[str]
    returncode: int | None
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool = False

    def tail(self, n: int = 5) -> str:
        return "\n".join((self.stderr.strip() or self.stdout.strip()).splitlines()[-n:])


def sh(argv: list[str], budget: Budget, cap: float | None = None, env: dict[str, str] | None = None,
       cwd: str | Path | None = None) -> Proc:
    """Run ``argv`` in its own process group, bounded by the budget (and ``cap``); never raises."""
    timeout = max(1.0, min(budget.left(), cap or budget.left()))
    t0 = time.monotonic()
    try:
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd,
                             env=dict(os.environ, **(env or {})), start_new_session=True)
    except OSError as exc:
        return Proc(argv, None, "", f"{type(exc).__name__}: {exc}", 0.0)
    try:
        out, err = p.communicate(timeout=timeout)
        return Proc(argv, p.returncode, out, err, time.monotonic() - t0)
    except subprocess.TimeoutExpired:
        _kill_group(p)
        out, err = p.communicate()
        return Proc(argv, None, out, err + f"\n(timed out after {timeout:.0f} s)", time.monotonic() - t0, True)


def _kill_group(p: subprocess.Popen) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(p.pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        try:
            p.wait(timeout=3)
            return
        except subprocess.TimeoutExpired:
            continue


LLMDIAG = [sys.executable, "-m", "llmdiag"]
TINY_TRAIN = ["--layers", "2", "--hidden", "64", "--heads", "2", "--seq-len", "64", "--batch-size", "4"]
GPU_TRAIN = ["--layers", "4", "--hidden", "512", "--heads", "8", "--seq-len", "512", "--batch-size", "8",
             "--precision", "bf16"]


def _json_file(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


# ---------------------------------------------------------------------------------------------
# checks

def check_environment(run: Run, budget: Budget) -> Check:
    return Check("environment", "pass", f"{run.gpus} GPU(s); {run.facts.get('gpu_name') or run.no_gpu_reason}",
                 numbers=dict(run.facts))


def check_nvsmi_recorded(run: Run, budget: Budget) -> Check:
    """The comparison logic on the recorded H200 pair: agrees, and a planted mismatch is caught."""
    from llmdiag.nvml import RecordedNvml

    snap = RecordedNvml.from_file(FIXTURES / "h200-nvml.json").snapshot(0)
    xml = (FIXTURES / "h200-q.xml").read_text()
    checks = NS.compare(snap, NS.parse_smi_xml(xml)["gpus"][0], nvlink={"total": 0, "down": []})
    planted = NS.compare(snap, NS.parse_smi_xml(xml.replace("<current_link_width>16x", "<current_link_width>8x"))
                         ["gpus"][0], nvlink={"total": 0, "down": []})
    counts = NS.summarise(checks)
    caught = [c.field for c in planted if c.verdict == "mismatch"]
    ok = counts["mismatch"] == 0 and caught == ["pcie_width"]
    return Check("nvml-vs-nvidia-smi-recorded", "pass" if ok else "fail",
                 f"recorded H200: {len(checks)} fields, {counts}; planted PCIe-width mismatch caught: {caught}",
                 numbers=counts, details=[c.to_dict() for c in checks if c.verdict != "equal"])


def check_nvsmi_live(run: Run, budget: Budget) -> Check:
    """The adapter read just before and just after ``nvidia-smi -q -x``, field by field."""
    name = "nvml-vs-nvidia-smi"
    if not run.gpu:
        return Check(name, "skip", f"no GPU: {run.no_gpu_reason}")
    smi_bin = run.nvidia_smi or shutil.which("nvidia-smi") or next(
        (p for p in ("/usr/local/nvidia/bin/nvidia-smi", "/usr/bin/nvidia-smi") if os.access(p, os.X_OK)), None)
    if smi_bin is None:
        return Check(name, "fail", "NVML sees GPUs but nvidia-smi is not on PATH")
    from llmdiag import nvml

    api = (run.nvml_factory or nvml.load)()
    try:
        before = [api.snapshot(i) for i in range(api.device_count())]
        p = sh([smi_bin, "-q", "-x"], budget, cap=30)
        links = sh([smi_bin, "nvlink", "-s"], budget, cap=15)
        after = [api.snapshot(i) for i in range(api.device_count())]
        doc = nvml.record(api, f"gpu_validate on {platform.node()}")
    finally:
        api.close()
    (run.outdir / "nvml-record.json").write_text(json.dumps(doc, indent=2) + "\n")
    if p.returncode != 0:
        return Check(name, "fail", f"nvidia-smi -q -x failed: {p.tail(2)}")
    (run.outdir / "nvidia-smi-q.xml").write_text(p.stdout)
    smi = NS.parse_smi_xml(p.stdout)
    nvlink = NS.parse_nvlink_status(links.stdout) if links.returncode == 0 else {}
    per_gpu, total = [], {v: 0 for v in NS.VERDICTS}
    for (b, g), a in zip(NS.match_gpus(before, smi["gpus"]), after):
        if g is None:
            per_gpu.append({"index": b.index, "error": "nvidia-smi lists no GPU with this UUID or bus id"})
            total["mismatch"] += 1
            continue
        checks = NS.compare(b, g, after=a, nvlink=nvlink.get(b.index, {"total": 0, "down": []})
                            if links.returncode == 0 else None)
        for k, v in NS.summarise(checks).items():
            total[k] += v
        per_gpu.append({"index": b.index, "checks": [c.to_dict() for c in checks]})
    total["driver_equal"] = int(smi["driver_version"] == doc["driver_version"])
    status = "pass" if total["mismatch"] == 0 and total["driver_equal"] else "fail"
    return Check(name, status, f"{len(before)} GPU(s): {total}", numbers=total, details=per_gpu)


def check_gpu_probe(run: Run, budget: Budget) -> Check:
    out = run.work / "gpu-probe.json"
    p = sh([*LLMDIAG, "preflight", "--probe", "gpu", "-f", "json", "-o", str(out)], budget)
    doc = _json_file(out)
    if doc is None:
        return Check("gpu-probe", "fail", f"preflight --probe gpu wrote no report (exit {p.returncode}): {p.tail(2)}")
    results = [r for r in _results(doc) if r.get("probe") == "gpu"]
    statuses = {s: sum(1 for r in results if r.get("status") == s) for s in ("pass", "warn", "fail", "skip")}
    lines = [f"{r.get('check')}: {r.get('status')} - {r.get('summary')}" for r in results]
    crashed = [r for r in results if "crash" in str(r.get("summary", "")).lower()
               or "overran" in str(r.get("summary", "")).lower()]
    if not run.gpu:
        ok = results and all(r.get("status") == "skip" for r in results)
        return Check("gpu-probe", "skip" if ok else "fail",
                     f"no GPU: the probe skipped ({lines[0] if lines else 'no result'})" if ok
                     else f"without a GPU the probe must skip, it gave {statuses}", numbers=statuses, details=lines)
    if crashed or not results:
        return Check("gpu-probe", "fail", f"the GPU probe crashed or gave nothing: {lines[:3]}", numbers=statuses,
                     details=lines)
    return Check("gpu-probe", "pass", f"{len(results)} results {statuses} (findings are the node's, not failures "
                 "of the probe)", numbers=statuses, details=lines)


def check_dcgm_platform(run: Run, budget: Budget) -> Check:
    """The dcgm probe (``dcgmi diag -r 1`` where DCGM is installed) and the platform probe (the real
    PCI tree: GPUs, RDMA NICs, NVSwitches, ACS; /proc/modules; systemctl) on this machine."""
    out = run.work / "dcgm-platform.json"
    p = sh([*LLMDIAG, "preflight", "--probe", "dcgm", "--probe", "platform", "--timeout",
            f"{max(5.0, budget.left() - 10):.0f}", "-f", "json", "-o", str(out)], budget)
    doc = _json_file(out)
    if doc is None:
        return Check("dcgm-platform", "fail", f"preflight wrote no report (exit {p.returncode}): {p.tail(2)}")
    results = [r for r in _results(doc) if r.get("probe") in ("dcgm", "platform")]
    lines = [f"{r.get('probe')}/{r.get('check')}: {r.get('status')} - {r.get('summary')}" for r in results]
    dcgmi = shutil.which("dcgmi")
    dcgm = [r for r in results if r.get("probe") == "dcgm"]
    numbers = {"dcgmi": dcgmi or None, **{s: sum(1 for r in results if r.get("status") == s)
                                          for s in ("pass", "warn", "fail", "skip")}}
    broken = [r for r in results if r.get("check") == "probe"]  # a crash or an overrun of the probe itself
    if broken or not dcgm or not any(r.get("probe") == "platform" for r in results):
        return Check("dcgm-platform", "fail", f"a probe crashed, overran or gave nothing: {lines[:3]}",
                     numbers=numbers, details=lines)
    if dcgmi and all(r.get("status") == "skip" for r in dcgm):
        return Check("dcgm-platform", "fail", f"dcgmi is at {dcgmi} but the dcgm probe skipped: {lines[0]}",
                     numbers=numbers, details=lines)
    if not run.gpu:
        return Check("dcgm-platform", "skip", f"no GPU: {run.no_gpu_reason} ({len(results)} results, "
                     f"dcgm {'ran' if dcgmi else 'skipped: no dcgmi'})", numbers=numbers, details=lines)
    return Check("dcgm-platform", "pass", f"{len(results)} results {numbers} (findings are the node's)",
                 numbers=numbers, details=lines)


def _results(doc: Any) -> list[dict[str, Any]]:
    """Every result dict anywhere in a report document (node and cluster reports alike)."""
    found: list[dict[str, Any]] = []

    def walk(x: Any) -> None:
        if isinstance(x, dict):
            if "probe" in x and "status" in x and "check" in x:
                found.append(x)
                return
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)
    walk(doc)
    return found


def check_xid(run: Run, budget: Budget) -> Check:
    if not run.gpu:
        return Check("xid-events", "skip", f"no GPU: {run.no_gpu_reason}")
    import pynvml

    from llmdiag import nvml

    # NVML itself first, so that a platform without event support is told from an adapter bug
    steps: dict[str, str] = {}
    es = None
    try:
        es = pynvml.nvmlEventSetCreate()
        steps["nvmlEventSetCreate"] = "ok"
        pynvml.nvmlDeviceRegisterEvents(pynvml.nvmlDeviceGetHandleByIndex(0),
                                        pynvml.nvmlEventTypeXidCriticalError, es)
        steps["nvmlDeviceRegisterEvents(XidCriticalError)"] = "ok"
        try:
            pynvml.nvmlEventSetWait_v2(es, 0)
            steps["nvmlEventSetWait_v2(0 ms)"] = "an event was pending"
        except pynvml.NVMLError_Timeout:
            steps["nvmlEventSetWait_v2(0 ms)"] = "ok (timeout: nothing pending)"
    except pynvml.NVMLError as exc:
        steps[f"failed after {len(steps)} step(s)"] = str(exc)
    finally:
        if es is not None:
            pynvml.nvmlEventSetFree(es)
            steps["nvmlEventSetFree"] = "ok"
    api = nvml.load(watch_xid=True)
    try:
        registered = getattr(api, "_events", None) is not None
        snaps = [api.snapshot(i) for i in range(api.device_count())]
    finally:
        api.close()
    closed = getattr(api, "_events", None) is None
    events = sum(len(s.xid_events) for s in snaps)
    numbers = {"nvml": steps, "adapter_registered": registered, "events": events, "adapter_closed": closed}
    raw_ok = not any(k.startswith("failed") for k in steps)
    if not raw_ok:  # the platform, not llmdiag: the adapter then registers what it can and claims nothing
        return Check("xid-events", "skip", f"NVML refuses Xid events on this machine: {steps}; the adapter opened "
                     f"(event set: {registered}) and closed (freed: {closed}) without error", numbers=numbers)
    ok = registered and closed
    return Check("xid-events", "pass" if ok else "fail",
                 f"NVML: {steps}; adapter registered: {registered}, drained {events} event(s), freed: {closed}",
                 numbers=numbers)


def _train_argv(run: Run, extra: list[str]) -> list[str]:
    dev = ["--device", "cuda", "--backend", "nccl"] if run.gpu else ["--device", "cpu", "--backend", "gloo",
                                                                       "--threads", "1"]
    return [*LLMDIAG, "train", *(GPU_TRAIN if run.gpu else TINY_TRAIN), *dev, *extra]


def _losses(summary: Any) -> list[float]:
    if not summary:
        return []
    ranks = summary.get("ranks") or []
    return [float(v) for _, v in sorted((int(k), v) for k, v in (ranks[0].get("losses") or {}).items())] \
        if ranks else []


def check_monitor_and_ddp(run: Run, budget: Budget) -> Check:
    """DDP training with checkpoints while ``llmdiag monitor`` samples; then a resume."""
    name = "monitor+ddp+resume"
    ck, log, prom = run.work / "ddp-ckpt", run.work / "ddp.log", run.work / "monitor.prom"
    nproc = max(1, run.gpus) if run.gpu else 2
    duration = (10 if run.quick else 30) if run.gpu else 3
    every = 500 if run.gpu else 20  # GPU steps take milliseconds: frequent checkpoints would be most of the run
    train = subprocess.Popen(_train_argv(run, ["--nproc", str(nproc), "--steps", "100000", "--checkpoint-dir",
                                               str(ck), "--checkpoint-every", str(every), "--log-file", str(log)]),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        # sample while it trains: from its first logged step on
        _wait(lambda: _max_step(log) >= 1, min(60.0, budget.left() / 3), train)
        mon_json = run.work / "monitor.json"
        t_start, s_start = time.monotonic(), _max_step(log)
        m = sh([*LLMDIAG, "monitor", "--interval", "1" if run.gpu else "0.5", "--duration", str(duration),
                "--prometheus-file", str(prom), "--timeline", str(run.work / "timeline.csv"), "-f", "json",
                "-o", str(mon_json)], budget, cap=duration + 30)
        # the job's step rate with the monitor sampling, then for a few seconds without it
        t_mid, s_mid = time.monotonic(), _max_step(log)
        time.sleep(min(5.0, budget.left() / 4))
        t_end, s_end = time.monotonic(), _max_step(log)
        rates = ((s_mid - s_start) / max(t_mid - t_start, 1e-9), (s_end - s_mid) / max(t_end - t_mid, 1e-9))
        # a complete checkpoint must exist before the run is killed: step every + 2 is logged after it
        _wait(lambda: _max_step(log) >= every + 2, min(60.0, budget.left() / 3), train)
    finally:
        _kill_group(train)
    doc = _json_file(mon_json) or {}
    numbers: dict[str, Any] = {"monitor_exit": m.returncode, "samples": doc.get("samples"),
                               "gpu_count": doc.get("gpu_count"), **(doc.get("overhead") or {}),
                               "job_steps_per_s_monitored": round(rates[0], 2),
                               "job_steps_per_s_unmonitored": round(rates[1], 2)}
    problems = []
    if m.returncode not in (0, 1) or not doc:
        problems.append(f"monitor exit {m.returncode}: {m.tail(2)}")
    families = _prometheus(prom, problems)
    numbers["metric_families"] = len(families)
    if run.gpu:
        for fam in ("llmdiag_gpu_utilization_ratio", "llmdiag_gpu_memory_used_bytes", "llmdiag_gpu_power_watts"):
            if fam not in families:
                problems.append(f"{fam} missing from the Prometheus file")
        util = [s for s in families.get("llmdiag_gpu_utilization_ratio", [])]
        numbers["gpu_util_ratio_last"] = max((v for _, v in util), default=None)
        # the timeline must show the training on the GPU: live NVML, not a replay
        util_max, mem_max = _timeline_max(run.work / "timeline.csv")
        numbers.update(timeline_gpu_util_max=util_max, timeline_gpu_mem_used_max=mem_max)
        if not util_max:
            problems.append(f"the timeline shows no GPU utilisation while training ran (max {util_max})")
    elif "llmdiag_host_cpu_utilization_ratio" not in families:
        problems.append("llmdiag_host_cpu_utilization_ratio missing from the Prometheus file")
    text = log.read_text(errors="replace") if log.exists() else ""
    steps = [int(x) for x in re.findall(r"step=(\d+) loss=", text)]
    numbers["steps_while_monitored"] = max(steps, default=0)
    numbers["checkpoint_entries"] = len(list(ck.glob("*"))) if ck.exists() else 0
    if not steps:
        problems.append(f"the training run logged no step ({log.name} {'missing' if not log.exists() else 'empty'})")
    # resume: 5 steps past the newest complete checkpoint, which the killed run left behind
    summary = run.work / "resume.json"
    target = (max(steps, default=0) // every) * every + 5 if steps else every + 5
    r = sh(_train_argv(run, ["--nproc", str(nproc), "--steps", str(target), "--checkpoint-dir", str(ck),
                             "--checkpoint-every", str(every), "--summary-file", str(summary)]), budget)
    resumed = re.search(r"resume: from checkpoint \S+ at step (\d+)", r.stdout + r.stderr)
    numbers.update(resume_exit=r.returncode, resumed_at=int(resumed.group(1)) if resumed else None,
                   resume_target=target)
    losses = _losses(_json_file(summary))
    if r.returncode != 0:
        problems.append(f"resume run exit {r.returncode}: {r.tail(2)}")
    elif not resumed:
        problems.append("the second run did not resume from the killed run's checkpoint")
    elif not losses or not all(v == v for v in losses):
        problems.append("the resumed run's losses are missing or not finite")
    if problems:
        return Check(name, "fail", "; ".join(problems), numbers=numbers)
    what = (f"{nproc}-rank DDP ran {numbers['steps_while_monitored']} steps under monitor ({numbers['samples']} "
            f"samples, {numbers.get('cpu_ms_per_sample')} ms CPU/sample); killed and resumed at step "
            f"{numbers['resumed_at']}")
    if not run.gpu:
        return Check(name, "skip", f"no GPU: the GPU part is not proven; CPU part passed ({what}, gloo, host-only "
                     "monitor, Prometheus parsed)", numbers=numbers)
    return Check(name, "pass", what, numbers=numbers)


def _timeline_max(path: Path) -> tuple[float | None, float | None]:
    """Largest GPU utilisation and used memory over the GPU rows of a monitor timeline CSV."""
    import csv

    util: list[float] = []
    mem: list[float] = []
    try:
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                if row.get("device") == "host":
                    continue
                for key, into in (("utilization_gpu_pct", util), ("memory_used_bytes", mem)):
                    try:
                        into.append(float(row.get(key) or "nan"))
                    except ValueError:
                        continue
    except OSError:
        return None, None
    util, mem = [x for x in util if x == x], [x for x in mem if x == x]
    return max(util, default=None), max(mem, default=None)


def _max_step(log: Path) -> int:
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return 0
    return max((int(x) for x in re.findall(r"step=(\d+) loss=", text)), default=0)


def _wait(cond: Callable[[], bool], seconds: float, proc: subprocess.Popen) -> bool:
    """Poll ``cond`` until it holds, ``proc`` exits or ``seconds`` pass."""
    end = time.monotonic() + seconds
    while time.monotonic() < end and proc.poll() is None:
        if cond():
            return True
        time.sleep(0.2)
    return cond()


def _prometheus(path: Path, problems: list[str]) -> dict[str, list[tuple[dict, float]]]:
    """Families of a Prometheus text file, read by prometheus_client's own parser."""
    if not path.exists():
        problems.append("no Prometheus file written")
        return {}
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError:
        problems.append("prometheus_client is not installed: cannot parse the metrics")
        return {}
    try:
        return {f.name: [(s.labels, s.value) for s in f.samples]
                for f in text_string_to_metric_families(path.read_text())}
    except ValueError as exc:
        problems.append(f"the Prometheus file does not parse: {exc}")
        return {}


def check_nccl_bench(run: Run, budget: Budget) -> Check:
    if not run.gpu:
        return Check("nccl-bench", "skip", f"no GPU: {run.no_gpu_reason} (gloo runs in the unit tests)")
    out = run.work / "nccl-bench.json"
    top = "16M" if run.quick else "256M"
    p = sh([*LLMDIAG, "nccl-bench", "--backend", "nccl", "--nproc", str(run.gpus), "-b", "1K", "-e", top, "-f", "4",
            "-c", "1", "-w", "2", "-n", "5" if run.quick else "10", "-C", "all_reduce", "-C", "all_gather",
            "-C", "reduce_scatter", "-C", "broadcast", "--format", "json", "--output", str(out)], budget)
    doc = _json_file(out)
    if doc is None:
        return Check("nccl-bench", "fail", f"no report (exit {p.returncode}): {p.tail(3)}")
    rows = doc.get("results") or []
    wrong = sum(int((r.get(k) or {}).get("wrong") or 0) for r in rows for k in ("out_of_place", "in_place"))
    world = doc.get("world") or {}
    numbers = {"exit": p.returncode, "rows": len(rows), "wrong": wrong, "plateau_busbw": doc.get("plateau_busbw"),
               "world_size": world.get("world_size"), "backend": world.get("backend"), "device": world.get("device"),
               "nccl_version": world.get("nccl_version"),
               "largest": max(rows, key=lambda r: r.get("size", 0)) if rows else None}
    ok = p.returncode in (0, 1) and rows and wrong == 0 and numbers["world_size"] == run.gpus \
        and world.get("backend") == "nccl"
    return Check("nccl-bench", "pass" if ok else "fail",
                 f"{run.gpus} NCCL rank(s), {len(rows)} rows, #wrong {wrong}, plateau busbw "
                 f"{doc.get('plateau_busbw')} GB/s (exit {p.returncode})", numbers=numbers)


def check_probes_in_group(run: Run, budget: Budget) -> Check:
    """The nccl and smoke-train probes inside a one-rank NCCL process group on the GPU."""
    name = "probes-in-nccl-group"
    out = run.work / "probes.json"
    p = sh([sys.executable, str(Path(__file__).resolve()), "probes-worker", str(out)], budget)
    doc = _json_file(out)
    if doc is None:
        return Check(name, "fail", f"the probe worker wrote nothing (exit {p.returncode}): {p.tail(3)}")
    statuses = {r["probe"] + "/" + r["check"]: r["status"] for r in doc["results"]}
    bad = {k: v for k, v in statuses.items() if v == "fail"}
    details = [f"{r['probe']}/{r['check']}: {r['status']} - {r['summary']}" for r in doc["results"]]
    numbers = {"backend": doc["backend"], "results": statuses}
    ran = {"nccl", "smoke-train"} <= {r["probe"] for r in doc["results"]} and "smoke-train/loss" in statuses
    if bad or not ran:
        return Check(name, "fail", f"{doc['backend']} group: failed {bad or 'none'}; {details[:4]}", numbers=numbers,
                     details=details)
    if not run.gpu:
        return Check(name, "skip", f"no GPU: the NCCL group is not proven; CPU part passed (both probes in a one-rank "
                     f"gloo group: {statuses})", numbers=numbers, details=details)
    return Check(name, "pass", f"both probes in a one-rank NCCL group: {statuses}", numbers=numbers, details=details)


def probes_worker(out: str) -> int:
    import torch.distributed as dist

    from llmdiag.context import Context, Deadline
    from llmdiag.probes.nccl import NcclBenchProbe
    from llmdiag.probes.smoke import SmokeTrainProbe
    from llmdiag.runner import run_probe
    import torch

    backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(0)
    port = _free_port()
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    results = []
    try:
        for probe in (NcclBenchProbe(), SmokeTrainProbe()):
            ctx = Context.create()
            ctx.services["process_group"] = dist.group.WORLD
            ctx.deadline = Deadline(probe.timeout_s)
            results += [r.to_dict() for r in run_probe(probe, ctx)]
    finally:
        dist.destroy_process_group()
    Path(out).write_text(json.dumps({"backend": backend, "results": results}, default=str))
    return 0


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check_fsdp(run: Run, budget: Budget) -> Check:
    if not run.gpu:
        return Check("trainer-fsdp", "skip", f"no GPU: {run.no_gpu_reason} (FSDP needs CUDA; on CPU it exits 2)")
    sizes = [1] + ([run.gpus] if run.gpus > 1 else [])
    numbers, problems = {}, []
    for n in sizes:
        summary = run.work / f"fsdp-{n}.json"
        p = sh(_train_argv(run, ["--fsdp", "--nproc", str(n), "--steps", "10" if run.quick else "20",
                                 "--summary-file", str(summary)]), budget)
        losses = _losses(_json_file(summary))
        numbers[f"ranks_{n}"] = {"exit": p.returncode, "first_loss": losses[0] if losses else None,
                                 "last_loss": losses[-1] if losses else None, "seconds": round(p.seconds, 1)}
        if p.returncode != 0 or not losses:
            problems.append(f"{n} rank(s): exit {p.returncode}: {p.tail(2)}")
        elif not losses[-1] < losses[0]:
            problems.append(f"{n} rank(s): loss did not fall ({losses[0]:.3f} -> {losses[-1]:.3f})")
    return Check("trainer-fsdp", "fail" if problems else "pass",
                 "; ".join(problems) or f"FSDP with {sizes} rank(s): loss falls", numbers=numbers)


def check_fault(run: Run, budget: Budget) -> Check:
    """An injected out-of-memory (a real CUDA allocation on a GPU) diagnosed by analyze-log."""
    log = run.work / "fault.log"
    nproc = max(1, run.gpus) if run.gpu else 2
    t = sh(_train_argv(run, ["--nproc", str(nproc), "--steps", "10", "--inject", "oom@5", "--log-file", str(log)]),
           budget)
    out = run.work / "analyze.json"
    a = sh([*LLMDIAG, "analyze-log", str(log), "-f", "json", "-o", str(out)], budget)
    doc = _json_file(out) or {}
    causes = [c.get("kind") for c in doc.get("root_causes") or []]
    numbers = {"train_exit": t.returncode, "analyze_exit": a.returncode, "root_causes": causes,
               "first_failing_rank": doc.get("first_failing_rank")}
    ok = t.returncode not in (0, None) and a.returncode == 1 and causes[:1] == ["cuda_oom"] \
        and doc.get("first_failing_rank") == 0
    summary = (f"oom@5 injected: training exit {t.returncode}; analyze-log root causes {causes}, first failing rank "
               f"{doc.get('first_failing_rank')}")
    if not ok:
        return Check("trainer-fault", "fail", summary, numbers=numbers)
    if not run.gpu:
        return Check("trainer-fault", "skip", f"no GPU: the CUDA allocation is not proven; CPU part passed ({summary})",
                     numbers=numbers)
    return Check("trainer-fault", "pass", summary, numbers=numbers)


def check_memory(run: Run, budget: Budget) -> Check:
    name = "memory-truth"
    gpu_mem = run.facts.get("gpu_memory_bytes")
    if not run.gpu:
        c = dict(MT.MODELS["tiny"], model="tiny", seq=64, micro_batch=2, recompute="selective", mode="single")
        p = sh([sys.executable, str(BENCH / "gpu_memtruth.py"), "worker", json.dumps(c)], budget, cap=120)
        est = MT.run_estimate(MT.grid()[0], 150 * 2**30, timeout=min(60, budget.left()))
        worker = _last_json(p.stdout)
        ok = worker is not None and worker.get("finite") and "error" not in est
        numbers = {"tiny_worker": worker, "estimate_first_grid_point": est}
        # the mechanism plans' code paths at tiny size (MoE routing, a stage's 1F1B order, the paged
        # optimizer's skip) and their estimates at full size
        mech = {}
        with ThreadPoolExecutor(max_workers=3) as pool:
            ests = {m["mode"]: pool.submit(MT.run_estimate, m, 150 * 2**30, min(60, budget.left())) for m in MT.MECHANISMS}
            for m in MT.MECHANISMS:
                tiny = {**m, **MT.MODELS["tiny"], "seq": 32, "micro_batch": 1}
                q = sh([sys.executable, str(BENCH / "gpu_memtruth.py"), "worker", json.dumps(tiny)], budget, cap=120)
                mech[m["mode"]] = {"tiny_worker": _last_json(q.stdout), "estimate": ests[m["mode"]].result()}
        numbers["mechanisms"] = mech
        broken = [k for k, v in mech.items() if not (v["tiny_worker"] or {}).get("finite") or "error" in v["estimate"]]
        if not ok or broken:
            return Check(name, "fail", f"CPU plumbing broke: worker exit {p.returncode} {p.tail(2)}; estimate {est}; "
                         f"mechanism plans broken: {broken}", numbers=numbers)
        return Check(name, "skip", f"no GPU: peaks not measured; CPU part passed (tiny model, 3 mixed-precision "
                     f"AdamW steps, losses finite; estimate for {MT.grid()[0]['model']}: {est['total'] / 2**30:.2f} GiB; "
                     f"MoE, pipeline-stage and paged-optimizer plans: code paths run tiny, estimates made)",
                     numbers=numbers)
    points = MT.grid(run.quick)
    rows: list[dict[str, Any]] = []
    with ThreadPoolExecutor(max_workers=4) as pool:  # estimates on the CPUs while the GPU measures
        ests = [(pool.submit(MT.run_estimate, c, gpu_mem, 120), pool.submit(MT.run_estimate, c, gpu_mem, 120, True))
                for c in points]
        for c, (fe, fe_fused) in zip(points, ests):
            if budget.left() < 20:
                rows.append({**c, "error": "not run: the time budget was spent"})
                continue
            p = sh([sys.executable, str(BENCH / "gpu_memtruth.py"), "worker", json.dumps(c)], budget,
                   cap=min(90.0, budget.left() - 10))
            w = _last_json(p.stdout)
            row = {**c, "params": MT.param_count(c)}
            if w is not None and w.get("skipped"):
                row["skipped"] = w["skipped"]  # e.g. no bitsandbytes for the paged optimizer
            elif w is None:
                oom = "OutOfMemoryError" in p.stderr or "out of memory" in p.stderr
                row["error"] = ("measured: out of memory" if oom else
                                f"worker exit {p.returncode}: {p.tail(1)[:200]}")
            else:
                row.update(measured=w)
            row["estimate"] = fe.result()
            row["estimate_fused_norm"] = fe_fused.result()
            rows.append(row)
    for r in rows:
        w, e = r.get("measured") or {}, r.get("estimate") or {}
        r["error_total_vs_process_pct"] = MT.signed_error(e.get("total"), w.get("process_used"))
        r["error_states_act_vs_allocated_pct"] = MT.signed_error(e.get("without_overheads"), w.get("peak_allocated"))
        r["error_total_vs_reserved_pct"] = MT.signed_error(e.get("total"), w.get("peak_reserved"))
    measured = [r for r in rows if r.get("measured")]
    errs = [abs(r["error_total_vs_process_pct"]) for r in measured if r["error_total_vs_process_pct"] is not None]
    numbers = {"points": len(rows), "measured": len(measured), "worst_abs_error_total_pct": max(errs, default=None),
               "mean_abs_error_total_pct": round(sum(errs) / len(errs), 2) if errs else None}
    failed = [r for r in rows if "error" in r and not r["error"].startswith("not run")]
    unrun = [r for r in rows if r.get("error", "").startswith("not run")]
    skipped = [r for r in rows if r.get("skipped")]
    numbers.update(failed=len(failed), not_run_for_time=len(unrun), skipped=len(skipped))
    status = "pass" if measured and not failed else "fail"
    return Check(name, status, f"{len(measured)}/{len(rows)} grid points measured; |error| of the estimate's total vs "
                 f"the process's device memory: mean {numbers['mean_abs_error_total_pct']}%, worst "
                 f"{numbers['worst_abs_error_total_pct']}%" + (f"; {len(failed)} failed" if failed else "")
                 + (f"; {len(unrun)} not run (time budget)" if unrun else "")
                 + "".join(f"; {r['mode']} skipped: {r['skipped']}" for r in skipped), numbers=numbers, details=rows)


def _last_json(text: str) -> dict[str, Any] | None:
    for line in reversed(text.strip().splitlines()):
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if isinstance(doc, dict):
            return doc
    return None


#: (name, check, budget in seconds: full, quick; the quick budgets are roomy for busy CPU-only CI). Cheap first; the memory grid before the trainer runs, so
#: that a hang there cannot cost the table; every budget is also cut to what the run has left.
CHECKS: list[tuple[str, Callable[[Run, Budget], Check], float, float]] = [
    ("environment", check_environment, 5, 5),
    ("nvml-vs-nvidia-smi-recorded", check_nvsmi_recorded, 10, 10),
    ("nvml-vs-nvidia-smi", check_nvsmi_live, 30, 30),
    ("xid-events", check_xid, 15, 15),
    ("gpu-probe", check_gpu_probe, 40, 40),
    ("dcgm-platform", check_dcgm_platform, 60, 30),  # DCGM level 1: under a minute on one GPU
    ("memory-truth", check_memory, 275, 140),  # alone on the GPU: the process's memory is read through NVML
    ("nccl-bench", check_nccl_bench, 50, 40),
    ("probes-in-nccl-group", check_probes_in_group, 60, 90),
    ("trainer-fsdp", check_fsdp, 50, 40),
    ("trainer-fault", check_fault, 45, 90),
    ("monitor+ddp+resume", check_monitor_and_ddp, 110, 150),
]


def run_check(name: str, fn: Callable[[Run, Budget], Check], run: Run, seconds: float) -> Check:
    """``fn`` in a thread under its budget: an overrun or an exception is a failed check."""
    budget = Budget(seconds)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["check"] = fn(run, budget)
        except Exception as exc:  # noqa: BLE001 - a broken check must not stop the others
            box["error"] = f"{type(exc).__name__}: {exc}"
            box["trace"] = traceback.format_exc(limit=6)

    t0 = time.monotonic()
    th = threading.Thread(target=target, name=f"check-{name}", daemon=True)
    th.start()
    th.join(seconds + 5)  # subprocesses are bounded by the budget; 5 s for the check to notice
    took = round(time.monotonic() - t0, 2)
    if th.is_alive():
        return Check(name, "fail", f"overran its budget of {seconds:g} s (abandoned)", took, seconds)
    if "error" in box:
        return Check(name, "fail", f"the check itself crashed: {box['error']}", took, seconds,
                     details=box.get("trace"))
    c = box["check"]
    c.name, c.seconds, c.budget_s = name, took, seconds
    return c


def machine_facts() -> tuple[int, str, dict[str, Any]]:
    facts: dict[str, Any] = {"python": platform.python_version(), "platform": platform.platform(),
                             "host": platform.node(), "cpus": os.cpu_count()}
    try:
        from importlib.metadata import version

        facts["llmdiag"] = version("llmdiag")
    except Exception:  # noqa: BLE001 - not installed: run from source
        facts["llmdiag"] = None
    try:
        import torch

        facts["torch"] = torch.__version__
        facts["torch_cuda"] = torch.version.cuda
    except Exception as exc:  # noqa: BLE001 - a broken torch is a fact too
        facts["torch"] = f"unusable: {exc}"
    else:
        try:
            v = torch.cuda.nccl.version() if torch.version.cuda else None
            facts["nccl"] = ".".join(map(str, v)) if isinstance(v, tuple) else v
        except Exception as exc:  # noqa: BLE001 - NCCL missing from this build
            facts["nccl"] = f"unknown: {exc}"
    from llmdiag import nvml

    try:
        api = nvml.load()
    except nvml.NvmlUnavailable as exc:
        return 0, str(exc), facts
    try:
        n = api.device_count()
        facts["driver"] = api.driver_version()
        if n:
            s = api.snapshot(0)
            facts.update(gpu_name=s.name, gpu_memory_bytes=s.memory_total_bytes)
    finally:
        api.close()
    return n, "" if n else "NVML lists no GPU", facts


def _gib(b: float | None) -> str:
    return "—" if b is None else f"{b / 2**30:.2f}"


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{x:+.1f}%"


def render_markdown(doc: dict[str, Any]) -> str:
    f = doc["facts"]
    lines = [f"# GPU validation: {f.get('gpu_name') or 'no GPU'} ({doc['gpus']} GPU(s))", "",
             f"{doc['started']} on {f.get('host')}: llmdiag {f.get('llmdiag')}, torch {f.get('torch')} (CUDA "
             f"{f.get('torch_cuda')}, NCCL {f.get('nccl')}), driver {f.get('driver')}, Python {f.get('python')}; "
             f"{'--quick, ' if doc['quick'] else ''}{doc['seconds']:.0f} s in all.", "",
             f"**{doc['counts']}**", "", "| check | status | seconds (budget) | summary |", "|---|---|---|---|"]
    for c in doc["checks"]:
        summary = str(c["summary"]).replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {c['name']} | {c['status']} | {c['seconds']:.1f} ({c['budget_s']:g}) | {summary} |")
    mem = next((c for c in doc["checks"] if c["name"] == "memory-truth" and isinstance(c.get("details"), list)), None)
    if mem:
        lines += ["", "## Memory truth: estimate-memory against torch.cuda peaks (3 AdamW bf16 steps)", "",
                  "Signed error = (estimate − measured) / measured: positive means the estimate is too high. "
                  "`process` is the device memory the process held (NVML used after − before: CUDA context, "
                  "NCCL and the caching allocator's pool); the estimate's total is compared with it, and the "
                  "estimate without its runtime overheads with `max_memory_allocated`.", "",
                  "| model | params | seq | mb | recompute | mode | max allocated GiB | max reserved GiB | process GiB "
                  "| estimate GiB | error vs process | est. w/o overheads GiB | error vs allocated "
                  "| error (fused-norm estimate) |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in mem["details"]:
            w, e, ef = r.get("measured") or {}, r.get("estimate") or {}, r.get("estimate_fused_norm") or {}
            fused = MT.signed_error(ef.get("total"), w.get("process_used"))
            note = f" ({r['error']})" if r.get("error") else (f" (skipped: {r['skipped']})" if r.get("skipped") else "")
            lines.append(f"| {r['model']}{note} | {r.get('params', 0) / 1e9:.2f}B | {r['seq']} | {r['micro_batch']} "
                         f"| {r['recompute']} | {r['mode']} | {_gib(w.get('peak_allocated'))} | "
                         f"{_gib(w.get('peak_reserved'))} | {_gib(w.get('process_used'))} | {_gib(e.get('total'))} | "
                         f"{_pct(r.get('error_total_vs_process_pct'))} | {_gib(e.get('without_overheads'))} | "
                         f"{_pct(r.get('error_states_act_vs_allocated_pct'))} | {_pct(fused)} |")
    lines += ["", "## Details", ""]
    for c in doc["checks"]:
        if c["numbers"]:
            lines.append(f"- **{c['name']}**: `{json.dumps(c['numbers'], default=str)[:1500]}`")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["probes-worker"] and len(argv) == 2:
        return probes_worker(argv[1])
    ap = argparse.ArgumentParser(prog="gpu_validate.py", description=__doc__.splitlines()[0])
    ap.add_argument("outdir", help="directory for gpu-validation.json and gpu-validation.md (created)")
    ap.add_argument("--quick", action="store_true", help="fewer steps and grid points (CI and short leases)")
    ap.add_argument("--budget", type=float, default=None, help="seconds for the whole run (default 450, quick 300)")
    ap.add_argument("--only", action="append", default=[], metavar="TEXT",
                    help="run only the checks whose name contains TEXT (repeatable): " + ", ".join(c[0] for c in CHECKS))
    args = ap.parse_args(argv)
    outdir = Path(args.outdir)
    if outdir.exists() and not outdir.is_dir():
        print(f"error: {outdir} exists and is not a directory", file=sys.stderr)
        return 2
    if args.budget is not None and args.budget <= 0:
        print("error: --budget must be > 0", file=sys.stderr)
        return 2
    outdir.mkdir(parents=True, exist_ok=True)
    total = args.budget or (300.0 if args.quick else 450.0)
    started = datetime.datetime.now(datetime.timezone.utc)
    t0 = time.monotonic()
    gpus, why, facts = machine_facts()
    checks: list[Check] = []
    with tempfile.TemporaryDirectory(prefix="llmdiag-gpu-validate-") as tmp:
        run = Run(outdir, Path(tmp), args.quick, gpus, why, facts)
        for label, fn, full, quick in CHECKS:
            if args.only and not any(o in label for o in args.only):
                continue
            left = total - (time.monotonic() - t0) - 5  # 5 s to write the reports
            want = quick if args.quick else full
            if left < min(want, 10):
                checks.append(Check(label, "fail", f"not started: {left:.0f} s of the {total:g} s run left"))
                continue
            c = run_check(label, fn, run, min(want, left))
            print(f"[{time.monotonic() - t0:6.1f} s] {c.name}: {c.status} - {c.summary}", flush=True)
            checks.append(c)
    counts = {s: sum(1 for c in checks if c.status == s) for s in STATUSES}
    doc = {"schema": SCHEMA, "started": started.strftime("%Y-%m-%d %H:%M:%S UTC"), "quick": args.quick,
           "budget_s": total, "seconds": round(time.monotonic() - t0, 1), "gpus": gpus, "no_gpu_reason": why,
           "facts": facts, "counts": counts, "checks": [c.to_dict() for c in checks]}
    (outdir / "gpu-validation.json").write_text(json.dumps(doc, indent=1, default=str) + "\n")
    (outdir / "gpu-validation.md").write_text(render_markdown(doc))
    print(f"{counts} in {doc['seconds']} s -> {outdir}/gpu-validation.json, gpu-validation.md", flush=True)
    return 1 if counts["fail"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
