"""The report documents, typed: one dataclass per kind, with the field names the commands write.

Every command's result is a JSON object with ``schema_version``, ``command``, ``kind`` and
``status``; the classes here describe the rest, field by field, as the producers write it
(``llmdiag.result`` for preflight / cluster / merge, ``llmdiag.ncclbench`` for nccl-bench,
``llmdiag.logs`` for analyze-log, ``llmdiag.memory`` for estimate-memory, ``llmdiag.monitor``
for monitor). Renderers read documents only through :func:`read` (a dict in, the typed
document out), never by guessing at keys.

The JSON Schema of each kind is generated from these classes (``python -m llmdiag.documents
DIR`` writes them; the package ships them in ``llmdiag/schemas/`` and ``docs/schemas/``).
``schema_version`` is one string for every kind, ``MAJOR.MINOR`` (:data:`SCHEMA_VERSION`), and
the compatibility rule is docs/reports.md's "Versions": a new optional field or enum word bumps
the minor; renaming, removing or retyping a field, or a new required one, bumps the major; a
reader takes its own major and ignores only the keys of a newer minor. A measured float that is NaN or infinite is written as the string
``"nan"`` / ``"inf"`` (JSON has no such numbers), hence ``float | str`` for measurements.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from llmdiag.util import dataschema
from llmdiag.vocab import AlertSeverity, Severity, Status, Verdict

#: the version every document kind writes: MAJOR.MINOR (docs/reports.md, "Versions")
SCHEMA_VERSION = "1.0"
SCHEMA_VERSION_PATTERN = r"^[0-9]+\.[0-9]+$"
#: tests set this to 1 (tests/conftest.py): every document read must match its type exactly
STRICT_ENV = "LLMDIAG_STRICT_DOCUMENTS"
#: a measurement: a number, or "nan" / "inf" / "-inf" where the value was not finite
Measured = float | str

STATUS_CODE = {s: s.severity for s in Status}


def _doc(text: str) -> dict[str, Any]:
    return {"doc": text}


def number(value: Any) -> float | None:
    """A document value as a finite float, or None (missing, "nan", not a number)."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def status_of(value: Any, default: Status | str = Status.SKIP) -> Status:
    """``value`` as a Status; ``default`` for anything else (a missing or unknown word)."""
    try:
        return Status(str(value or "").lower())
    except ValueError:
        return Status(default)


def worst(statuses) -> Status:
    """As :meth:`llmdiag.vocab.Status.worst` (skips never make it worse than pass), except that
    only skips are a skip."""
    seen = {status_of(s) for s in statuses}
    if seen and seen <= {Status.SKIP}:
        return Status.SKIP
    return Status.worst(seen)


@dataclasses.dataclass
class Evidence:
    """One observed value, what was expected, and the unit of both."""

    name: str
    observed: Any = None
    expected: Any = None
    unit: str | None = ""


@dataclasses.dataclass
class Finding:
    """A check's outcome as nccl-bench writes it (``findings``)."""

    status: Status
    summary: str = ""
    check: str = ""
    node: str | None = None
    evidence: list[Evidence] = dataclasses.field(default_factory=list)
    remediation: str | None = None
    runbook: str | None = None

    @property
    def label(self) -> str:
        probe = getattr(self, "probe", None)
        if probe is None:
            return self.check
        return probe if self.check in ("probe", "") else f"{probe}/{self.check}"


@dataclasses.dataclass
class Check(Finding):
    """A preflight check's result on a node (or across nodes: ``scope`` cluster)."""

    probe: str | None = None
    data: dict[str, Any] = dataclasses.field(default_factory=dict)
    duration_s: float | None = None
    scope: Literal["node", "cluster"] | None = None


@dataclasses.dataclass
class Header:
    schema_version: str = dataclasses.field(metadata={
        "doc": "MAJOR.MINOR: a new optional field bumps the minor, any other change the major (docs/reports.md)",
        "pattern": SCHEMA_VERSION_PATTERN})
    command: str
    kind: str
    status: Status


# ---------------------------------------------------------------- preflight, cluster, merge


@dataclasses.dataclass
class NodeEntry:
    node: str
    status: Status
    node_rank: int | None = None
    started_at: float | None = None
    finished_at: float | None = None
    meta: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class MissingNode:
    """An expected node without a report: never joined (missing), or joined then died or hung."""

    node: str
    state: Literal["missing", "died", "hung"]
    node_rank: int | None = None
    name: str | None = None
    detail: str | None = None
    host: str | None = None


@dataclasses.dataclass
class Outlier:
    value: Any = None
    nodes: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class ConsistencyDiff:
    """A fact that differs between nodes: the majority value and the odd groups."""

    key: str
    label: str | None = None
    status: Status | None = None
    majority: Any = None
    majority_count: int | None = None
    outliers: list[Outlier] = dataclasses.field(default_factory=list)
    message: str | None = None


