"""The cluster side of ``llmdiag preflight``: an agent on this node, or ssh fan-out from a hostfile."""

from __future__ import annotations

import dataclasses
import os
import sys

import click

from llmdiag.cliutil import emit_doc
from llmdiag.exitcodes import ExitCode
from llmdiag.result import ClusterReport, NodeReport, Status


def agent_options(config, strict: bool):
    from llmdiag.cluster.agent import AgentOptions

    g = config.get
    return AgentOptions(
        timeout_s=float(g("cluster", "timeout_s")),
        connect_timeout_s=float(g("network", "connect_timeout_s")),
        port_range=tuple(g("network", "port_range")),
        max_ports=int(g("cluster", "matrix_max_ports")),
        sample_peers=int(g("cluster", "sample_peers")),
        full_matrix=bool(g("cluster", "full_matrix")),
        share_wait_s=float(g("cluster", "share_wait_s")),
        node_report_dir=g("cluster", "node_report_dir"),
        skew_warn_ms=float(g("thresholds", "clock_skew_warn_ms")),
        strict=strict,
    )


def _log(node: str):
    def log(msg: str) -> None:
        print(f"llmdiag[{node}]: {msg}", file=sys.stderr, flush=True)

    return log


def with_baseline(report: ClusterReport, save_dir: str | None, baseline: dict | None) -> ClusterReport:
    """Compare with a saved baseline (its findings join the cluster results), then save one."""
    if baseline is not None:
        from llmdiag.cluster.baseline import compare

        report = dataclasses.replace(report, cluster_results=tuple(report.cluster_results) +
                                     tuple(compare(baseline, report)))
    if save_dir:
        from llmdiag.cluster.baseline import save

        try:
            path = save(save_dir, report)
            print(f"llmdiag: baseline saved to {path}", file=sys.stderr, flush=True)
        except OSError as exc:
            print(f"llmdiag: could not save the baseline to {save_dir}: {exc}", file=sys.stderr, flush=True)
    return report


def save_node_report(directory: str, node_report: NodeReport, env, elapsed_s: float, master_addr: str | None) -> None:
    """``--node-report-dir`` outside cluster mode: this node's report as ``DIR/node-<host>.json``
    with the facts ``report merge`` compares, so nodes checked one by one still merge into a
    cluster report (a failure to write is said, the checks' exit code stands)."""
    from llmdiag.cluster import facts, gather

    results = [r.to_dict() for r in node_report.results]
    iface = facts.job_interface(master_addr) if master_addr else None
    meta = dict(node_report.meta, facts=facts.node_facts(results, env, iface), elapsed_s=round(elapsed_s, 3))
    doc = dataclasses.replace(node_report, meta=meta).to_dict()
    try:
        path = gather.write_node_file(directory, doc)
        print(f"llmdiag: node report written to {path}", file=sys.stderr, flush=True)
    except OSError as exc:
        print(f"llmdiag: could not write the node report to {directory}: {exc}", file=sys.stderr, flush=True)


def drain_if_failed(results, strict: bool, env) -> None:
    """``--slurm-drain``: drain this node when one of its own checks failed (the reason says which)."""
    from llmdiag.cluster import slurm

    reason = slurm.drain_reason(results, strict)
    if reason is None:
        return
    ok, what = slurm.drain(slurm.node_name(env), reason, env)
    print(f"llmdiag: {what}", file=sys.stderr, flush=True)


def _exit(report: ClusterReport, strict: bool) -> None:
    st = report.status
    if st is Status.FAIL or (strict and st is Status.WARN):
        raise SystemExit(ExitCode.CHECKS_FAILED)


def _leave(report: ClusterReport, strict: bool) -> None:
    """The agent's exit, once its report is out and its cleanups have run: without the interpreter's teardown.
    The agent holds native threads it does not own the order of (the c10d store's server, a gloo group's workers,
    a collective a cut group probe left running, a local probe past its deadline): torch's destructors met one of
    them at exit and aborted ("terminate called without an active exception", exit -6 instead of the verdict)."""
    try:
        _exit(report, strict)
        code = 0
    except SystemExit as done:
        code = int(done.code or 0)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    from llmdiag.util.procs import remove_private_tempdir

    remove_private_tempdir()  # what the CLI's private_tempdir would have removed on the way out
    os._exit(code)


def run_agent_mode(world, ctx, probes, load_errors, *, strict, fmt, output, width, no_color, save_baseline=None,
                   baseline=None, slurm_drain=False) -> None:
    """One agent; rank 0 prints the cluster report, other nodes their node report."""
    from llmdiag.cluster.agent import Agent

    log = _log(ctx.node)
    if not world.is_agent:
        log(f"local rank {ctx.launcher.local_rank}: only local rank 0 runs the node's agent; nothing to do")
        return
    agent = Agent(world, ctx, probes, agent_options(ctx.config, strict), load_errors=load_errors, log=log)
    try:
        outcome = agent.run()
    finally:
        agent.cleanup()
        ctx.cleanup.run()
    if outcome.cluster is not None:
        report = with_baseline(outcome.cluster, save_baseline, baseline)
    else:
        from llmdiag.cluster.merge import run_elapsed

        report = ClusterReport(command="preflight", nodes=(NodeReport.from_dict(outcome.node_doc),), strict=strict,
                               duration_s=run_elapsed([outcome.node_doc]))
        if outcome.sent:
            log(f"node report sent to rank 0; this node: {report.status.value}")
        else:
            log(f"rank 0 was not reached: this node's report is printed here only; this node: {report.status.value}")
    emit_doc(report.to_dict(), fmt, output, width, no_color, env=ctx.env)
    if slurm_drain:
        mine = [r for n in report.nodes if n.node_rank == world.node_rank for r in n.results]
        drain_if_failed(mine, strict, ctx.env)
    _leave(report, strict)


def run_hostfile_mode(config, env, *, strict, master_addr, master_port, passthrough, fmt, output, width,
                      no_color, save_baseline=None, baseline=None) -> None:
    from llmdiag.cluster.coordinator import run_hostfile
    from llmdiag.cluster.hostfile import host_problem, read_hostfile
    from llmdiag.errors import UsageError

    entries = read_hostfile(config.get("cluster", "hostfile"))
    if master_addr and host_problem(master_addr):
        raise UsageError(f"--master-addr {master_addr!r}: {host_problem(master_addr)}")
    if len(entries) < 2:
        click.echo("llmdiag: the hostfile lists one host; running a cluster of one", err=True)
    report = run_hostfile(
        entries, master_addr=master_addr, master_port=master_port or int(config.get("cluster", "master_port")),
        timeout_s=float(config.get("cluster", "timeout_s")), remote_command=config.get("cluster", "remote_command"),
        ssh_config=config.get("cluster", "ssh_config"), connect_timeout=int(config.get("cluster", "ssh_connect_timeout_s")),
        passthrough=passthrough, skew_warn_ms=float(config.get("thresholds", "clock_skew_warn_ms")), strict=strict,
        log=_log("hostfile"), window=int(config.get("cluster", "ssh_window")))
    report = with_baseline(report, save_baseline, baseline)
    emit_doc(report.to_dict(), fmt, output, width, no_color, env=env)
    _exit(report, strict)
