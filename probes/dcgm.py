"""Probe ``dcgm``: NVIDIA DCGM's active diagnostic, ``dcgmi diag -r LEVEL -j``, read into results.

Where ``dcgmi`` is installed (DCGM images, GPU Operator nodes) the probe runs the level from
``[dcgm] level`` (1 quick deployment checks, 2 adds short PCIe/memory tests, 3 and 4 stress
tests lasting tens of minutes to hours), bounded by ``[dcgm] timeout_s`` and by the run's
deadline; elsewhere it is skipped with the reason.

The JSON ``dcgmi diag -j`` prints (DCGM 3 and 4) is read by its structure, not by test names:
``"DCGM Diagnostic"`` (``"DCGM GPU Diagnostic"`` in DCGM 2) holds ``test_categories``, each a
``category`` with ``tests``; a test has a ``name`` and ``results``, one per entity (DCGM 4:
``entity_group``/``entity_id``; DCGM 3: ``gpu_id``; DCGM 2: ``gpu_ids``) with a ``status``
(Pass, Fail, Warn, Skip), ``warnings`` (``warning`` text, ``error_id``, ``error_severity``) and
``info``. A failure DCGM could not run at all comes as ``runtime_error``. dcgmi exits non-zero
when a test failed (the negative DCGM status as a byte: 226 for NVVS_ERROR, 205 when a GPU must
be isolated), so the JSON is read whatever the exit code.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from llmdiag.context import Context
from llmdiag.probe import BaseProbe
from llmdiag.result import Result, Status

ROOT_KEYS = ("DCGM Diagnostic", "DCGM GPU Diagnostic")
STATUS = {"pass": Status.PASS, "fail": Status.FAIL, "warn": Status.WARN, "skip": Status.SKIP}
#: dcgmErrorSeverity: what the operator does with a GPU that reported the error
SEVERITY_ACTION = {
    2: "isolate the GPU: drain the node and open a hardware ticket (RMA) with the DCGM error",
    6: "drain the node, reset the GPU (`nvidia-smi -r -i N`, or reboot) and rerun the diagnostic",
    5: "fix the configuration the message names and rerun",
    4: "triage: rerun the level; if it fails again, drain the node and open a hardware ticket",
    1: "the GPU can run work but needs watching: rerun the diagnostic after the job",
}
TYPICAL_S = {1: 60, 2: 180, 3: 1800, 4: 7200}  # order of magnitude of each level's run time


class DcgmError(ValueError):
    """dcgmi's output is not a diagnostic document."""


@dataclasses.dataclass(frozen=True)
class DiagEntry:
    """One test's outcome on one entity (a GPU; ``None`` for a node-wide result)."""

    category: str
    test: str
    entity: str | None
    status: Status
    warnings: tuple[tuple[str, int | None, int | None], ...]  # (text, error_id, severity)
    info: tuple[str, ...]


def _texts(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,) if value.strip() else ()
    if isinstance(value, list):
        return tuple(str(v) for v in value if str(v).strip())
    return (str(value),)


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _entity(res: Mapping[str, Any]) -> str | None:
    if "entity_id" in res:
        return f"{res.get('entity_group') or 'GPU'} {res['entity_id']}"
    for key in ("gpu_id", "gpu_ids"):
        if key in res and str(res[key]).strip() != "":
            return f"GPU {res[key]}"
    return None


def _warnings(res: Mapping[str, Any]) -> tuple[tuple[str, int | None, int | None], ...]:
    out = []
    for w in res.get("warnings") or ():
        if isinstance(w, Mapping):
            # DCGM 3's deployment tests put the text under "warnings" too
            text = w.get("warning", w.get("warnings", ""))
            out.append((str(text), _int(w.get("error_id")), _int(w.get("error_severity"))))
        else:
            out.append((str(w), None, None))
    return tuple(out)


