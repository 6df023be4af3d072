"""Terminal and Markdown renderers of ``kind: nccl-bench`` documents.

The table is plain text laid out like nccl-tests' output (``#`` header lines, the same
columns, ``N/A`` for #wrong without checking, the two footer lines), so scripts that parse
nccl-tests output and people used to reading it need nothing new. Values come from the
document as they are; renderers compute nothing but layout.
"""

from __future__ import annotations

from llmdiag.documents import BenchRow, BenchSettings, BenchWorld, CollectiveSummary, Finding, NcclBenchDoc, Pairwise, Placement
from llmdiag.reports.base import RenderOptions
from llmdiag.reports.console import STATUS_LABEL

_LEFT = "{:>12}  {:>12}  {:>8}  {:>6}  {:>6}"
_CELL = "  {:>8}  {:>7}  {:>7}  {:>6}"


def _time(us: float) -> str:
    if us < 1e4:
        return f"{us:.2f}"
    if us < 1e6:
        return f"{us:.1f}"
    return f"{us:.0f}"


def _cell(c: Placement | None) -> str:
    if c is None:
        return _CELL.format("N/A", "N/A", "N/A", "N/A")
    wrong = "N/A" if c.wrong is None else str(c.wrong)
    return _CELL.format(_time(c.time_us), f"{c.algbw:.2f}", f"{c.busbw:.2f}", wrong)


def _hash(line: str) -> str:
    """A header line: '#' in the first column, as nccl-tests prints them."""
    return "#" + line[1:] if line.startswith(" ") else "# " + line


def _fmt(v: float | None, digits: int = 4) -> str:
    return "N/A" if v is None else f"{v:.{digits}f}"


def _sizes(sizes: list[int]) -> str:
    from llmdiag.ncclbench.sizes import format_size

    if not sizes:
        return "-"
    return format_size(sizes[0]) if len(sizes) == 1 else f"{format_size(sizes[0])}..{format_size(sizes[-1])}"


def table_head(name: str) -> list[str]:
    """The header lines of one collective's table."""
    group = len(_CELL.format("", "", "", ""))
    left = _LEFT.format("", "", "", "", "")
    lines = [
        f"# Collective test: {name}",
        "#",
        "#" + left[1:] + "out-of-place".center(group) + "in-place".center(group),
        _hash(_LEFT.format("size", "count", "type", "redop", "root") + _CELL.format("time", "algbw", "busbw", "#wrong") * 2),
        _hash(_LEFT.format("(B)", "(elements)", "", "", "") + _CELL.format("(us)", "(GB/s)", "(GB/s)", "") * 2),
    ]
    return [ln.rstrip() for ln in lines]


def row_line(r: BenchRow) -> str:
    """One measured row, as nccl-tests prints it."""
    return (_LEFT.format(r.size, r.count, r.type, r.redop, r.root)
            + _cell(r.out_of_place) + _cell(r.in_place)).rstrip()


def table_lines(doc: NcclBenchDoc, collective: CollectiveSummary) -> list[str]:
    """One collective's nccl-tests-style table with its footer."""
    name = collective.collective
    lines = table_head(name) + [row_line(r) for r in doc.results if r.collective == name]
    return [ln.rstrip() for ln in lines] + footer_lines(collective)


def footer_lines(collective: CollectiveSummary) -> list[str]:
    """The lines after one collective's rows (nccl-tests' two, then the plateau)."""
    wrong = collective.wrong
    return [
        f"# Out of bounds values : {wrong} {'OK' if wrong == 0 else 'FAILED'}",
        f"# Avg bus bandwidth    : {_fmt(collective.avg_busbw)} ",
        f"# Plateau bus bandwidth: {_fmt(collective.plateau_busbw)} GB/s "
        f"(sizes {_sizes(collective.plateau_sizes)})".rstrip(),
        "#",
    ]


def _known(v: object) -> object:
    """A world value, or "?": a run stopped before the ranks met knows only what it asked for."""
    return "?" if v is None else v


def world_lines(w: BenchWorld, s: BenchSettings) -> list[str]:
    """The run's header: ranks, nodes, backend, device, sizes and iterations, rank placement."""
    sizes = s.sizes or [0]
    lines = [
        f"# llmdiag nccl-bench: {_known(w.world_size)} rank(s) on {_known(w.nodes)} node(s), "
        f"backend {_known(w.backend)}, device {_known(w.device)}, torch {_known(w.torch_version)}"
        + (f", NCCL {w.nccl_version}" if w.nccl_version else ""),
        f"#  minBytes {min(sizes)} maxBytes {max(sizes)} sizes {len(sizes)} warmup iters: {s.warmup_iters} "
        f"iters: {s.iters} validation: {int(bool(s.check))}",
        "#",
    ]
    for rank, host in enumerate(w.hosts or []):
        lines.append(f"#  Rank {rank:2d} on {host}")
    lines.append("#")
    return lines


def header_lines(doc: NcclBenchDoc) -> list[str]:
    lines = world_lines(doc.world or BenchWorld(world_size=None), doc.spec or BenchSettings())
    stop = doc.stopped
    if stop:
        planned = f" of {stop.rows_planned}" if stop.rows_planned else ""
        lines += [f"# PARTIAL RUN ({stop.reason}): {stop.rows_measured}{planned} rows measured"
                  + (f"; still running: {stop.measuring}" if stop.measuring else ""), "#"]
    return lines


class LiveTable:
    """Lines to print as a run reports its progress (:mod:`llmdiag.ncclbench.progress` records,
    read into their types by the command): the header once the ranks have met, a table head per
    collective, then each row."""

    def __init__(self, spec: BenchSettings) -> None:
        self.spec = spec
        self.collective: str | None = None

    def world(self, world: BenchWorld) -> list[str]:
        return world_lines(world, self.spec)

    def row(self, row: BenchRow) -> list[str]:
        head = [] if row.collective == self.collective else table_head(row.collective)
        self.collective = row.collective
        return head + [row_line(row)]


