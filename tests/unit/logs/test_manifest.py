"""Every labelled dev case in ../shared/logs, logs-real and logs-real-3 comes out right: labels exactly, every fact.

The two manifests name facts descriptively (logs-real/README.md: "map them to the analyzer's own
fields"). ``FACT_FIELDS`` says which document field a manifest name is read from when the
document does not use the manifest's own name.
"""

from __future__ import annotations

import json
import math

import pytest

from llmdiag.logs import analyze_paths
from tests.conftest import SHARED


def _load(name: str) -> list[tuple[str, dict]]:
    man = SHARED / name / "manifest.json"
    return [(name, c) for c in json.loads(man.read_text())] if man.exists() else []


CASES = _load("logs") + _load("logs-real") + _load("logs-real-3")
#: facts that cannot be read from the excerpt itself (stated in no line of the log)
UNREADABLE = {("logs", "case_49.log", "dtype"), ("logs-real", "case_30.log", "torch_version"),
              ("logs-real-3", "case_31.log", "nccl_version")}
#: manifest fact name -> the document's field for it (a doc["facts"] key, or "root.rank": the rank of the
#: top root cause)
FACT_FIELDS = {
    "last_iter": "last_step",  # the analyzer keys steps by iteration when the log has no separate step
    "epoch": "last_epoch",
    "rank": "root.rank",
    "loss_scale_from": "loss_scale_first",  # logs-real-3: a run of overflows, the scale before and after
    "loss_scale_to": "loss_scale_last",
}


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


def fact(doc: dict, key: str):
    if key in doc["facts"]:
        return doc["facts"][key]
    field = FACT_FIELDS.get(key)
    if field == "root.rank":
        return doc["root_causes"][0]["rank"] if doc["root_causes"] else None
    return doc["facts"].get(field, KeyError(key)) if field else KeyError(key)


@pytest.mark.skipif(not CASES, reason="shared/logs not present")
@pytest.mark.parametrize("case", CASES, ids=[f"{s}/{c['file']}" for s, c in CASES])
def test_case(case):
    subset, case = case
    doc = analyze_paths([str(SHARED / subset / case["file"])])
    kinds = sorted({f["kind"] for f in doc["findings"]})
    assert kinds == sorted(case["expected"]["failures"])
    # a dead job never passes; a healthy log has no finding at all
    assert doc["status"] == ("pass" if not case["expected"]["failures"] else doc["status"])
    if any(k not in ("nccl_warn", "grad_overflow", "loss_spike", "grad_norm_spike", "throughput_drop")
           for k in case["expected"]["failures"]):
        assert doc["status"] == "fail"
    for key, value in case["expected"]["facts"].items():
        if (subset, case["file"], key) in UNREADABLE:
            continue
        got = fact(doc, key)
        assert not isinstance(got, KeyError), f"fact {key} missing"
        assert same(value, got), f"{key}: expected {value!r}, got {got!r}"


def test_same_rounds_like_the_readme():
    assert same(2.2, 2.247) and same(763, 763.36) and same(5593, 5593.0) and not same(2.2, 2.3)


def _labels_of(tmp_path, lines: list[str]) -> list[str]:
    p = tmp_path / "shaped.log"
    p.write_text("".join(line + "\n" for line in lines))
    return sorted({f["kind"] for f in analyze_paths([str(p)])["findings"]})


@pytest.mark.skipif(not CASES, reason="shared/logs not present")
@pytest.mark.parametrize("shape", ["myjob.node-7 [stderr] ", "2024-05-01T10:00:00.123Z stdout F ",
                                   "Jun 10 10:00:00 gpu-node-3 python[1234]: ", "wrap@120", "wrap@80"])
def test_labels_survive_other_prefixes_and_terminal_wraps(tmp_path, shape):
    """The same excerpts behind a prefix nobody listed, or cut by a terminal: the same labels."""
    wrong = []
    for subset, case in CASES:
        lines = (SHARED / subset / case["file"]).read_text(encoding="utf-8", errors="replace").splitlines()
        if shape.startswith("wrap@"):
            w = int(shape[5:])
            lines = [line[i:i + w] for line in lines for i in range(0, max(len(line), 1), w)]
        else:
            lines = [shape + line for line in lines]
        got = _labels_of(tmp_path, lines)
        if got != sorted(case["expected"]["failures"]):
            wrong.append((case["file"], got))
    assert wrong == []
