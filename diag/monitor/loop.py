"""The sampling loop: read host and GPUs each interval, evaluate rules, feed the sinks.

Timing is on a fixed grid (start + n x interval) so the interval does not drift by the time a
round takes; a round that overruns is followed at once by the next. GPU reads run in a worker
thread with a deadline of ``stall_factor`` intervals: NVML can block for a long time on a
failing GPU, and a monitor that hangs with it would report nothing at all. While such a read
is outstanding, samples carry the host only and the ``sampling-stalled`` condition holds.

Alerts go to the ``--on-alert`` command through one background thread (in order, each run
bounded by its timeout), so a slow alert command never delays sampling.
"""

from __future__ import annotations

import dataclasses
import queue
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from llmdiag import documents as D
from llmdiag.monitor import rules as R
from llmdiag.monitor.config import Rules

SCHEMA_VERSION = D.SCHEMA_VERSION
#: Points per plotted series kept for the HTML report (older points are thinned out).
MAX_POINTS = 600
#: Alerts kept in full in the summary document (all are counted).
MAX_ALERTS = 1000
#: The stall deadline never goes below this: reading eight GPUs through NVML takes tens of
#: milliseconds, so a very short interval must not turn a normal read into a "stall".
MIN_STALL_S = 1.0


class _Series:
    """A time series thinned to at most ``MAX_POINTS`` points by dropping every other one."""

    def __init__(self) -> None:
        self.t: list[float] = []
        self.v: list[Any] = []
        self._stride = 1
        self._n = 0

    def add(self, t: float, v: Any) -> None:
        if self._n % self._stride == 0:
            self.t.append(round(t, 3))
            self.v.append(v)
            if len(self.t) > MAX_POINTS:
                self.t, self.v = self.t[::2], self.v[::2]
                self._stride *= 2
        self._n += 1

    def to_dict(self) -> dict[str, list]:
        return {"t": list(self.t), "v": list(self.v)}


class _Stats:
    """min / mean / max of a reading, without keeping the readings."""

    def __init__(self) -> None:
        self.n, self.total, self.min, self.max = 0, 0.0, None, None

    def add(self, v: Any) -> None:
        if v is None or isinstance(v, bool):
            return
        v = float(v)
        self.n += 1
        self.total += v
        self.min = v if self.min is None else min(self.min, v)
        self.max = v if self.max is None else max(self.max, v)

    def to_dict(self) -> dict[str, float | None]:
        return {"min": self.min, "mean": round(self.total / self.n, 3) if self.n else None, "max": self.max}


#: (device kind, reading) pairs summarised per device in the report.
HOST_STATS = ("cpu_pct", "mem_pct", "load_1m", "net_rx_bps", "net_tx_bps")
GPU_STATS = ("utilization_gpu_pct", "memory_used_pct", "temperature_c", "power_w", "sm_clock_mhz")


class AlertDispatcher:
    """Runs the alert command for each alert on one background thread, in order."""

    def __init__(self, command, on_error: Callable[[str], None], max_pending: int = 100) -> None:
        self._command = command
        self._on_error = on_error
        self._queue: queue.Queue = queue.Queue(maxsize=max_pending)
        self.sent = 0
        self.failed = 0
        self.dropped = 0
        self._thread = threading.Thread(target=self._work, name="llmdiag-on-alert", daemon=True)
        self._thread.start()

    def put(self, alert: Mapping[str, Any]) -> None:
        try:
            self._queue.put_nowait(dict(alert))
        except queue.Full:
            self.dropped += 1
            self._on_error(f"--on-alert is {self._queue.maxsize} alerts behind; alert {alert.get('rule')} dropped")

    def _work(self) -> None:
        while True:
            alert = self._queue.get()
            if alert is None:
                return
            error = self._command.send(alert)
            self.sent += 1
            if error:
                self.failed += 1
                self._on_error(error)

    def close(self, wait_s: float) -> None:
        """Let queued alerts go out, for at most ``wait_s`` seconds."""
        try:
            self._queue.put(None, timeout=wait_s)
        except queue.Full:
            return
        self._thread.join(wait_s)


@dataclasses.dataclass
class Sinks:
    timeline: Any = None  # sinks.Timeline
    prometheus_file: Any = None  # sinks.PrometheusFile
    server: Any = None  # sinks.MetricsServer
    alert_command: Any = None  # sinks.AlertCommand
    heartbeat: Any = None  # heartbeat.Heartbeat
    #: metrics document -> Prometheus text; the command passes the reports layer's renderer
    #: (this subsystem renders nothing itself). Needed with ``prometheus_file`` or ``server``.
    render_metrics: Callable[[Mapping[str, Any]], str] | None = None


