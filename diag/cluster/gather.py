"""Node reports to rank 0 over the store, and node report files for ``report merge``.

A node report travels as zlib-compressed JSON under ``report/<rank>``. Rank 0 collects the
reports of every joined node until its deadline, giving up early on a node whose heartbeat
stopped (it *died*); a node that is still beating but never delivered is *hung*.

``--node-report-dir`` makes every node also write its report to ``DIR/node-<rank>.json``
(``DIR/node-<host>.json`` outside cluster mode; atomically: a temporary file in the same
directory, then ``os.replace``), so that when the network is the fault ``llmdiag report merge
DIR`` can still build the cluster report. Merge reads ``DIR/*.json`` and ``node-*.json`` in
the directories below (one per pod in the Kubernetes recipe); of two reports of one node rank
the newer is used and the older named.
"""

from __future__ import annotations

import json
import os
import time
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from llmdiag.cluster.rendezvous import StoreSession
from llmdiag.util.files import write_atomic


ARRIVED = "report/arrived"  # "3,7,1," : ranks whose report is in the store, in arrival order
FETCH_BATCH = 256


def send_report(session: StoreSession, doc: dict[str, Any]) -> int:
    """Put this node's report into the store; returns the payload size in bytes."""
    payload = zlib.compress(json.dumps(doc, separators=(",", ":"), default=str).encode(), 6)
    session.store.set(f"report/{session.rank}", payload)
    session.store.append(ARRIVED, f"{session.rank},")
    return len(payload)


def _arrived(session: StoreSession) -> set[int]:
    if not session.has(ARRIVED):
        return set()
    raw = session.store.get(ARRIVED).decode()
    return {int(x) for x in raw.split(",") if x.strip().isdigit()}


def collect_reports(session: StoreSession, ranks: Iterable[int], deadline: float,
                    poll: float = 0.05) -> tuple[dict[int, dict], dict[int, str]]:
    """Rank 0: (rank → report doc, rank → "died"/"hung" with why) for the joined ``ranks``.

    One read of the arrival list per poll tells which reports are in; those are fetched in
    batches (``multi_get``), so the store sees O(1) requests per poll however many nodes are
    still pending, not one ``check`` per pending node.
    """
    pending = set(ranks)
    docs: dict[int, dict] = {}
    lost: dict[int, str] = {}
    next_live = time.monotonic() + 1.0
    poll_max = max(0.2, session.poll_max)
    while pending:
        ready = sorted(pending & _arrived(session))
        for i in range(0, len(ready), FETCH_BATCH):
            batch = ready[i:i + FETCH_BATCH]
            for r, payload in zip(batch, session.store.multi_get([f"report/{r}" for r in batch])):
                docs[r] = json.loads(zlib.decompress(payload))
                pending.discard(r)
        if not pending:
            break
        now = time.monotonic()
        if now >= next_live:
            next_live = now + 1.0
            for r in sorted(pending):
                if r != session.rank and not session.alive(r):
                    age = session.last_beat_age(r)
                    lost[r] = (_died(session, r) if session.known_dead(r) else
                               f"died: no heartbeat for {age:.0f} s" if age is not None else "died")
                    pending.discard(r)
        if now >= deadline:
            # a node known dead stays "died" even when rank 0 came here late (a loaded rank 0
            # reached the gather at its deadline and called a cut-off host "hung")
            for r in pending:
                lost[r] = _died(session, r) if session.known_dead(r) else \
                    "hung: still alive but sent no report before the deadline"
            break
        time.sleep(min(poll, max(0.0, deadline - now)))
        poll = min(poll * 1.5, poll_max)
    return docs, lost


def _died(session: StoreSession, rank: int) -> str:
    return f"died: {session.dead_why.get(rank) or 'its process ended without finishing'}"


def write_node_file(directory: str | os.PathLike[str], doc: dict[str, Any]) -> Path:
    """Write ``doc`` (a node report) to ``DIR/node-<rank>.json`` atomically; returns the path."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    rank = doc.get("node_rank")
    name = f"node-{rank:05d}.json" if isinstance(rank, int) else f"node-{_safe(doc.get('node', 'unknown'))}.json"
    target = d / name
    write_atomic(target, json.dumps(doc, indent=1, default=str))
    return target


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in str(name))[:64]


def _malformed(doc: dict) -> str | None:
    """Why a JSON object cannot be a node report (a hand-edited or foreign file), or None."""
    from llmdiag.result import NodeReport

    if not isinstance(doc.get("node"), str):
        return "node is not a string"
    rank = doc.get("node_rank")
    if rank is not None and (isinstance(rank, bool) or not isinstance(rank, int)):
        return "node_rank is not an integer"
    if not isinstance(doc.get("results"), list) or not all(isinstance(r, dict) for r in doc["results"]):
        return "results is not a list of objects"
    meta = doc.get("meta")
    if meta is not None and (not isinstance(meta, dict) or not isinstance(meta.get("world") or {}, dict)):
        return "meta is not an object"
    try:
        int((meta or {}).get("world", {}).get("nnodes") or 0)
        NodeReport.from_dict(doc)
    except Exception as exc:  # noqa: BLE001 - untrusted input: any failure means "not a report"
        return f"{type(exc).__name__}: {exc}"
    return None


def node_files(directory: str | os.PathLike[str]) -> list[Path]:
    """``DIR/*.json``, and ``node-*.json`` in every directory below (per-pod directories), sorted;
    symlinked directories are not followed (a loop, or someone else's tree)."""
    top = Path(directory)
    out = [p for p in top.glob("*.json") if p.is_file()]
    for root, dirs, files in os.walk(top, followlinks=False):
        dirs.sort()
        if Path(root) != top:
            out += [Path(root) / f for f in sorted(files) if f.startswith("node-") and f.endswith(".json")]
    return sorted(out)


def read_node_files(directory: str | os.PathLike[str]) -> tuple[list[dict], list[str]]:
    """(node report docs, problems) from :func:`node_files`; unreadable files are problems, not errors."""
    top = Path(directory)
    docs: list[tuple[str, dict]] = []
    problems: list[str] = []
    for p in node_files(top):
        name = str(p.relative_to(top))
        try:
            doc = json.loads(p.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            problems.append(f"{name}: not readable JSON ({exc})")
            continue
        if not isinstance(doc, dict) or "results" not in doc or "node" not in doc:
            problems.append(f"{name}: not an llmdiag node report")
            continue
        why = _malformed(doc)
        if why:
            problems.append(f"{name}: not an llmdiag node report ({why})")
            continue
        docs.append((name, doc))
    return _newest_per_rank(docs, problems), problems


def _newest_per_rank(docs: list[tuple[str, dict]], problems: list[str]) -> list[dict]:
    """One report per node rank: a pod restarted under a new name leaves two; the newer counts."""
    by_rank: dict[int, list[tuple[str, dict]]] = {}
    out: list[dict] = []
    for name, doc in docs:
        if isinstance(doc.get("node_rank"), int):
            by_rank.setdefault(doc["node_rank"], []).append((name, doc))
        else:
            out.append(doc)
    for rank, group in sorted(by_rank.items()):
        group.sort(key=lambda nd: float(nd[1].get("finished_at") or nd[1].get("started_at") or 0.0), reverse=True)
        (keep, doc), older = group[0], group[1:]
        out.append(doc)
        for name, _ in older:
            problems.append(f"{name}: an older report of node rank {rank} ({keep} is newer and is used)")
    return out
