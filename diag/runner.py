"""Runs probes: requirements checked, deadlines enforced, failures turned into findings.

Each probe runs in its own daemon thread with its own :class:`~llmdiag.context.Deadline`. A probe
that overruns is abandoned (threads cannot be killed; its thread dies with the process) and
reported as failed "timed out after N s"; a probe that raises is reported as failed with the
exception. Temporary files probes registered in ``ctx.cleanup`` are removed at the end, also
when the run is interrupted.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterable, Sequence

from llmdiag.context import Context
from llmdiag.errors import UsageError
from llmdiag.probe import Probe, Requirement
from llmdiag.registry import LoadError
from llmdiag.result import NodeReport, Result, Status

ProgressFn = Callable[[str, str, Sequence[Result]], None]
"""progress(event, probe_name, results): event is "start" or "done"."""


def _fmt_s(seconds: float) -> str:
    return f"{seconds:g}"


def torch_status() -> tuple[bool, str]:
    """(importable, version or error). Cached; a broken torch is a finding, not a crash."""
    global _TORCH_STATUS
    if _TORCH_STATUS is None:
        try:
            import torch  # noqa: PLC0415 - lazy on purpose

            _TORCH_STATUS = (True, str(torch.__version__))
        except Exception as exc:  # noqa: BLE001 - ImportError, OSError from a broken CUDA lib, ...
            _TORCH_STATUS = (False, f"{type(exc).__name__}: {exc}")
    return _TORCH_STATUS


_TORCH_STATUS: tuple[bool, str] | None = None


def require_torch(what: str) -> None:
    """A command that cannot run without torch (nccl-bench, train) stops with one line, exit 2,
    before it starts workers that would each print an ImportError traceback."""
    ok, why = torch_status()
    if not ok:
        import sys  # noqa: PLC0415

        raise UsageError(f"{what} needs PyTorch, which does not import in {sys.executable}: {why}; install torch "
                         "(a CUDA build on GPU nodes) or run llmdiag from the training job's Python environment")


def gpu_status(ctx: Context) -> tuple[bool, str]:
    """(NVML answers, reason when not)."""
    try:
        from llmdiag import nvml  # noqa: PLC0415

        api = (ctx.nvml or nvml.load)()
        count = api.device_count()
    except Exception as exc:  # noqa: BLE001
        return False, f"no NVIDIA driver / NVML not available ({type(exc).__name__}: {exc})"
    if count == 0:
        return False, "NVML answers but reports no GPU"
    return True, f"{count} GPU(s)"


def unmet_requirement(probe: Probe, ctx: Context) -> str | None:
    """The reason ``probe`` cannot run here, or None."""
    reqs = frozenset(Requirement(r) for r in probe.requires)
    if Requirement.CONFIG in reqs and not ctx.config.has_section(probe.config_section):
        return f"needs the [{probe.config_section}] section in the config file"
    if Requirement.DISTRIBUTED in reqs and not (ctx.launcher.distributed or "process_group" in ctx.services):
        return "needs a multi-process job (run under torchrun/srun/mpirun or with --hostfile)"
    if Requirement.TORCH in reqs:
        ok, why = torch_status()
        if not ok:
            return f"torch is not importable: {why}"
    if Requirement.GPU in reqs:
        ok, why = gpu_status(ctx)
        if not ok:
            return why
    return None


def _error_result(probe_name: str, ctx: Context, summary: str, runbook: str, remediation: str) -> Result:
    return Result(
        probe=probe_name,
        check="probe",
        node=ctx.node,
        status=Status.FAIL,
        summary=summary,
        remediation=remediation,
        runbook=runbook,
    )


def run_probe(probe: Probe, ctx: Context) -> list[Result]:
    """Run one probe under its deadline; always returns at least one result."""
    start = time.monotonic()
    reason = unmet_requirement(probe, ctx)
    if reason:
        # a probe may turn a missing requirement into its own finding (GPUs expected, no driver)
        own = getattr(probe, "unmet", None)
        found = list(own(ctx, reason) or ()) if callable(own) else []
        if found:
            return found
        return [
            Result(probe=probe.name, check="probe", node=ctx.node, status=Status.SKIP,
                   summary=f"skipped: {reason}", runbook="check-skipped")
        ]
    pctx = ctx.with_deadline(float(probe.timeout_s))
    box: dict[str, object] = {}

    def target() -> None:
        try:
            box["results"] = list(probe.run(pctx))
        except BaseException as exc:  # noqa: BLE001 - a broken probe is a finding
            box["error"] = exc

    t = threading.Thread(target=target, name=f"probe-{probe.name}", daemon=True)
    t.start()
    t.join(probe.timeout_s)
    elapsed = time.monotonic() - start
    if t.is_alive():
        return [
            _error_result(
                probe.name, ctx, f"timed out after {_fmt_s(probe.timeout_s)} s"
                + (f" ({note})" if (note := getattr(probe, "timeout_note", None)) else ""), "probe-timeout",
                f"Find what blocks the '{probe.name}' probe (a hung mount, driver or network call); "
                f"rerun with --skip {probe.name} to go on without it.",
            )
        ]
    if "error" in box:
        exc = box["error"]
        return [
            _error_result(
                probe.name, ctx, f"probe raised {type(exc).__name__}: {exc}", "probe-error",
                f"Rerun with LLMDIAG_DEBUG=1 for the traceback and report it; --skip {probe.name} bypasses it.",
            )
        ]
    results = box.get("results") or []
    checked: list[Result] = []
    for r in results:  # type: ignore[union-attr]
        if not isinstance(r, Result):
            return [
                _error_result(
                    probe.name, ctx, f"probe returned {type(r).__name__}, not Result", "probe-error",
                    f"Fix the '{probe.name}' plugin: run() must return llmdiag.result.Result values.",
                )
            ]
        checked.append(r if r.duration_s is not None else dataclasses.replace(r, duration_s=elapsed))
    if not checked:
        checked.append(
            Result(probe=probe.name, check="probe", node=ctx.node, status=Status.SKIP,
                   summary="skipped: the probe had nothing to check here", runbook="check-skipped",
                   duration_s=elapsed)
        )
    return checked


def run_probes(
    probes: Sequence[Probe],
    ctx: Context,
    *,
    load_errors: Iterable[LoadError] = (),
    progress: ProgressFn | None = None,
    parallel: int = 4,
) -> NodeReport:
    """Run ``probes`` (up to ``parallel`` at a time) and collect a NodeReport in probe order."""
    started = time.time()
    slots = threading.Semaphore(max(1, parallel))
    outputs: list[list[Result] | None] = [None] * len(probes)
    threads: list[threading.Thread] = []

    def work(i: int, probe: Probe) -> None:
        with slots:
            if progress:
                progress("start", probe.name, ())
            outputs[i] = run_probe(probe, ctx)
            if progress:
                progress("done", probe.name, outputs[i] or ())

    try:
        for i, p in enumerate(probes):
            t = threading.Thread(target=work, args=(i, p), name=f"runner-{p.name}", daemon=True)
            t.start()
            threads.append(t)
        for t in threads:
            # run_probe enforces each probe's deadline; this join only waits for that.
            while t.is_alive():
                t.join(0.1)
    finally:
        ctx.cleanup.run()

    results: list[Result] = []
    for err in load_errors:
        results.append(
            Result(probe="registry", check=err.source.split(":")[0].split(" = ")[0], node=ctx.node,
                   status=Status.FAIL, summary=err.message, runbook="probe-error",
                   remediation="Fix or uninstall the plugin named here; the other probes ran.")
        )
    for out in outputs:
        results.extend(out or ())
    return NodeReport(
        node=ctx.node,
        node_rank=ctx.launcher.node_rank,
        results=tuple(results),
        started_at=started,
        finished_at=time.time(),
        meta={"launcher": ctx.launcher.kind},
    )


class _TimeoutOverride:
    """A probe with its deadline replaced (``--timeout``, a cluster stage's share of the budget)."""

    def __init__(self, probe: Probe, timeout_s: float, note: str | None = None):
        self._probe = probe
        self.timeout_s = float(timeout_s)
        self.timeout_note = note  # where the deadline came from, for the timeout message

    def __getattr__(self, name):
        return getattr(self._probe, name)

    def run(self, ctx):
        return self._probe.run(ctx)


def with_timeout(probe: Probe, timeout_s: float, note: str | None = None) -> Probe:
    """``probe`` with the deadline ``timeout_s`` (everything else unchanged); ``note`` says where
    it came from (a share of a budget) in the timeout message."""
    return _TimeoutOverride(probe, timeout_s, note)  # type: ignore[return-value]
