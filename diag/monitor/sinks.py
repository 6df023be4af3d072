"""Where samples and alerts go: the timeline file, Prometheus (file or HTTP) and ``--on-alert``.

- :class:`Timeline`: one row per sample and device (``host``, ``gpu0`` ...). CSV is appended
  and flushed row by row, so a monitor killed with SIGKILL still leaves a readable file;
  Parquet cannot be appended, so it is rewritten atomically every ``flush_s`` and at the end.
- :class:`PrometheusFile`: the metrics text, replaced atomically each sample (what
  node_exporter's textfile collector needs: it must never read a half-written file).
- :class:`MetricsServer`: ``GET /metrics`` on a stdlib HTTP server in a daemon thread.
- :class:`AlertCommand`: runs the command (split like a shell would, but never through a
  shell: alert text cannot inject anything) with the alert as JSON on stdin, killed after a
  timeout; a failure is returned as a message, never raised.
"""

from __future__ import annotations

import csv
import json
import shlex
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from llmdiag.errors import UsageError

HOST_COLUMNS = ("cpu_pct", "load_1m", "mem_used_bytes", "mem_total_bytes", "mem_pct", "swap_used_bytes",
                "net_rx_bytes", "net_tx_bytes", "net_rx_bps", "net_tx_bps", "net_errors", "disk_read_bytes",
                "disk_write_bytes")
GPU_COLUMNS = ("uuid", "utilization_gpu_pct", "utilization_mem_pct", "memory_used_bytes", "memory_total_bytes",
               "memory_used_pct", "temperature_c", "power_w", "power_limit_w", "sm_clock_mhz", "throttled",
               "throttle_reasons", "ecc_uncorrectable_volatile", "ecc_corrected_volatile", "xid_count", "error")
COLUMNS = ("time", "elapsed_s", "node", "device") + HOST_COLUMNS + GPU_COLUMNS
TIMELINE_SUFFIXES = (".csv", ".parquet", ".pq")


def timeline_rows(sample: Mapping[str, Any], node: str) -> list[dict[str, Any]]:
    base = {"time": sample["time"], "elapsed_s": sample["elapsed_s"], "node": node}
    rows = [dict(base, device="host", **{k: (sample.get("host") or {}).get(k) for k in HOST_COLUMNS})]
    for g in sample.get("gpus") or ():
        row = dict(base, device=f"gpu{g['index']}", **{k: g.get(k) for k in GPU_COLUMNS})
        row["throttle_reasons"] = ",".join(g.get("throttle_reasons") or ()) or None
        rows.append(row)
    return rows


def check_timeline_path(path: str) -> str:
    suffix = Path(path).suffix.lower()
    if suffix not in TIMELINE_SUFFIXES:
        raise UsageError(f"--timeline {path!r}: the file name must end in .csv or .parquet (got {suffix or 'none'})")
    if suffix != ".csv":
        try:
            import pyarrow  # noqa: F401, PLC0415
        except ImportError:
            raise UsageError("--timeline *.parquet needs pyarrow (pip install 'llmdiag[parquet]'); "
                             "or write .csv") from None
    return suffix


