"""The per-step table, stored by column in typed arrays so memory stays small on huge logs."""

from __future__ import annotations

import math
from array import array

#: float columns of the table (NaN = not printed)
FLOAT_COLS = ("loss", "lr", "grad_norm", "loss_scale", "step_time_ms", "tokens_per_s", "samples_per_s",
              "tflops", "mfu_pct", "memory_gib", "epoch", "skipped", "nan_iters", "ts")
INT_COLS = ("step", "iter", "rank", "line", "file", "has_loss", "has_grad_norm")
_NONE = -(2**62)


class StepTable:
    def __init__(self) -> None:
        self.f = {c: array("d") for c in FLOAT_COLS}
        self.i = {c: array("q") for c in INT_COLS}
        self.files: list[str] = []
        self._file_ids: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self.i["line"])

    def add(self, rec: dict, file: str, line: int, rank: int | None, ts: float | None) -> int:
        fid = self._file_ids.setdefault(file, len(self.files))
        if fid == len(self.files):
            self.files.append(file)
        for c in FLOAT_COLS:
            v = ts if c == "ts" else rec.get(c)
            self.f[c].append(math.nan if v is None else float(v))
        for c, v in (("step", rec.get("step")), ("iter", rec.get("iter")), ("rank", rank), ("line", line),
                     ("file", fid), ("has_loss", int("loss" in rec)), ("has_grad_norm", int("grad_norm" in rec))):
            self.i[c].append(_NONE if v is None else int(v))
        return len(self) - 1

    def get(self, col: str, idx: int):
        if col in self.f:
            v = self.f[col][idx]
            if col in ("loss", "grad_norm"):  # a printed NaN stays NaN; an absent value is None
                return v if self.i["has_" + col][idx] else None
            return None if math.isnan(v) else v
        v = self.i[col][idx]
        if col == "file":
            return self.files[v]
        return None if v == _NONE else v

    def row(self, idx: int) -> dict:
        r = {c: self.get(c, idx) for c in ("step", "iter", "rank")}
        for c in FLOAT_COLS:
            r[c] = self.get(c, idx)
        r["line"], r["file"] = self.get("line", idx), self.get("file", idx)
        return r

    def indices(self, rank: int | None) -> list[int]:
        want = _NONE if rank is None else rank
        col = self.i["rank"]
        return [k for k in range(len(col)) if col[k] == want]

    def ranks(self) -> list[int | None]:
        seen = sorted(set(self.i["rank"]))
        return [None if r == _NONE else r for r in seen]
