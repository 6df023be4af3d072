"""``llmdiag node-health``: this node's checks as a health hook reads them (exit code + one line).

``--protocol npd``: a Kubernetes node-problem-detector custom plugin (examples/node-health/).
``--protocol nhc``: what ``check_llmdiag`` (examples/node-health/llmdiag.nhc) calls under LBNL NHC
or a Slurm HealthCheckProgram. Both: exit 0 OK, 1 NonOK, 2 Unknown (see llmdiag.health.verdict),
one line on stdout, nothing else; the whole run ends within ``--timeout`` seconds, since the
caller kills a plugin that overruns its own timeout and then reports nothing useful.
"""

from __future__ import annotations

import time

import click

from llmdiag.cliutil import config_option, FiniteFloatRange, setting_option
from llmdiag.config import ClusterSettings

#: default line length per protocol: NPD's max_output_length default; a Slurm reason for NHC
MAX_OUTPUT = {"npd": 80, "nhc": 200}
#: what the run keeps for starting probes, rendering and exiting after the probes' deadline
RESERVE_S = 1.5


@click.command("node-health")
@config_option
@click.option("--protocol", type=click.Choice(sorted(MAX_OUTPUT)), default="npd", show_default=True,
              help="npd: node-problem-detector custom plugin; nhc: LBNL NHC's check_llmdiag / Slurm health check.")
@click.option("--timeout", "budget_s", type=FiniteFloatRange(2, 3600), default=25.0, show_default=True,
              help="The whole run's budget in seconds; set it below the caller's timeout (NPD rule timeout, NHC -t).")
@click.option("--max-output-length", type=click.IntRange(16, 65536), default=None,
              help="Longest line in bytes (default: 80 for npd, as NPD's max_output_length; 200 for nhc).")
@click.option("--probe", "only", multiple=True, metavar="NAME", help="Run only this probe (repeatable).")
@click.option("--skip", multiple=True, metavar="NAME", help="Do not run this probe (repeatable).")
@click.option("--strict", is_flag=True, help="Warnings make the node NonOK too.")
@setting_option(ClusterSettings, "gpus_per_node")
@click.option("--report", "report_path", type=click.Path(dir_okay=False), default=None,
              help="Also write the full node report (JSON) to this file, for the details behind the line.")
def node_health(config_path, protocol, budget_s, max_output_length, only, skip, strict, gpus_per_node, report_path):
    """This node's checks, told as a health hook expects: exit 0 OK, 1 NonOK, 2 Unknown, one line.

    Runs every node-local probe (not the cluster-wide nccl and smoke-train) at once, each within
    what is left of --timeout. See docs/node-health.md for node-problem-detector, NHC and Slurm.
    """
    started = time.monotonic()
    from llmdiag.errors import UsageError
    from llmdiag.health.verdict import unknown_line

    limit = max_output_length or MAX_OUTPUT[protocol]
    try:
        code, text = _check(config_path, budget_s, started, only, skip, strict, gpus_per_node, report_path, limit)
    except UsageError as exc:
        code, text = 2, unknown_line(str(exc), limit)
    click.echo(text)
    raise SystemExit(int(code))


def _check(config_path, budget_s, started, only, skip, strict, gpus_per_node, report_path, limit):
    import os

    from llmdiag.commands.preflight import select_probes
    from llmdiag.config import Config
    from llmdiag.context import Context
    from llmdiag.health.verdict import judge, line
    from llmdiag.registry import all_probes, is_group_probe
    from llmdiag.runner import run_probes, with_timeout

    env = dict(os.environ)
    config = Config.load(config_path, env).with_overrides({("cluster", "gpus_per_node"): gpus_per_node})
    probes, load_errors = all_probes()
    only = list(only) or list(config.get("probes", "only") or [])
    skip = list(skip) + list(config.get("probes", "skip") or [])
    if not only:
        # group probes need the other nodes' processes: a health hook runs on one node alone
        skip += [p.name for p in probes if is_group_probe(p) and p.name not in skip]
    probes = select_probes(probes, only, skip)
    left = budget_s - (time.monotonic() - started) - RESERVE_S
    if left < 0.5:
        from llmdiag.errors import UsageError

        raise UsageError(f"--timeout {budget_s:g} s leaves no time to check after start-up")
    probes = [with_timeout(p, min(float(p.timeout_s), left)) for p in probes]
    ctx = Context.create(config=config, env=env)
    try:
        node_report = run_probes(probes, ctx, load_errors=load_errors, parallel=len(probes))
    finally:
        ctx.cleanup.run()
    if report_path:
        from llmdiag.cliutil import emit_doc
        from llmdiag.result import ClusterReport

        doc = ClusterReport(command="node-health", nodes=(node_report,), strict=strict,
                            duration_s=time.monotonic() - started).to_dict()
        emit_doc(doc, "json", [report_path], None, True, env=env)
    verdict, behind = judge(node_report.results, strict=strict)
    return verdict, line(verdict, behind, node_report.results, ctx.node, limit)
