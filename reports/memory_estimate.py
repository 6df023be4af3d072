"""Terminal and Markdown renderers of ``kind: memory-estimate`` (llmdiag estimate-memory)."""

from __future__ import annotations

from typing import Any

from llmdiag.documents import MemoryEstimateDoc, MemoryLine
from llmdiag.reports.base import RenderOptions
from llmdiag.reports.console import captured, make_console, status_text


def _gib(n: Any) -> str:
    return "-" if n is None else f"{n / 2**30:.2f} GiB"


def _inputs(line: MemoryLine) -> str:
    inp = {k: v for k, v in line.inputs.items() if k != "terms"}
    return (line.formula or "") + ("; " + ", ".join(f"{k}={v}" for k, v in inp.items()) if inp else "")


def _model_name(d: MemoryEstimateDoc) -> Any:
    return d.model.get("name") if d.model else None


def _headline(d: MemoryEstimateDoc) -> str:
    v = str(d.verdict or "unknown")
    if v == "invalid-plan":
        bad = [c.check for c in d.plan_checks if c.severity == "fail"]
        v += f" ({', '.join(bad)}): the framework refuses it at launch" if bad else ""
    text = f"{_model_name(d)}: {_gib(d.total)} per GPU (stage {d.worst_stage or 0})"
    if d.gpu_memory:
        text += f" of {_gib(d.gpu_memory)} ({d.gpu_memory_source}): {v}"
        if d.oom_when:
            text += f", fails at {d.oom_when}"
    return text


def smallest(d: MemoryEstimateDoc) -> str | None:
    """``--min-gpus``: the fewest GPUs on which some plan fits, as one sentence."""
    sg = d.smallest_gpu_count
    if sg is None:
        return None
    if sg.gpus is None or sg.plan is None:
        return f"No plan fits on up to {sg.searched_up_to} GPUs without CPU offload."
    return (f"Fewest GPUs that fit: {sg.gpus} ({d.gpu_memory and _gib(d.gpu_memory)} each), with "
            f"{sg.plan.change or 'the plan as given'}: {_gib(sg.plan.total)} per GPU.")


#: the phase that did not peak, and its allocated bytes
_OTHER_PHASE = {"forward/backward": ("optimizer step", lambda pk: pk.optimizer_step_allocated),
                "optimizer step": ("forward/backward", lambda pk: pk.forward_backward_allocated)}


def _peak(d: MemoryEstimateDoc) -> str | None:
    """Which phase peaks and the three sizes the estimate separates (allocated, the caching
    allocator's reserved, and what the device holds with context and NCCL buffers)."""
    pk = d.peak
    if pk is None or not pk.allocated:
        return None
    text = (f"Peak in {pk.phase or '?'}: {_gib(pk.allocated)} allocated, {_gib(pk.reserved)} "
            f"reserved by the caching allocator, {_gib(pk.device)} on the device")
    other = _OTHER_PHASE.get(pk.phase or "")
    if other and other[1](pk):
        text += f" (the {other[0]}: {_gib(other[1](pk))} allocated)"
    return text


def placement(d: MemoryEstimateDoc) -> str | None:
    """Where the bytes live: the device (the verdict's), split by the caching allocator, and the
    host RAM the plan needs besides (CPU offload, paged optimizer state)."""
    mem = d.memory
    if mem is None:
        return None
    text = (f"On the device: {_gib(mem.device)} = {_gib(mem.allocator_reserved)} in the caching allocator"
            f" + {_gib(mem.outside_allocator)} outside it (CUDA context, NCCL buffers, managed memory)")
    text += f"; host RAM: {_gib(mem.host_per_gpu)} per GPU"
    if mem.host_per_gpu:
        parts = ", ".join(f"{x.name} {_gib(x.bytes)}" for x in mem.host_lines)
        text += f", {_gib(mem.host_per_node)} per node of {mem.gpus_per_node} GPUs ({parts})"
    return text


