"""Steps for records that print only an epoch (the Hugging Face Trainer's), from what else the log says.

The Trainer prints ``{'loss': .., 'grad_norm': .., 'learning_rate': .., 'epoch': e}`` every ``logging_steps``
(L) optimizer steps and no step. Where the run ends, it prints a summary record,
``{'train_runtime': R, 'train_samples_per_second': .., 'train_steps_per_second': S, 'train_loss': .., 'epoch': E}``:
S is its ``max_steps`` over R, so the run's total steps are T = R x S (an integer), and its steps per epoch
T / E. A record at epoch e is then at step x = e x T / E.

The printed numbers are rounded (``.4g`` in transformers 5, epochs to two decimals in 4.x), so x is known
only within an uncertainty u (from the digits each number was printed with, and the version's format that
the summary's syntax tells: quoted values are transformers 5's). A record is placed at:

- ``round(x)`` where u < 0.5 (the step itself is certain),
- else the nearest multiple of L, where u < L / 2 (the Trainer logs when ``global_step % L == 0``),
- else the step L after the record before (before the first certain record: L before the record after),
  where that is within u of x (records come every L steps), or ``round(x)``: the placement is then
  *inferred*, and the document says so in a warning.

L is the most common gap between consecutive records whose steps are certain, else the mean gap (else,
where every epoch prints alike, T over the number of records). Where no
record is certain, the last one before the summary is at the run's last multiple of L (T rounded down).

Without a summary (a run that died, an excerpt) nothing says how many steps an epoch has: the records keep
their epoch, and every position the findings name is called an epoch.
"""

from __future__ import annotations

import math
import re

import numpy as np

from llmdiag.logs.columns import NONE
from llmdiag.logs.table import batch_len, concat, take

#: records held back until a summary places them; beyond this they go on with their epochs
HOLD_ROWS = 1 << 17

_SUMMARY_FIELDS = {k: re.compile(r"['\"]" + k + r"['\"]\s*:\s*(?P<q>['\"]?)(?P<v>[-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)")
                   for k in ("train_runtime", "train_steps_per_second", "epoch")}
#: transformers 4.x rounds the epoch it prints to two decimals (``round(epoch, 2)``)
_EPOCH_DECIMALS_4X = 2


def half_ulp(text: str, quoted: bool = False) -> float:
    """Half the last printed digit's value: the rounding error of a number printed as ``text``. A quoted
    number is transformers 5's ``f"{v:.4g}"``: four significant digits, also where it dropped trailing
    zeros (3.0 is '3')."""
    t = text.strip().lower()
    mant, _, exp = t.partition("e")
    decimals = len(mant.partition(".")[2])
    out = 0.5 * 10.0 ** (-decimals + (int(exp) if exp else 0))
    v = abs(float(t))
    if quoted and v > 0:
        out = min(out, 0.5 * 10.0 ** (math.floor(math.log10(v)) - 3))
    return out


def printed_half_ulp(values: np.ndarray) -> np.ndarray:
    """:func:`half_ulp` of numbers whose text is gone. Each value's fewest decimals that give it back
    (0.0625 -> 4) undercount where the last digits were zeros (``.4g`` prints 0.5 as '0.5'), but one format
    printed them all: a value is taken as printed with the most decimals seen in its decade."""
    dec = np.full(len(values), 8)
    left = np.ones(len(values), dtype=bool)
    for d in range(9):
        hit = left & (np.abs(np.round(values, d) - values) <= 1e-12 * np.maximum(1.0, np.abs(values)))
        dec[hit] = d
        left &= ~hit
    with np.errstate(divide="ignore"):
        decade = np.where(values != 0, np.floor(np.log10(np.abs(values))), -99).astype(np.int64)
    most = {int(k): int(dec[decade == k].max()) for k in np.unique(decade)}
    return 0.5 * 10.0 ** -np.array([most[int(k)] for k in decade], dtype=np.float64)