@dataclasses.dataclass
class PortProblem:
    """A connection of the port matrix that was not open."""

    src_rank: int | None = None
    dst_rank: int | None = None
    port: int | None = None
    outcome: str | None = None
    detail: str | None = None
    elapsed_s: float | None = None
    src: str | None = None
    dst: str | None = None
    meaning: str | None = None
    status: str | None = None


@dataclasses.dataclass
class PortMatrix:
    """Every node's connections to every other node's job ports."""

    ports: list[int] = dataclasses.field(default_factory=list)
    mode: str | None = None
    tested: int | None = None
    open: int | None = None
    failed: int | None = None
    problems: list[PortProblem] | None = dataclasses.field(default=None, metadata=_doc(
        "the connections not open (the first ones; ``truncated`` more); absent when no node tested"))
    truncated: int | None = None
    pairs: list[dict[str, Any]] = dataclasses.field(default_factory=list, metadata=_doc(
        "each tested (src, dst) pair with its worst outcome: the heat map's cells"))


@dataclasses.dataclass
class ClusterSections:
    """The cross-node sections of a merged report (docs/cluster.md)."""

    missing_nodes: list[MissingNode] = dataclasses.field(default_factory=list)
    consistency: list[ConsistencyDiff] | None = dataclasses.field(default=None, metadata=_doc(
        "facts that differ between nodes; absent when no node reported its facts"))
    clock: dict[str, Any] = dataclasses.field(default_factory=dict, metadata=_doc(
        "warn_ms, centre_ms and each node's skew"))
    shared_fs: dict[str, Any] = dataclasses.field(default_factory=dict, metadata=_doc(
        "path -> whether the nodes see one filesystem there"))
    port_matrix: PortMatrix | None = None


@dataclasses.dataclass
class ClusterDoc(Header):
    """``llmdiag preflight`` and ``llmdiag report merge``: checks per node and across nodes."""

    counts: dict[str, int]
    nodes: list[NodeEntry]
    missing_nodes: list[str]
    results: list[Check] = dataclasses.field(metadata=_doc("every check, node scope then cluster scope"))
    created_at: float | None = None
    strict: bool = False
    duration_s: float | None = dataclasses.field(default=None, metadata=_doc(
        "seconds the run took on rank 0's monotonic clock (never wall clocks of different nodes)"))
    sections: ClusterSections = dataclasses.field(
        default_factory=ClusterSections, metadata=_doc("cross-node sections: consistency, port_matrix, clock, ... (docs/cluster.md)"))

    def node_names(self) -> list[str]:
        names = [n.node for n in self.nodes]
        for r in self.results:
            if (r.scope or "node") == "node" and r.node and r.node not in names:
                names.append(r.node)
        return names + [m for m in self.missing_nodes if m not in names]


# ---------------------------------------------------------------- nccl-bench


@dataclasses.dataclass
class Placement:
    """One placement (out-of-place or in-place) of one row, as nccl-tests prints it."""

    time_us: Measured | None = None
    algbw: Measured | None = dataclasses.field(default=None, metadata=_doc("GB/s"))
    busbw: Measured | None = dataclasses.field(default=None, metadata=_doc("GB/s"))
    wrong: int | None = dataclasses.field(default=None, metadata=_doc("wrong elements (None: not checked)"))


@dataclasses.dataclass
class BenchRow:
    collective: str
    size: int = dataclasses.field(metadata=_doc("message size in bytes"))
    out_of_place: Placement | None = dataclasses.field(metadata=_doc("None: the collective has no such placement"))
    in_place: Placement | None
    count: int | None = None
    type: str | None = None
    redop: str | None = None
    root: int | None = None
    rank_time_us: dict[str, list[Measured] | None] = dataclasses.field(default_factory=dict)

    def placement(self, name: str) -> Placement:
        """``out_of_place`` or ``in_place``, empty when the collective has none."""
        return getattr(self, name) or Placement()


@dataclasses.dataclass
class CollectiveSummary:
    collective: str
    avg_busbw: Measured | None = dataclasses.field(default=None, metadata=_doc("GB/s, mean over all rows"))
    plateau_busbw: Measured | None = dataclasses.field(default=None, metadata=_doc("GB/s at the largest sizes"))
    plateau_sizes: list[int] = dataclasses.field(default_factory=list)
    wrong: int | None = None


@dataclasses.dataclass
class BenchWorld:
    world_size: int
    nodes: int | None = None
    backend: str | None = None
    device: str | None = None
    torch_version: str | None = None
    nccl_version: str | None = None
    hosts: list[str] = dataclasses.field(default_factory=list)
    duration_s: float | None = None