def parse_diag(text: str) -> list[DiagEntry]:
    """The entries of a ``dcgmi diag -j`` document; raises DcgmError for a runtime error or
    output that is not one."""
    start = text.find("{")
    try:
        doc = json.loads(text[start:]) if start >= 0 else None
    except json.JSONDecodeError as exc:
        raise DcgmError(f"not JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(doc, dict):
        raise DcgmError(f"no JSON document in dcgmi's output: {text.strip()[:120]!r}")
    body = next((doc[k] for k in ROOT_KEYS if isinstance(doc.get(k), dict)), None)
    if body is None:
        raise DcgmError(f"no {' / '.join(ROOT_KEYS)} object (keys: {', '.join(sorted(doc)) or 'none'})")
    if body.get("runtime_error"):
        raise DcgmError(str(body["runtime_error"]).strip())
    entries = []
    for cat in body.get("test_categories") or ():
        if not isinstance(cat, Mapping):
            continue
        category = str(cat.get("category", "?"))
        for test in cat.get("tests") or ():
            if not isinstance(test, Mapping):  # DCGM 4 leaves null slots for tests that did not run
                continue
            name = str(test.get("name", "?"))
            results = [r for r in test.get("results") or () if isinstance(r, Mapping)]
            if not results and isinstance(test.get("test_summary"), Mapping):
                results = [test["test_summary"]]
            for res in results:
                status = STATUS.get(str(res.get("status", "")).strip().lower())
                if status is None:
                    continue  # "Not Run" and the like
                entries.append(DiagEntry(category, name, _entity(res), status, _warnings(res), _texts(res.get("info"))))
    if not entries:
        raise DcgmError("the document lists no test results")
    return entries


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "test"


def _fix(entries: list[DiagEntry]) -> str:
    severities = {sev for e in entries for _t, _id, sev in e.warnings if sev is not None}
    for sev in (2, 6, 4, 5, 1):  # the most drastic action first
        if sev in severities:
            return SEVERITY_ACTION[sev][0].upper() + SEVERITY_ACTION[sev][1:] + "."
    return ("Read the warning DCGM printed for the GPU named here (`dcgmi diag -r 1 -v`); drain the node if a "
            "hardware test failed and rerun the level after the fix.")


class DcgmProbe(BaseProbe):
    name = "dcgm"
    description = "NVIDIA DCGM diagnostic (dcgmi diag -r [dcgm] level -j), where dcgmi is installed"
    timeout_s = 310.0  # [dcgm] timeout_s (default 300 s) plus the grace; the configured value wins
    timeout_setting = ("dcgm", "timeout_s")

    def run(self, ctx: Context) -> Iterable[Result]:
        level = int(ctx.config.get("dcgm", "level"))
        exe = ctx.runner.which("dcgmi")
        if exe is None:
            yield self.skip(ctx, "diag", "dcgmi not installed (no DCGM on this node): the DCGM diagnostic was not run")
            return
        # leave the probe time to stop dcgmi and report before the runner's own deadline passes
        left = ctx.deadline.remaining()
        budget = max(0.1, min(float(ctx.config.get("dcgm", "timeout_s")), left - min(3.0, max(0.5, 0.1 * left))))
        argv = [exe, "diag", "-r", str(level), "-j"]
        res = ctx.run(argv, timeout=budget)
        data = {"level": level, "exit_code": res.returncode, "duration_s": round(res.duration_s, 1)}
        if res.timed_out:
            yield self.warn(ctx, "diag", f"dcgmi diag -r {level} did not finish within {budget:.0f} s (level {level} "
                            f"takes about {TYPICAL_S.get(level, 60)} s)", data=data, runbook="dcgm-diag-failed",
                            evidence=[("dcgmi diag run time", f"> {budget:.0f}", f"<= {budget:.0f}", "s")],
                            remediation="Give it more time ([dcgm] timeout_s, --timeout) or a lower [dcgm] level.")
            return
        if res.error:
            yield self.warn(ctx, "diag", f"dcgmi could not run: {res.error}", data=data, runbook="dcgm-diag-failed",
                            evidence=[("dcgmi", res.error, "runs", "")],
                            remediation="Check the DCGM install: `dcgmi discovery -l` (nv-hostengine running?).")
            return
        try:
            entries = parse_diag(res.stdout)
        except DcgmError as exc:
            detail = str(exc) if res.stdout.strip() else (res.stderr.strip().splitlines() or ["no output"])[-1]
            yield self.warn(ctx, "diag", f"dcgmi diag -r {level} gave no result (exit {res.returncode}): {detail}",
                            data=data, runbook="dcgm-diag-failed", evidence=[("dcgmi exit code", res.returncode, 0, "")],
                            remediation="Run `dcgmi diag -r 1` by hand: a stopped nv-hostengine (`systemctl start "
                                        "nvidia-dcgm`), a GPU held by another process or a DCGM/driver mismatch.")
            return
        yield from self.results(ctx, level, entries, data)

    def results(self, ctx: Context, level: int, entries: list[DiagEntry], data: dict) -> Iterable[Result]:
        """One result per DCGM test (its worst entity), named by the test."""
        by_test: dict[tuple[str, str], list[DiagEntry]] = {}
        for e in entries:
            by_test.setdefault((e.category, e.test), []).append(e)
        for (category, test), es in by_test.items():
            check = f"diag-{_slug(test)}"
            worst = Status.worst(e.status for e in es)
            tdata = dict(data, category=category, test=test,
                         entities={e.entity or "node": e.status.value for e in es})
            bad = [e for e in es if e.status in (Status.FAIL, Status.WARN)]
            if bad:
                ev = [(f"{e.entity or 'node'} {test}", e.status.value, "pass", "") for e in bad]
                ev += [(f"{e.entity or 'node'} DCGM error {'?' if eid is None else eid}", text[:200], None, "")
                       for e in bad for text, eid, _sev in e.warnings[:3]]
                who = ", ".join(e.entity or "node" for e in bad)
                first = next((t for e in bad for t, _i, _s in e.warnings), "")
                summary = f"DCGM level {level} {test} ({category}): {worst.value} on {who}" + (f": {first}" if first else "")
                helper = self.fail if worst is Status.FAIL else self.warn
                yield helper(ctx, check, summary, evidence=ev, data=tdata, runbook="dcgm-diag-failed",
                             remediation=_fix(bad))
            elif all(e.status is Status.SKIP for e in es):
                why = next((t for e in es for t in (*e.info, *(w for w, _i, _s in e.warnings))), "DCGM skipped it")
                yield self.skip(ctx, check, f"DCGM level {level} {test} skipped: {why}", data=tdata)
            else:
                n = sum(e.status is Status.PASS for e in es)
                yield self.ok(ctx, check, f"DCGM level {level} {test} ({category}) passed on {n} "
                              f"{'entity' if n == 1 else 'entities'}", data=tdata)