def train_summary(msg: str) -> dict | None:
    """The Trainer's end-of-training record, or None: ``total`` steps (R x S), its relative ``total_err``,
    the ``epoch`` it ended at and that epoch's relative error."""
    if "train_runtime" not in msg or "train_steps_per_second" not in msg:
        return None
    got = {}
    for k, rx in _SUMMARY_FIELDS.items():
        m = rx.search(msg)
        if m is None:
            return None
        got[k] = (float(m["v"]), half_ulp(m["v"], bool(m["q"])))
        if k == "epoch" and not m["q"]:
            got[k] = (got[k][0], min(got[k][1], 0.5 * 10.0 ** -_EPOCH_DECIMALS_4X))
    (runtime, du), (rate, dr), (epoch, de) = (got[k] for k in ("train_runtime", "train_steps_per_second", "epoch"))
    if runtime <= 0 or rate <= 0 or epoch <= 0:
        return None
    total = runtime * rate
    err = du / runtime + dr / rate
    if total * err < 0.5:  # T is an integer: the product's error cannot move it off the nearest one
        total, err = float(round(total)), 0.0
    # relative to the true epoch, which may be smaller than the printed one by de
    epoch_err = de / (epoch - de) if epoch > de else math.inf
    return {"total": total, "total_err": err, "epoch": epoch, "epoch_err": epoch_err, "quoted": bool(m["q"])}


def bar_summary(epoch: float, count: int) -> dict:
    """A summary for a run that printed none (it died): the Trainer's progress bar, redrawn after its last record
    (``tqdm.write`` prints a record, then redraws the bar at the current step), shows that record's step, so the
    run's steps per epoch are ``count / epoch``. Shaped like :func:`train_summary`'s, ``total`` the count; the
    epoch's error is taken as 4.x's two decimals (the larger: which version printed it is not known here)."""
    e = min(float(printed_half_ulp(np.array([epoch]))[0]), 0.5 * 10.0 ** -_EPOCH_DECIMALS_4X)
    return {"total": float(count), "total_err": 0.0, "epoch": epoch,
            "epoch_err": e / (epoch - e) if epoch > e else math.inf, "quoted": False}


def place(epochs: np.ndarray, summary: dict) -> tuple[np.ndarray, bool, dict]:
    """The steps of records at ``epochs`` (log order) of the run that ``summary`` ended; whether any was
    inferred (not certain); and what placed them (steps per epoch, logging interval)."""
    spe = summary["total"] / summary["epoch"]
    rel = summary["total_err"] + summary["epoch_err"]
    x = epochs * spe
    printed = printed_half_ulp(epochs)
    # the Trainer that printed the summary printed the records: quoted values are transformers 5's ``.4g``,
    # bare ones 4.x's, whose epochs are rounded to two decimals
    if summary.get("quoted"):
        with np.errstate(divide="ignore"):
            sig = 0.5 * 10.0 ** (np.floor(np.log10(np.where(epochs > 0, epochs, 1.0))) - 3)
        printed = np.minimum(printed, sig)
    else:
        printed = np.minimum(printed, 0.5 * 10.0 ** -_EPOCH_DECIMALS_4X)
    u = printed * spe * (1 + rel) + np.abs(x) * rel if math.isfinite(rel) else np.full(len(x), math.inf)
    n = len(x)
    diffs = np.diff(x)
    sure = (u[1:] + u[:-1]) < 0.5
    if n > 1 and sure.any() and (diffs[sure] > 0.5).any():
        d = np.round(diffs[sure][diffs[sure] > 0.5]).astype(np.int64)
        vals, counts = np.unique(d, return_counts=True)
        interval = int(vals[np.argmax(counts)])  # the most common gap between consecutive records
    elif n > 1 and x[-1] > x[0]:
        interval = max(1, int(round((x[-1] - x[0]) / (n - 1))))
    else:  # the epochs say nothing (all printed alike): the records are taken as the whole run's
        interval = max(1, int(round(summary["total"] / n)))
    # the certain ones first; each other one is the record after (else before) a placed neighbour where that
    # fits, so a run of doubtful records between certain ones is counted from them
    steps = np.zeros(n, dtype=np.int64)
    placed = u < 0.5
    steps[placed] = np.round(x[placed])
    on_lattice = ~placed & (u < interval / 2)
    steps[on_lattice] = interval * np.round(x[on_lattice] / interval)
    placed |= on_lattice
    inferred = not placed.all()
    if not placed.any():  # no record is certain: the last one before the summary is the run's last logged step
        end = interval * math.floor(round(summary["total"]) / interval)
        if abs(end - x[-1]) <= u[-1]:
            steps[-1], placed[-1] = end, True
    first = int(np.argmax(placed)) if placed.any() else 0
    for k in list(range(first, n)) + list(range(first - 1, -1, -1)):
        if placed[k]:
            continue
        near = steps[k - 1] + interval if k > first else steps[k + 1] - interval if k < first else None
        steps[k] = near if near is not None and abs(near - x[k]) <= u[k] else round(float(x[k]))
        placed[k] = True
    # the Trainer logs after its step: a record is at step 1 or later
    np.maximum(steps, 1, out=steps)
    return steps, inferred, {"steps_per_epoch": spe, "logging_interval": interval}