@dataclasses.dataclass
class BenchStop:
    """Why a run ended before its last row; the rows measured until then are in the document."""

    reason: Literal["interrupted", "timed out", "peer left", "failed"]
    detail: str
    measuring: str | None = dataclasses.field(default=None, metadata=_doc("what was running when it stopped"))
    rows_measured: int = 0
    rows_planned: int | None = None


@dataclasses.dataclass
class BenchSettings:
    """What every rank ran (``llmdiag.ncclbench.config.BenchSpec`` as written)."""

    collectives: list[str] = dataclasses.field(default_factory=list)
    sizes: list[int] = dataclasses.field(default_factory=list, metadata=_doc("message sizes in bytes"))
    warmup_iters: int | None = None
    iters: int | None = None
    check: bool = False
    dtype: str | None = None
    op: str | None = None
    root: int | None = None
    backend: str | None = None
    pairwise: bool = False
    pairwise_bytes: int | None = None
    pairwise_iters: int | None = None
    pairwise_low_fraction: float | None = None
    pairwise_samples: int | None = None
    timeout_s: float | None = None
    inject_corruption: list[int] | None = dataclasses.field(default=None, metadata=_doc("a test hook: rank, elements"))


@dataclasses.dataclass
class PeerLink:
    peer: str
    gbps: Measured | None = None


@dataclasses.dataclass
class SlowNode:
    """A node whose links are mostly below the others' median."""

    node: str
    links: list[PeerLink] = dataclasses.field(default_factory=list)
    median_gbps: Measured | None = None
    floor_gbps: Measured | None = None


@dataclasses.dataclass
class SlowLink:
    """A slow link between two nodes neither of which is slow on its own."""

    a: str
    b: str
    gbps: Measured | None = None


@dataclasses.dataclass
class PairNode:
    node: str
    rank: int | None = None


@dataclasses.dataclass
class PairLink:
    a: str
    b: str
    gbps: Measured | None = None
    ranks: list[int] = dataclasses.field(default_factory=list)
    phase: str | None = None
    time_us: Measured | None = None
    best_time_us: Measured | None = None
    best_gbps: Measured | None = None
    rechecked: bool | None = None


@dataclasses.dataclass
class Pairwise:
    """``--pairwise``: node pairs measured, and the slow nodes and links found."""

    links: list[PairLink] = dataclasses.field(default_factory=list)
    bytes: int | None = None
    iters: int | None = None
    low_fraction: float | None = None
    nodes: list[PairNode] = dataclasses.field(default_factory=list)
    loopback: bool | None = None
    reference_gbps: Measured | None = None
    threshold_gbps: Measured | None = None
    mad_log10: float | None = dataclasses.field(
        default=None, metadata=_doc("spread of the links' log10 bandwidths (median absolute deviation)"))
    slow_nodes: list[SlowNode] = dataclasses.field(default_factory=list)
    slow_links: list[SlowLink] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Straggler:
    """The slowest rank at the plateau sizes, flagged below ``threshold_fraction`` of the median;
    with pairwise links measured, the slowest node by the median of its links (``basis``)."""

    rank: int | None
    busbw: Measured
    median_busbw: Measured
    fraction: float
    flagged: bool
    threshold_fraction: float | None = dataclasses.field(
        default=None, metadata=_doc("the per-rank test's cut-off; none when judged from pairwise links"))
    host: str | None = None
    rank_busbw: list[Measured] = dataclasses.field(default_factory=list)
    basis: str | None = dataclasses.field(default=None, metadata=_doc("'pairwise links' when judged from them"))
    node_median_gbps: dict[str, float] = dataclasses.field(default_factory=dict)
    mad_log10: float | None = None


