"""``llmdiag preflight``: run the probes on this node and print the cluster health report."""

from __future__ import annotations

import sys

import click

from llmdiag.cliutil import (config_option, emit_doc, guard_outputs, output_options, setting_flags,
                             setting_option)
from llmdiag.config import ClusterSettings, NetworkSettings, ProbeSettings
from llmdiag.errors import UsageError
from llmdiag.exitcodes import ExitCode


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
            from llmdiag.errors import UsageError

            raise UsageError(f"unknown probe {n!r} (available: {', '.join(sorted(names))})")
    if only:
        probes = [p for p in probes if p.name in only]
    chosen = [p for p in probes if p.name not in skip]
    if not chosen:
        from llmdiag.errors import UsageError

        raise UsageError(f"no probe left to run (--probe {' '.join(only) or 'all'}, --skip {' '.join(skip)}): "
                         "nothing would be checked")
    return chosen


def _path_items(paths, shared_paths):
    items = [{"path": p} for p in paths] + [{"path": p, "shared": True} for p in shared_paths]
    return items or None


def _passthrough(config_path, only, skip, paths, shared_paths, port_range, node_report_dir, full_matrix,
                 sample_peers) -> list[str]:
    """The flags every ssh-started agent gets too (the remote reads its own config file)."""
    args: list[str] = []
    if config_path:
        args += ["--config", config_path]
    for flag, values in (("--probe", only), ("--skip", skip), ("--path", paths), ("--shared-path", shared_paths)):
        for v in values:
            args += [flag, v]
    if port_range:
        args += ["--port-range", port_range]
    if node_report_dir:
        args += ["--node-report-dir", node_report_dir]
    if full_matrix:
        args.append("--full-matrix")
    if sample_peers is not None:
        args += ["--sample-peers", str(sample_peers)]
    return args


def cluster_options(fn):
    """The flags of cluster mode (see docs/cluster.md)."""
    opts = [
        setting_option(ClusterSettings, "hostfile", type=click.Path(dir_okay=False)),
        setting_option(ClusterSettings, "nodes", name="nnodes"),
        click.option("--node-rank", type=click.IntRange(0, 99999), default=None, help="This node's rank (0 hosts "
                     "the rendezvous)."),
        setting_option(ClusterSettings, "master_addr"),
        setting_option(ClusterSettings, "master_port"),
        setting_option(ClusterSettings, "node_report_dir", type=click.Path(file_okay=False)),
        setting_option(ClusterSettings, "full_matrix"),
        setting_option(ClusterSettings, "sample_peers"),
        click.option("--expected-hosts", default=None, hidden=True, help="Host names by node rank (set by --hostfile)."),
        setting_option(ClusterSettings, "remote_command"),
        setting_option(ClusterSettings, "ssh_config", type=click.Path(dir_okay=False)),
        click.option("--slurm-drain", is_flag=True,
                     help="When a check fails, drain this Slurm node with the finding as the reason (prolog/NHC)."),
        click.option("--save-baseline", type=click.Path(file_okay=False), default=None, metavar="DIR",
                     help="Keep this run's per-node numbers (versions, busbw, throughput) in DIR/baseline.json."),
        click.option("--baseline", "baseline_dir", type=click.Path(file_okay=False), default=None, metavar="DIR",
                     help="Compare with the baseline saved in DIR and name the regressions."),
    ]
    for o in reversed(opts):
        fn = o(fn)
    return fn


@click.command()
@config_option
@click.option("--probe", "only", multiple=True, metavar="NAME", help="Run only this probe (repeatable).")
@click.option("--skip", multiple=True, metavar="NAME", help="Do not run this probe (repeatable).")
@click.option("--list-probes", is_flag=True, help="List the available probes and exit.")
@click.option("--strict", is_flag=True, help="Exit 1 on warnings too.")
@setting_option(ProbeSettings, "timeout_s")
@setting_option(ClusterSettings, "gpus_per_node")
@setting_option(NetworkSettings, "port_range")
@setting_option(NetworkSettings, "interfaces", multiple=True)
@click.option("--path", "paths", multiple=True, metavar="PATH",
              help="A path the job reads/writes (repeatable; replaces [filesystem] paths).")
@click.option("--shared-path", "shared_paths", multiple=True, metavar="PATH",
              help="A path that must be the same shared filesystem on every node (repeatable).")
