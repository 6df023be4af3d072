"""Per-step table export (CSV / Parquet through pandas) and the loss / grad-norm plot."""

from __future__ import annotations

from diag.errors import UsageError

COLUMNS = ["step", "iter", "rank", "loss", "lr", "grad_norm", "loss_scale", "step_time_ms", "tokens_per_s",
           "samples_per_s", "tflops", "mfu_pct", "memory_gib", "epoch", "ts", "file", "line"]


def _target(path: str, protect) -> str:
    from reports.base import check_output_path

    return str(check_output_path(path, protect))


def export_table(doc: dict, *, csv_path: str | None = None, parquet_path: str | None = None, protect=()) -> None:
    import pandas as pd  # lazy: heavy

    frame = pd.DataFrame(doc.get("steps", []), columns=COLUMNS)
    for col in COLUMNS:
        if col != "file":  # the JSON document spells NaN as "nan"; the table wants numbers
            frame[col] = pd.to_numeric(frame[col], errors="coerce")
    if csv_path:
        frame.to_csv(_target(csv_path, protect), index=False)
    if parquet_path:
        try:
            frame.to_parquet(_target(parquet_path, protect), index=False)
        except ImportError as exc:
            raise UsageError(f"--parquet needs pyarrow: {exc}") from exc


def plot_curves(doc: dict, path: str, protect=()) -> None:
    import matplotlib  # lazy: heavy

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    target = _target(path, protect)
    rows = [r for r in doc.get("steps", []) if r.get("loss") is not None or r.get("grad_norm") is not None]
    x = [r["step"] if r.get("step") is not None else r.get("iter") if r.get("iter") is not None else i
         for i, r in enumerate(rows)]
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
    loss = [r["loss"] if isinstance(r.get("loss"), float) else float("nan") for r in rows]
    gn = [r["grad_norm"] if isinstance(r.get("grad_norm"), float) else float("nan") for r in rows]
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