def _stage_rows(d: MemoryEstimateDoc) -> list[tuple[str, ...]]:
    """One row per pipeline stage, only when there is more than one."""
    stages = d.stages
    if len(stages) < 2:
        return []
    worst = d.worst_stage
    return [(str(st.stage) + (" (worst)" if st.stage == worst else ""), str("?" if st.layers is None else st.layers),
             f"{(st.params_per_gpu or 0) / 1e9:.2f} B", st.phase or "?", _gib(st.allocated),
             _gib(st.device)) for st in stages]


_STAGE_COLS = ("stage", "layers", "params per GPU", "peak phase", "allocated", "on device")


def terminal(d: MemoryEstimateDoc, opts: RenderOptions) -> str:
    from rich.table import Table
    from rich.text import Text

    con = make_console(opts)
    con.print(Text.assemble(status_text(d.status), " ", Text(_headline(d))))
    t = Table(show_lines=False)
    for col in ("item", "per GPU", "formula and inputs"):
        t.add_column(col)
    for line in d.lines:
        t.add_row(Text(line.name), Text(_gib(line.bytes)), Text(_inputs(line)))
    t.add_row(Text("total"), Text(_gib(d.total)), Text(""))
    con.print(t)
    if _peak(d):
        con.print(Text(_peak(d)))
    if placement(d):
        con.print(Text(placement(d)))
    if _stage_rows(d):
        st = Table(title="Per pipeline stage")
        for col in _STAGE_COLS:
            st.add_column(col)
        for row in _stage_rows(d):
            st.add_row(*(Text(c) for c in row))
        con.print(st)
    for issue in d.plan_checks:
        con.print(Text(f"{issue.severity.upper()} {issue.check}: {issue.message} -> {issue.fix}"))
    if d.suggestions:
        con.print(Text("What fits (cheapest first):"))
        for s in d.suggestions:
            con.print(Text(f"  - {s.change}: {_gib(s.total)} (expected cost ~{s.expected_cost:.0%})"))
    elif d.verdict == "out-of-memory":
        con.print(Text("No nearby plan fits; more GPUs or a smaller model are needed."))
    if smallest(d):
        con.print(Text(smallest(d)))
    return captured(con)


def markdown(d: MemoryEstimateDoc, opts: RenderOptions) -> str:
    out = [f"# Memory estimate: {d.status.upper()}", "", _headline(d), "",
           "| item | per GPU | formula and inputs |", "|---|---|---|"]
    esc = lambda s: str(s).replace("|", "\\|")  # noqa: E731
    for line in d.lines:
        out.append(f"| {esc(line.name)} | {_gib(line.bytes)} | {esc(_inputs(line))} |")
    out.append(f"| **total** | **{_gib(d.total)}** | |")
    if _peak(d):
        out += ["", _peak(d) + "."]
    if placement(d):
        out += ["", esc(placement(d)) + "."]
    if _stage_rows(d):
        out += ["", "## Per pipeline stage", "", "| " + " | ".join(_STAGE_COLS) + " |",
                "|" + "---|" * len(_STAGE_COLS)]
        out += ["| " + " | ".join(esc(c) for c in row) + " |" for row in _stage_rows(d)]
    if d.plan_checks:
        out += ["", "## Plan checks", ""]
        out += [f"- **{i.severity}** `{i.check}`: {esc(i.message)}; fix: {esc(i.fix)}" for i in d.plan_checks]
    if d.suggestions:
        out += ["", "## What fits (cheapest first)", ""]
        out += [f"- {esc(s.change)}: {_gib(s.total)} (expected cost ~{s.expected_cost:.0%})" for s in d.suggestions]
    elif d.verdict == "out-of-memory":
        out += ["", "No nearby plan fits; more GPUs or a smaller model are needed."]
    if smallest(d):
        out += ["", esc(smallest(d))]
    if d.warnings:
        out += ["", "## Warnings", ""] + [f"- {esc(w)}" for w in d.warnings]
    return "\n".join(out) + "\n"