@dataclasses.dataclass
class NcclBenchDoc(Header):
    """``llmdiag nccl-bench``: the nccl-tests table per collective, plateau, checks."""

    world: BenchWorld
    results: list[BenchRow]
    collectives: list[CollectiveSummary]
    findings: list[Finding] = dataclasses.field(metadata=_doc("the checks: correctness, busbw, straggler, pairwise"))
    spec: BenchSettings | None = None
    avg_busbw: Measured | None = None
    plateau_busbw: Measured | None = None
    out_of_bounds: int | None = None
    expected_busbw: float | None = dataclasses.field(default=None, metadata=_doc("--expect-busbw, GB/s"))
    straggler: Straggler | None = None
    pairwise: Pairwise | None = None
    stopped: BenchStop | None = dataclasses.field(default=None, metadata=_doc("a partial run: why it ended early"))

    @classmethod
    def build(cls, doc: Mapping[str, Any]) -> NcclBenchDoc:
        """The typed document from the dict the benchmark assembles; an unknown key is an error
        (add it here first), so the JSON cannot drift from its schema."""
        d = dict(doc)
        d["world"] = BenchWorld(**d["world"])
        d["results"] = [BenchRow(**{**r, **{p: Placement(**r[p]) for p in ("out_of_place", "in_place")
                                            if r.get(p) is not None}}) for r in d["results"]]
        d["collectives"] = [CollectiveSummary(**c) for c in d["collectives"]]
        d["findings"] = [Finding(**{**f, "evidence": [Evidence(**e) for e in f.get("evidence") or ()]})
                         for f in d["findings"]]
        if d.get("straggler") is not None:
            d["straggler"] = Straggler(**d["straggler"])
        if d.get("spec") is not None:
            d["spec"] = BenchSettings(**d["spec"])
        if d.get("pairwise") is not None:
            pw = d["pairwise"]
            d["pairwise"] = Pairwise(**{
                **pw, "links": [PairLink(**lk) for lk in pw.get("links") or ()],
                "nodes": [PairNode(**n) for n in pw.get("nodes") or ()],
                "slow_nodes": [SlowNode(**{**n, "links": [PeerLink(**lk) for lk in n.get("links") or ()]})
                               for n in pw.get("slow_nodes") or ()],
                "slow_links": [SlowLink(**lk) for lk in pw.get("slow_links") or ()]})
        if d.get("stopped") is not None:
            d["stopped"] = BenchStop(**d["stopped"])
        return cls(**d)


# ---------------------------------------------------------------- analyze-log


@dataclasses.dataclass
class LogFinding:
    kind: str
    severity: Severity
    message: str
    rank: int | None = None
    step: int | None = None
    line: int | None = None
    file: str | None = None
    facts: dict[str, Any] = dataclasses.field(default_factory=dict)
    runbook: str | None = None
    cause: str | None = None
    next_step: str | None = None
    ts: Any = None
    count: int | None = None

    @property
    def status(self) -> Status:
        try:
            return Severity(self.severity).status
        except ValueError:
            return Status.PASS

    @property
    def where(self) -> str:
        return ":".join(str(x) for x in (self.file, self.line) if x is not None)


@dataclasses.dataclass
class StepRow:
    """One training-progress record of the log (a step or, for Megatron, an iteration)."""

    step: int | None = None
    iter: int | None = None
    rank: int | None = None
    loss: Measured | None = None
    lr: Measured | None = None
    grad_norm: Measured | None = None
    loss_scale: Measured | None = None
    step_time_ms: Measured | None = None
    tokens_per_s: Measured | None = None
    samples_per_s: Measured | None = None
    tflops: Measured | None = None
    mfu_pct: Measured | None = None
    memory_gib: Measured | None = None
    line: int | None = None
    file: str | None = None
    epoch: Measured | None = None
    skipped: Measured | None = dataclasses.field(default=None, metadata=_doc("Megatron: skipped iterations"))
    nan_iters: Measured | None = dataclasses.field(default=None, metadata=_doc("Megatron: NaN iterations"))
    ts: Any = dataclasses.field(default=None, metadata=_doc("the line's timestamp, when it has one"))
    data_time_ms: Measured | None = dataclasses.field(default=None, metadata=_doc(
        "the step's wait for its batch (data_time), ms: the rank's own part of a slow step"))

    @property
    def x(self) -> int | None:
        return self.step if self.step is not None else self.iter


@dataclasses.dataclass
class LogMetrics:
    """The training curve's summary. Besides the fields here it carries a first/last pair for each
    progress column the log prints (``lr_first``, ``tflops_per_gpu_max``, ...): the named fields
    are the ones reports show, the rest are read as an open set (``OPEN_KEYS``)."""

    OPEN_KEYS = True
    num_records: int | None = None
    num_steps_with_loss: int | None = None
    num_lines_with_loss: int | None = None
    has_step_number: bool | None = None
    first_step: int | None = None
    last_step: int | None = None
    first_epoch: Measured | None = None
    last_epoch: Measured | None = None
    first_loss: Measured | None = None
    last_loss: Measured | None = None
    loss_last: Measured | None = dataclasses.field(default=None, metadata=_doc("the same as last_loss"))
    loss_min: Measured | None = None
    loss_max: Measured | None = None
    lr_last: Measured | None = None
    grad_norm_last: Measured | None = None
    iter_time_ms_typical: Measured | None = dataclasses.field(
        default=None, metadata=_doc("median step time after the first, ms"))


@dataclasses.dataclass
class ReadProblem:
    """A part of the input that could not be read (a binary file, a damaged archive)."""

    file: str | None = None
    message: str = ""
    kind: str | None = None
    line: int | None = None


