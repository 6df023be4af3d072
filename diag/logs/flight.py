"""PyTorch Flight Recorder dumps: which rank never entered, or never finished, the collective that blocked.

With ``TORCH_FR_BUFFER_SIZE`` set, every process group records its last collectives (NCCL, and
gloo since torch 2.9); on a timeout the dumps are written one per rank, as pickles named
``<TORCH_FR_DUMP_TEMP_FILE prefix><rank>`` (``torch._C._distributed_c10d._dump_fr_trace()``
returns the same bytes). A dump holds ``entries`` (one per collective: ``process_group``,
``collective_seq_id``, ``profiling_name`` such as ``nccl:all_reduce``, ``input_sizes``,
``input_dtypes``, ``state`` scheduled/started/completed), ``pg_config`` (each group's ranks)
and ``pg_status`` (last enqueued / started / completed sequence id per group).

:func:`read_dir` loads the dumps of a directory (never executing anything: only plain values
are unpickled); :func:`analyze` matches collectives across ranks by process group and sequence
id and returns what blocked. Partial dumps (some ranks missing) are said, not guessed around.
"""

from __future__ import annotations

import io
import os
import pickle
import re
from collections import defaultdict

#: a dump file: any prefix, then the rank number at the end of the name
_RANK_AT_END = re.compile(r"^(?P<prefix>.*?)(?P<rank>\d+)$")
MAX_DUMP_BYTES = 256 << 20


class FlightRecorderError(ValueError):
    pass


class _PlainUnpickler(pickle.Unpickler):
    """Only dicts, lists, tuples, strings and numbers: a dump never needs a class."""

    def find_class(self, module, name):  # noqa: D401 - pickle's hook
        raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a Flight Recorder dump")


def load_dump(path: str) -> dict:
    if os.path.getsize(path) > MAX_DUMP_BYTES:
        raise FlightRecorderError(f"{path}: larger than {MAX_DUMP_BYTES >> 20} MiB")
    with open(path, "rb") as fh:
        data = fh.read()
    try:
        dump = _PlainUnpickler(io.BytesIO(data)).load()
    except Exception as exc:  # noqa: BLE001 - any malformed pickle is one clear problem
        raise FlightRecorderError(f"{path}: not a Flight Recorder dump ({type(exc).__name__}: {exc})") from None
    if not isinstance(dump, dict) or not isinstance(dump.get("entries"), list):
        raise FlightRecorderError(f"{path}: not a Flight Recorder dump (no 'entries' list)")
    return dump


def find_dumps(directory: str) -> tuple[str, dict[int, str]]:
    """(prefix, rank -> file) of the dumps in ``directory``: the most common name prefix wins."""
    groups: dict[str, dict[int, str]] = defaultdict(dict)
    for name in sorted(os.listdir(directory)):
        full = os.path.join(directory, name)
        m = _RANK_AT_END.match(name)
        if m and os.path.isfile(full):
            groups[m["prefix"]][int(m["rank"])] = full
    if not groups:
        return "", {}
    prefix = max(groups, key=lambda p: (len(groups[p]), p))
    return prefix, groups[prefix]


def read_dir(directory: str) -> tuple[dict[int, dict], list[dict]]:
    """rank -> dump of every readable dump in ``directory``, and the problems met."""
    problems: list[dict] = []
    _prefix, files = find_dumps(directory)
    dumps: dict[int, dict] = {}
    for rank, path in files.items():
        try:
            dumps[rank] = load_dump(path)
        except (OSError, FlightRecorderError) as exc:
            problems.append({"file": path, "kind": "flight-recorder", "line": None, "message": str(exc)})
    return dumps, problems


def _op(entry: dict) -> str:
    name = str(entry.get("profiling_name") or "?")
    return name.split(":", 1)[-1]


def _pg_key(entry: dict) -> str:
    pg = entry.get("process_group")
    if isinstance(pg, (list, tuple)) and pg:
        return str(pg[1] or pg[0]) if len(pg) > 1 else str(pg[0])
    return str(entry.get("pg_id", "0"))


def _pg_ranks(dump: dict, pg: str, pg_id: str) -> list[int] | None:
    cfg = dump.get("pg_config") or {}
    only = len(cfg) == 1  # one group (the default one, whose name may be empty): it is this one
    for key, val in cfg.items():
        if not isinstance(val, dict):
            continue
        if only or key in (pg, pg_id) or val.get("desc") == pg or val.get("name") in (pg, pg_id):
            ranks = val.get("ranks")
            if isinstance(ranks, str):
                ranks = [int(x) for x in re.findall(r"\d+", ranks)]
            if isinstance(ranks, list):
                return [int(r) for r in ranks]
    return None