@cluster_options
@output_options()
def preflight(config_path, only, skip, list_probes, strict, timeout_s, gpus_per_node, port_range, interfaces,
              paths, shared_paths, hostfile, nnodes, node_rank, master_addr, master_port, node_report_dir,
              full_matrix, sample_peers, expected_hosts, remote_command, ssh_config, slurm_drain, save_baseline,
              baseline_dir, fmt, output, width, no_color):
    """Check this node, or every node of a cluster (versions, GPUs, limits, network, ports, paths).

    Cluster mode starts when the job has more than one node: under torchrun, srun or mpirun
    (one process per node), with --nnodes/--node-rank/--master-addr (or NNODES, NODE_RANK,
    MASTER_ADDR, MASTER_PORT) on every node, or with --hostfile FILE from one node (agents
    started over ssh). Rank 0 prints the cluster report; the other nodes print their own.

    Flags override the config file, which overrides the defaults.
    Exit code 0 when nothing failed (warnings too with --strict), 1 when a check failed.
    """
    import os
    import time

    from llmdiag.config import Config
    from llmdiag.context import Context
    from llmdiag.registry import all_probes
    from llmdiag.result import ClusterReport, Status
    from llmdiag.runner import run_probes

    env = dict(os.environ)
    guard_outputs([("-o", output)], [("--hostfile", hostfile), ("--ssh-config", ssh_config)],
                  config_path=config_path, env=env)
    config = Config.load(config_path, env)
    overrides = {
        **setting_flags(),
        ("filesystem", "paths"): _path_items(paths, shared_paths),
        # --timeout bounds the cluster's steps too (their bound's floor is 1 s), and every probe (below)
        ("cluster", "timeout_s"): None if timeout_s is None else max(1.0, timeout_s),
    }
    config = config.with_overrides(overrides)
    probes, load_errors = all_probes()
    probes = [_configured_timeout(p, config) for p in probes]
    if list_probes:
        for p in probes:
            reqs = ",".join(sorted(r.value if hasattr(r, "value") else str(r) for r in p.requires)) or "-"
            click.echo(f"{p.name:<14} {p.description}  [requires: {reqs}; timeout {p.timeout_s:g} s]")
        for e in load_errors:
            click.echo(f"{e.source:<14} BROKEN: {e.message}")
        return
    baseline = None
    if baseline_dir:
        from llmdiag.cluster.baseline import load

        baseline = load(baseline_dir)
    only = list(only) or list(config.get("probes", "only") or [])
    skip = list(skip) + list(config.get("probes", "skip") or [])
    probes = select_probes(probes, only, skip)
    timeout_s = timeout_s or config.get("probes", "timeout_s")
    if timeout_s:
        probes = [_with_timeout(p, timeout_s) for p in probes]

    if config.get("cluster", "hostfile"):
        from llmdiag.commands.cluster_mode import run_hostfile_mode

        return run_hostfile_mode(config, env, strict=strict, master_addr=master_addr, master_port=master_port,
                                 passthrough=_passthrough(config_path, only, skip, paths, shared_paths, port_range,
                                                          node_report_dir, full_matrix, sample_peers),
                                 fmt=fmt, output=output, width=width, no_color=no_color,
                                 save_baseline=save_baseline, baseline=baseline)
    ctx = Context.create(config=config, env=env)
    from llmdiag.cluster.world import RendezvousUnknown, resolve_world

    try:
        world = resolve_world(ctx.launcher, env, config, nnodes=nnodes, node_rank=node_rank, master_addr=master_addr,
                              master_port=master_port, hosts=tuple(h for h in (expected_hosts or "").split(",") if h))
    except UsageError as exc:
        if nnodes is not None or node_rank is not None or master_addr or isinstance(exc, RendezvousUnknown):
            raise  # the user's own flags, or a multi-node job without a rendezvous: never a single-node PASS
        # Broken launcher variables are what the launcher probe diagnoses: check this node.
        click.echo(f"llmdiag: cluster mode not started: {exc}; checking this node only", err=True)
        world = None
    if world is None and ctx.launcher.local_rank not in (None, 0):
        # torchrun --nproc-per-node N on one node: one node check, not N concurrent ones
        click.echo(f"llmdiag[{ctx.node}]: local rank {ctx.launcher.local_rank}: only local rank 0 runs the node "
                   "checks; nothing to do", err=True)
        ctx.cleanup.run()
        return
    if world is not None:
        from llmdiag.commands.cluster_mode import run_agent_mode

        return run_agent_mode(world, ctx, probes, load_errors, strict=strict, fmt=fmt, output=output, width=width,
                              no_color=no_color, save_baseline=save_baseline, baseline=baseline,
                              slurm_drain=slurm_drain)
    progress, stop = _progress_printer()
    started = time.monotonic()
    try:
        node_report = run_probes(probes, ctx, load_errors=load_errors, progress=progress)
    finally:
        stop()
        ctx.cleanup.run()
    elapsed = time.monotonic() - started
    if config.get("cluster", "node_report_dir"):
        from llmdiag.commands.cluster_mode import save_node_report

        save_node_report(config.get("cluster", "node_report_dir"), node_report, env, elapsed,
                         master_addr or ctx.launcher.master_addr)
    report = ClusterReport(command="preflight", nodes=(node_report,), strict=strict, duration_s=elapsed)
    if save_baseline or baseline is not None:
        from llmdiag.commands.cluster_mode import with_baseline

        report = with_baseline(report, save_baseline, baseline)
    doc = report.to_dict()
    emit_doc(doc, fmt, output, width, no_color, env=env)
    if slurm_drain:
        from llmdiag.commands.cluster_mode import drain_if_failed

        drain_if_failed(node_report.results, strict, env)
    status = report.status
    if status is Status.FAIL or (strict and status is Status.WARN):
        raise SystemExit(ExitCode.CHECKS_FAILED)


def _configured_timeout(probe, config):
    """``probe`` bounded by its ``timeout_setting`` (plus its grace) where it declares one."""
    setting = getattr(probe, "timeout_setting", None)
    if not setting:
        return probe
    value = config.get(*setting)
    if value is None:
        return probe
    from llmdiag.runner import with_timeout

    return with_timeout(probe, float(value) + float(getattr(probe, "timeout_grace_s", 10.0)),
                        note=f"[{setting[0]}] {setting[1]} + {getattr(probe, 'timeout_grace_s', 10.0):g} s")


def _with_timeout(probe, timeout_s: float):
    from llmdiag.runner import with_timeout

    return with_timeout(probe, timeout_s)