class Monitor:
    """One node's monitor. :meth:`run` returns the summary document (kind ``monitor``)."""

    def __init__(self, *, node: str, interval_s: float, rules: Rules, gpus, host, sinks: Sinks | None = None,
                 notify: Callable[[str, Any], None] | None = None, env: Mapping[str, str] | None = None,
                 wall: Callable[[], float] = time.time, mono: Callable[[], float] = time.monotonic,
                 stop: threading.Event | None = None) -> None:
        self.node = node
        self.interval_s = interval_s
        self.rules = rules
        self.gpus = gpus
        self.host = host
        self.sinks = sinks or Sinks()
        self.notify = notify or (lambda kind, what: None)
        self.env = dict(env or {})
        self.wall, self.mono = wall, mono
        self.stop = stop or threading.Event()
        self.stall_s = max(MIN_STALL_S, rules.stall_factor * interval_s)
        self.samples = 0
        self.alerts: list[dict[str, Any]] = []
        self.alerts_total = 0
        self.alerts_by_rule: dict[str, int] = {}
        self.active: dict[tuple[str, str], dict[str, Any]] = {}
        self.latest: dict[str, Any] = {}
        self.stop_reason = ""
        self._prev_gpus: dict[int, Mapping[str, Any]] = {}
        self._pending: threading.Thread | None = None
        self._pending_since = 0.0
        self._series: dict[str, dict[str, _Series]] = {}
        self._stats: dict[str, dict[str, _Stats]] = {}
        self._rounds = _Stats()  # wall time of a round (s)
        self._worst: list[dict[str, Any]] = []  # one alert per severity seen, for the status
        self._dispatch = (AlertDispatcher(self.sinks.alert_command, lambda m: self.notify("error", m))
                          if self.sinks.alert_command else None)
        self.started_at = self.wall()

    # -- one round ---------------------------------------------------------------------------

    def _read_gpus(self) -> tuple[list[dict[str, Any]], str | None]:
        if not self.gpus.count:
            return [], None
        if self._pending is not None:
            if self._pending.is_alive():
                return [], f"GPU readings blocked for {self.mono() - self._pending_since:.1f} s"
            self._pending = None
        box: dict[str, Any] = {}

        def read() -> None:
            try:
                box["gpus"] = self.gpus.sample()
            except Exception as exc:  # noqa: BLE001 - a broken read is an alert, not a crash
                box["error"] = f"{type(exc).__name__}: {exc}"

        worker = threading.Thread(target=read, name="llmdiag-nvml-read", daemon=True)
        started = self.mono()
        worker.start()
        worker.join(self.stall_s)
        if worker.is_alive():
            self._pending, self._pending_since = worker, started
            return [], f"GPU readings did not return within {self.stall_s:g} s"
        if "error" in box:
            return [], f"GPU readings failed: {box['error']}"
        return box["gpus"], None

    def sample_once(self, elapsed_s: float) -> dict[str, Any]:
        gpus, gpu_error = self._read_gpus()
        sample = {"time": round(self.wall(), 3), "elapsed_s": round(elapsed_s, 3), "host": self.host.sample(),
                  "gpus": gpus}
        if gpu_error:
            sample["gpu_error"] = gpu_error
        return sample

    def _fire(self, alert: dict[str, Any], now: float) -> None:
        alert = {"time": now, "node": self.node, **alert}
        self.alerts_total += 1
        self.alerts_by_rule[alert["rule"]] = self.alerts_by_rule.get(alert["rule"], 0) + 1
        if len(self.alerts) < MAX_ALERTS:
            self.alerts.append(alert)
        if alert["severity"] not in {a["severity"] for a in self._worst}:
            self._worst.append(alert)
        self.notify("alert", alert)
        if self._dispatch:
            self._dispatch.put(alert)

    def _alerts(self, sample: Mapping[str, Any], gap_s: float | None) -> None:
        now = sample["time"]
        conditions, events = R.evaluate(sample, self._prev_gpus, self.rules)
        if sample.get("gpu_error"):
            conditions.append(R.alert("sampling-stalled", "critical", "gpu", sample["gpu_error"],
                                      round(self.mono() - self._pending_since, 1) if self._pending else None,
                                      self.stall_s, "s"))
        if gap_s is not None and gap_s > self.stall_s:
            events.append(R.alert("sampling-stalled", "critical", "host",
                                  f"no sample for {gap_s:.1f} s (interval {self.interval_s:g} s): this host stalled "
                                  "(swapping, CPU starvation or a hung filesystem)", round(gap_s, 1), self.stall_s, "s"))
        hb = self.sinks.heartbeat
        if hb is not None:
            error = hb.beat(now, self.samples + 1)
            if error:
                self.notify("error", error)
            for peer, age in sorted(hb.silent(now).items()):
                conditions.append(R.alert("node-silent", "critical", peer,
                                          f"node {peer} has not sampled for {age:.0f} s", round(age, 1),
                                          hb.silent_after_s, "s"))
        for a in events:
            self._fire(a, now)
        holding = {R.condition_key(a): a for a in conditions}
        if sample.get("gpu_error"):  # no GPU readings this round: GPU conditions neither start nor clear
            for key, a in self.active.items():
                if a["device"].startswith("gpu") and a["rule"] != "sampling-stalled":
                    holding.setdefault(key, a)
        for key, a in holding.items():
            if key not in self.active:
                self._fire(a, now)
        for key in [k for k in self.active if k not in holding]:
            self.notify("resolved", self.active[key])
        # An active alert keeps the time it started.
        self.active = {k: self.active.get(k) or {"time": now, "node": self.node, **a} for k, a in holding.items()}
        for g in sample.get("gpus") or ():
            self._prev_gpus[g["index"]] = g

    def _record(self, sample: Mapping[str, Any]) -> None:
        t = sample["elapsed_s"]
        host = sample.get("host") or {}
        self._add_series("host", "cpu %", t, host.get("cpu_pct"))
        self._add_series("host", "memory %", t, host.get("mem_pct"))
        for k in HOST_STATS:
            self._stats.setdefault("host", {}).setdefault(k, _Stats()).add(host.get(k))
        for g in sample.get("gpus") or ():
            if g.get("error"):
                continue
            label = f"gpu{g['index']}"
            self._add_series("gpu_util", label, t, g.get("utilization_gpu_pct"))
            self._add_series("gpu_mem", label, t, g.get("memory_used_pct"))
            self._add_series("gpu_temp", label, t, g.get("temperature_c"))
            power, limit = g.get("power_w"), g.get("power_limit_w")
            if isinstance(power, (int, float)) and isinstance(limit, (int, float)) and limit > 0:
                self._add_series("gpu_power", label, t, round(100.0 * power / limit, 1))
            for k in GPU_STATS:
                self._stats.setdefault(label, {}).setdefault(k, _Stats()).add(g.get(k))

    def _add_series(self, group: str, label: str, t: float, v: Any) -> None:
        self._series.setdefault(group, {}).setdefault(label, _Series()).add(t, v)

    def _publish(self, sample: Mapping[str, Any]) -> None:
        s = self.sinks
        if s.timeline is not None:
            from llmdiag.monitor.sinks import timeline_rows

            s.timeline.write(timeline_rows(sample, self.node))
        if s.prometheus_file is not None or s.server is not None:
            from llmdiag.redact import redact_doc

            if s.render_metrics is None:
                raise TypeError("Sinks.render_metrics is needed for Prometheus output")
            text = s.render_metrics(redact_doc(self.metrics_document(), self.env))
            if s.prometheus_file is not None:
                s.prometheus_file.write(text)
            if s.server is not None:
                s.server.write(text)

    # -- the loop ------------------------------------------------------------------------------

    def run(self, count: int | None = None, duration_s: float | None = None,
            alive: Callable[[], bool] | None = None) -> dict[str, Any]:
        """Sample until ``count`` samples, ``duration_s`` seconds, ``alive()`` false or :attr:`stop`."""
        start = self.mono()
        cpu0 = time.process_time()
        next_at = start
        last_at: float | None = None
        try:
            while True:
                began = self.mono()
                gap = None if last_at is None else began - last_at
                last_at = began
                sample = self.sample_once(began - start)
                self._alerts(sample, gap)
                self._record(sample)
                self.samples += 1
                self.latest = sample
                self._publish(sample)
                self._rounds.add(self.mono() - began)
                if count is not None and self.samples >= count:
                    self.stop_reason = f"{count} sample(s) taken"
                    break
                next_at += self.interval_s
                if duration_s is not None and next_at - start > duration_s + 1e-6:
                    self.stop_reason = f"{duration_s:g} s elapsed"
                    break
                if alive is not None and not alive():
                    self.stop_reason = "the watched process exited"
                    break
                now = self.mono()
                if next_at < now - self.interval_s:  # far behind (a stall): restart the grid
                    next_at = now
                if self.stop.wait(max(0.0, next_at - now)):
                    self.stop_reason = "stopped by signal"
                    break
        finally:
            self._cpu_s = time.process_time() - cpu0
            self._wall_s = self.mono() - start
            self.finished_at = self.wall()
            self.close()
        return self.document()

    def close(self) -> None:
        s = self.sinks
        if self._dispatch is not None:
            timeout = getattr(s.alert_command, "timeout_s", 10.0)
            self._dispatch.close(wait_s=timeout + 5.0)
        if s.timeline is not None:
            s.timeline.close()
        if s.server is not None:
            s.server.close()
        self.gpus.close()

    # -- the document ------------------------------------------------------------------------

    def overhead(self) -> dict[str, Any]:
        r = self._rounds
        out: dict[str, Any] = {"round_ms_mean": round(1000 * r.total / r.n, 3) if r.n else None,
                               "round_ms_max": round(1000 * r.max, 3) if r.n else None}
        cpu, wall = getattr(self, "_cpu_s", None), getattr(self, "_wall_s", None)
        if cpu is not None and self.samples:
            out["cpu_ms_per_sample"] = round(1000 * cpu / self.samples, 3)
            if wall:
                out["cpu_pct_of_one_core"] = round(100 * cpu / wall, 3)
        return out

    def metrics_document(self) -> dict[str, Any]:
        """What the Prometheus renderer reads, and no more: it is rendered (and redacted) every
        sample, so the alerts' history, series and statistics stay out (a monitor document all
        the same: the fields its type requires are there)."""
        text_fields = ("name", "pci_bus_id", "throttle_reasons", "new_xids", "error")
        latest = {"time": self.latest.get("time"), "host": self.latest.get("host") or {},
                  "gpus": [{k: v for k, v in g.items() if k not in text_fields} for g in self.latest.get("gpus") or ()]}
        return {"schema_version": SCHEMA_VERSION, "command": "monitor", "kind": "monitor",
                "status": R.severity_of(self._worst), "node": self.node, "created_at": latest["time"],
                "started_at": round(self.started_at, 3),
                "samples": self.samples, "gpu_count": self.gpus.count, "rules": R.rule_names(self.rules),
                "alerts": [], "alerts_by_rule": dict(self.alerts_by_rule),  # the fired ones are counted
                "active_alerts": [{k: a[k] for k in ("rule", "severity", "message", "device")}
                                  for a in self.active.values()],
                "latest": latest}

    def document(self) -> dict[str, Any]:
        """The summary report, filled into its type (:class:`llmdiag.documents.MonitorDoc`)."""
        doc = D.MonitorDoc(
            schema_version=SCHEMA_VERSION, command="monitor", kind="monitor",
            status=R.severity_of(self._worst),  # self.alerts may be truncated
            node=self.node, created_at=round(self.wall(), 3), started_at=round(self.started_at, 3),
            finished_at=round(getattr(self, "finished_at", self.wall()), 3), interval_s=self.interval_s,
            samples=self.samples, gpu_count=self.gpus.count, gpu_note=self.gpus.note, driver=self.gpus.driver,
            rules=R.rule_names(self.rules), thresholds=dataclasses.asdict(self.rules), alerts_total=self.alerts_total,
            alerts_by_rule=dict(self.alerts_by_rule), alerts=[D.Alert(**a) for a in self.alerts],
            active_alerts=[D.Alert(**a) for a in self.active.values()],
            latest=D.Sample(**self.latest) if self.latest else None, stop_reason=self.stop_reason,
            stats={dev: {k: s.to_dict() for k, s in ks.items()} for dev, ks in self._stats.items()},
            series={g: {label: D.Series(**s.to_dict()) for label, s in ls.items()} for g, ls in self._series.items()},
            overhead=self.overhead(),
            on_alert=None if self._dispatch is None else {
                "sent": self._dispatch.sent, "failed": self._dispatch.failed, "dropped": self._dispatch.dropped})
        return D.to_dict(doc)