def analyze(dumps: dict[int, dict], world_size: int | None = None) -> dict:
    """Match the ranks' collectives by (process group, sequence id); name the blocked one and who held it."""
    out: dict = {"ranks_dumped": sorted(dumps), "process_groups": [], "mismatches": []}
    # (pg) -> rank -> seq -> entry
    table: dict[str, dict[int, dict[int, dict]]] = defaultdict(lambda: defaultdict(dict))
    members: dict[str, list[int]] = {}
    for rank, dump in dumps.items():
        for e in dump["entries"]:
            if not isinstance(e, dict) or e.get("is_p2p"):
                continue
            seq = e.get("collective_seq_id", e.get("seq_id"))  # "seq_id" in dumps before torch 2.4
            if not isinstance(seq, int):
                continue
            pg = _pg_key(e)
            table[pg][rank][seq] = e
            if pg not in members:
                ranks = _pg_ranks(dump, pg, str(e.get("pg_id", "")))
                if ranks:
                    members[pg] = ranks
    expected = set(range(world_size)) if world_size else set()
    for ranks in members.values():
        expected |= set(ranks)
    missing = sorted(expected - set(dumps))
    out["ranks_missing"] = missing
    out["partial"] = bool(missing)
    for pg, by_rank in sorted(table.items()):
        last = {r: max(seqs) for r, seqs in by_rank.items() if seqs}
        if not last:
            continue
        top = max(last.values())
        completed = {}
        for r in by_rank:
            status = ((dumps[r].get("pg_status") or {}).get(str(next(iter(by_rank[r].values())).get("pg_id", "")))
                      or {})
            done = status.get("last_completed_collective")
            newest_done = (by_rank[r].get(done) or {}).get("state") == "completed"
            if isinstance(done, int) and done >= last.get(r, -1) and not newest_done:
                # pg_status counts a retired work as completed, and a work that timed out is retired too:
                # the rank's newest collective counts as completed only when its entry says so (NCCL's
                # states; gloo's stay "scheduled"). Dumps taken around a timeout differ in that alone.
                done = last.get(r, 0) - 1
            states = [q for q, e in by_rank[r].items() if e.get("state") == "completed"]
            completed[r] = max([x for x in (done, max(states) if states else None) if isinstance(x, int)], default=-1)
        not_entered = sorted(r for r, q in last.items() if q < top)
        # the blocked collective: the first one some rank has not entered, else the newest one
        blocking = min((q + 1 for q in last.values() if q < top), default=top)
        entered = {r: by_rank[r][blocking] for r in by_rank if blocking in by_rank[r]}
        not_completed = sorted(r for r in entered if completed.get(r, -1) < blocking)
        sample = next(iter(entered.values()), None)
        pg_out = {
            "pg": pg, "ranks": members.get(pg, sorted(by_rank)), "seq_id": blocking,
            "op": _op(sample) if sample else None,
            "input_sizes": sample.get("input_sizes") if sample else None,
            "input_dtypes": sample.get("input_dtypes") if sample else None,
            "last_entered": {str(r): q for r, q in sorted(last.items())},
            "entered": sorted(entered), "not_entered": not_entered, "not_completed": not_completed,
            "no_dump": sorted(r for r in members.get(pg, []) if r not in dumps),
        }
        # all entered, none completed: a rank whose kernel never started holds the others (NCCL states)
        states = {r: e.get("state") for r, e in entered.items()}
        order = {"scheduled": 0, "started": 1, "completed": 2}
        if len(set(states.values())) > 1 and all(s in order for s in states.values()):
            low = min(states.values(), key=order.get)
            pg_out["least_progressed"] = {
                "state": low, "ranks": sorted(r for r, s in states.items() if s == low),
                "others": "/".join(sorted({s for s in states.values() if s != low}, key=order.get))}
        out["process_groups"].append(pg_out)
        for q in sorted({q for seqs in by_rank.values() for q in seqs}):
            sides: dict[tuple, list[int]] = defaultdict(list)
            for r, seqs in by_rank.items():
                e = seqs.get(q)
                if e is not None:
                    sides[(_op(e), repr(e.get("input_sizes")), repr(e.get("input_dtypes")))].append(r)
            if len(sides) > 1:
                out["mismatches"].append({
                    "pg": pg, "seq_id": q,
                    "sides": [{"op": k[0], "input_sizes": k[1], "input_dtypes": k[2], "ranks": sorted(v)}
                              for k, v in sorted(sides.items(), key=lambda kv: kv[1])]})
                break  # the first divergence explains the rest
    suspects: list[int] = []
    reason = ""
    for g in out["process_groups"]:
        if g["not_entered"]:
            suspects = g["not_entered"]
            reason = (f"rank(s) {suspects} never entered {g['op']} #{g['seq_id']} of process group {g['pg']} "
                      f"(sizes {g['input_sizes']}) that the other ranks were waiting in")
            break
    if not suspects and out["mismatches"]:
        mm = out["mismatches"][0]
        small = min(mm["sides"], key=lambda s: len(s["ranks"]))
        suspects = small["ranks"]
        reason = (f"at collective #{mm['seq_id']} of process group {mm['pg']} the ranks disagree: "
                  + "; ".join(f"rank(s) {s['ranks']} call {s['op']} {s['input_sizes']} {s['input_dtypes']}"
                              for s in mm["sides"]))
    if not suspects:
        for g in out["process_groups"]:
            if g["not_completed"] and len(g["not_completed"]) < len(g["entered"]):
                suspects = g["not_completed"]
                reason = f"rank(s) {suspects} entered {g['op']} #{g['seq_id']} but never completed it"
                break
            behind = g.get("least_progressed")
            if behind:
                suspects = behind["ranks"]
                reason = (f"every rank entered {g['op']} #{g['seq_id']} and none completed it, but rank(s) "
                          f"{suspects} are still '{behind['state']}' while the others are '{behind['others']}'")
                break
    if not suspects and missing:
        reason = (f"no dump from rank(s) {missing} (partial dumps): the ranks that wrote one all reached the same "
                  f"collective, so the missing rank(s) are the first place to look")
        suspects = missing
    out["suspect_ranks"] = suspects
    out["reason"] = reason
    return out


def beside(log_path: str) -> str | None:
    """A Flight Recorder directory next to a log: ``<log>.fr/`` (the reference trainer's)."""
    if log_path == "-" or not os.path.isfile(log_path):
        return None
    d = log_path + ".fr"
    return d if os.path.isdir(d) and find_dumps(d)[1] else None
