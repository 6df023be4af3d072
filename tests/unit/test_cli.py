"""The CLI surface: exit codes, config errors without tracebacks, startup time, runbooks."""

from __future__ import annotations

import re
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


# ---------------------------------------------------------------- the README's claims, from the commands


README = Path(__file__).resolve().parents[2] / "README.md"


def _all_commands() -> dict[str, click.Command]:
    """Every command and subcommand by its path ("report merge"), loaded as the CLI loads them."""
    ctx = click.Context(cli)
    out = {}
    for name in cli.list_commands(ctx):
        cmd = cli.get_command(ctx, name)
        out[name] = cmd
        if isinstance(cmd, click.Group):
            out.update({f"{name} {sub}": cmd.get_command(ctx, sub) for sub in cmd.list_commands(ctx)})
    return out


def _readme_table_commands() -> set[str]:
    """The command paths the README's command table names: ``llmdiag report merge DIR`` is
    "report merge", ``llmdiag train` / `prepare-data`` is "train" and "prepare-data"."""
    text = README.read_text()
    table = text.split("## Commands", 1)[1].strip().split("\n\n", 1)[0]
    found = set()
    for row in table.splitlines()[2:]:
        first = row.split("|")[1]
        for words in re.findall(r"`([^`]+)`", first):
            words = words.split()
            words = words[1:] if words[0] == "llmdiag" else words
            found.add(" ".join(w for w in words if re.fullmatch(r"[a-z][a-z-]*", w)))
    return found


def test_the_readme_table_lists_every_command_and_only_those():
    commands = _all_commands()
    listed = _readme_table_commands()
    assert listed - set(commands) == set(), f"the README lists commands that do not exist: {listed - set(commands)}"
    top = {c for c in commands if " " not in c}
    assert top - {c.split()[0] for c in listed} == set(), "commands missing from the README's table"


def _option(cmd: click.Command, flag: str) -> click.Parameter | None:
    return next((p for p in cmd.params if flag in p.opts), None)


def _writes_a_report(cmd: click.Command) -> bool:
    """From the code, not the options: the command's function hands a document to emit_doc."""
    import inspect

    return "emit_doc(" in inspect.getsource(cmd.callback)


def test_every_command_that_writes_a_report_takes_format_and_output_and_the_readme_says_which():
    from llmdiag.reports.base import FORMATS

    commands = _all_commands()
    writers = {name for name, cmd in commands.items() if _writes_a_report(cmd)}
    assert {"preflight", "analyze-log", "report render"} <= writers  # the detection itself works
    for name in sorted(writers):
        cmd = commands[name]
        fmt, out = _option(cmd, "--format"), _option(cmd, "--output")
        assert fmt is not None and out is not None, f"{name}: no --format / --output"
        assert tuple(fmt.type.choices) == FORMATS, name
    for name, cmd in commands.items():
        if name not in writers:
            assert _option(cmd, "--format") is None, f"{name} takes --format but writes no report"
    text = " ".join(README.read_text().split())
    claim = re.search(r"Every command that writes a report \(([^)]*)\) takes `--format", text)
    assert claim, "the README's sentence about --format changed: update this test"
    assert set(re.findall(r"`([^`]+)`", claim.group(1))) == writers
    # -f / -o mean --format / --output, except where nccl-tests' letters are kept (and said so)
    aliases = re.search(r"In `([a-z-]+)` the short letters keep nccl-tests' meanings", text)
    for name in sorted(writers):
        cmd = commands[name]
        keeps = [flag for flag, long in (("-f", "--format"), ("-o", "--output"))
                 if _option(cmd, flag) is not _option(cmd, long)]
        if keeps:
            assert aliases and aliases.group(1) == name, f"{name}: {keeps} mean something else, undocumented"


def test_a_mistyped_command_gets_a_suggestion():
    r = CliRunner().invoke(cli, ["preflite"])
    assert r.exit_code == 2 and "Did you mean 'preflight'?" in r.output, r.output
    r = CliRunner().invoke(cli, ["report", "rendr"])
    assert r.exit_code == 2 and "Did you mean 'render'?" in r.output, r.output
    r = CliRunner().invoke(cli, ["zzzz"])
    assert r.exit_code == 2 and "Did you mean" not in r.output and "runbook" in r.output, r.output


def test_train_flags_round_trip_to_the_workers():
    """The launcher hands its workers ``to_argv(args)``: they must parse back to the same flags."""
    from llmdiag.trainer.config import parse_args, to_argv

    args = parse_args(["--nproc", "2", "--inject", "nan@3", "--inject", "slow@2:rank=1:factor=2.5", "--lr", "1e-4",
                       "--fsdp", "--log-file", "x.log", "--seed", "-3"])
    assert parse_args(to_argv(args)) == args and args.inject == ["nan@3", "slow@2:rank=1:factor=2.5"]
    assert parse_args([]).threads is None and parse_args([]).steps == 50


def test_train_help_shows_every_flag_with_help_and_defaults():
    r = CliRunner().invoke(cli, ["train", "--help"])
    assert r.exit_code == 0
    cmd = _all_commands()["train"]
    for p in cmd.params:
        assert p.help, f"train {p.opts[0]} has no help"
        assert p.opts[0] in r.output
    assert "[default: 50; x>=1]" in " ".join(r.output.split())  # --steps


def test_preflight_timeout_is_the_probes_setting_and_takes_a_fraction_of_a_second(tmp_path):
    """--timeout is [probes] timeout_s (one declaration: its range and help); under 1 s it still bounds the
    probes, and the cluster steps' bound keeps its floor of 1 s instead of refusing the run."""
    res = run("preflight", "--timeout", "0.5", "--probe", "system", "-f", "json")
    assert res.returncode in (0, 1), res.stderr
    assert '"status"' in res.stdout
    res = run("preflight", "--timeout", "0.01")
    assert res.returncode == 2 and "0.1" in res.stderr
    cfg = tmp_path / "llmdiag.toml"
    cfg.write_text("[probes]\ntimeout_s = 0.01\n")
    res = run("preflight", "-c", str(cfg), "--probe", "system")
    assert res.returncode == 2 and "timeout_s" in res.stderr, res.stderr
