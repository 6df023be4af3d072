"""``llmdiag analyze-log``: find what went wrong in training logs, and say why.

Exit codes: 0 no error-severity finding (warnings allowed unless ``--strict``), 1 a failure
or error-severity anomaly was found, 2 no input could be read (or bad flags).
"""

from __future__ import annotations

import click

from llmdiag.cliutil import config_option, emit_doc, guard_outputs, output_options, setting_flags, setting_option
from llmdiag.logs.config import Settings
from llmdiag.exitcodes import ExitCode


@click.command()
@click.argument("paths", nargs=-1, required=True)
@config_option
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None,
              help="Draw loss and grad norm over steps, anomalies marked, to FILE.png.")
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False), default=None, help="Per-step table as CSV.")
@click.option("--parquet", "parquet_path", type=click.Path(dir_okay=False), default=None,
              help="Per-step table as Parquet (needs pyarrow).")
@click.option("--follow", is_flag=True, help="Keep reading the (single) log as it grows and print alerts.")
@click.option("--on-alert", "on_alert", default=None, metavar="CMD",
              help="With --follow: run CMD for every alert, the alert as JSON on stdin.")
@click.option("--prometheus-file", "prom_path", type=click.Path(dir_okay=False), default=None,
              help="With --follow: rewrite the log's metrics (findings, loss, step) in FILE after every new batch of "
                   "lines, atomically (node_exporter's textfile collector).")
@setting_option(Settings, "hang_minutes", name="no_progress_minutes")
@click.option("--strict", is_flag=True, help="Exit 1 on warning-severity findings too.")
@click.option("--fr", "fr_dir", type=click.Path(file_okay=False), default=None, metavar="DIR",
              help="PyTorch Flight Recorder dumps (one per rank) to match with the log; default: <log>.fr/ "
                   "beside the log when present.")
@output_options()
def analyze_log(paths, config_path, plot_path, csv_path, parquet_path, follow, on_alert, prom_path, no_progress_minutes,
                strict, fr_dir, fmt, output, width, no_color):
    """Analyse training logs: PATHS are files, directories, globs, .gz files or '-' (stdin).

    Extracts the training curve, finds anomalies (NaN, spikes, overflow, throughput drops,
    hangs) and failures (NCCL timeouts and errors, OOM, Xid, rendezvous, ChildFailedError,
    signals, Slurm limits, tracebacks), names the first failing rank and the runbook.
    Exit code 0 healthy, 1 a failure or error-severity anomaly, 2 unreadable input.
    """
    import os

    # the log engine multiplies no matrices: OpenBLAS's thread pool, made when numpy is imported,
    # only adds start-up time (~0.05 s CPU) and threads beside the reading workers
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from llmdiag.config import Config
    from llmdiag.errors import UsageError

    env = dict(os.environ)
    from llmdiag.logs.readers import ReadStats, resolve

    inputs = [p for p in resolve(paths, ReadStats()) if p != "-"]
    guard_outputs([("-o", output), ("--csv", csv_path), ("--parquet", parquet_path), ("--plot", plot_path),
                   ("--prometheus-file", prom_path)],
                  [("log", p) for p in inputs], config_path=config_path, env=env)
    settings = Config.load(config_path, env).with_overrides(setting_flags()).settings(Settings)
    if follow:
        from llmdiag.logs.follow import follow_file

        if len(paths) != 1 or paths[0] == "-":
            raise UsageError("--follow takes exactly one log file")
        follow_file(paths[0], settings, on_alert=on_alert, no_progress_s=settings.hang_minutes * 60.0,
                    on_doc=_textfile(prom_path, paths[0], env) if prom_path else None)
        return
    if prom_path:
        raise UsageError("--prometheus-file goes with --follow (without it: -o prometheus:FILE)")
    from llmdiag.logs.engine import analyze

    if fr_dir is not None:
        from llmdiag.logs.flight import find_dumps

        if not os.path.isdir(fr_dir):
            raise UsageError(f"--fr {fr_dir}: no such directory")
        if not find_dumps(fr_dir)[1]:
            raise UsageError(f"--fr {fr_dir}: no Flight Recorder dumps in it (files named <prefix><rank>)")
    from llmdiag.logs.compressed import input_findings, looks_binary
    from llmdiag.logs.readers import open_binary

    binary = {p: share for p in inputs for bad, share in [looks_binary(p, open_binary)] if bad}
    if binary and len(binary) == len(inputs) and "-" not in paths:
        p, share = next(iter(binary.items()))
        raise UsageError(f"{p} is not a text log: {share:.0%} of its first bytes are not text"
                         + (f" (nor are the other {len(binary) - 1} inputs)" if len(binary) > 1 else ""))
    if binary:  # never read further (/dev/zero has no end): a finding says why they were left out
        import glob

        paths = [glob.escape(p) for p in inputs if p not in binary] + (["-"] if "-" in paths else [])
    doc, analyzer = analyze(list(paths), settings=settings, spill=bool(csv_path or parquet_path), fr=fr_dir)
    input_findings(doc, binary)
    try:
        _check_and_export(doc, analyzer.table, inputs, csv_path, parquet_path, plot_path)
    finally:
        analyzer.table.close()
    emit_doc(doc, fmt, output, width, no_color, env=env, protect=inputs)
    severities = {f["severity"] for f in doc["findings"]}
    if "error" in severities or (strict and severities):
        raise SystemExit(ExitCode.CHECKS_FAILED)


def _check_and_export(doc, table, inputs, csv_path, parquet_path, plot_path) -> None:
    from llmdiag.errors import UsageError

    if not doc["files"]:
        problems = "; ".join(f"{p['file']}: {p['message']}" for p in doc["read"]["problems"][:5])
        raise UsageError(f"no readable log input ({problems or 'nothing given'})")
    if doc["read"]["bytes"] == 0 and all(p["kind"] in ("unreadable", "missing") for p in doc["read"]["problems"]) \
            and doc["read"]["problems"]:
        raise UsageError("no readable log input: " + doc["read"]["problems"][0]["message"])
    from llmdiag.logs.export import export_table, plot_curves

    if csv_path or parquet_path:
        export_table(table, csv_path=csv_path, parquet_path=parquet_path, protect=inputs)
    if plot_path:
        plot_curves(doc, plot_path, protect=inputs, sample=table.plot_sample())


def _textfile(path: str, log: str, env):
    """After each batch of a followed log: its metrics in ``path``, replaced atomically, with
    this node's name and the log's absolute path (what an alert names), the time of the batch,
    and one run id from the start of the follow to its end."""
    import os
    import time

    from llmdiag.context import node_name
    from llmdiag.reports.base import emit_all

    fixed = {"node": node_name(env), "files": [os.path.abspath(log)], "started_at": round(time.time(), 3)}

    def write(doc: dict) -> None:
        emit_all({**doc, **fixed, "created_at": round(time.time(), 3)}, [("prometheus", path)], env=env)

    return write
