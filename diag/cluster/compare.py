"""Cross-node consistency: for each fact, the majority value and the nodes that differ.

A fact is one comparable value per node (torch version, GPU count, ``NCCL_IB_HCA``, the MTU
of the job's interface). The *majority* is the most common value; ties go to the value rank 0
has (the node the job's rendezvous lives on), then to the lowest node. Every other value is
an *outlier group*, reported as "node-7: torch 2.4.0+cu121, 15 other nodes: 2.5.1+cu124".

A node that did not collect a fact (its probe did not run) is left out of that fact's
comparison; a fact collected as ``None`` ("not installed", "unset") takes part.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

MISSING = object()


@dataclasses.dataclass(frozen=True)
class FactSpec:
    """How to judge a difference in one fact: label, severity and runbook."""

    key: str
    label: str
    status: str = "fail"
    runbook: str = "cluster-version-mismatch"
    remediation: str = ""


@dataclasses.dataclass(frozen=True)
class Diff:
    """One fact on which the nodes disagree."""

    spec: FactSpec
    majority: Any
    majority_nodes: tuple[str, ...]
    outliers: tuple[tuple[Any, tuple[str, ...]], ...]  # (value, nodes), largest group first

    def outlier_nodes(self) -> list[str]:
        return [n for _, nodes in self.outliers for n in nodes]

    def sentence(self, value: Any, nodes: Sequence[str]) -> str:
        others = len(self.majority_nodes)
        return (f"{node_list(nodes)}: {self.spec.label} {show(value)}, "
                f"{others} other node{'s' if others != 1 else ''}: {show(self.majority)}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.spec.key,
            "label": self.spec.label,
            "status": self.spec.status,
            "majority": self.majority,
            "majority_count": len(self.majority_nodes),
            "outliers": [{"value": v, "nodes": list(nodes)} for v, nodes in self.outliers],
            "message": "; ".join(self.sentence(v, nodes) for v, nodes in self.outliers),
        }


def show(value: Any) -> str:
    if value is None:
        return "(none)"
    if isinstance(value, (list, tuple)):
        return ", ".join(show(v) for v in value) or "(empty)"
    return str(value)


def node_list(nodes: Sequence[str], limit: int = 6) -> str:
    """``node-1, node-4`` or ``node-1, node-2, ... and 12 more`` (reports stay short at scale)."""
    nodes = list(nodes)
    if len(nodes) <= limit:
        return ", ".join(nodes)
    return ", ".join(nodes[:limit - 1]) + f" and {len(nodes) - limit + 1} more"


def _hashable(value: Any) -> Any:
    try:
        hash(value)
        return value
    except TypeError:
        return json.dumps(value, sort_keys=True, default=str)


def majority(values: Mapping[str, Any], order: Sequence[str]) -> tuple[Any, list[str], list[tuple[Any, list[str]]]]:
    """(majority value, its nodes, [(other value, nodes), ...]) for node → value.

    ``order`` ranks the nodes (rank 0 first): it breaks ties and orders the node lists.
    """
    pos = {n: i for i, n in enumerate(order)}
    ranked = sorted(values, key=lambda n: (pos.get(n, len(pos)), n))
    groups: dict[Any, list[str]] = {}
    originals: dict[Any, Any] = {}
    for n in ranked:
        h = _hashable(values[n])
        groups.setdefault(h, []).append(n)
        originals.setdefault(h, values[n])
    # largest group first; on a tie the group holding the earliest node (rank 0) wins
    keyed = sorted(groups.items(), key=lambda kv: (-len(kv[1]), pos.get(kv[1][0], len(pos))))
    (top, top_nodes), rest = keyed[0], keyed[1:]
    return originals[top], top_nodes, [(originals[h], nodes) for h, nodes in rest]


def diff_facts(facts: Mapping[str, Mapping[str, Any]], specs: Sequence[FactSpec],
               order: Sequence[str]) -> list[Diff]:
    """Diffs for ``facts`` (node → {key: value}) on the keys of ``specs``, in spec order."""
    out = []
    for spec in specs:
        values = {node: f[spec.key] for node, f in facts.items() if spec.key in f}
        if len(values) < 2:
            continue
        top, top_nodes, rest = majority(values, order)
        if rest:
            out.append(Diff(spec, top, tuple(top_nodes), tuple((v, tuple(n)) for v, n in rest)))
    return out
