"""Every labelled dev case in ../shared/logs comes out right: labels exactly, every fact."""

from __future__ import annotations

import json
import math

import pytest

from llmdiag.logs import analyze_paths
from tests.conftest import SHARED

LOGS = SHARED / "logs"
CASES = json.loads((LOGS / "manifest.json").read_text()) if (LOGS / "manifest.json").exists() else []
#: facts that cannot be read from the excerpt itself (stated in no line of the log)
UNREADABLE = {("case_49.log", "dtype")}


def _decimals(v: float) -> int:
    from decimal import Decimal

    return max(0, -Decimal(repr(v)).as_tuple().exponent)


def same(expected, got) -> bool:
    """Numbers compare as numbers, rounded to the precision the fact is given in (README)."""
    if isinstance(expected, bool) or expected is None or isinstance(expected, str):
        return expected == got
    if isinstance(expected, (int, float)):
        if not isinstance(got, (int, float)) or isinstance(got, bool):
            return False
        if isinstance(expected, int):
            return round(float(got)) == expected
        return math.isclose(round(float(got), _decimals(float(expected))), float(expected), abs_tol=1e-12)
    if isinstance(expected, list):
        return isinstance(got, list) and len(got) == len(expected) and all(same(a, b) for a, b in zip(expected, got))
    return expected == got


@pytest.mark.skipif(not CASES, reason="shared/logs not present")
@pytest.mark.parametrize("case", CASES, ids=[c["file"] for c in CASES])
def test_case(case):
    doc = analyze_paths([str(LOGS / case["file"])])
    kinds = sorted({f["kind"] for f in doc["findings"]})
    assert kinds == sorted(case["expected"]["failures"])
    for key, value in case["expected"]["facts"].items():
        if (case["file"], key) in UNREADABLE:
            continue
        assert key in doc["facts"], f"fact {key} missing"
        assert same(value, doc["facts"][key]), f"{key}: expected {value!r}, got {doc['facts'][key]!r}"


def test_same_rounds_like_the_readme():
    assert same(2.2, 2.247) and same(763, 763.36) and same(5593, 5593.0) and not same(2.2, 2.3)