@dataclasses.dataclass
class ReadStats:
    bytes: int | None = None
    lines: int | None = None
    candidate_lines: int | None = None
    problems: list[ReadProblem] = dataclasses.field(default_factory=list)
    elapsed_s: float | None = None


@dataclasses.dataclass
class InputWarning:
    """Why a run without a failure is not a PASS."""

    kind: str
    message: str
    count: int | None = None
    file: str | None = None
    line: int | None = None
    text: str | None = None


@dataclasses.dataclass
class RootCause:
    """A finding ranked as a candidate root cause (its summary is the finding's message)."""

    kind: str
    summary: str
    rank: int | None = None
    line: int | None = None
    file: str | None = None
    cause: str | None = None
    runbook: str | None = None


@dataclasses.dataclass
class FrBehind:
    """Every rank entered the collective and none completed it; these are still in an earlier state."""

    state: str
    ranks: list[int]
    others: str


@dataclasses.dataclass
class FrGroup:
    """One process group in the Flight Recorder dumps: its blocked collective and who held it."""

    pg: str
    ranks: list[int]
    seq_id: int
    op: str | None = None
    input_sizes: Any = None
    input_dtypes: Any = None
    last_entered: dict[str, int] = dataclasses.field(default_factory=dict, metadata=_doc(
        "rank -> the newest collective sequence id it entered"))
    entered: list[int] = dataclasses.field(default_factory=list)
    not_entered: list[int] = dataclasses.field(default_factory=list)
    not_completed: list[int] = dataclasses.field(default_factory=list)
    no_dump: list[int] = dataclasses.field(default_factory=list)
    least_progressed: FrBehind | None = None


@dataclasses.dataclass
class FrSide:
    op: str | None
    input_sizes: Any
    input_dtypes: Any
    ranks: list[int]


@dataclasses.dataclass
class FrMismatch:
    """The first collective the ranks of a group called differently (op, sizes or dtypes)."""

    pg: str
    seq_id: int
    sides: list[FrSide]


@dataclasses.dataclass
class FlightRecorder:
    """``analyze-log --fr``: PyTorch Flight Recorder dumps matched across ranks."""

    dir: str
    ranks_dumped: list[int]
    process_groups: list[FrGroup] = dataclasses.field(default_factory=list)
    mismatches: list[FrMismatch] = dataclasses.field(default_factory=list)
    ranks_missing: list[int] = dataclasses.field(default_factory=list)
    partial: bool = False
    suspect_ranks: list[int] = dataclasses.field(default_factory=list)
    reason: str = ""


@dataclasses.dataclass
class LogAnalysisDoc(Header):
    """``llmdiag analyze-log``: findings with the log lines they come from, and the progress."""

    findings: list[LogFinding]
    files: list[str] = dataclasses.field(default_factory=list)
    metrics: LogMetrics = dataclasses.field(default_factory=LogMetrics)
    root_causes: list[RootCause] = dataclasses.field(default_factory=list)
    first_failing_rank: int | None = None
    facts: dict[str, Any] = dataclasses.field(default_factory=dict)
    steps: list[StepRow] = dataclasses.field(default_factory=list)
    steps_total: int | None = None
    warnings: list[InputWarning] = dataclasses.field(default_factory=list, metadata=_doc(
        "why a run without a failure is not a PASS: an empty input, progress records no reader could place"))
    read: ReadStats = dataclasses.field(default_factory=ReadStats)
    node: str | None = dataclasses.field(default=None, metadata=_doc(
        "the host that followed the log (analyze-log --follow); absent when logs were read after the fact"))
    started_at: float | None = dataclasses.field(default=None, metadata=_doc(
        "Unix time the follow started (analyze-log --follow --prometheus-file: one run from start to end)"))
    created_at: float | None = dataclasses.field(default=None, metadata=_doc(
        "Unix time of this document (a followed log's latest batch)"))
    first_reporting_rank: int | None = dataclasses.field(default=None, metadata=_doc(
        "the rank whose collective timeout was reported first"))
    suspect_ranks: list[int] = dataclasses.field(default_factory=list, metadata=_doc(
        "ranks the timeout points at (absent from the collective, or behind the others)"))
    suspect_reason: str | None = None
    ranks_not_in_excerpt: list[int] = dataclasses.field(default_factory=list, metadata=_doc(
        "ranks of the job that the log given does not show"))
    flight_recorder: FlightRecorder | None = dataclasses.field(default=None, metadata=_doc(
        "the Flight Recorder dumps read beside the log or from --fr"))


# ---------------------------------------------------------------- estimate-memory


