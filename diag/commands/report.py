"""``llmdiag report merge DIR``: the cluster report from node report files.

When the network is what broke, nodes cannot send their reports to rank 0; with
``preflight --node-report-dir DIR`` (a shared directory, or files copied together) every
node wrote ``DIR/node-<rank>.json``, and this command builds the same cluster report rank 0
would have built: the same comparisons, port matrix and missing nodes.
"""

from __future__ import annotations

import click

from llmdiag.cliutil import config_option, emit_doc, guard_outputs, output_options
from llmdiag.exitcodes import ExitCode


@click.group()
def report():
    """Work with saved reports."""


@report.command("merge")
@click.argument("directory", type=click.Path(file_okay=False))
@config_option
@click.option("--nnodes", type=click.IntRange(1, 100000), default=None,
              help="Nodes expected (default: what the node reports recorded).")
@click.option("--strict", is_flag=True, help="Exit 1 on warnings too.")
@output_options()
def merge(directory, config_path, nnodes, strict, fmt, output, width, no_color):
    """Build the cluster report from DIR/node-*.json (written by preflight --node-report-dir).

    Exit code 0 when nothing failed, 1 when a check failed or a node is missing, 2 when DIR
    holds no node report.
    """
    import os
    from pathlib import Path

    from llmdiag.cluster.gather import read_node_files
    from llmdiag.cluster.merge import build_report
    from llmdiag.config import Config
    from llmdiag.errors import UsageError
    from llmdiag.result import Result, Status

    if not Path(directory).is_dir():
        raise UsageError(f"{directory} is not a directory")
    env = dict(os.environ)
    guard_outputs([("-o", output)], [("node report", str(p)) for p in Path(directory).glob("*.json")],
                  config_path=config_path, env=env)
    config = Config.load(config_path, env)
    docs, problems = read_node_files(directory)
    if not docs:
        detail = f" ({'; '.join(problems[:3])})" if problems else ""
        raise UsageError(f"no node report files (node-*.json) in {directory}{detail}")
    extra = [Result(probe="report-merge", check="file", node="cluster", status=Status.WARN, summary=p,
                    remediation="Remove or re-create the file: rerun preflight with --node-report-dir on that node.",
                    runbook="probe-error") for p in problems]
    rep = build_report(docs, nnodes=nnodes, skew_warn_ms=float(config.get("thresholds", "clock_skew_warn_ms")),
                       extra_results=extra, command="report merge", strict=strict)
    emit_doc(rep.to_dict(), fmt, output, width, no_color, env=env, protect=[str(p) for p in Path(directory).glob("*.json")])
    st = rep.status
    if st is Status.FAIL or (strict and st is Status.WARN):
        raise SystemExit(ExitCode.CHECKS_FAILED)
