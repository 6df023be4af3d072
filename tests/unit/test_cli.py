"""The CLI surface: exit codes, config errors without tracebacks, startup time, runbooks."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from llmdiag import runbooks
from llmdiag.cli import COMMANDS, cli
from llmdiag.exitcodes import ExitCode
from tests.conftest import cli_env, llmdiag_argv
from tests.unit.test_plugins import install_fake_distribution


def run(*args, env=None, timeout=60, **kw):
    return subprocess.run(llmdiag_argv(*args), capture_output=True, text=True, env=env or cli_env(),
                          timeout=timeout, **kw)


def test_help_is_fast_and_lists_commands():
    start = time.monotonic()
    proc = run("--help")
    elapsed = time.monotonic() - start
    assert proc.returncode == 0 and "preflight" in proc.stdout and "runbook" in proc.stdout
    assert elapsed < 3.0, elapsed  # interpreter start included; the import itself is ~0.1 s
    probe = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "llmdiag", "--help"], capture_output=True, text=True, env=cli_env()
    )
    heavy = [m for m in ("torch", "pandas", "pynvml", "matplotlib", "numpy") if f" {m}\n" in probe.stderr]
    assert heavy == [], f"--help imported heavy modules: {heavy}"


def test_bad_config_value_exit_2_names_field(tmp_path):
    cfg = tmp_path / "llmdiag.toml"
    cfg.write_text('[network]\nport_range = "30000-70000"\n')
    proc = run("preflight", "--config", str(cfg))
    assert proc.returncode == ExitCode.USAGE_ERROR
    assert "network.port_range" in proc.stderr and "1-65535" in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout


@pytest.mark.parametrize(
    "content, needle",
    [
        ("[thresholds]\nshm_min_mib = -5\n", "thresholds.shm_min_mib"),
        ("[thresholds]\nshm_mni_mib = 5\n", "unknown key"),
        ("[clusterr]\nnodes = 2\n", "unknown section"),
        ("[cluster\nnodes = 2\n", "not valid TOML"),
        ('[cluster]\nnodes = "two"\n', "cluster.nodes"),
    ],
)
def test_config_errors(tmp_path, content, needle):
    cfg = tmp_path / "c.toml"
    cfg.write_text(content)
    result = CliRunner().invoke(cli, ["preflight", "-c", str(cfg)])
    assert result.exit_code == 2, result.output
    assert needle in result.output


def test_missing_config_file_is_usage_error(tmp_path):
    result = CliRunner().invoke(cli, ["preflight", "-c", str(tmp_path / "nope.toml")])
    assert result.exit_code == 2 and "does not exist" in result.output


def test_flags_override_file(tmp_path):
    from llmdiag.config import Config

    cfg = tmp_path / "c.toml"
    cfg.write_text('[network]\nport_range = "29500-29510"\n[cluster]\ngpus_per_node = 8\n')
    c = Config.load(cfg).with_overrides({("network", "port_range"): "40000-40010", ("cluster", "gpus_per_node"): None})
    assert c.get("network", "port_range") == (40000, 40010)
    assert c.get("cluster", "gpus_per_node") == 8
    assert Config.load(None, env={}).get("network", "port_range") == (29500, 29510)


def test_unknown_probe_and_bad_flag_are_usage_errors():
    r = CliRunner().invoke(cli, ["preflight", "--probe", "nonexistent"])
    assert r.exit_code == 2 and "unknown probe" in r.output
    r = CliRunner().invoke(cli, ["preflight", "--format", "xml"])
    assert r.exit_code == 2


def test_output_to_directory_refused(tmp_path):
    r = CliRunner().invoke(cli, ["preflight", "--probe", "none-such", "-o", str(tmp_path)])
    assert r.exit_code == 2


def test_internal_error_exit_3(monkeypatch):
    @click.command()
    def explode():
        raise ZeroDivisionError("oops")

    monkeypatch.setitem(COMMANDS, "explode", (f"{__name__}:_explode", "boom"))
    monkeypatch.setattr(sys.modules[__name__], "_explode", explode, raising=False)
    r = CliRunner().invoke(cli, ["explode"])
    assert r.exit_code == ExitCode.INTERNAL_ERROR
    assert "internal error: ZeroDivisionError: oops" in r.output


def test_sigint_exits_130_and_cleans_up(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    install_fake_distribution(site, {})
    (site / "slow_plugin.py").write_text(
        "import time\nfrom llmdiag.probe import BaseProbe\n"
        "class Slow(BaseProbe):\n    name='slow'\n    description='sleeps'\n    timeout_s=60\n"
        "    def run(self, ctx):\n        p=ctx.cleanup.track(ctx.env['MARK'])\n        open(p,'w').write('x')\n"
        "        time.sleep(30)\n        return []\n"
    )
    (site / "hello_plugin-1.0.dist-info" / "entry_points.txt").write_text("[llmdiag.probes]\nslow = slow_plugin:Slow\n")
    mark = tmp_path / "marker.tmp"
    env = cli_env(MARK=str(mark))
    env["PYTHONPATH"] = f"{site}:{env['PYTHONPATH']}"
    proc = subprocess.Popen(llmdiag_argv("preflight", "--probe", "slow"), env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not mark.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert mark.exists(), "probe never started"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == ExitCode.INTERRUPTED, (out, err)
    assert "Traceback" not in err
    assert not mark.exists(), "temporary file left behind after Ctrl-C"


def test_runbook_command_lists_and_prints():
    r = CliRunner().invoke(cli, ["runbook"])
    assert r.exit_code == 0 and "nccl-timeout" in r.output
    r = CliRunner().invoke(cli, ["runbook", "nccl-timeout"])
    assert r.exit_code == 0 and r.output.startswith("# NCCL")
    r = CliRunner().invoke(cli, ["runbook", "nccl-timout"])
    assert r.exit_code == 2 and "did you mean nccl-timeout" in r.output


@pytest.mark.parametrize("rid", runbooks.ids())
def test_runbooks_have_required_sections(rid):
    text = runbooks.text(rid)
    assert text.startswith("# "), rid
    for section in ("## Symptoms", "## Likely causes", "## Checks", "## Fixes"):
        assert section in text, f"{rid} lacks {section}"


def test_every_runbook_id_named_in_code_exists():
    """Any literal runbook id in the sources must be a file in runbooks/."""
    import re

    root = Path(__file__).resolve().parents[2]
    pattern = re.compile(r"""runbook\s*=\s*["']([a-z0-9-]+)["']""")
    missing = {}
    for src in list((root / "diag").rglob("*.py")) + list((root / "probes").rglob("*.py")):
        for rid in pattern.findall(src.read_text()):
            if not runbooks.exists(rid):
                missing.setdefault(rid, []).append(str(src.relative_to(root)))
    assert not missing, f"runbook ids without a runbook file: {missing}"