class Timeline:
    def __init__(self, path: str, flush_s: float = 60.0, clock=time.monotonic) -> None:
        self.path = Path(path)
        self.parquet = check_timeline_path(path) != ".csv"
        self._clock = clock
        self._flush_s = flush_s
        self._last_flush = clock()
        self._rows: list[dict[str, Any]] = []
        self._fh = None
        self.rows_written = 0
        if not self.parquet:
            from llmdiag.util.files import open_output

            # written in place, row by row: readable after a SIGKILL (outputs' rules otherwise)
            self._out = open_output(self.path, "--timeline", atomic=False, newline="")
            self._fh = self._out.__enter__()
            self._csv = csv.DictWriter(self._fh, fieldnames=COLUMNS)
            self._csv.writeheader()
            self._fh.flush()

    def write(self, rows: Sequence[Mapping[str, Any]]) -> None:
        self.rows_written += len(rows)
        if self._fh is not None:
            self._csv.writerows(rows)
            self._fh.flush()
            return
        self._rows.extend(rows)
        if self._clock() - self._last_flush >= self._flush_s:
            self._write_parquet()

    def _write_parquet(self) -> None:
        import pyarrow as pa  # noqa: PLC0415
        import pyarrow.parquet as pq  # noqa: PLC0415

        from llmdiag.util.files import open_output

        table = pa.Table.from_pylist([{c: r.get(c) for c in COLUMNS} for r in self._rows]) if self._rows else \
            pa.table({c: pa.array([], type=pa.null()) for c in COLUMNS})
        with open_output(self.path, "--timeline", binary=True) as fh:
            pq.write_table(table, fh)
        self._last_flush = self._clock()

    def close(self) -> None:
        if self._fh is not None:
            self._fh = None
            self._out.__exit__(None, None, None)
        elif self.parquet:
            self._write_parquet()


class PrometheusFile:
    def __init__(self, path: str) -> None:
        from llmdiag.outputs import check_output_path

        self.path = check_output_path(path, option="--prometheus-file")

    def write(self, text: str) -> None:
        from llmdiag.util.files import write_output

        write_output(self.path, text, "--prometheus-file")


class MetricsServer:
    """``GET /metrics`` (and ``/``) serve the latest exposition text."""

    CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

    def __init__(self, port: int, bind: str = "0.0.0.0") -> None:
        import http.server

        server_ref = self
        self._text = "".encode()
        self._lock = threading.Lock()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                if self.path.split("?")[0] not in ("/", "/metrics"):
                    self.send_error(404, "only /metrics here")
                    return
                body = server_ref.body()
                self.send_response(200)
                self.send_header("Content-Type", MetricsServer.CONTENT_TYPE)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):  # scrapes are not news
                pass

        try:
            self._server = http.server.ThreadingHTTPServer((bind, port), Handler)
        except OSError as exc:
            raise UsageError(f"--port {port}: cannot listen on {bind}:{port}: {exc.strerror or exc}") from None
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="llmdiag-metrics", daemon=True)
        self._thread.start()

    def body(self) -> bytes:
        with self._lock:
            return self._text

    def write(self, text: str) -> None:
        with self._lock:
            self._text = text.encode("utf-8")

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def parse_command(cmd: str) -> list[str]:
    try:
        argv = shlex.split(cmd)
    except ValueError as exc:
        raise UsageError(f"--on-alert {cmd!r}: {exc}") from None
    if not argv:
        raise UsageError("--on-alert: empty command")
    return argv


class AlertCommand:
    def __init__(self, cmd: str, timeout_s: float, runner) -> None:
        self.argv = parse_command(cmd)
        self.timeout_s = timeout_s
        self._runner = runner

    def check(self) -> None:
        """Refuse at start a command that cannot run, rather than failing at every alert."""
        import os

        exe = self.argv[0]
        found = (os.path.isfile(exe) and os.access(exe, os.X_OK)) if os.sep in exe else self._runner.which(exe)
        if not found:
            raise UsageError(f"--on-alert: {exe!r} is not an executable file or a command on PATH")

    def send(self, alert: Mapping[str, Any]) -> str | None:
        """Run the command for one alert; an error message when it failed, else None."""
        res = self._runner.run(self.argv, timeout=self.timeout_s, input=json.dumps(alert, default=str) + "\n")
        if res.timed_out:
            return f"--on-alert {self.argv[0]} killed after {self.timeout_s:g} s"
        if res.error:
            return f"--on-alert {self.argv[0]}: {res.error}"
        if res.returncode != 0:
            tail = (res.stderr or "").strip().splitlines()[-1:] or [""]
            return f"--on-alert {self.argv[0]} exited {res.returncode}" + (f": {tail[0][:200]}" if tail[0] else "")
        return None
