"""``llmdiag monitor``: sample GPUs and the host while a job runs; timeline, metrics, alerts.

Exit codes: 0 no critical alert (warnings allowed unless ``--strict``), 1 a critical alert
fired, 2 bad flags or config, 130 / 143 / 129 stopped by SIGINT / SIGTERM / SIGHUP (the
timeline and report are still written, as for every other end).
"""

from __future__ import annotations

import click

from llmdiag.cliutil import (config_option, emit_doc, FiniteFloatRange, guard_outputs, output_options, setting_flags,
                             setting_option)
from llmdiag.exitcodes import ExitCode
from llmdiag.monitor.config import Settings


def _describe(alert) -> str:
    return (f"ALERT [{alert['severity']}] {alert['rule']} {alert['device']}: {alert['message']} "
            f"(llmdiag runbook {alert['runbook']})")


def _watch(pid: int):
    """A callable telling whether process ``pid`` still runs (a zombie has exited; a reused pid
    is another process: the start time must match)."""
    import psutil

    from llmdiag.errors import UsageError

    try:
        started = psutil.Process(pid).create_time()
    except psutil.Error:
        raise UsageError(f"--pid {pid}: no such process") from None

    def alive() -> bool:
        try:
            proc = psutil.Process(pid)
            return proc.create_time() == started and proc.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False

    return alive


@click.command()
@config_option
@setting_option(Settings, "interval_s")
@click.option("--count", type=click.IntRange(1), default=None, help="Stop after N samples.")
@click.option("--duration", "duration_s", type=FiniteFloatRange(0, min_open=True), default=None, metavar="SECONDS",
              help="Stop after this many seconds.")
@click.option("--pid", type=click.IntRange(1), default=None, help="Stop when this process (the job) exits.")
@click.option("--timeline", "timeline_path", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Write every sample to FILE.csv (appended as it runs) or FILE.parquet.")
@click.option("--prometheus-file", "prom_path", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Rewrite FILE (atomically) with the metrics each sample: node_exporter's textfile collector.")
@click.option("--port", type=click.IntRange(0, 65535), default=None,
              help="Serve the metrics on http://BIND:PORT/metrics (0: any free port, printed on stderr).")
@click.option("--bind", default="0.0.0.0", show_default=True, help="Address the --port server listens on.")
@setting_option(Settings, "on_alert")
@click.option("--heartbeat-dir", default=None, type=click.Path(file_okay=False), metavar="DIR",
              help="Shared directory: write this node's heartbeat there and alert on peers gone silent.")
@click.option("--strict", is_flag=True, help="Exit 1 on warning alerts too.")
@click.option("--replay-nvml", default=None, hidden=True, type=click.Path(exists=True, dir_okay=False),
              help="Test hook: read GPUs from a recorded NVML fixture instead of the driver.")
@output_options()
def monitor(config_path, interval_s, count, duration_s, pid, timeline_path, prom_path, port, bind, on_alert,
            heartbeat_dir, strict, replay_nvml, fmt, output, width, no_color):
    """Sample every GPU (utilisation, memory, temperature, power, clocks, throttling, ECC, Xid)
    and the host (CPU, memory, load, network, disk) at an interval while a job runs.

    Writes a timeline (--timeline), Prometheus metrics (--prometheus-file, --port) and raises
    alerts on the [monitor] rules, printed on stderr and passed to --on-alert. Runs until
    --count, --duration, --pid's exit, SIGTERM or Ctrl-C, then prints a summary report.
    Without a GPU it monitors the host and says that GPUs are absent.
    """
    import os
    import signal
    import threading

    from llmdiag.config import Config
    from llmdiag.context import Context
    from llmdiag.monitor import sinks as S
    from llmdiag.monitor.gpus import GpuSampler
    from llmdiag.monitor.host import HostSampler
    from llmdiag.monitor.loop import MIN_STALL_S, Monitor, Sinks

    env = dict(os.environ)
    guard_outputs([("-o", output), ("--timeline", timeline_path), ("--prometheus-file", prom_path)],
                  [("--replay-nvml", replay_nvml)], config_path=config_path, env=env)
    config = Config.load(config_path, env).with_overrides(setting_flags())
    settings = config.settings(Settings)
    rules = settings.rules()
    protect = [config_path] if config_path else []
    alive = _watch(pid) if pid is not None else None

    ctx = Context.create(config=config, env=env)
    interval = settings.interval_s
    sinks = Sinks(render_metrics=_render_prometheus)
    if settings.on_alert:
        sinks.alert_command = S.AlertCommand(settings.on_alert, settings.on_alert_timeout_s, ctx.runner)
        sinks.alert_command.check()
    if heartbeat_dir:
        from llmdiag.monitor.heartbeat import Heartbeat

        sinks.heartbeat = Heartbeat(heartbeat_dir, ctx.node, max(MIN_STALL_S, rules.stall_factor * interval))
    if prom_path:
        sinks.prometheus_file = S.PrometheusFile(prom_path)
    if timeline_path:
        S.check_timeline_path(timeline_path)
    factory = None
    if replay_nvml:
        from llmdiag import nvml

        factory = lambda: nvml.replay(replay_nvml)  # noqa: E731
    gpus = GpuSampler(factory, rules.throttle_reasons)
    try:
        if port is not None:  # first: a busy port must fail before any file is created
            sinks.server = S.MetricsServer(port, bind)
        if timeline_path:
            sinks.timeline = S.Timeline(timeline_path)
    except BaseException:
        gpus.close()
        if sinks.server is not None:
            sinks.server.close()
        raise

    def notify(kind: str, what) -> None:
        if kind == "alert":
            click.echo(f"llmdiag monitor: {_describe(what)}", err=True)
        elif kind == "resolved":
            click.echo(f"llmdiag monitor: resolved {what['rule']} {what['device']}", err=True)
        else:
            click.echo(f"llmdiag monitor: {what}", err=True)

    where = f"; metrics on http://{bind}:{sinks.server.port}/metrics" if sinks.server else ""
    click.echo(f"llmdiag monitor: {ctx.node}: {gpus.note}; sampling every {interval:g} s{where}", err=True)

    stop = threading.Event()
    got: list[int] = []

    def on_signal(signum, frame) -> None:
        got.append(signum)
        stop.set()

    from llmdiag.util.procs import HANDLED, inherited_ignore

    # a signal the caller ignored (nohup: SIGHUP; a background job: SIGINT) stays ignored
    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, *HANDLED) if not inherited_ignore(s)}
    try:
        mon = Monitor(node=ctx.node, interval_s=interval, rules=rules, gpus=gpus, host=HostSampler(), sinks=sinks,
                      notify=notify, env=env, stop=stop)
        doc = mon.run(count=count, duration_s=duration_s, alive=alive)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    if timeline_path:
        doc["timeline"] = {"path": timeline_path, "rows": sinks.timeline.rows_written}
    emit_doc(doc, fmt, output, width, no_color, env=env, protect=protect)
    if got:  # the timeline and report are written; the exit code says it was stopped
        click.echo("interrupted" if got[0] == signal.SIGINT else f"llmdiag monitor: stopped by "
                   f"{signal.Signals(got[0]).name}", err=True)
        raise SystemExit(128 + got[0])
    if doc["status"] == "fail" or (strict and doc["status"] == "warn"):
        raise SystemExit(ExitCode.CHECKS_FAILED)


def _render_prometheus(doc) -> str:
    from llmdiag.reports.base import render

    return render(doc, "prometheus")
