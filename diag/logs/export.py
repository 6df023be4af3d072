"""Per-step table export (CSV through the csv module, Parquet through pyarrow) and the loss / grad-norm plot."""

from __future__ import annotations

from llmdiag.errors import UsageError

COLUMNS = ["step", "iter", "rank", "loss", "lr", "grad_norm", "loss_scale", "step_time_ms", "tokens_per_s",
           "samples_per_s", "tflops", "mfu_pct", "memory_gib", "epoch", "ts", "file", "line"]


def _target(path: str, protect, option: str) -> str:
    from llmdiag.outputs import check_output_path

    return str(check_output_path(path, protect, option))


def _columns(batch: dict, files: list[str]) -> dict:
    """COLUMNS of one batch as (values, missing) pairs of NumPy arrays."""
    import numpy as np

    from llmdiag.logs.table import FLOAT_COLS, NONE

    cols: dict = {}
    for c in COLUMNS:
        if c == "file":
            idx = batch["file"]
            cols[c] = (np.asarray(files + [""], dtype=object)[np.where(idx == NONE, len(files), idx)], idx == NONE)
        elif c in FLOAT_COLS:
            a = batch[c]
            # absent (not printed) is empty; a printed NaN loss or grad norm stays NaN
            missing = batch["has_" + c] != 1 if c in ("loss", "grad_norm") else np.isnan(a)
            cols[c] = (a, missing)
        else:
            a = batch[c]
            cols[c] = (a, a == NONE)
    return cols


def _csv_rows(cols: dict):
    """Rows for the csv module: missing cells None (written empty), numbers as Python values."""
    lists = []
    for c in COLUMNS:
        values, missing = cols[c]
        vals = values.tolist()
        for i in missing.nonzero()[0].tolist():
            vals[i] = None
        lists.append(vals)
    return zip(*lists)


def _arrow_table(cols: dict):
    import pyarrow as pa

    arrays = []
    for c in COLUMNS:
        values, missing = cols[c]
        if c == "file":
            arrays.append(pa.array(values.tolist(), type=pa.string(), mask=missing))
        elif values.dtype.kind == "f":
            arrays.append(pa.array(values, type=pa.float64(), mask=missing))
        else:
            arrays.append(pa.array(values, type=pa.int64(), mask=missing))
    return pa.Table.from_arrays(arrays, names=COLUMNS)


def export_table(store, *, csv_path: str | None = None, parquet_path: str | None = None, protect=()) -> None:
    """Stream every step record from the spilled table (``StepStore(spill=True)``) to CSV / Parquet."""
    import contextlib

    from llmdiag.util.files import open_output

    csv_target = _target(csv_path, protect, "--csv") if csv_path else None
    pq_target = _target(parquet_path, protect, "--parquet") if parquet_path else None
    pq = None
    if pq_target:
        try:
            import pyarrow.parquet as pq
        except ImportError as exc:
            raise UsageError(f"--parquet needs pyarrow (pip install 'llmdiag[parquet]'): {exc}") from exc
    with contextlib.ExitStack() as stack:
        fh = stack.enter_context(open_output(csv_target, "--csv", newline="")) if csv_target else None
        pq_fh = stack.enter_context(open_output(pq_target, "--parquet", binary=True)) if pq_target else None
        _export(store, fh, pq_fh, pq)


def _export(store, fh, pq_fh, pq) -> None:
    import csv
    import itertools

    writer = None
    try:
        out = csv.writer(fh) if fh is not None else None
        if out is not None:
            out.writerow(COLUMNS)
        batches = iter(store.iter_batches())
        first = next(batches, None)
        if first is None:  # no step records: header-only files
            from llmdiag.logs.table import empty_batch

            first = empty_batch(0)
        for batch in itertools.chain([first], batches):
            cols = _columns(batch, store.files)
            if out is not None:
                out.writerows(_csv_rows(cols))
            if pq_fh is not None:
                table = _arrow_table(cols)
                if writer is None:
                    writer = pq.ParquetWriter(pq_fh, table.schema)
                writer.write_table(table)
    finally:
        if writer is not None:
            writer.close()


def plot_curves(doc: dict, path: str, protect=(), sample: dict | None = None) -> None:
    """Loss and grad norm over steps, findings marked. ``sample`` is the step table's bounded
    plot sample (``StepStore.plot_sample()``); without it the document's first rows are drawn."""
    try:
        import matplotlib  # lazy: heavy
    except ImportError:
        raise UsageError("--plot needs matplotlib (pip install 'llmdiag[plots]')") from None

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    target = _target(path, protect, "--plot")
    if sample is not None:
        x, loss, gn = sample["x"], sample["loss"], sample["grad_norm"]
    else:
        rows = [r for r in doc.get("steps", []) if r.get("loss") is not None or r.get("grad_norm") is not None]
        x = [r["step"] if r.get("step") is not None else r.get("iter") if r.get("iter") is not None else i
             for i, r in enumerate(rows)]
        loss = [r["loss"] if isinstance(r.get("loss"), float) else float("nan") for r in rows]
        gn = [r["grad_norm"] if isinstance(r.get("grad_norm"), float) else float("nan") for r in rows]
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
    ax1.plot(x, loss, lw=1, label="loss")
    ax2.plot(x, gn, lw=1, color="tab:orange", label="grad norm")
    ax1.set_ylabel("loss")
    ax2.set_ylabel("grad norm")
    ax2.set_xlabel("step")
    for f in doc.get("findings", []):
        if f.get("step") is not None:
            for ax in (ax1, ax2):
                ax.axvline(f["step"], color="red", ls="--", lw=0.8)
            ax1.annotate(f["kind"], (f["step"], ax1.get_ylim()[1]), fontsize=7, color="red", rotation=90,
                         va="top")
    ax1.set_title("llmdiag analyze-log")
    fig.tight_layout()
    from llmdiag.util.files import open_output

    import os

    fmt = os.path.splitext(target)[1].lstrip(".").lower() or "png"
    if fmt not in fig.canvas.get_supported_filetypes():
        plt.close(fig)
        raise UsageError(f"--plot {path!r}: matplotlib cannot write .{fmt} files "
                         f"(use one of: {', '.join(sorted(fig.canvas.get_supported_filetypes()))})")
    try:
        with open_output(target, "--plot", binary=True) as fh:
            fig.savefig(fh, dpi=100, format=fmt)
    finally:
        plt.close(fig)
