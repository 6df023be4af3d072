"""What a progress line is: the one rule both the line-by-line and the bulk path apply.

The per-line path (:class:`~llmdiag.logs.analyzer.LogAnalyzer`) calls :func:`progress_of` and
:func:`timestamp_of` for every candidate line; the bulk path (:mod:`llmdiag.logs.bulk`) learns
a template from a line only if :func:`read_line` makes the same record of it, and checks its
probe lines against :func:`read_line` again, so a template can never read a line differently.
"""

from __future__ import annotations

import re

from llmdiag.logs import prefixes, signatures
from llmdiag.logs.formats import counter_header, fields_of, header_piece, parse_progress
from llmdiag.logs.unwrap import needs_continuation


def may_be_progress(msg: str) -> bool:
    """Cheap gate before the format parsers: every progress format prints a loss (or cross-entropy, or
    perplexity, by those names) or an iteration."""
    return "oss" in msg or "iteration" in msg or "OSS" in msg or "xent" in msg or "ppl" in msg or "erplexity" in msg


#: a "name: number" / "name=number" / "name number" field, for telling a record the readers missed
_NUMERIC_FIELD = re.compile(r"[A-Za-z][\w /()-]{0,40}?\s*[:=]?\s+['\"]?[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf)\b"
                            r"|[A-Za-z][\w/()-]{0,40}[:=]['\"]?[-+]?(?:\d|nan|inf)", re.IGNORECASE)


def looks_like_record(msg: str) -> bool:
    """A line that names a loss among at least three numeric fields: a progress record in a syntax the
    readers do not know (counted, so that a log full of them is not a silent PASS)."""
    return "oss" in msg.lower() and len(_NUMERIC_FIELD.findall(msg)) >= 3


def progress_of(msg: str) -> dict | None:
    """The progress record of a message (prefix already split off), or None."""
    return parse_progress(msg) if may_be_progress(msg) else None


def timestamp_of(pre: prefixes.Prefix) -> float | None:
    """The line's time: from its prefix, else the first timestamp in the message."""
    return pre.ts if pre.ts is not None else prefixes.find_timestamp(pre.message)


def read_line(text: str, file_rank: int | None):
    """``(record, rank, ts)`` of one raw line read on its own, or None when the line is not
    a plain progress line (it starts a wrapped watchdog message or carries a failure signature)."""
    pre = prefixes.split_prefix(text.rstrip("\r\n"))
    rank = pre.rank if pre.rank is not None else file_rank
    msg = pre.message
    if "WorkNCCL(" in msg and needs_continuation(msg):
        return None
    if signatures.match_line(msg):
        return None
    rec = progress_of(msg)
    if rec is not None and rec.get("open"):
        return None  # a record that goes on over the next lines: read line by line (RecordJoiner)
    return rec, rank, timestamp_of(pre)


#: lines a record split over several lines may span (its pieces without a counter of their own)
JOIN_SPAN = 6
#: lines a header record's pieces may span (Composer prints some 30 metrics under its "[batch=N/M]:")
HEADER_SPAN = 200


def header_of(msg: str) -> dict | None:
    """The open record a counter-only line starts (formats.counter_header), behind a cheap gate."""
    # (a logger's columns may stand before it: formats.counter_header reads the end of a longer line)
    return counter_header(msg) if (len(msg) <= 96 or msg.endswith(("]", "]:"))) and (
        "tep" in msg or "ter" in msg or "atch" in msg or "TEP" in msg or "TER" in msg) else None


class RecordJoiner:
    """One record split over several lines, joined: a record that says it goes on (``open``: a
    Megatron iteration line that ends in ``|`` without its loss) takes the fields of the lines
    that follow it in the same file until a line with its own counter, a line that is no piece
    of a record, or ``JOIN_SPAN`` lines. ``feed`` returns the records that are complete."""

    def __init__(self) -> None:
        self._open: dict[str, list] = {}  # file -> [record, first line, rank, ts, last line]

    def feed(self, file: str, lineno: int, msg: str, rec: dict | None, rank, ts) -> list[tuple]:
        out: list[tuple] = []
        cur = self._open.get(file)
        if cur is not None and cur[0].get("format") == "header":
            # a header record goes on over its "name: value" lines; a line of any other shape ends it
            own = rec is not None and ("step" in rec or "iter" in rec)  # a record of its own, or the next header
            piece = header_piece(msg) if not own and lineno - cur[4] <= HEADER_SPAN else None
            if piece is not None:
                for k, v in piece.items():
                    cur[0].setdefault(k, v)
                cur[4] = lineno
                return out
            done = self._close(file)
            if done is not None:
                out.append(done)
            cur = None
        if cur is not None:
            piece = None
            if lineno - cur[4] <= JOIN_SPAN and (rec is None or ("step" not in rec and "iter" not in rec)):
                # a line that starts a record of its own (a dict, a Megatron iteration) is no piece of this one
                piece = fields_of(msg) if rec is None else rec if rec.get("format") == "generic" else None
            if piece or (rec is None and cur[0].get("format") in ("hf-trainer", "jsonl") and msg.strip()):
                for k, v in (piece or {}).items():
                    if k not in ("format", "open"):
                        cur[0].setdefault(k, v)
                cur[4] = lineno
                if "}" in msg and cur[0].get("format") in ("hf-trainer", "jsonl"):
                    out.append(self._close(file))  # the dict is closed
                return out
            out.append(self._close(file))
        if rec is not None and rec.get("open"):
            self._open[file] = [dict(rec), lineno, rank, ts, lineno]
        elif rec is not None:
            out.append((rec, lineno, rank, ts))
        return out

    def pending(self, file: str) -> bool:
        return file in self._open

    def _close(self, file: str) -> tuple | None:
        """The record open in ``file``, complete; None for a header record whose lines gave no loss (a
        counter-only line above other output)."""
        rec, line, rank, ts, _ = self._open.pop(file)
        rec.pop("open", None)
        if rec.get("format") == "header" and "loss" not in rec and "val_loss" not in rec:
            return None
        if rec.get("format") == "header" and "val_loss" in rec and "loss" not in rec:
            rec["eval"] = True
        return rec, line, rank, ts

    def close_all(self) -> list[tuple]:
        """``(file, (record, line, rank, ts))`` of every record still open (the end of the input)."""
        return [(f, got) for f in list(self._open) if (got := self._close(f)) is not None]