def pairwise_lines(pw: Pairwise) -> list[str]:
    from llmdiag.ncclbench.sizes import format_size

    lines = [
        f"# Pairwise send/recv: {format_size(pw.bytes)}B each way, {pw.iters} iterations per pair",
        f"#  reference {pw.reference_gbps:.4f} GB/s (median of each node's best link); "
        f"slow below {pw.threshold_gbps:.4f} GB/s",
    ]
    slow = {(lk.a, lk.b) for lk in pw.links if lk.gbps < pw.threshold_gbps}
    for lk in pw.links:
        mark = ("SLOW" if (lk.a, lk.b) in slow else "ok") + (" (measured twice)" if lk.rechecked else "")
        lines.append(f"#  {lk.a:>16} <-> {lk.b:<16} {lk.phase:<6} {lk.gbps:10.4f} GB/s  {mark}")
    for n in pw.slow_nodes:
        lines.append(f"# Slow node: {n.node} (median link {n.median_gbps:.4f} GB/s)")
    for sl in pw.slow_links:
        lines.append(f"# Slow link: {sl.a} <-> {sl.b} ({sl.gbps:.4f} GB/s)")
    for note in pw.notes or []:
        lines.append(f"# Note: {note}")
    lines.append("#")
    return lines


def summary_lines(doc: NcclBenchDoc) -> list[str]:
    lines = []
    s = doc.straggler
    if s:
        lines.append(f"# Slowest rank         : {s.rank} ({s.host}) {s.busbw:.4f} GB/s, "
                     f"{s.fraction:.0%} of the median rank")
    lines.append(f"# Expected plateau     : {doc.expected_busbw if doc.expected_busbw is not None else 'not set'}"
                 + (" GB/s" if doc.expected_busbw is not None else ""))
    return lines


def _finding_text(f: Finding, head: str, sub: str) -> list[str]:
    """A finding as lines: ``head`` and ``sub`` are format strings (terminal vs Markdown)."""
    label = STATUS_LABEL.get(f.status, f.status)
    lines = [head.format(status=label, check=f.check, summary=f.summary)]
    if f.status != "pass":
        if f.remediation:
            lines.append(sub.format(f"fix: {f.remediation}"))
        if f.runbook:
            lines.append(sub.format(f"runbook: `llmdiag runbook {f.runbook}`" if sub.startswith("  -")
                                    else f"runbook: llmdiag runbook {f.runbook}"))
    return lines


def finding_lines(doc: NcclBenchDoc) -> list[str]:
    lines = []
    for f in doc.findings:
        lines += _finding_text(f, "{status}  {check}: {summary}", "      {}")
    lines.append(f"{STATUS_LABEL.get(doc.status, doc.status)}: nccl-bench, avg bus bandwidth "
                 f"{_fmt(doc.avg_busbw)} GB/s, plateau {_fmt(doc.plateau_busbw)} GB/s, "
                 f"{doc.out_of_bounds} wrong element(s)")
    return lines


def text_lines(doc: NcclBenchDoc) -> list[str]:
    lines = header_lines(doc)
    for c in doc.collectives:
        lines += table_lines(doc, c)
    if doc.pairwise:
        lines += pairwise_lines(doc.pairwise)
    lines += summary_lines(doc)
    return lines


def after_stream_lines(doc: NcclBenchDoc) -> list[str]:
    """The report for a reader who watched the run: the header and every row were printed as
    they came (:class:`LiveTable`), so only what the stream never carried — a partial run's
    note, each collective's footer, the pairwise table, the summary — is left to show."""
    world = world_lines(doc.world or BenchWorld(world_size=None), doc.spec or BenchSettings())
    lines = header_lines(doc)[len(world):]
    many = len(doc.collectives) > 1
    for c in doc.collectives:
        lines += ([f"# Collective test: {c.collective}"] if many else []) + footer_lines(c)
    if doc.pairwise:
        lines += pairwise_lines(doc.pairwise)
    return lines + summary_lines(doc)


def terminal(doc: NcclBenchDoc, opts: RenderOptions) -> str:
    """The nccl-tests table and the findings; ``opts.extra["rows_shown"]``: how many rows the
    reader already saw streamed on this terminal (all of them: the table is not printed again,
    as nccl-tests prints each row once)."""
    shown = int(opts.extra.get("rows_shown") or 0)
    body = after_stream_lines(doc) if doc.results and shown >= len(doc.results) else text_lines(doc)
    return "\n".join(body + [""] + finding_lines(doc)) + "\n"


def markdown(doc: NcclBenchDoc, opts: RenderOptions) -> str:
    out = [f"# llmdiag nccl-bench: {STATUS_LABEL.get(doc.status, doc.status)}", ""]
    out += ["| collective | avg busbw (GB/s) | plateau busbw (GB/s) | plateau sizes | #wrong |", "|---|---|---|---|---|"]
    for c in doc.collectives:
        out.append(f"| {c.collective} | {_fmt(c.avg_busbw)} | {_fmt(c.plateau_busbw)} | "
                   f"{_sizes(c.plateau_sizes)} | {c.wrong} |")
    out += ["", "```", *text_lines(doc), "```", "", "## Findings", ""]
    for f in doc.findings:
        out += _finding_text(f, "- **{status}** `{check}`: {summary}", "  - {}")
    if not doc.findings:
        out.append("- no checks configured (set `--expect-busbw` or `[nccl_bench] expected_busbw_gbps`)")
    return "\n".join(out) + "\n"