@dataclasses.dataclass
class MemoryLine:
    name: str
    bytes: int
    formula: str = ""
    inputs: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class PlanIssue:
    check: str
    severity: Literal["fail", "warn"]
    message: str
    fix: str = ""
    runbook: str | None = None


@dataclasses.dataclass
class Suggestion:
    """A changed plan that fits, cheapest first."""

    change: str
    total: int
    verdict: Verdict
    settings: dict[str, Any] = dataclasses.field(default_factory=dict)
    expected_cost: float | None = None
    breakdown: dict[str, int] = dataclasses.field(default_factory=dict)
    plan: dict[str, Any] = dataclasses.field(default_factory=dict)
    headroom: int | None = dataclasses.field(default=None, metadata=_doc("bytes left under the GPU's memory"))
    peak_phase: str | None = None
    cost_terms: dict[str, float] = dataclasses.field(default_factory=dict, metadata=_doc(
        "what the change costs, by term (the sum orders the suggestions)"))
    comm_bytes_per_step: dict[str, int] = dataclasses.field(default_factory=dict, metadata=_doc(
        "bytes each parallel group moves per step under the changed plan"))


@dataclasses.dataclass
class MemoryPlacement:
    """Device bytes (the verdict's) split by who holds them, and the host RAM the plan needs besides."""

    device: int = dataclasses.field(metadata=_doc("bytes on the GPU: allocator_reserved + outside_allocator"))
    allocator_reserved: int = dataclasses.field(metadata=_doc("reserved by PyTorch's caching allocator"))
    outside_allocator: int = dataclasses.field(metadata=_doc(
        "on the GPU outside the allocator: CUDA context, NCCL buffers, managed (paged) memory's working set"))
    host_per_gpu: int = dataclasses.field(metadata=_doc("host RAM per GPU process: CPU offload, paged optimizer state"))
    host_per_node: int = dataclasses.field(metadata=_doc("host_per_gpu x the GPUs of a node"))
    gpus_per_node: int = 1
    host_lines: list[MemoryLine] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class PeakMemory:
    """The phase that peaks on the worst stage, and the three sizes the estimate separates."""

    phase: str | None = None
    allocated: int | None = dataclasses.field(default=None, metadata=_doc("bytes the tensors hold"))
    reserved: int | None = dataclasses.field(default=None, metadata=_doc("bytes the caching allocator holds"))
    device: int | None = dataclasses.field(default=None, metadata=_doc("bytes on the device, context and NCCL included"))
    forward_backward_allocated: int | None = None
    optimizer_step_allocated: int | None = None


@dataclasses.dataclass
class StageMemory:
    """One pipeline stage's peak."""

    stage: int
    layers: int | None = None
    params_per_gpu: int | None = None
    phase: str | None = None
    allocated: int | None = None
    reserved: int | None = None
    device: int | None = None
    outside_allocator: int | None = None
    host: int | None = dataclasses.field(default=None, metadata=_doc("host RAM bytes per GPU"))
    phases: dict[str, int] = dataclasses.field(default_factory=dict, metadata=_doc(
        "allocated bytes at the peak of each phase: forward_backward, optimizer_step"))
    first_step_allocated: int | None = None


@dataclasses.dataclass
class SmallestGpuCount:
    """``estimate-memory --min-gpus``: the fewest GPUs on which some plan fits (without CPU offload)."""

    searched_up_to: int = dataclasses.field(metadata=_doc("the bound of the search (GPUs)"))
    gpus: int | None = dataclasses.field(default=None, metadata=_doc("none: no plan fits up to searched_up_to"))
    plan: Suggestion | None = None


@dataclasses.dataclass
class MemoryEstimateDoc(Header):
    """``llmdiag estimate-memory``: per-GPU memory of a plan by component, against the GPU."""

    breakdown: dict[str, int] = dataclasses.field(metadata=_doc("bytes per GPU by component, and total"))
    verdict: Verdict = dataclasses.field(metadata=_doc("fits, tight, out-of-memory, unknown (no GPU memory) or "
                                                       "invalid-plan (the framework refuses it at launch)"))
    model: dict[str, Any] | None = None
    plan: dict[str, Any] = dataclasses.field(default_factory=dict)
    gpu_memory: int | None = dataclasses.field(default=None, metadata=_doc("bytes of the GPU planned against"))
    gpu_memory_source: str | None = None
    lines: list[MemoryLine] = dataclasses.field(default_factory=list)
    worst_stage: int | None = None
    stage_totals: dict[str, int] = dataclasses.field(default_factory=dict)
    params_total: int | None = None
    oom_when: str | None = None
    headroom: int | None = dataclasses.field(default=None, metadata=_doc("bytes left (negative: short by)"))
    plan_checks: list[PlanIssue] = dataclasses.field(default_factory=list)
    suggestions: list[Suggestion] = dataclasses.field(default_factory=list)
    peak: PeakMemory | None = dataclasses.field(
        default=None, metadata=_doc("the phase that peaks on the worst stage; allocated, reserved and device bytes"))
    stages: list[StageMemory] = dataclasses.field(default_factory=list, metadata=_doc("one entry per pipeline stage"))
    memory: MemoryPlacement | None = dataclasses.field(default=None, metadata=_doc(
        "where the worst stage's bytes live: caching allocator, device outside it, host RAM"))
    warnings: list[str] = dataclasses.field(default_factory=list,
                                            metadata=_doc("inputs read but not used, fits that cannot be judged"))
    smallest_gpu_count: SmallestGpuCount | None = dataclasses.field(default=None, metadata=_doc(
        "--min-gpus: the fewest GPUs on which some plan fits, and that plan"))

    @property
    def parts(self) -> dict[str, int]:
        return {k: v for k, v in self.breakdown.items() if k != "total" and isinstance(v, (int, float))}

    @property
    def total(self) -> int | None:
        t = self.breakdown.get("total")
        return t if t is not None else (sum(self.parts.values()) if self.parts else None)


