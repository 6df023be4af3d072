"""Per-step table export (CSV / Parquet through pandas) and the loss / grad-norm plot."""

from __future__ import annotations

from diag.errors import UsageError

COLUMNS = ["step", "iter", "rank", "loss", "lr", "grad_norm", "loss_scale", "step_time_ms", "tokens_per_s",
           "samples_per_s", "tflops", "mfu_pct", "memory_gib", "epoch", "ts", "file", "line"]


def _target(path: str, protect) -> str:
    from reports.base import check_output_path

    return str(check_output_path(path, protect))


def _frame(batch: dict, files: list[str]):
    import numpy as np
    import pandas as pd

    from probes.logs.table import FLOAT_COLS, NONE

    cols: dict = {}
    for c in COLUMNS:
        if c == "file":
            cols[c] = np.asarray(files, dtype=object)[batch["file"]]
        elif c in FLOAT_COLS:
            a = batch[c]
            if c in ("loss", "grad_norm"):  # absent (not printed) stays empty; a printed NaN stays NaN
                a = np.where(batch["has_" + c] == 1, a, np.nan)
            cols[c] = a
        else:
            a = batch[c]
            cols[c] = pd.array(np.where(a == NONE, 0, a), dtype="Int64")
            cols[c][a == NONE] = pd.NA
    return pd.DataFrame(cols, columns=COLUMNS)


def export_table(store, *, csv_path: str | None = None, parquet_path: str | None = None, protect=()) -> None:
    """Stream every step record from the spilled table (``StepStore(spill=True)``) to CSV / Parquet."""
    csv_target = _target(csv_path, protect) if csv_path else None
    pq_target = _target(parquet_path, protect) if parquet_path else None
    writer = None
    if pq_target:
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError as exc:
            raise UsageError(f"--parquet needs pyarrow: {exc}") from exc
    first = True
    try:
        for batch in store.iter_batches():
            frame = _frame(batch, store.files)
            if csv_target:
                frame.to_csv(csv_target, index=False, mode="w" if first else "a", header=first)
            if pq_target:
                table = pa.Table.from_pandas(frame, preserve_index=False)
                if writer is None:
                    writer = pq.ParquetWriter(pq_target, table.schema)
                writer.write_table(table.cast(writer.schema))
            first = False
        if first:  # no step records: header-only files
            from probes.logs.table import empty_batch

            frame = _frame(empty_batch(0), store.files)
            if csv_target:
                frame.to_csv(csv_target, index=False)
            if pq_target:
                pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), pq_target)
    finally:
        if writer is not None:
            writer.close()


def plot_curves(doc: dict, path: str, protect=(), sample: dict | None = None) -> None:
    """Loss and grad norm over steps, findings marked. ``sample`` is the step table's bounded
    plot sample (``StepStore.plot_sample()``); without it the document's first rows are drawn."""
    import matplotlib  # lazy: heavy

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    target = _target(path, protect)
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
    fig.savefig(target, dpi=100)
    plt.close(fig)
