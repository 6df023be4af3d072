"""The command: JSON contract, renderers, exports, plot, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from llmdiag.cli import cli

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "logs"


def run(*args):
    return CliRunner().invoke(cli, ["analyze-log", *args], catch_exceptions=False)


def test_json_contract():
    r = run(str(FIX / "failing/timeout_absent_rank.log"), "-f", "json")
    assert r.exit_code == 1
    doc = json.loads(r.output)
    assert doc["kind"] == "log-analysis" and doc["status"] == "fail"
    for f in doc["findings"]:
        assert {"kind", "severity", "rank", "step", "line", "file", "message", "facts", "runbook", "cause",
                "next_step"} <= set(f)
    for k in ("num_steps_with_loss", "first_step", "last_step", "loss_min", "loss_max", "loss_last"):
        assert k in doc["metrics"]
    assert doc["root_causes"][0]["kind"] == "nccl_timeout"


def test_healthy_exit_zero_and_renderers(tmp_path):
    log = str(FIX / "healthy/trainer_kv.log")
    r = run(log, "--width", "100")
    assert r.exit_code == 0 and "PASS" in r.output
    r = run(log, "-f", "markdown")
    assert r.exit_code == 0 and r.output.startswith("# llmdiag analyze-log report")


def test_terminal_escapes_markup():
    r = run(str(FIX / "failing/heartbeat.log"), "--width", "120")
    assert "[rank5]" in r.output or "Rank 5" in r.output
    assert "nccl_heartbeat_stuck" in r.output


def test_exports_and_plot(tmp_path):
    log = str(FIX / "failing/megatron_nan.log")
    r = run(log, "--csv", str(tmp_path / "t.csv"), "--parquet", str(tmp_path / "t.parquet"),
            "--plot", str(tmp_path / "c.png"))
    assert r.exit_code == 1
    import pandas as pd

    csv = pd.read_csv(tmp_path / "t.csv")
    assert len(csv) == 39 and list(csv.columns[:4]) == ["step", "iter", "rank", "loss"]
    assert len(pd.read_parquet(tmp_path / "t.parquet")) == 39
    assert (tmp_path / "c.png").read_bytes()[:4] == b"\x89PNG"


def test_refuses_to_overwrite_input(tmp_path):
    p = tmp_path / "x.log"
    p.write_text("step=1 loss=1.0\n")
    r = CliRunner().invoke(cli, ["analyze-log", str(p), "--csv", str(p)])
    assert r.exit_code == 2 and p.read_text() == "step=1 loss=1.0\n"