# ---------------------------------------------------------------- monitor


@dataclasses.dataclass
class Alert:
    rule: str
    severity: AlertSeverity
    message: str
    time: float | None = None
    node: str | None = None
    device: str | None = None
    observed: Any = None
    threshold: Any = None
    unit: str | None = None
    runbook: str | None = None


@dataclasses.dataclass
class Series:
    """A plotted time series: seconds since the monitor started, and the values."""

    t: list[float]
    v: list[Measured | None]


@dataclasses.dataclass
class MonitorSeries:
    """The plotted series by group: each maps a label (gpu0, cpu %, ...) to its series."""

    gpu_util: dict[str, Series] = dataclasses.field(default_factory=dict)
    gpu_mem: dict[str, Series] = dataclasses.field(default_factory=dict)
    gpu_temp: dict[str, Series] = dataclasses.field(default_factory=dict)
    gpu_power: dict[str, Series] = dataclasses.field(default_factory=dict)
    host: dict[str, Series] = dataclasses.field(default_factory=dict)

    def groups(self) -> dict[str, dict[str, Series]]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


@dataclasses.dataclass
class Sample:
    time: float | None = None
    elapsed_s: float | None = None
    host: dict[str, Any] = dataclasses.field(default_factory=dict)
    gpus: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    gpu_error: str | None = dataclasses.field(default=None, metadata=_doc("why the GPUs could not be read"))


@dataclasses.dataclass
class Stat:
    """One reading's statistics over the run."""

    mean: Measured | None = None
    max: Measured | None = None
    min: Measured | None = None


@dataclasses.dataclass
class Overhead:
    """What sampling cost the node."""

    round_ms_mean: float | None = None
    round_ms_max: float | None = None
    cpu_ms_per_sample: float | None = None
    cpu_pct_of_one_core: float | None = None


@dataclasses.dataclass
class TimelineFile:
    path: str | None = None
    rows: int | None = None


@dataclasses.dataclass
class MonitorDoc(Header):
    """``llmdiag monitor``: samples of GPUs and host, alerts by rule, the latest sample."""

    node: str
    samples: int
    gpu_count: int
    alerts: list[Alert]
    created_at: float | None = None
    started_at: float | None = dataclasses.field(default=None, metadata=_doc("Unix time: series t=0"))
    finished_at: float | None = None
    interval_s: float | None = None
    gpu_note: str | None = None
    driver: str | None = None
    rules: list[str] = dataclasses.field(default_factory=list)
    thresholds: dict[str, Any] = dataclasses.field(default_factory=dict)
    alerts_total: int | None = None
    alerts_by_rule: dict[str, int] = dataclasses.field(default_factory=dict)
    active_alerts: list[Alert] = dataclasses.field(default_factory=list)
    latest: Sample | None = None
    stop_reason: str | None = None
    stats: dict[str, dict[str, Stat]] = dataclasses.field(default_factory=dict, metadata=_doc(
        "device (host, gpu0, ...) -> reading -> mean, max, min"))
    series: MonitorSeries = dataclasses.field(default_factory=MonitorSeries)
    overhead: Overhead = dataclasses.field(default_factory=Overhead)
    on_alert: dict[str, int] | None = dataclasses.field(default=None, metadata=_doc("--on-alert: sent, failed, dropped"))
    timeline: TimelineFile | None = dataclasses.field(default=None, metadata=_doc("--timeline: path, rows"))


# ---------------------------------------------------------------- anything else


