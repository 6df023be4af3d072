"""Shared fixtures. Markers: distributed, cluster, gpu, slow (see pyproject.toml)."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"


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
