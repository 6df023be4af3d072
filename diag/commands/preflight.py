"""``llmdiag preflight``: run the probes on this node and print the cluster health report."""

from __future__ import annotations

import sys

import click

from diag.cliutil import config_option, emit_doc, output_options
from diag.exitcodes import ExitCode


def _progress_printer():
    """Progress on stderr while probes run (only on a terminal; never mixed into stdout)."""
    if not sys.stderr.isatty():
        return None, lambda: None
    from rich.console import Console

    console = Console(stderr=True)
    status = console.status("running probes ...")
    status.start()
    running: set[str] = set()

    def progress(event: str, name: str, results) -> None:
        if event == "start":
            running.add(name)
        else:
            running.discard(name)
        status.update(f"running probes: {', '.join(sorted(running)) or 'finishing'}")

    return progress, status.stop


def select_probes(probes, only, skip):
    names = {p.name for p in probes}
    for n in list(only) + list(skip):
        if n not in names:
            from diag.errors import UsageError

            raise UsageError(f"unknown probe {n!r} (available: {', '.join(sorted(names))})")
    if only:
        probes = [p for p in probes if p.name in only]
    return [p for p in probes if p.name not in skip]


@click.command()
@config_option
@click.option("--probe", "only", multiple=True, metavar="NAME", help="Run only this probe (repeatable).")
@click.option("--skip", multiple=True, metavar="NAME", help="Do not run this probe (repeatable).")
@click.option("--list-probes", is_flag=True, help="List the available probes and exit.")
@click.option("--strict", is_flag=True, help="Exit 1 on warnings too.")
@click.option("--timeout", "timeout_s", type=click.FloatRange(0.1, 3600), default=None,
              help="Deadline of every probe, in seconds (default: each probe's own).")
@click.option("--gpus-per-node", type=click.IntRange(0, 64), default=None, help="GPUs every node must show.")
@click.option("--port-range", default=None, metavar="LO-HI", help="Ports the job will bind.")
@click.option("--interface", "interfaces", multiple=True, metavar="IF", help="Interface the job must use.")
@click.option("--path", "paths", multiple=True, metavar="PATH",
              help="A path the job reads/writes (repeatable; replaces [filesystem] paths).")
@output_options()
def preflight(config_path, only, skip, list_probes, strict, timeout_s, gpus_per_node, port_range, interfaces,
              paths, fmt, output, width, no_color):
    """Check this node (software, GPUs, system limits, network, ports, filesystems).

    Flags override the config file, which overrides the defaults.
    Exit code 0 when nothing failed (warnings too with --strict), 1 when a check failed.
    """
    import os

    from diag.config import Config
    from diag.context import Context
    from diag.registry import all_probes
    from diag.result import ClusterReport, Status
    from diag.runner import run_probes

    env = dict(os.environ)
    config = Config.load(config_path, env)
    overrides = {
        ("cluster", "gpus_per_node"): gpus_per_node,
        ("network", "port_range"): port_range,
        ("network", "interfaces"): list(interfaces) or None,
        ("filesystem", "paths"): [{"path": p} for p in paths] or None,
    }
    config = config.with_overrides(overrides)
    probes, load_errors = all_probes()
    if list_probes:
        for p in probes:
            reqs = ",".join(sorted(r.value if hasattr(r, "value") else str(r) for r in p.requires)) or "-"
            click.echo(f"{p.name:<14} {p.description}  [requires: {reqs}; timeout {p.timeout_s:g} s]")
        for e in load_errors:
            click.echo(f"{e.source:<14} BROKEN: {e.message}")
        return
    only = list(only) or list(config.get("probes", "only") or [])
    skip = list(skip) + list(config.get("probes", "skip") or [])
    probes = select_probes(probes, only, skip)
    timeout_s = timeout_s or config.get("probes", "timeout_s")
    if timeout_s:
        probes = [_with_timeout(p, timeout_s) for p in probes]

    ctx = Context.create(config=config, env=env)
    progress, stop = _progress_printer()
    try:
        node_report = run_probes(probes, ctx, load_errors=load_errors, progress=progress)
    finally:
        stop()
        ctx.cleanup.run()
    report = ClusterReport(command="preflight", nodes=(node_report,), strict=strict)
    doc = report.to_dict()
    emit_doc(doc, fmt, output, width, no_color, env=env)
    status = report.status
    if status is Status.FAIL or (strict and status is Status.WARN):
        raise SystemExit(ExitCode.CHECKS_FAILED)


class _TimeoutOverride:
    """A probe with its deadline replaced (``--timeout``)."""

    def __init__(self, probe, timeout_s: float):
        self._probe = probe
        self.timeout_s = float(timeout_s)

    def __getattr__(self, name):
        return getattr(self._probe, name)

    def run(self, ctx):
        return self._probe.run(ctx)


def _with_timeout(probe, timeout_s: float):
    return _TimeoutOverride(probe, timeout_s)