@dataclasses.dataclass
class GenericDoc(Header):
    """A document of no kind typed here: the header where it has one, and the whole document as
    it came in ``content`` (its keys are its own: generic renderers show them as they are)."""

    created_at: float | None = None
    summary: str | None = None
    run: str | None = None
    content: dict[str, Any] = dataclasses.field(default_factory=dict)


# ---------------------------------------------------------------- the table of kinds

#: kind -> its document class (``generic``: any document with the header)
KINDS: dict[str, type] = {
    "cluster": ClusterDoc,
    "nccl-bench": NcclBenchDoc,
    "log-analysis": LogAnalysisDoc,
    "memory-estimate": MemoryEstimateDoc,
    "monitor": MonitorDoc,
    "generic": GenericDoc,
}


def to_dict(doc: Any) -> dict[str, Any]:
    """A typed document as the plain dict the renderers and ``emit`` take (JSON-ready)."""
    return dataclasses.asdict(doc)


class DocumentError(ValueError):
    """A document that does not match its type: an unknown key, a missing required field, a word
    outside its vocabulary, or a ``schema_version`` of another major. The message is one line."""


def version(doc: Mapping[str, Any]) -> tuple[int, int] | None:
    """``schema_version`` as (major, minor); the integer 1 of analyze-log before 1.0 was one
    format for all kinds reads as (1, 0). None when it is neither."""
    v = doc.get("schema_version")
    if isinstance(v, int) and not isinstance(v, bool):
        return (v, 0)
    if isinstance(v, str) and re.match(SCHEMA_VERSION_PATTERN, v):
        major, minor = v.split(".")
        return (int(major), int(minor))
    return None


def problems(doc: Mapping[str, Any]) -> list[str]:
    """What keeps ``doc`` from being a document of its kind under the compatibility rule: an
    unsupported version, unknown keys (unless the document is of a newer minor version, whose
    additions this reader does not know), missing required fields, unknown enum words."""
    found: list[str] = []
    _read(doc, found)
    return found


def _read(doc: Mapping[str, Any], found: list[str]) -> Any:
    cls = KINDS.get(str(doc.get("kind")), GenericDoc)
    ours, theirs = version({"schema_version": SCHEMA_VERSION}), version(doc)
    if theirs is None:
        found.append(f"schema_version {doc.get('schema_version')!r} is not MAJOR.MINOR")
    elif theirs[0] != ours[0]:
        found.append(f"schema_version {doc.get('schema_version')} is not one this llmdiag reads ({SCHEMA_VERSION})")
    newer = theirs is not None and theirs > ours
    local: list[str] = []
    # generic documents carry keys of their own; a newer minor adds keys this reader ignores
    generic = cls is GenericDoc
    typed = dataschema.read(cls, {**doc, "schema_version": str(doc.get("schema_version"))}, local,
                            open_keys=generic)
    found.extend(p for p in local if not (newer and p.endswith(": unknown key")))
    if generic:
        typed.content = dict(doc)
    return typed


def read(doc: Mapping[str, Any], *, strict: bool | None = None) -> Any:
    """The typed document of ``doc`` (its ``kind`` picks the class). ``strict`` (by default when
    $LLMDIAG_STRICT_DOCUMENTS is 1, as in the tests): any of :func:`problems` raises
    DocumentError; otherwise what is known is read and the rest is ignored (a renderer shows what
    it can)."""
    strict = os.environ.get(STRICT_ENV) == "1" if strict is None else strict
    found: list[str] = []
    typed = _read(doc, found)
    if strict and found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise DocumentError(f"{doc.get('kind')} document: {found[0]}{more}")
    return typed


def read_part(cls: type, data: Mapping[str, Any]) -> Any:
    """``data`` read as ``cls``, one part of a document (a progress record's world or row before
    the document exists): what is known is read, the rest ignored."""
    return dataschema.read(cls, data)


def schema(kind: str) -> dict[str, Any]:
    cls = KINDS[kind]
    out = dataschema.json_schema(cls, title=f"llmdiag report document, kind {kind}",
                                 schema_id=f"https://llmdiag.invalid/schemas/{kind}.json")
    out["properties"]["kind"] = {"const": kind} if kind != "generic" else {"type": "string"}
    return out


def schema_text(kind: str) -> str:
    return json.dumps(schema(kind), indent=2, ensure_ascii=False) + "\n"


def shipped_schema_dir() -> Path:
    return Path(__file__).resolve().parent / "schemas"


def main(argv: list[str]) -> int:
    """``python -m llmdiag.documents DIR...``: write every kind's schema into each DIR."""
    for d in argv or [str(shipped_schema_dir())]:
        Path(d).mkdir(parents=True, exist_ok=True)
        for kind in KINDS:
            if kind != "generic":
                (Path(d) / f"{kind}.json").write_text(schema_text(kind), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
