"""Results of checks: frozen, serialisable values that cross process and node boundaries.

A probe returns :class:`Result` values; a node's results form a :class:`NodeReport`; rank 0
(or ``llmdiag report merge``) combines node reports into a :class:`ClusterReport`.
Everything here converts to and from plain dicts (``to_dict`` / ``from_dict``), which is what
nodes exchange and what the renderers consume. The JSON layout is versioned by
:data:`SCHEMA_VERSION`; ``docs/report-schema.json`` documents it.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import time
from collections.abc import Mapping
from typing import Any

from llmdiag.documents import SCHEMA_VERSION  # noqa: F401 - re-exported: the producers import it from here
from llmdiag.vocab import Status


def _plain(value: Any) -> Any:
    """Turn a value into JSON-compatible data (tuples to lists, enums to values, NaN to str)."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return str(value)
        return value
    if isinstance(value, (str, int, bool)) or value is None:
        return value
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = list(value)
        if isinstance(value, (set, frozenset)):
            items = sorted(items, key=str)
        return [_plain(v) for v in items]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _plain(dataclasses.asdict(value))
    return str(value)


@dataclasses.dataclass(frozen=True)
class Evidence:
    """One observed value, what was expected, and the unit of both ("MiB", "GB/s", "")."""

    name: str
    observed: Any
    expected: Any = None
    unit: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "observed": _plain(self.observed),
            "expected": _plain(self.expected),
            "unit": self.unit,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Evidence:
        return cls(d["name"], d.get("observed"), d.get("expected"), d.get("unit", ""))


@dataclasses.dataclass(frozen=True)
class Result:
    """The outcome of one check of one probe on one node.

    Contract (enforced here, so a plugin cannot produce a result a reader cannot act on):
    - a skip carries its reason in ``summary``;
    - a warn or fail carries a ``remediation`` (one actionable sentence or command);
    - every non-pass result names a ``runbook`` id (a file in ``runbooks/``).

    ``data`` holds machine-readable facts (versions, sizes) that cluster aggregation compares
    across nodes; renderers may ignore it.
    """

    probe: str
    check: str
    node: str
    status: Status
    summary: str
    evidence: tuple[Evidence, ...] = ()
    remediation: str | None = None
    runbook: str | None = None
    data: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    duration_s: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", Status(self.status))
        object.__setattr__(self, "evidence", tuple(self.evidence))
        for field in ("probe", "check", "node"):
            if not getattr(self, field):
                raise ValueError(f"result field {field!r} must not be empty")
        if not self.summary:
            raise ValueError(f"{self.probe}/{self.check}: a result needs a summary (a skip needs its reason)")
        if self.status in (Status.WARN, Status.FAIL) and not self.remediation:
            raise ValueError(f"{self.probe}/{self.check}: a {self.status.value} result needs a remediation")
        if self.status is not Status.PASS and not self.runbook:
            raise ValueError(f"{self.probe}/{self.check}: a {self.status.value} result needs a runbook id")

    def replace(self, **changes: Any) -> Result:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return {
            "probe": self.probe,
            "check": self.check,
            "node": self.node,
            "status": self.status.value,
            "summary": self.summary,
            "evidence": [e.to_dict() for e in self.evidence],
            "remediation": self.remediation,
            "runbook": self.runbook,
            "data": _plain(self.data),
            "duration_s": None if self.duration_s is None else round(self.duration_s, 4),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Result:
        return cls(
            probe=d["probe"],
            check=d["check"],
            node=d["node"],
            status=Status(d["status"]),
            summary=d["summary"],
            evidence=tuple(Evidence.from_dict(e) for e in d.get("evidence") or ()),
            remediation=d.get("remediation"),
            runbook=d.get("runbook"),
            data=dict(d.get("data") or {}),
            duration_s=d.get("duration_s"),
        )


@dataclasses.dataclass(frozen=True)
class NodeReport:
    """Everything one node found: its results plus identity (hostname, node rank)."""

    node: str
    results: tuple[Result, ...]
    node_rank: int | None = None
    started_at: float = dataclasses.field(default_factory=time.time)
    finished_at: float | None = None
    meta: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "results", tuple(self.results))

    @property
    def status(self) -> Status:
        return Status.worst(r.status for r in self.results)

    def facts(self, probe: str) -> dict[str, Any]:
        """Merged ``data`` of all results of ``probe`` on this node."""
        merged: dict[str, Any] = {}
        for r in self.results:
            if r.probe == probe:
                merged.update(r.data)
        return merged

    def to_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "node_rank": self.node_rank,
            "status": self.status.value,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "meta": _plain(self.meta),
            "results": [r.to_dict() for r in self.results],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> NodeReport:
        return cls(
            node=d["node"],
            node_rank=d.get("node_rank"),
            started_at=d.get("started_at") or 0.0,
            finished_at=d.get("finished_at"),
            meta=dict(d.get("meta") or {}),
            results=tuple(Result.from_dict(r) for r in d.get("results") or ()),
        )


