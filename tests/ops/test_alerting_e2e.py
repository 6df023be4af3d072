"""Alerting end to end with the real servers (Debian's prometheus, prometheus-alertmanager and
prometheus-node-exporter): node_exporter reads llmdiag's textfile directory, Prometheus scrapes
it and ``monitor --port`` with the rules ``llmdiag alerting write`` ships, Alertmanager routes
with the shipped config to a chat webhook, here a small HTTP server of this test that receives
Alertmanager's Slack JSON. A NaN written into a followed log must arrive as an alert naming the
node and the runbook; the recorded NVML timeline's uncorrectable ECC error too; and every query
of the shipped dashboard must return data from that Prometheus.

Everything listens on 127.0.0.1 on ports the kernel picked; every process is stopped at the end.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import re
import shutil
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import yaml

from tests.conftest import cli_env, llmdiag_argv

FIX = Path(__file__).resolve().parents[1] / "fixtures"
SERVERS = {"prometheus": "prometheus", "alertmanager": "prometheus-alertmanager",
           "node_exporter": "prometheus-node-exporter"}
NODE = "e2e-node"
pytestmark = [
    pytest.mark.slow,
    pytest.mark.distributed,  # nccl-bench on gloo feeds the NCCL panels
    pytest.mark.skipif(not all(shutil.which(b) for b in SERVERS.values()),
                       reason="needs Debian's prometheus, prometheus-alertmanager, prometheus-node-exporter"),
]
WAIT_S = 240  # a deadline for things to happen on a loaded machine, not a speed goal


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Receiver:
    """The chat webhook: records every JSON body Alertmanager posts."""

    def __init__(self) -> None:
        self.bodies: list[dict] = []
        rec = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                n = int(self.headers.get("Content-Length") or 0)
                rec.bodies.append(json.loads(self.rfile.read(n) or b"{}"))
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *a):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/slack"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Procs:
    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.procs: list[subprocess.Popen] = []

    def start(self, name: str, argv: list[str], **kw) -> subprocess.Popen:
        out = open(self.log_dir / f"{name}.log", "w")  # noqa: SIM115
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, **kw)
        out.close()
        self.procs.append(p)
        return p

    def log(self, name: str) -> str:
        return (self.log_dir / f"{name}.log").read_text(errors="replace")[-3000:]

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)


def get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


def query(prom: str, expr: str) -> list:
    out = get(f"{prom}/api/v1/query?{urllib.parse.urlencode({'query': expr})}")
    assert out["status"] == "success", out
    return out["data"]["result"]


def wait_for(what: str, fn, procs: Procs, deadline_s: float = WAIT_S):
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        with contextlib.suppress(OSError, ValueError):
            got = fn()
            if got:
                return got
        for p in procs.procs:
            assert p.poll() is None, f"{p.args[0]} exited ({p.returncode}) while waiting for {what}"
        time.sleep(0.5)
    logs = "\n".join(f"--- {p.name}\n{procs.log(p.stem)}" for p in procs.log_dir.glob("*.log"))
    raise AssertionError(f"gave up waiting for {what}\n{logs}")


def cli(*args: str, ok=(0,)) -> subprocess.CompletedProcess:
    proc = subprocess.run(llmdiag_argv(*args), capture_output=True, text=True, env=cli_env(LLMDIAG_NODE_NAME=NODE),
                          timeout=600)
    assert proc.returncode in ok, proc.stderr[-2000:]
    return proc


def slack_alerts(rec: Receiver, alertname: str) -> list[dict]:
    return [a for b in rec.bodies for a in b.get("attachments", ()) if alertname in a.get("title", "")]


def test_a_nan_in_a_followed_log_reaches_the_chat_webhook_with_node_and_runbook(tmp_path):
    textfiles = tmp_path / "textfile"
    textfiles.mkdir()
    conf = tmp_path / "conf"
    conf.mkdir()
    # the metrics the other commands leave in the textfile directory: one preflight, one benchmark
    cli("preflight", "--probe", "system", "--probe", "launcher", "-o",
        f"prometheus:{textfiles / 'llmdiag_preflight.prom'}", "-f", "json", "-o", str(tmp_path / "pf.json"), ok=(0, 1))
    cli("nccl-bench", "--nproc", "2", "-C", "all_reduce", "-b", "1K", "-e", "64K", "-n", "3", "-w", "1",
        "--expect-busbw", "1000", "--output", f"prometheus:{textfiles / 'llmdiag_nccl.prom'}",
        "--output", str(tmp_path / "nccl.txt"), ok=(1,))
    cli("alerting", "write", str(conf), "--webhook-url-file", str(conf / "webhook-url"), "--channel", "#e2e",
        "--stale-after", "30")
    rec = Receiver()
    (conf / "webhook-url").write_text(rec.url + "\n")
    am_conf = yaml.safe_load((conf / "alertmanager-llmdiag.yml").read_text())
    am_conf["route"].update(group_wait="1s", group_interval="1s")  # the shipped config, quicker
    (conf / "alertmanager.yml").write_text(yaml.safe_dump(am_conf))

    log = tmp_path / "train.log"
    line = (" iteration {i}/ 1000 | elapsed time per iteration (ms): 950.0 | learning rate: 1.0E-04 | "
            "lm loss: {loss} | grad norm: {norm} |\n")  # Megatron-LM's wording
    log.write_text("".join(line.format(i=i, loss=f"{3.0 - i * 0.01:.4E}", norm="1.0") for i in range(1, 11)))
    ports = {name: free_port() for name in ("node", "prom", "am")}
    procs = Procs(tmp_path)
    try:
        procs.start("node_exporter", [SERVERS["node_exporter"], f"--web.listen-address=127.0.0.1:{ports['node']}",
                                      "--collector.disable-defaults", "--collector.textfile",
                                      f"--collector.textfile.directory={textfiles}"])
        procs.start("alertmanager", [SERVERS["alertmanager"], f"--config.file={conf / 'alertmanager.yml'}",
                                     f"--storage.path={tmp_path / 'am-data'}", "--cluster.listen-address=",
                                     f"--web.listen-address=127.0.0.1:{ports['am']}"])
        mon = procs.start("monitor", llmdiag_argv("monitor", "--replay-nvml",
                                                  str(FIX / "nvml" / "timeline-h100-faults.json"), "--interval", "1",
                                                  "--port", "0", "--bind", "127.0.0.1"),
                          env=cli_env(LLMDIAG_NODE_NAME=NODE))
        mon_port = wait_for("the monitor's port", lambda: re.search(r"metrics on http://127\.0\.0\.1:(\d+)/metrics",
                                                                      procs.log("monitor")), procs).group(1)
        procs.start("follow", llmdiag_argv("analyze-log", str(log), "--follow", "--prometheus-file",
                                           str(textfiles / "llmdiag_train.prom")), env=cli_env(LLMDIAG_NODE_NAME=NODE))
        (conf / "prometheus.yml").write_text(yaml.safe_dump({
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(conf / "llmdiag-rules.yml")],
            "alerting": {"alertmanagers": [{"static_configs": [{"targets": [f"127.0.0.1:{ports['am']}"]}]}]},
            "scrape_configs": [
                {"job_name": "node", "static_configs": [{"targets": [f"127.0.0.1:{ports['node']}"]}]},
                {"job_name": "llmdiag-monitor", "static_configs": [{"targets": [f"127.0.0.1:{mon_port}"]}]},
            ]}))
        procs.start("prometheus", [SERVERS["prometheus"], f"--config.file={conf / 'prometheus.yml'}",
                                   f"--storage.tsdb.path={tmp_path / 'prom-data'}",
                                   f"--web.listen-address=127.0.0.1:{ports['prom']}"])
        prom = f"http://127.0.0.1:{ports['prom']}"

        wait_for("the healthy log's steps in Prometheus", lambda: query(prom, "llmdiag_log_last_step == 10"), procs)
        assert not query(prom, 'ALERTS{alertname="LlmdiagLossNaN"}')  # quiet before the fault
        assert not slack_alerts(rec, "LlmdiagLossNaN")

        with log.open("a") as fh:  # the fault: the loss turns NaN
            fh.write(line.format(i=11, loss="nan", norm="nan"))
        (nan,) = wait_for("the LlmdiagLossNaN message at the webhook", lambda: slack_alerts(rec, "LlmdiagLossNaN"),
                          procs)[:1]
        body = next(b for b in rec.bodies if nan in b.get("attachments", ()))
        assert body["channel"] == "#e2e"
        assert nan["title"] == f"[FIRING] LlmdiagLossNaN on {NODE}"
        assert f"node: {NODE}" in nan["text"] and "runbook: `llmdiag runbook nan-loss`" in nan["text"]
        assert f"NaN loss in {log} on {NODE}" in nan["text"]

        # the GPU fault of the recorded NVML timeline (GPU 5: a new uncorrectable ECC error), via monitor --port
        (ecc,) = wait_for("the ECC alert at the webhook", lambda: slack_alerts(rec, "LlmdiagGpuEccUncorrectable"),
                          procs)[:1]
        assert f"node: {NODE}" in ecc["text"] and "llmdiag runbook gpu-ecc-errors" in ecc["text"]

        # every panel of the shipped dashboard has data in this Prometheus
        board = json.loads((conf / "llmdiag-dashboard.json").read_text())
        targets = [(p["title"], t["expr"].replace("$node", ".*")) for p in board["panels"] for t in p.get("targets", ())]
        assert len(targets) > 15
        empty = [(title, expr) for title, expr in targets if not query(prom, expr)]
        assert not empty, empty
        nodes = get(f"{prom}/api/v1/label/node/values?{urllib.parse.urlencode({'match[]': 'llmdiag_report_status'})}")
        assert NODE in nodes["data"]  # the dashboard's node variable
        assert mon.poll() is None
    finally:
        procs.stop()
        rec.close()
    assert all(p.returncode is not None for p in procs.procs)
