"""Identities that reach operators stay the same from run to run on the same node: check names,
JUnit test names, Prometheus series (metric name and labels). Jenkins tracks a test by its
name and Prometheus a series by its labels; a name that changes every run is a new test and a
removed one, a new series and a stale one."""

from __future__ import annotations

import json
import subprocess
import xml.etree.ElementTree as ET

from prometheus_client.parser import text_string_to_metric_families

from llmdiag.reports.base import render
from tests.conftest import cli_env, llmdiag_argv
from tests.reports import realdocs


def _preflight(tmp_path, i: int) -> dict:
    out = tmp_path / f"run{i}.json"
    # the real default run (every probe, default paths), started from the same directory
    proc = subprocess.run(llmdiag_argv("preflight", "-f", "json", "-o", str(out)), capture_output=True, text=True,
                          env=cli_env(), timeout=600, cwd=tmp_path)
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(out.read_text())


def _series(text: str) -> set[tuple]:
    return {(s.name, tuple(sorted(s.labels.items()))) for f in text_string_to_metric_families(text)
            for s in f.samples if s.name != "llmdiag_run_info"}


def _junit_names(text: str) -> list[tuple[str, str]]:
    return sorted((c.get("classname"), c.get("name")) for c in ET.fromstring(text).iter("testcase"))


def test_two_preflight_runs_give_the_same_names(tmp_path):
    a, b = _preflight(tmp_path, 1), _preflight(tmp_path, 2)
    names = [sorted((r["node"], r["probe"], r["check"]) for r in d["results"]) for d in (a, b)]
    assert names[0] == names[1]
    checks = {n[2] for n in names[0]}
    assert {"path:workdir", "path:tempdir"} <= checks, checks  # the default paths, named by role
    assert not any("llmdiag-" in c for c in checks)  # llmdiag's own private temp dir is never a name
    assert _junit_names(render(a, "junit")) == _junit_names(render(b, "junit"))
    pa, pb = render(a, "prometheus"), render(b, "prometheus")
    assert _series(pa) == _series(pb)
    runs = [next(s.labels["run"] for f in text_string_to_metric_families(t) for s in f.samples
                 if s.name == "llmdiag_run_info") for t in (pa, pb)]
    assert runs[0] != runs[1]  # which run wrote the file: still told, on the info metric alone


def test_every_kind_keeps_its_series_from_run_to_run():
    """The same log analysed, the same plan estimated, twice: the same series (the run id,
    which includes the time, only on llmdiag_run_info)."""
    for name in ("analyze-log", "estimate-memory"):
        first = realdocs.run(realdocs.COMMANDS[name])
        again = realdocs.run(realdocs.COMMANDS[name])
        assert _series(render(first, "prometheus")) == _series(render(again, "prometheus")), name
