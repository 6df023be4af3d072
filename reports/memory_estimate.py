"""Terminal and Markdown renderers of ``kind: memory-estimate`` (llmdiag estimate-memory)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llmdiag.reports.base import RenderOptions
from llmdiag.reports.console import captured, make_console, status_text


def _gib(n: Any) -> str:
    return "-" if n is None else f"{n / 2**30:.2f} GiB"


def _inputs(line: Mapping[str, Any]) -> str:
    inp = {k: v for k, v in line.get("inputs", {}).items() if k != "terms"}
    return line.get("formula", "") + ("; " + ", ".join(f"{k}={v}" for k, v in inp.items()) if inp else "")


def _headline(doc: Mapping[str, Any]) -> str:
    b = doc["breakdown"]
    v = doc.get("verdict", "unknown")
    text = f"{doc['model']['name']}: {_gib(b['total'])} per GPU (stage {doc.get('worst_stage', 0)})"
    if doc.get("gpu_memory"):
        text += f" of {_gib(doc['gpu_memory'])} ({doc.get('gpu_memory_source')}): {v}"
        if doc.get("oom_when"):
            text += f", fails at {doc['oom_when']}"
    return text


def terminal(doc: Mapping[str, Any], opts: RenderOptions) -> str:
    from rich.table import Table
    from rich.text import Text

    con = make_console(opts)
    con.print(Text.assemble(status_text(doc["status"]), " ", Text(_headline(doc))))
    t = Table(show_lines=False)
    for col in ("item", "per GPU", "formula and inputs"):
        t.add_column(col)
    for line in doc.get("lines", []):
        t.add_row(Text(line["name"]), Text(_gib(line["bytes"])), Text(_inputs(line)))
    t.add_row(Text("total"), Text(_gib(doc["breakdown"]["total"])), Text(""))
    con.print(t)
    for issue in doc.get("plan_checks", []):
        con.print(Text(f"{issue['severity'].upper()} {issue['check']}: {issue['message']} -> {issue['fix']}"))
    if doc.get("suggestions"):
        con.print(Text("What fits (cheapest first):"))
        for s in doc["suggestions"]:
            con.print(Text(f"  - {s['change']}: {_gib(s['total'])} (expected cost ~{s['expected_cost']:.0%})"))
    elif doc.get("verdict") == "out-of-memory":
        con.print(Text("No nearby plan fits; more GPUs or a smaller model are needed."))
    return captured(con)


def markdown(doc: Mapping[str, Any], opts: RenderOptions) -> str:
    out = [f"# Memory estimate: {doc['status'].upper()}", "", _headline(doc), "",
           "| item | per GPU | formula and inputs |", "|---|---|---|"]
    esc = lambda s: str(s).replace("|", "\\|")  # noqa: E731
    for line in doc.get("lines", []):
        out.append(f"| {esc(line['name'])} | {_gib(line['bytes'])} | {esc(_inputs(line))} |")
    out.append(f"| **total** | **{_gib(doc['breakdown']['total'])}** | |")
    if doc.get("plan_checks"):
        out += ["", "## Plan checks", ""]
        out += [f"- **{i['severity']}** `{i['check']}`: {esc(i['message'])}; fix: {esc(i['fix'])}" for i in doc["plan_checks"]]
    if doc.get("suggestions"):
        out += ["", "## What fits (cheapest first)", ""]
        out += [f"- {esc(s['change'])}: {_gib(s['total'])} (expected cost ~{s['expected_cost']:.0%})" for s in doc["suggestions"]]
    return "\n".join(out) + "\n"