@dataclasses.dataclass(frozen=True)
class ClusterReport:
    """The cluster health report: nodes × checks, plus cluster-wide results and sections.

    ``cluster_results`` are checks about the cluster as a whole (cross-node consistency,
    reachability); their ``node`` is the node they blame or ``"cluster"``.
    ``missing_nodes`` names expected nodes that never reported. ``sections`` carries
    structured extras for renderers (consistency diffs, port matrix, bandwidth tables).
    ``duration_s`` is the run's length on one monotonic clock (rank 0's, or the one node's):
    never a difference of wall clocks of different nodes, which may be skewed.
    """

    command: str
    nodes: tuple[NodeReport, ...]
    cluster_results: tuple[Result, ...] = ()
    missing_nodes: tuple[str, ...] = ()
    sections: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    created_at: float = dataclasses.field(default_factory=time.time)
    strict: bool = False
    duration_s: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "nodes", tuple(self.nodes))
        object.__setattr__(self, "cluster_results", tuple(self.cluster_results))
        object.__setattr__(self, "missing_nodes", tuple(self.missing_nodes))

    @property
    def results(self) -> tuple[Result, ...]:
        out: list[Result] = []
        for n in self.nodes:
            out.extend(n.results)
        out.extend(self.cluster_results)
        return tuple(out)

    @property
    def status(self) -> Status:
        st = Status.worst(r.status for r in self.results)
        if self.missing_nodes:
            st = Status.FAIL
        return st

    def counts(self) -> dict[str, int]:
        counts = {s.value: 0 for s in Status}
        for r in self.results:
            counts[r.status.value] += 1
        return counts

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "command": self.command,
            "kind": "cluster",
            "status": self.status.value,
            "created_at": self.created_at,
            "strict": self.strict,
            "duration_s": None if self.duration_s is None else round(self.duration_s, 3),
            "counts": self.counts(),
            "nodes": [
                {k: v for k, v in n.to_dict().items() if k != "results"} for n in self.nodes
            ],
            "missing_nodes": list(self.missing_nodes),
            "results": [dict(r.to_dict(), scope="node") for n in self.nodes for r in n.results]
            + [dict(r.to_dict(), scope="cluster") for r in self.cluster_results],
            "sections": _plain(self.sections),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ClusterReport:
        """Rebuild from ``to_dict`` output (results are regrouped by node)."""
        node_meta = {n["node"]: n for n in d.get("nodes") or ()}
        by_node: dict[str, list[Result]] = {name: [] for name in node_meta}
        cluster: list[Result] = []
        for rd in d.get("results") or ():
            r = Result.from_dict(rd)
            if rd.get("scope", "node") == "node" and r.node in by_node:
                by_node[r.node].append(r)
            else:
                cluster.append(r)
        nodes = []
        for name, meta in node_meta.items():
            nodes.append(
                NodeReport(
                    node=name,
                    node_rank=meta.get("node_rank"),
                    started_at=meta.get("started_at") or 0.0,
                    finished_at=meta.get("finished_at"),
                    meta=dict(meta.get("meta") or {}),
                    results=tuple(by_node[name]),
                )
            )
        return cls(
            command=d.get("command", "preflight"),
            nodes=tuple(nodes),
            cluster_results=tuple(cluster),
            missing_nodes=tuple(d.get("missing_nodes") or ()),
            sections=dict(d.get("sections") or {}),
            created_at=d.get("created_at") or time.time(),
            strict=bool(d.get("strict", False)),
            duration_s=d.get("duration_s") if isinstance(d.get("duration_s"), (int, float)) else None,
        )


def to_plain(value: Any) -> Any:
    """Public helper: JSON-compatible copy of ``value`` (used by other report kinds)."""
    return _plain(value)
