"""``llmdiag report merge DIR``: the cluster report from node report files; ``llmdiag report
render SAVED.json``: a saved report in another format.

When the network is what broke, nodes cannot send their reports to rank 0; with
``preflight --node-report-dir DIR`` (a shared directory, or files copied together) every
node wrote ``DIR/node-<rank>.json``, and this command builds the same cluster report rank 0
would have built: the same comparisons, port matrix and missing nodes.
"""

from __future__ import annotations

import click

from llmdiag.cliutil import config_option, emit_doc, guard_outputs, output_options
from llmdiag.exitcodes import ExitCode
from llmdiag.util.clitypes import SuggestingGroup


@click.group(cls=SuggestingGroup)
def report():
    """Work with saved reports (merge node reports, render a saved report in another format)."""


@report.command("merge")
@click.argument("directory", type=click.Path(file_okay=False))
@config_option
@click.option("--nnodes", type=click.IntRange(1, 100000), default=None,
              help="Nodes expected (default: what the node reports recorded).")
@click.option("--strict", is_flag=True, help="Exit 1 on warnings too.")
@output_options()
def merge(directory, config_path, nnodes, strict, fmt, output, width, no_color):
    """Build the cluster report from DIR/node-*.json (written by preflight --node-report-dir),
    including node-*.json in the directories below DIR (one per pod).

    Exit code 0 when nothing failed, 1 when a check failed or a node is missing, 2 when DIR
    holds no node report.
    """
    import os
    from pathlib import Path

    from llmdiag.cluster.gather import node_files, read_node_files
    from llmdiag.cluster.merge import build_report
    from llmdiag.config import Config
    from llmdiag.errors import UsageError
    from llmdiag.result import Result, Status

    if not Path(directory).is_dir():
        raise UsageError(f"{directory} is not a directory")
    env = dict(os.environ)
    inputs = [str(p) for p in node_files(directory)]
    guard_outputs([("-o", output)], [("node report", p) for p in inputs], config_path=config_path, env=env)
    config = Config.load(config_path, env)
    docs, problems = read_node_files(directory)
    if not docs:
        detail = f" ({'; '.join(problems[:3])})" if problems else ""
        raise UsageError(f"no node report files (node-*.json) in {directory} or the directories below it{detail}")
    extra = [Result(probe="report-merge", check="file", node="cluster", status=Status.WARN, summary=p,
                    remediation="Remove or re-create the file: rerun preflight with --node-report-dir on that node.",
                    runbook="probe-error") for p in problems]
    rep = build_report(docs, nnodes=nnodes, skew_warn_ms=float(config.get("thresholds", "clock_skew_warn_ms")),
                       extra_results=extra, command="report merge", strict=strict)
    emit_doc(rep.to_dict(), fmt, output, width, no_color, env=env, protect=inputs)
    st = rep.status
    if st is Status.FAIL or (strict and st is Status.WARN):
        raise SystemExit(ExitCode.CHECKS_FAILED)


@report.command("render")
@click.argument("saved", type=click.Path(dir_okay=False, allow_dash=True))
@output_options()
def render(saved, fmt, output, width, no_color):
    """Render SAVED (the JSON report of any llmdiag command, -f json; '-' reads stdin) in another
    format: e.g. a JUnit file or a Prometheus textfile from the archived JSON of a run.

    Exit code 0 when it was rendered (whatever the report's status), 2 when SAVED is not a
    report llmdiag wrote.
    """
    import os

    env = dict(os.environ)
    guard_outputs([("-o", output)], [("SAVED", None if saved == "-" else saved)], env=env)
    doc = read_saved(saved)
    try:
        emit_doc(doc, fmt, output, width, no_color, env=env, protect=[] if saved == "-" else [saved])
    except (KeyError, TypeError, ValueError, AttributeError) as exc:  # a field of the wrong type
        from llmdiag.errors import UsageError

        raise UsageError(f"{saved}: not a valid {doc['kind']} report ({type(exc).__name__}: {exc})") from None


def read_saved(saved: str) -> dict:
    """The document in ``saved``: a JSON object of a known kind and major schema version, with
    the fields its kind requires; anything else is one line and exit 2."""
    import json
    import sys

    from llmdiag import documents
    from llmdiag.errors import UsageError
    from llmdiag.result import SCHEMA_VERSION

    try:
        if saved == "-":
            text = sys.stdin.read()
        else:
            with open(saved, encoding="utf-8") as fh:
                text = fh.read(512 << 20)
        doc = json.loads(text)
    except FileNotFoundError:
        raise UsageError(f"{saved}: no such file") from None
    except UnicodeDecodeError:
        raise UsageError(f"{saved}: not a JSON report (not UTF-8 text)") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"{saved}: not a JSON report ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(doc, dict) or "kind" not in doc or "schema_version" not in doc:
        raise UsageError(f"{saved}: not an llmdiag report (a JSON object with kind and schema_version; "
                         "write one with -f json)")
    kind = doc["kind"]
    if kind not in documents.KINDS or kind == "generic":
        known = ", ".join(k for k in documents.KINDS if k != "generic")
        raise UsageError(f"{saved}: unknown report kind {kind!r} (known: {known})")
    found = documents.problems(doc)  # the compatibility rule of docs/reports.md, "Versions"
    missing = [p.split(":")[0] for p in found if p.endswith(": missing (required)")]
    unknown = [p.split(":")[0] for p in found if p.endswith(": unknown key")]
    if found and "schema_version" in found[0]:
        raise UsageError(f"{saved}: {found[0]}; render it with the llmdiag that wrote it")
    if missing:
        raise UsageError(f"{saved}: not a complete {kind} report (missing {', '.join(missing[:5])}"
                         f"{' ...' if len(missing) > 5 else ''}; written by an older llmdiag?)")
    if found:
        what = f"unknown key(s) {', '.join(unknown[:5])}" if unknown else found[0]
        raise UsageError(f"{saved}: not a {kind} report of schema {SCHEMA_VERSION} ({what}"
                         f"{' ...' if len(found) > 5 else ''}): render it with the llmdiag that wrote it")
    return doc
