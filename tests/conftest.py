"""Shared fixtures. Markers: distributed, cluster, browser, ops, gpu, slow (see pyproject.toml)."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import pytest

#: fixtures every test folder may use: a real Slurm (``slurm``)
pytest_plugins = ("tests.slurm",)

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
# every document a test renders or reads must match its type exactly: an unknown key, a missing
# required field or a word outside its vocabulary is an error here (llmdiag.documents.read);
# the commands the tests start inherit it
os.environ.setdefault("LLMDIAG_STRICT_DOCUMENTS", "1")


def pytest_configure(config) -> None:
    """The commands the tests start get the signal dispositions of a user's shell. A test run
    started in the background (`make test &`: SIGINT and SIGQUIT ignored) or under `nohup`
    (SIGHUP ignored) would hand those ignores down to every llmdiag it starts, and llmdiag keeps
    an inherited ignore (tests/unit/test_signals.py), so a Ctrl-C test could never stop it."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    for sig in (signal.SIGQUIT, signal.SIGHUP, signal.SIGTERM):
        if signal.getsignal(sig) == signal.SIG_IGN:
            signal.signal(sig, signal.SIG_DFL)


#: a test folder -> the marker every test in it carries, so `-m "not ..."` (make test-fast) selects
#: by what a test needs without each file repeating it
FOLDER_MARKERS = {"distributed": "distributed", "cluster": "cluster", "browser": "browser", "ops": "ops"}


#: seconds each test took (setup + call + teardown) when last measured (`make test-durations`);
#: a test over SLOW_S there is `slow`, so `make test-fast` leaves it to `make test`
DURATIONS = REPO / "tests" / "durations.json"
SLOW_S = 0.5
_RECORD_ENV = "LLMDIAG_RECORD_DURATIONS"
_times: dict[str, float] = {}


def _recorded() -> dict[str, float]:
    try:
        return json.loads(DURATIONS.read_text())
    except (OSError, ValueError):
        return {}


def pytest_collection_modifyitems(config, items) -> None:
    recorded = _recorded()
    for item in items:
        parts = Path(str(item.fspath)).relative_to(REPO).parts
        marker = FOLDER_MARKERS.get(parts[1]) if len(parts) > 2 and parts[0] == "tests" else None
        if marker:
            item.add_marker(getattr(pytest.mark, marker))
        if recorded.get(item.nodeid, 0.0) > SLOW_S:
            item.add_marker(pytest.mark.slow)


def pytest_runtest_logreport(report) -> None:
    if os.environ.get(_RECORD_ENV):
        _times[report.nodeid] = _times.get(report.nodeid, 0.0) + report.duration


def pytest_sessionfinish(session) -> None:
    """With $LLMDIAG_RECORD_DURATIONS set, the durations of this run replace those recorded (only
    tests over a tenth of SLOW_S are kept: the file lists the candidates, not every test)."""
    if not os.environ.get(_RECORD_ENV) or not _times:
        return
    merged = {**_recorded(), **{k: round(v, 2) for k, v in _times.items()}}
    keep = {k: v for k, v in sorted(merged.items()) if v > SLOW_S / 10}
    DURATIONS.write_text(json.dumps(keep, indent=0, sort_keys=True) + "\n")


def cli_env(**extra: str) -> dict[str, str]:
    """Environment for running `python -m llmdiag` as a real subprocess from this checkout."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("COLUMNS", "120")
    env.update(extra)
    return env


def llmdiag_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "llmdiag", *args]


@pytest.fixture
def repo() -> Path:
    return REPO
