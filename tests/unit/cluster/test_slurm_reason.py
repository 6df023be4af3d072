"""The drain reason: one line naming the first failure, bounded, counting the rest."""

from llmdiag.cluster.slurm import REASON_MAX, drain_argv, drain_reason
from llmdiag.result import Result, Status


def _r(check, status, summary):
    return Result(probe="system", check=check, node="n1", status=Status(status), summary=summary,
                  remediation=None if status == "pass" else "fix it", runbook=None if status == "pass" else "nofile-low")


def test_reason_names_the_first_failure_and_counts_the_rest():
    rs = [_r("nofile", "warn", "low"), _r("shm", "fail", "/dev/shm 64 MiB\n< 1024 MiB"), _r("memlock", "fail", "x")]
    assert drain_reason(rs) == "llmdiag: system/shm: /dev/shm 64 MiB < 1024 MiB (and 1 more)"
    assert drain_reason(rs, strict=True).startswith("llmdiag: system/nofile: low (and 2 more)")
    assert drain_reason([_r("a", "pass", "ok"), _r("b", "warn", "w")]) is None
    long = drain_reason([_r("x", "fail", "y" * 500)])
    assert len(long) <= REASON_MAX and long.endswith("...")
    assert drain_argv("gpu07", "llmdiag: a b") == ["scontrol", "update", "nodename=gpu07", "state=drain",
                                                   "reason=llmdiag: a b"]
