"""Helpers for the node-probe tests: contexts with real inputs and recorded NVML readings."""

from __future__ import annotations

from pathlib import Path

from llmdiag.config import Config
from llmdiag.context import Context
from llmdiag.nvml import RecordedNvml
from llmdiag.result import Result, Status

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "nvml"


def nvml_fixture(name: str):
    """A factory for ``Context(nvml=...)`` replaying ``tests/fixtures/nvml/<name>.json``."""
    return lambda: RecordedNvml.from_file(FIXTURES / f"{name}.json")


def context(env: dict | None = None, config: dict | None = None, **kw) -> Context:
    cfg = Config.from_mapping(config or {})
    return Context.create(config=cfg, env=env or {}, node="test-node", **kw)


def by_check(results: list[Result]) -> dict[str, Result]:
    return {r.check: r for r in results}


def statuses(results: list[Result]) -> dict[str, str]:
    return {r.check: r.status.value for r in results}


def assert_actionable(results: list[Result]) -> None:
    """Every non-pass result carries evidence, a remediation and a runbook id that exists."""
    from llmdiag import runbooks

    for r in results:
        if r.status in (Status.WARN, Status.FAIL):
            assert r.evidence, r
            assert r.remediation, r
        if r.status is not Status.PASS:
            assert r.runbook and runbooks.exists(r.runbook), r
