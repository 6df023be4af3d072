"""The architecture's contract, checked from the source: layers, loading, renderers, CLI surface.

Layers (docs/architecture.md)::

    util  ->  core  ->  subsystems  ->  commands  ->  cli
              core  ->  probes (plugins: core, util and the subsystem each one wraps)
              core  ->  reports (renderers: read documents, never run checks)

A module may import its own layer and the layers before it, never one after it. There is no
import cycle anywhere (lazy imports inside functions count too).
"""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

import click
import pytest

REPO = Path(__file__).resolve().parents[2]
#: import name -> folder, as setup.py maps them
PACKAGE_DIR = {"llmdiag": "diag", "llmdiag.probes": "probes", "llmdiag.reports": "reports",
               "llmdiag.runbooks": "runbooks"}
SNAPSHOT = REPO / "tests" / "golden" / "data" / "cli-options.json"

CORE = {"llmdiag", "llmdiag.__main__", "llmdiag.errors", "llmdiag.exitcodes", "llmdiag.result", "llmdiag.probe",
        "llmdiag.context", "llmdiag.config", "llmdiag.runner", "llmdiag.registry", "llmdiag.launcher",
        "llmdiag.redact", "llmdiag.nvml", "llmdiag.outputs", "llmdiag.runbooks", "llmdiag.documents", "llmdiag.vocab"}
SUBSYSTEMS = ("cluster", "memory", "ncclbench", "monitor", "trainer", "logs", "alerting", "health")


def layer(module: str) -> str:
    parts = module.split(".")
    if module in ("llmdiag.cli", "llmdiag.__main__"):
        return "cli"
    if len(parts) > 1 and parts[1] == "util":
        return "util"
    if len(parts) > 1 and parts[1] == "probes":
        return "probes"
    if len(parts) > 1 and parts[1] == "reports":
        return "reports"
    if len(parts) > 1 and parts[1] in ("commands", "cliutil"):
        return "commands"
    if len(parts) > 1 and parts[1] in SUBSYSTEMS:
        return "subsystem"
    if module in CORE:
        return "core"
    raise AssertionError(f"{module} belongs to no layer: add it to one in tests/unit/test_contract.py")


#: layer -> the layers it may import
ALLOWED = {
    "util": {"util"},
    "core": {"util", "core"},
    "subsystem": {"util", "core", "subsystem"},
    "probes": {"util", "core", "probes", "subsystem"},
    "reports": {"util", "core", "reports", "subsystem"},
    "commands": {"util", "core", "subsystem", "reports", "commands"},
    "cli": {"util", "core", "cli"},
}


def modules() -> dict[str, Path]:
    out = {}
    for name, folder in PACKAGE_DIR.items():
        for path in sorted((REPO / folder).rglob("*.py")):
            rel = path.relative_to(REPO / folder).with_suffix("").parts
            if rel[-1] == "__init__":
                rel = rel[:-1]
            out[".".join((name, *rel))] = path
        for path in sorted((REPO / folder).rglob("*.c")):  # compiled extensions (setup.py)
            out[".".join((name, *path.relative_to(REPO / folder).with_suffix("").parts))] = path
    return out


MODULES = modules()


