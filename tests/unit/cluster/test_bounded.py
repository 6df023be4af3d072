"""Every wait is bounded and says what happened: rendezvous retries, nccl-bench's whole-run limit."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

from llmdiag.cluster import reach
from tests.conftest import cli_env


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_wait_open_reports_every_try_and_the_whole_wait():
    port = _closed_port()
    seen = []
    t0 = time.monotonic()
    r = reach.wait_open("127.0.0.1", port, 1.2, 0.5, interval=0.1, progress=lambda r, n, w: seen.append((r.outcome, n)))
    assert time.monotonic() - t0 < 2.5
    assert r.outcome == reach.REFUSED
    # the evidence is the whole wait, not the last 0.1 s try
    assert r.detail.startswith("tried ") and " times over 1 s" in r.detail, r.detail
    assert r.elapsed_s >= 1.0
    # the caller heard about the first refusal at once (to tell the user), then on every try
    assert seen and seen[0] == (reach.REFUSED, 1)


def test_nccl_bench_whole_run_limit_ends_a_stuck_rank():
    code = ("import time; from llmdiag.ncclbench.launch import whole_run_limit; "
            "whole_run_limit(1.5, 0, every_s=0.5); time.sleep(30)")
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-c", code], env=cli_env(), capture_output=True, text=True, timeout=60)
    took = time.monotonic() - t0
    assert p.returncode == 1 and took < 10, (p.returncode, took)
    assert "still running after" in p.stderr
    assert "did not finish within timeout_s = 1.5 s" in p.stderr


def test_nccl_bench_whole_run_limit_is_quiet_when_the_run_ends_in_time():
    code = ("import time; from llmdiag.ncclbench.launch import whole_run_limit; "
            "e = whole_run_limit(1.0, 0, every_s=5); time.sleep(0.2); e.set(); time.sleep(1.5); print('ok')")
    p = subprocess.run([sys.executable, "-c", code], env=cli_env(), capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stdout.strip() == "ok" and "did not finish" not in p.stderr


def test_software_probe_cut_by_a_budget_share_keeps_its_other_findings(tmp_path):
    """A torch import slower than the probe's share of the budget: the torch check says so and
    the os/python findings are kept (the child used to run to the deadline itself, so the whole
    probe timed out: "software: timed out after 14.5 s" on loaded cluster nodes)."""
    from llmdiag.context import Context
    from llmdiag.probes.software import SoftwareProbe
    from llmdiag.runner import run_probe, with_timeout

    (tmp_path / "torch.py").write_text("import time\ntime.sleep(60)\n")  # an import that hangs
    ctx = Context.create(env=cli_env(PYTHONPATH=str(tmp_path)), node="n0")
    t0 = time.monotonic()
    res = run_probe(with_timeout(SoftwareProbe(), 4.0, "a share of the budget"), ctx)
    checks = {r.check: r for r in res}
    assert time.monotonic() - t0 < 6
    assert "probe" not in checks, [r.summary for r in res]
    assert {"os", "python", "torch"} <= set(checks), list(checks)
    # the share of the budget cut it, not the check's own limit: not judged (skip), never "torch missing"
    assert checks["torch"].status.value == "skip" and "did not finish within" in checks["torch"].summary
    assert checks["torch"].runbook in (None, "probe-timeout")