def _epoch_only(b: dict) -> np.ndarray:
    return (b["step"] == NONE) & (b["iter"] == NONE) & ~np.isnan(b["epoch"])


class EpochPlacer:
    """Holds the batches from the first record that has only an epoch on (log order is kept), until a
    Trainer summary places them (``release``) or the input ends (``release`` without one: epochs stay)."""

    def __init__(self) -> None:
        self._held: list[dict] = []
        self._n = 0
        #: files whose records went on with their epochs (too many held, or the file ended without a summary;
        #: ``--follow`` ends it at every poll): their later records are not held either, so a run's positions
        #: are all steps or all epochs
        self.settled: set[int] = set()
        #: what placed records, for the document: steps per epoch, interval, how many, whether inferred
        self.placed: list[dict] = []

    def admit(self, b: dict) -> dict | None:
        """The part of ``b`` to store now; the rest is held."""
        if not self._held:
            eo = _epoch_only(b)
            if self.settled:
                eo &= ~np.isin(b["file"], list(self.settled))
            if not eo.any():
                return b
            first = int(np.argmax(eo))
            now, b = (take(b, slice(0, first)), take(b, slice(first, None))) if first else (None, b)
        else:
            now = None
        self._held.append(b)
        self._n += batch_len(b)
        return now

    def last_held(self) -> tuple[int, int, float, int] | None:
        """The last held record that printed only an epoch: (file id, line, epoch, that file's held records)."""
        for b in reversed(self._held):
            eo = np.flatnonzero(_epoch_only(b))
            if len(eo):
                k = int(eo[-1])
                fid = int(b["file"][k])
                n = sum(int((_epoch_only(h) & (h["file"] == fid)).sum()) for h in self._held)
                return fid, int(b["line"][k]), float(b["epoch"][k]), n
        return None

    def full(self) -> bool:
        return self._n >= HOLD_ROWS

    def _settle(self, b: dict) -> None:
        self.settled.update(np.unique(b["file"][_epoch_only(b)]).tolist())

    def release(self, summary: dict | None, file_id: int | None = None) -> dict | None:
        """Every held row, the epoch-only ones of file ``file_id`` (the summary's) placed on steps by ``summary``."""
        if not self._held:
            return None
        b = concat(self._held)
        self._held, self._n = [], 0
        if summary is None:
            self._settle(b)
            return b
        eo = _epoch_only(b)
        if file_id is not None:
            eo &= b["file"] == file_id
        idx = np.flatnonzero(eo)
        if not len(idx):
            return b
        steps, inferred, how = place(b["epoch"][idx], summary)
        b = dict(b)
        b["step"] = b["step"].copy()
        b["step"][idx] = steps
        self.placed.append({**how, "records": len(idx), "inferred": inferred, "file": int(b["file"][idx[0]]),
                            "line": int(b["line"][idx[0]])})
        return b

    def warnings(self, files: list[str]) -> list[dict]:
        """A warning per run whose steps are inferred, not certain."""
        out = []
        for p in self.placed:
            if p["inferred"]:
                out.append({"kind": "steps_inferred", "file": files[p["file"]], "line": p["line"],
                            "message": f"the records from {files[p['file']]}:{p['line']} print an epoch and no step: "
                            f"their steps are inferred from it ({_g(p['steps_per_epoch'])} steps per epoch from the "
                            f"Trainer's summary, a record every {p['logging_interval']} step(s)) and may be off "
                            "where the printed epoch is too coarse to tell neighbouring steps apart"})
        return out


def _g(v: float) -> str:
    return f"{v:.6g}" if not math.isclose(v, round(v)) else str(int(round(v)))
