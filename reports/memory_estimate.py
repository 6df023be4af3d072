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
    if v == "invalid-plan":
        bad = [c["check"] for c in doc.get("plan_checks", []) if c.get("severity") == "fail"]
        v += f" ({', '.join(bad)}): the framework refuses it at launch" if bad else ""
    text = f"{doc['model']['name']}: {_gib(b['total'])} per GPU (stage {doc.get('worst_stage', 0)})"
    if doc.get("gpu_memory"):
        text += f" of {_gib(doc['gpu_memory'])} ({doc.get('gpu_memory_source')}): {v}"
        if doc.get("oom_when"):
            text += f", fails at {doc['oom_when']}"
    return text


def _peak(doc: Mapping[str, Any]) -> str | None:
    """Which phase peaks and the three sizes the estimate separates (allocated, the caching
    allocator's reserved, and what the device holds with context and NCCL buffers)."""
    pk = doc.get("peak") or {}
    if not pk.get("allocated"):
        return None
    text = (f"Peak in {pk.get('phase', '?')}: {_gib(pk['allocated'])} allocated, {_gib(pk.get('reserved'))} "
            f"reserved by the caching allocator, {_gib(pk.get('device'))} on the device")
    other = {"forward/backward": ("optimizer step", "optimizer_step_allocated"),
             "optimizer step": ("forward/backward", "forward_backward_allocated")}.get(pk.get("phase", ""))
    if other and pk.get(other[1]):
        text += f" (the {other[0]}: {_gib(pk[other[1]])} allocated)"
    return text


def placement(doc: Mapping[str, Any]) -> str | None:
    """Where the bytes live: the device (the verdict's), split by the caching allocator, and the
    host RAM the plan needs besides (CPU offload, paged optimizer state)."""
    mem = doc.get("memory") or {}
    if not mem:
        return None
    text = (f"On the device: {_gib(mem['device'])} = {_gib(mem['allocator_reserved'])} in the caching allocator"
            f" + {_gib(mem['outside_allocator'])} outside it (CUDA context, NCCL buffers, managed memory)")
    text += f"; host RAM: {_gib(mem['host_per_gpu'])} per GPU"
    if mem.get("host_per_gpu"):
        parts = ", ".join(f"{x['name']} {_gib(x['bytes'])}" for x in mem.get("host_lines", []))
        text += f", {_gib(mem['host_per_node'])} per node of {mem.get('gpus_per_node', 1)} GPUs ({parts})"
    return text


def _stage_rows(doc: Mapping[str, Any]) -> list[tuple[str, ...]]:
    """One row per pipeline stage, only when there is more than one."""
    stages = doc.get("stages") or []
    if len(stages) < 2:
        return []
    worst = doc.get("worst_stage")
    return [(str(st["stage"]) + (" (worst)" if st["stage"] == worst else ""), str(st.get("layers", "?")),
             f"{st.get('params_per_gpu', 0) / 1e9:.2f} B", st.get("phase", "?"), _gib(st.get("allocated")),
             _gib(st.get("device"))) for st in stages]


_STAGE_COLS = ("stage", "layers", "params per GPU", "peak phase", "allocated", "on device")


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
    if _peak(doc):
        con.print(Text(_peak(doc)))
    if placement(doc):
        con.print(Text(placement(doc)))
    if _stage_rows(doc):
        st = Table(title="Per pipeline stage")
        for col in _STAGE_COLS:
            st.add_column(col)
        for row in _stage_rows(doc):
            st.add_row(*(Text(c) for c in row))
        con.print(st)
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
    if _peak(doc):
        out += ["", _peak(doc) + "."]
    if placement(doc):
        out += ["", esc(placement(doc)) + "."]
    if _stage_rows(doc):
        out += ["", "## Per pipeline stage", "", "| " + " | ".join(_STAGE_COLS) + " |",
                "|" + "---|" * len(_STAGE_COLS)]
        out += ["| " + " | ".join(esc(c) for c in row) + " |" for row in _stage_rows(doc)]
    if doc.get("plan_checks"):
        out += ["", "## Plan checks", ""]
        out += [f"- **{i['severity']}** `{i['check']}`: {esc(i['message'])}; fix: {esc(i['fix'])}" for i in doc["plan_checks"]]
    if doc.get("suggestions"):
        out += ["", "## What fits (cheapest first)", ""]
        out += [f"- {esc(s['change'])}: {_gib(s['total'])} (expected cost ~{s['expected_cost']:.0%})" for s in doc["suggestions"]]
    elif doc.get("verdict") == "out-of-memory":
        out += ["", "No nearby plan fits; more GPUs or a smaller model are needed."]
    if doc.get("warnings"):
        out += ["", "## Warnings", ""] + [f"- {esc(w)}" for w in doc["warnings"]]
    return "\n".join(out) + "\n"