def imports(path: Path) -> set[str]:
    """llmdiag modules ``path`` imports (``from pkg import mod`` counts as ``pkg.mod``)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                found.add(sub if sub in MODULES else node.module)
    return {m for m in found if m.split(".")[0] == "llmdiag" or m.split(".")[0] in ("diag", "probes", "reports",
                                                                                     "runbooks")}


# a module importing itself is ``python -m`` support (``if __name__ == "__main__"``), no cycle
GRAPH = {m: imports(p) - {m} if p.suffix == ".py" else set() for m, p in MODULES.items()}


def test_no_import_of_the_repository_folders_as_packages():
    """Only ``llmdiag`` is installed: ``import diag`` or ``from reports import`` work only by accident."""
    bad = {}
    for root in ("diag", "probes", "reports", "runbooks", "tests", "bench"):
        for path in (REPO / root).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                    [node.module] if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 else []
                for n in names:
                    if n.split(".")[0] in ("diag", "probes", "reports", "runbooks"):
                        bad.setdefault(str(path.relative_to(REPO)), []).append(n)
    assert not bad, bad


def test_no_subprocess_runs_the_repository_folders_as_modules():
    """``python -m diag`` works only from the checkout: every ``-m`` names an llmdiag module."""
    bad = []
    for root in ("diag", "probes", "reports", "tests", "bench"):
        for path in (REPO / root).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if not isinstance(node, (ast.List, ast.Tuple)):
                    continue
                items = [e.value if isinstance(e, ast.Constant) else None for e in node.elts]
                for flag, arg in zip(items, items[1:]):
                    if flag == "-m" and isinstance(arg, str) and arg.split(".")[0] in ("diag", "probes", "reports"):
                        bad.append(f"{path.relative_to(REPO)}:{node.lineno}: -m {arg}")
    assert not bad, bad


def test_only_the_util_shim_imports_tomllib():
    """``tomllib`` is 3.11+: everything else reads TOML through llmdiag.util.toml (tomli on 3.10)."""
    bad = [m for m, p in MODULES.items() if p.suffix == ".py" and m != "llmdiag.util.toml"
           and any((isinstance(n, ast.Import) and any(a.name == "tomllib" for a in n.names))
                   or (isinstance(n, ast.ImportFrom) and n.module == "tomllib")
                   for n in ast.walk(ast.parse(p.read_text())))]
    assert not bad, bad


def test_every_import_resolves_to_a_module():
    missing = {m: sorted(d for d in deps if d not in MODULES) for m, deps in GRAPH.items()}
    assert not {m: d for m, d in missing.items() if d}, missing


def test_layers_import_only_downwards():
    bad = []
    for module, deps in GRAPH.items():
        for dep in deps:
            if layer(dep) not in ALLOWED[layer(module)]:
                bad.append(f"{module} ({layer(module)}) imports {dep} ({layer(dep)})")
    assert not bad, "\n".join(bad)


def test_nothing_in_the_core_or_subsystems_names_probes_except_the_registry():
    for module, deps in GRAPH.items():
        if layer(module) in ("core", "subsystem") and module != "llmdiag.registry":
            assert not [d for d in deps if d.startswith("llmdiag.probes")], module


def test_no_import_cycles():
    # Tarjan's strongly connected components over the whole import graph
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    cycles: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in GRAPH.get(v, ()):
            if w not in GRAPH:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    assert not cycles, cycles


def test_every_builtin_probe_loads():
    from llmdiag.registry import BUILTIN_PROBES, builtin_probes

    probes, errors = builtin_probes()
    assert not errors
    assert len(probes) == len(BUILTIN_PROBES)
    assert [p.name for p in probes] == ["software", "launcher", "gpu", "system", "platform", "dcgm", "network",
                                        "ports", "filesystem", "memory", "nccl", "smoke-train"]


def test_a_broken_builtin_probe_is_an_error_not_a_skip():
    from llmdiag.errors import BuiltinError
    from llmdiag.registry import builtin_probes

    with pytest.raises(BuiltinError, match="llmdiag.probes.gone"):
        builtin_probes(("llmdiag.probes.software:SoftwareProbe", "llmdiag.probes.gone:GoneProbe"))


def test_a_broken_builtin_probe_exits_3_naming_it(monkeypatch):
    from click.testing import CliRunner

    from llmdiag import cli, registry

    monkeypatch.setattr(registry, "BUILTIN_PROBES", registry.BUILTIN_PROBES + ("llmdiag.probes.gone:GoneProbe",))
    res = CliRunner().invoke(cli.cli, ["preflight", "--probe", "system"])
    assert res.exit_code == 3, res.output
    assert "llmdiag.probes.gone" in res.output


def test_a_broken_builtin_command_exits_3_naming_it(monkeypatch):
    from click.testing import CliRunner

    from llmdiag import cli

    monkeypatch.setitem(cli.COMMANDS, "runbook", ("llmdiag.commands.gone:runbook", "x"))
    res = CliRunner().invoke(cli.cli, ["runbook"])
    assert res.exit_code == 3, res.output
    assert "llmdiag.commands.gone" in res.output


def test_a_broken_config_section_module_is_an_error(monkeypatch):
    from llmdiag import config
    from llmdiag.errors import BuiltinError

    monkeypatch.setattr(config, "SECTION_MODULES", config.SECTION_MODULES + ("llmdiag.gone.config",))
    monkeypatch.setattr(config, "_sections_loaded", False)
    with pytest.raises(BuiltinError, match="llmdiag.gone.config"):
        config._load_section_modules()


def test_every_renderer_in_the_table_is_callable():
    from llmdiag.reports.base import FORMATS, KINDS, RENDERERS, find_renderer

    for (kind, fmt), spec in RENDERERS.items():
        assert kind in KINDS and fmt in FORMATS, spec
        assert callable(find_renderer(kind, fmt)), spec
    for kind in KINDS:
        for fmt in FORMATS:
            assert find_renderer(kind, fmt) is not None, (kind, fmt)


def _cli_surface() -> dict:
    from llmdiag.cli import COMMANDS, cli

    def params(cmd: click.Command) -> list[dict]:
        out = []
        for p in cmd.params:
            item = {"name": p.name, "kind": type(p).__name__, "opts": sorted(p.opts + p.secondary_opts),
                    "type": p.type.name, "multiple": bool(getattr(p, "multiple", False)),
                    "required": bool(p.required)}
            if isinstance(p.type, click.Choice):
                item["choices"] = list(p.type.choices)
            if getattr(p, "is_flag", False):
                item["flag"] = True
            out.append(item)
        return out

    surface = {"llmdiag": params(cli)}
    ctx = click.Context(cli)
    for name in COMMANDS:
        cmd = cli.get_command(ctx, name)
        surface[name] = params(cmd)
        if isinstance(cmd, click.Group):
            for sub in cmd.list_commands(ctx):
                surface[f"{name} {sub}"] = params(cmd.get_command(ctx, sub))
    return surface


def test_cli_options_snapshot():
    """Adding, renaming or retyping a flag is a deliberate change: update the snapshot with
    ``LLMDIAG_UPDATE_SNAPSHOT=1 python -m pytest tests/unit/test_contract.py``."""
    surface = _cli_surface()
    text = json.dumps(surface, indent=1, sort_keys=True) + "\n"
    if os.environ.get("LLMDIAG_UPDATE_SNAPSHOT"):
        SNAPSHOT.write_text(text)
    assert SNAPSHOT.exists(), "no CLI snapshot: run with LLMDIAG_UPDATE_SNAPSHOT=1"
    want = json.loads(SNAPSHOT.read_text())
    changed = sorted(k for k in set(want) | set(surface) if want.get(k) != surface.get(k))
    assert not changed, f"the options of {changed} changed: update {SNAPSHOT.relative_to(REPO)} deliberately " \
                        "(LLMDIAG_UPDATE_SNAPSHOT=1)"


# ---------------------------------------------------------------- renderers read typed documents

#: the only mappings whose keys a renderer may name, and why each stays open (other mapping
#: fields, such as a finding's facts or a check's data, are only iterated)
OPEN_MAPS = {
    "model": "estimate-memory's model shape: each architecture family has keys of its own",
    "plan": "estimate-memory's plan: one key per memory/ setting, declared there",
    "environ": "the process environment (the console's width), not a document",
    "extra": "RenderOptions.extra: what a command tells its renderer (rows already streamed), not a document",
}
#: the dispatcher reads the dict's ``kind`` to pick the type, and hands JSON the dict
DICT_READERS = {"base.py"}


def raw_key_reads(source: str) -> list[str]:
    """``line: expression`` for every ``x["literal"]`` and ``x.get("literal", ...)`` in ``source``
    whose ``x`` is not an :data:`OPEN_MAPS` field (``d.plan.get("tp")`` is allowed)."""

    def literal(node: ast.AST) -> bool:
        return isinstance(node, ast.Constant) and isinstance(node.value, str)

    def open_map(node: ast.AST) -> bool:
        return isinstance(node, ast.Attribute) and node.attr in OPEN_MAPS

    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Subscript) and literal(node.slice) and not open_map(node.value):
            found.append(node)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
              and node.args and literal(node.args[0]) and not open_map(node.func.value)):
            found.append(node)
    return [f"{n.lineno}: {ast.unparse(n)}" for n in sorted(found, key=lambda n: n.lineno)]


def test_the_raw_key_check_finds_dict_reads_and_allows_attributes_and_open_maps():
    bad = 'def f(doc):\n    a = doc["findings"]\n    b = doc.get("status", "skip")\n    return doc["x"]["y"]\n'
    assert [x.split(":")[0] for x in raw_key_reads(bad)] == ["2", "3", "4", "4"]
    good = ('def f(d, rows, key):\n    a = d.model["name"]\n    b = d.plan.get("tp")\n'
            '    return rows[key], d.stats.get(key), "x".join(["a"])\n')
    assert raw_key_reads(good) == []


def test_no_renderer_reads_a_raw_dict_key():
    """Renderers take the typed document (llmdiag.documents via reports.base.render): a field
    they need is declared there first, so the JSON, its schema and every format agree."""
    found = {}
    for path in sorted((REPO / "reports").glob("*.py")):
        reads = raw_key_reads(path.read_text(encoding="utf-8"))
        if reads and path.name not in DICT_READERS:
            found[path.name] = reads
    assert not found, f"renderers read raw dict keys (declare the field in llmdiag.documents): {found}"
