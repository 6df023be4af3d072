"""The step table's batch helpers: the JSON head rows and the spill format round trip."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from llmdiag.logs.columns import FLOAT_COLS, INT_COLS, NONE
from llmdiag.logs.table import _json_float, empty_batch, head_rows, pack, unpack

VALUES = st.sampled_from([math.nan, math.inf, -math.inf, 0.0, -0.0, 1.5, 3.25e-4, 1e300])


def _reference_rows(b: dict, k: int, files: list[str]) -> list[dict]:
    """Every value converted one by one (the per-value rule the fast path must equal)."""
    rows = []
    for i in range(k):
        row: dict = {}
        for c in ("step", "iter", "rank"):
            v = int(b[c][i])
            row[c] = None if v == NONE else v
        for c in FLOAT_COLS:
            v = float(b[c][i])
            if c in ("loss", "grad_norm"):
                row[c] = _json_float(v) if b["has_" + c][i] else None
            else:
                row[c] = None if v != v else _json_float(v)
        row["line"] = int(b["line"][i])
        row["file"] = files[int(b["file"][i])]
        rows.append(row)
    return rows


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 12), st.data())
def test_head_rows_equal_the_per_value_conversion(n, data):
    b = empty_batch(n)
    for c in FLOAT_COLS:
        kind = data.draw(st.sampled_from(["absent", "finite", "mixed"]))
        if kind == "finite":
            b[c] = np.array(data.draw(st.lists(st.floats(-1e6, 1e6), min_size=n, max_size=n)))
        elif kind == "mixed":
            b[c] = np.array(data.draw(st.lists(VALUES, min_size=n, max_size=n)))
    for c in ("step", "iter", "rank"):
        b[c] = np.array(data.draw(st.lists(st.sampled_from([NONE, 0, 3, 12]), min_size=n, max_size=n)), dtype=np.int64)
    for c in ("has_loss", "has_grad_norm"):
        b[c] = np.array(data.draw(st.lists(st.sampled_from([0, 1]), min_size=n, max_size=n)), dtype=np.int64)
    b["line"] = np.arange(1, n + 1, dtype=np.int64)
    b["file"] = np.zeros(n, dtype=np.int64)
    k = data.draw(st.integers(0, n))
    got = head_rows(b, k, ["a.log"])
    want = _reference_rows(b, k, ["a.log"])
    assert [{c: (str(v) if isinstance(v, float) and v != v else v) for c, v in r.items()} for r in got] == \
        [{c: (str(v) if isinstance(v, float) and v != v else v) for c, v in r.items()} for r in want]
    assert all(type(g[c]) is type(w[c]) for g, w in zip(got, want) for c in w)


def test_pack_unpack_round_trip():
    b = empty_batch(3)
    b["loss"] = np.array([1.0, math.nan, 2.0])
    b["step"] = np.array([1, 2, 3], dtype=np.int64)
    b["line"] = np.array([4, 5, 6], dtype=np.int64)
    p = pack(b)
    assert "lr" not in p and "iter" not in p
    u = unpack(p)
    assert list(u) == list(FLOAT_COLS) + list(INT_COLS)
    for c in u:
        np.testing.assert_array_equal(u[c], b[c])
        assert u[c].dtype == b[c].dtype
