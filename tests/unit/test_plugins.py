"""Third-party probes from the ``llmdiag.probes`` entry-point group, validated at registration."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from llmdiag.errors import PluginError
from llmdiag.registry import plugin_probes, validate
from tests.conftest import cli_env, llmdiag_argv

PLUGIN_SRC = '''
from llmdiag.probe import BaseProbe

class HelloProbe(BaseProbe):
    name = "hello"
    description = "an external plugin probe"
    timeout_s = 5

    def run(self, ctx):
        yield self.warn(ctx, "greeting", "hello from a plugin", remediation="none needed",
                        runbook="probe-error", evidence=[("answer", 41, 42, "")])

class BadName:
    name = "Bad Name!"
    description = "x"
    requires = frozenset()
    config_section = None
    timeout_s = 1
    def run(self, ctx):
        return []

def broken_import():
    raise RuntimeError("cannot load")
'''


def install_fake_distribution(site: Path, entries: dict[str, str], source: str = PLUGIN_SRC) -> None:
    """A real installed distribution as pip leaves it: a module (``hello_plugin``, of ``source``)
    plus a .dist-info with entry points."""
    site.mkdir(parents=True, exist_ok=True)
    (site / "hello_plugin.py").write_text(source)
    dist = site / "hello_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: hello-plugin\nVersion: 1.0\n")
    lines = "\n".join(f"{k} = {v}" for k, v in entries.items())
    (dist / "entry_points.txt").write_text(f"[llmdiag.probes]\n{lines}\n")


def test_installed_plugin_runs_in_preflight(tmp_path):
    install_fake_distribution(tmp_path, {"hello": "hello_plugin:HelloProbe", "bad": "hello_plugin:BadName"})
    env = cli_env()
    env["PYTHONPATH"] = f"{tmp_path}:{env['PYTHONPATH']}"
    proc = subprocess.run(llmdiag_argv("preflight", "--probe", "hello", "-f", "json"),
                          capture_output=True, text=True, env=env, timeout=60)
    doc = json.loads(proc.stdout)
    hello = [r for r in doc["results"] if r["probe"] == "hello"]
    assert hello and hello[0]["summary"] == "hello from a plugin"
    assert hello[0]["evidence"][0] == {"name": "answer", "observed": 41, "expected": 42, "unit": ""}
    broken = [r for r in doc["results"] if r["probe"] == "registry"]
    assert broken and "Bad Name!" in broken[0]["summary"] and broken[0]["status"] == "fail"
    assert proc.returncode == 1  # the broken plugin is a failed check, not a crash


class _EP:
    def __init__(self, name, target=None, exc=None):
        self.name, self.value, self._target, self._exc = name, f"mod:{name}", target, exc

    def load(self):
        if self._exc:
            raise self._exc
        return self._target


def test_validation_names_plugin_and_rule():
    class NoRun:
        name = "x"
        description = "d"
        requires = frozenset()
        config_section = None
        timeout_s = 1

    with pytest.raises(PluginError, match=r"'src'.*missing attribute 'run'"):
        validate(NoRun(), "src")

    class BadTimeout(NoRun):
        timeout_s = -1

        def run(self, ctx):
            return []

    with pytest.raises(PluginError, match="timeout_s"):
        validate(BadTimeout(), "src")

    class BadReq(BadTimeout):
        timeout_s = 1
        requires = frozenset({"quantum"})

    with pytest.raises(PluginError, match="requires"):
        validate(BadReq(), "src")


def test_plugin_loading_errors_are_collected():
    probes, errors = plugin_probes(lambda: [_EP("boom", exc=ImportError("no module named foo"))])
    assert probes == [] and "ImportError" in errors[0].message and "boom" in errors[0].source
