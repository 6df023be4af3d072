"""Shared fixtures. Markers: distributed, cluster, gpu, slow (see pyproject.toml)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"


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
