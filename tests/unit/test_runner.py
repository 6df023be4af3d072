"""The runner: a probe that raises or overruns becomes a failed result and the run goes on."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from llmdiag.config import Config
from llmdiag.context import Context
from llmdiag.probe import BaseProbe, Requirement
from llmdiag.result import Status
from llmdiag.runner import run_probes


class Good(BaseProbe):
    name = "good"
    description = "always passes"

    def run(self, ctx):
        yield self.ok(ctx, "fine", "all good")


class Raises(BaseProbe):
    name = "raises"
    description = "raises"

    def run(self, ctx):
        raise RuntimeError("boom")


class Sleeps(BaseProbe):
    name = "sleeps"
    description = "overruns its deadline"
    timeout_s = 0.3

    def __init__(self):
        self.release = threading.Event()

    def run(self, ctx):
        self.release.wait(5)
        return [self.ok(ctx, "late", "too late")]


class NeedsSection(BaseProbe):
    name = "needs-section"
    description = "needs [job]"
    requires = frozenset({Requirement.CONFIG})
    config_section = "job"

    def run(self, ctx):  # pragma: no cover - must be skipped
        raise AssertionError("should not run")


class NeedsDistributed(BaseProbe):
    name = "needs-dist"
    description = "needs a job"
    requires = frozenset({Requirement.DISTRIBUTED})

    def run(self, ctx):  # pragma: no cover
        raise AssertionError("should not run")


class MakesTemp(BaseProbe):
    name = "temp"
    description = "creates a temp file and hangs"
    timeout_s = 0.2

    def __init__(self, path: Path):
        self.path = path

    def run(self, ctx):
        ctx.cleanup.track(self.path)
        self.path.write_text("x")
        time.sleep(3)
        return []


def ctx():
    return Context.create(config=Config.default(), env={"PATH": "/usr/bin:/bin"}, node="testnode")


def test_failures_are_findings_and_run_goes_on(tmp_path):
    sleeper = Sleeps()
    temp = MakesTemp(tmp_path / "probe.tmp")
    start = time.monotonic()
    report = run_probes([Good(), Raises(), sleeper, NeedsSection(), NeedsDistributed(), temp], ctx())
    elapsed = time.monotonic() - start
    sleeper.release.set()
    by_probe = {r.probe: r for r in report.results}
    assert by_probe["good"].status is Status.PASS
    assert by_probe["raises"].status is Status.FAIL
    assert "RuntimeError: boom" in by_probe["raises"].summary and by_probe["raises"].runbook == "probe-error"
    assert by_probe["sleeps"].status is Status.FAIL
    assert by_probe["sleeps"].summary == "timed out after 0.3 s"
    assert by_probe["needs-section"].status is Status.SKIP and "[job]" in by_probe["needs-section"].summary
    assert by_probe["needs-dist"].status is Status.SKIP and "multi-process" in by_probe["needs-dist"].summary
    # the abandoned probe's temp file is removed by the runner, not by the probe
    assert by_probe["temp"].summary.startswith("timed out")
    assert not (tmp_path / "probe.tmp").exists()
    assert elapsed < 2.5, elapsed
    assert [r.probe for r in report.results] == ["good", "raises", "sleeps", "needs-section", "needs-dist", "temp"]
    assert report.node == "testnode"


def test_probe_returning_garbage_is_reported():
    class Garbage(BaseProbe):
        name = "garbage"
        description = "returns strings"

        def run(self, ctx):
            return ["not a result"]

    report = run_probes([Garbage()], ctx())
    (r,) = report.results
    assert r.status is Status.FAIL and "not Result" in r.summary


def test_a_budget_share_says_where_the_deadline_came_from():
    """A deadline cut from a budget (the cluster agent's share of cluster.timeout_s) is named in
    the timeout message: "timed out after 0.3 s" alone does not say why 0.3 s."""
    from llmdiag.cluster.agent import bounded

    sleeper = Sleeps()
    sleeper.timeout_s = 5.0
    (capped,) = bounded([sleeper], 1.0, "the local probes' share of cluster.timeout_s = 10 s")
    report = run_probes([capped], ctx())
    sleeper.release.set()
    (r,) = report.results
    assert r.summary == "timed out after 1 s (the local probes' share of cluster.timeout_s = 10 s)"
    assert r.runbook == "probe-timeout"
