"""One pass over the logs: candidate lines → step records and signature events.

:class:`LogAnalyzer` is the consumer the reader feeds. It keeps little state: the streamed
step table (bounded, see table.py), the events, and small block parsers (a ChildFailedError
summary, a wrapped watchdog message). Step records arrive one by one from the per-line
parsers (buffered into batches) or a chunk at a time from a learned progress-line template
(bulk.py, through the reader's ``fast_path`` hook); both go through ``ingest`` (duplicate
steps dropped, then the table). ``llmdiag.logs.engine`` runs it over files and returns the document.
"""

from __future__ import annotations

import math
import pickle
from collections import Counter, deque
import re

import numpy as np

from llmdiag.logs import bulk, prefixes, signatures
from llmdiag.logs.columns import FLOAT_COLS
from llmdiag.logs.epochs import EpochPlacer, bar_summary, train_summary
from llmdiag.logs.formats import bar_reader, table_goes_on, table_header, table_row, to_float
from llmdiag.logs.progress import RecordJoiner, header_of, looks_like_record, progress_of, timestamp_of
from llmdiag.logs.signatures import Event
from llmdiag.logs.table import (NONE, PENDING_ROWS, StepStore, batch_len, concat, empty_batch, pack, rows_to_batch,
                                take)
from llmdiag.logs.unwrap import join_wrapped, needs_continuation


_PREFILTERS: dict = {}
#: kinds whose lines may carry NCCL's "host:pid:tid [dev]" prefix
_NCCL_LINE_KINDS = frozenset(("nccl_warn", "nccl_rc", "cuda_oom", "nccl_internal_error", "nccl_system_error",
                              "nccl_unhandled_cuda_error", "nccl_remote_error", "ib_completion_error", "sigbus",
                              "nccl_invalid_argument", "nccl_invalid_usage"))


def prefilter_regex(engine: str = "auto"):
    """One alternation of every keyword, compiled once and run over whole chunks.

    ``auto`` takes the C kernel's matcher, else Hyperscan, else RE2, else ``re`` (see
    llmdiag/logs/prefilter.py; the engines are compared by bench/log_throughput.py and
    tests/unit/logs/test_prefilter.py, and yield the same matches).
    """
    if engine not in _PREFILTERS:
        from llmdiag.logs.prefilter import compile_prefilter

        parts = [re.escape(k) for k in signatures.KEYWORDS] + list(signatures.PATTERNS)
        _PREFILTERS[engine] = compile_prefilter(parts, engine)
    return _PREFILTERS[engine]


#: lines after an empty "Last error:" searched for its text (other ranks' lines may come between)
_LAST_ERROR_SPAN = 8
#: what follows an empty "Last error:" when NCCL had no text for it
_NOT_LAST_ERROR = ("Exception raised from", "frame #", "Traceback", "[E", "[W")
#: per-rank log files: rank3.log, rank_3.out, worker-3.log, train.rank-3.log.gz
_FILE_RANK = re.compile(r"(?:rank|worker)[_-]?(\d+)(?!\d)", re.IGNORECASE)
#: torchrun --log-dir: LOG_DIR/RUN_ID/attempt_N/LOCAL_RANK/{stdout,stderr}.log (a node's ranks, one directory each)
_LOG_DIR_RANK = re.compile(r"(?:^|/)attempt_\d+/(\d+)/(?:stdout|stderr)\.log(?:\.\w+)?$")
#: a traceback's frame line, and the files that are libraries (the failing call is the user's code)
_FRAME = re.compile(r'^File "([^"]+)", line \d+, in ')
#: the line that ends a traceback's frames (its exception), as the catalogue's exception rules read it
_EXCEPTION_LINE = re.compile(r"(?:[A-Za-z_]\w*\.)*[A-Z]?\w*(?:Error|Exception|Interrupt|Failure|Exit)\b")
_LIBRARY_FILE = re.compile(r"(?:site|dist)-packages/|/lib/python\d[\d.]*/|^<")
#: the outermost call on a source line: ``torch.distributed.barrier()``, ``loss = model(x)``
_CALL = re.compile(r"([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)\s*\(")
#: lines a traceback is read for its frames before it is given up (a cut excerpt, interleaved output)
_TRACEBACK_SPAN = 400
#: a traceback through the DataLoader's wait for a worker's batch whose innermost frame is that handoff (the
#: DataLoader, the queue, the fd sharing of torch's reductions and multiprocessing): the worker died mid-handoff
_DATALOADER_FILE = "torch/utils/data/dataloader.py"
_HANDOFF_FILE = re.compile(r"torch/utils/data/dataloader\.py$|torch/multiprocessing/reductions\.py$"
                           r"|multiprocessing/(?:resource_sharer|connection|queues|reduction)\.py$")
#: the exceptions such a handoff ends in when the worker is gone (its socket closed, its queue end broken)
_HANDOFF_ERRORS = frozenset({"ConnectionResetError", "ConnectionRefusedError", "EOFError", "BrokenPipeError",
                             "FileNotFoundError", "ConnectionAbortedError"})
_BLOCK_ROW = re.compile(r"^\s*(time|host|rank|exitcode|error_file|traceback)\s*:\s*(.*)$")
_BLOCK_ENTRY = re.compile(r"^\s*\[(\d+)\]:\s*$")


_LOOSE_RANK_ROW = re.compile(r"^\s*rank\s*:\s*(\d+) \(local_rank: (\d+)\)\s*$")
#: how far apart two entries' rank rows may be (7 rows an entry; a traceback row can span more)
_ENTRY_GAP = 64
_LOOSE_ROWS = 256


class _ChildFailedBlock:
    """The torchrun summary: ``Failures:`` entries and the ``Root Cause`` entry."""

    def __init__(self, ev: Event):
        self.ev = ev
        # an excerpt may start at the Root Cause header itself (its lines behind a prefix the others lack)
        self.section = "root" if ev.message.lstrip().startswith("Root Cause") else "failures"
        self.entries: list[dict] = []
        self.cur: dict | None = None
        self.done = False

    def feed(self, msg: str) -> None:
        s = msg.strip()
        if s.startswith("Root Cause"):
            self.section = "root"
            return
        if s.startswith("Failures:") or s.startswith("<NO_OTHER_FAILURES>") or not s or s.endswith("FAILED"):
            return
        if set(s) <= set("=-"):
            if self.section == "root" and self.cur is not None:
                self.done = True
            return
        m = _BLOCK_ENTRY.match(s)
        if m:
            self.cur = {"index": int(m[1]), "root": self.section == "root"}
            self.entries.append(self.cur)
            return
        m = _BLOCK_ROW.match(msg)
        if m and self.cur is not None:
            key, val = m[1], m[2].strip()
            if key == "rank":
                r = re.match(r"(\d+)(?: \(local_rank: (\d+)\))?", val)
                if r:
                    self.cur["rank"] = int(r[1])
                    if r[2]:
                        self.cur["local_rank"] = int(r[2])
            elif key == "exitcode":
                r = re.match(r"(-?\d+)(?: \(pid: (\d+)\))?", val)
                if r:
                    self.cur["exitcode"] = int(r[1])
                    if r[2]:
                        self.cur["pid"] = int(r[2])
            elif key == "traceback":
                r = re.search(r"Signal (\d+) \((SIG\w+)\)", val)
                if r:
                    self.cur["signal"] = r[2]
            else:
                self.cur[key] = val
            return
        if self.section == "root" and self.cur is not None:
            self.done = True

    def adopt(self, rows: list[tuple[int, int | None]]) -> None:
        """Failures listed above the part of the summary the excerpt kept (their headers cut off)."""
        self.entries[:0] = [{"index": None, "root": False, "rank": r, **({"local_rank": lr} if lr is not None else {})}
                            for r, lr in rows]

    def facts(self) -> dict:
        f: dict = {}
        root = next((e for e in self.entries if e["root"]), None)
        ranks = sorted({e["rank"] for e in self.entries if "rank" in e})
        if ranks:
            f["failed_ranks"] = ranks
        # without its Root Cause section (an excerpt cut short) the first listed failure still says how
        # the worker ended; it is not called the root cause
        src = root or (self.entries[0] if self.entries else None)
        if src:
            for k_src, k_dst in (("rank", "first_failing_rank" if root else "failed_rank"), ("host", "host"),
                                 ("exitcode", "exitcode"), ("pid", "root_cause_pid" if root else "pid"),
                                 ("local_rank", "local_rank"), ("time", "time")):
                if k_src in src:
                    f[k_dst] = src[k_src]
            code = src.get("exitcode")
            sig = src.get("signal") or (signatures.SIGNALS.get(-code) if isinstance(code, int) and code < 0 else None)
            if sig:
                f["signal"] = sig
        # the other failures a signal ended (torchrun lists each worker that failed before it stopped the rest;
        # one still running 30 s after its SIGTERM gets SIGKILL): each is a worker that died of that signal
        others = [{k: e[k] for k in ("rank", "exitcode", "pid", "time", "host") if k in e} for e in self.entries
                  if e is not src and isinstance(e.get("exitcode"), int) and e["exitcode"] < 0]
        if others:
            f["other_signals"] = others
        return f


class LogAnalyzer:
    def __init__(self, settings=None, spill: bool = False) -> None:
        self.table = StepStore(settings, spill=spill)
        self.events: list[Event] = []
        self.evals: list[dict] = []
        self.lines_with_loss = 0
        #: lines that print a loss among numeric fields but that no progress reader could place
        self.unplaced: dict = {"count": 0, "example": None}
        self.extra: dict = {}
        self._block: _ChildFailedBlock | None = None
        #: ``rank : N (local_rank: M)`` rows seen outside a summary, per file: (line, rank, local rank).
        #: An excerpt cut inside the ``Failures:`` list starts the summary at ``Root Cause``; the
        #: entries above it are still failed ranks.
        self._loose_rows: dict[str, list[tuple[int, int, int | None]]] = {}
        self._wrap: tuple[str, int, prefixes.Prefix, list[str]] | None = None
        self._in_traceback: dict[tuple[str, int | None], int] = {}
        #: tracebacks whose frames are being read, per (file, rank): [first line, next source line's frame, call]
        self._frames: dict[tuple[str, int | None], list] = {}
        #: the failing call of each (file, rank)'s last traceback, for the exception line that ends it
        self._failing_call: dict[tuple[str, int | None], str] = {}
        #: ranks whose own lines (a rank prefix on a line the reader handed over) are in the log
        self.ranks_seen: set[int] = set()
        #: per (file, rank): a traceback that ended in the DataLoader's handoff (its first line, innermost file)
        self._handoff: dict[tuple[str, int | None], tuple[int, str]] = {}
        #: line numbers of "Exception ignored in: ..." reports whose exception has not come yet, per (file, rank)
        self._ignored: dict[tuple[str, int | None], list[int]] = {}
        self._seen_keys: dict[int | None, set] = {}
        #: the largest key in each set of _seen_keys (max() over 4096 keys per batch was costly)
        self._seen_max: dict[int | None, int] = {}
        self.unique_steps: dict[int | None, int] = {}
        self.optimizer_step_lines = 0
        self.last_progress: dict[str, tuple[int, float | None]] = {}
        self._file_rank: dict[str, int | None] = {}
        self._pending: list[tuple] = []
        self._joiner = RecordJoiner()
        self._redrawn = False
        #: per file, the columns of a table of numbers under a header line, while its rows go on
        self._tables: dict[str, list] = {}
        #: per file, a bar's redraw held until the next record says whether it was redrawn with the same count
        self._held: dict[str, tuple] = {}
        self._staged: list[dict] = []
        self._staged_n = 0
        self._line_text: str | None = None
        self._templates: dict[str, list[bulk.Template]] = {}
        self._learn_more: dict[str, bool] = {}
        self._learners: dict[str, prefixes.PrefixLearner] = {}
        #: files captured from a terminal that cut lines at a fixed width, and the pieces of a cut line
        self._width: dict[str, int] = {}
        #: per short file: line -> (the line its hard-wrapped record starts at, the record or None)
        self._joins: dict[str, dict[int, tuple[int, str | None]]] = {}
        self._joins_done: dict[str, set[int]] = {}
        self._tw: tuple[int, list[str]] | None = None
        self._tw_file: str = ""
        self._learn_budget: dict[str, int] = {}
        self._slow_records: dict[str, int] = {}
        #: a parallel worker writes its raw step batches here instead of storing them
        self.raw = None
        #: per file: an NCCL "Last error:" whose text is on a following line (its line, its rank)
        self._last_error: dict[str, tuple[int, int | None]] = {}
        #: records that print only an epoch, held until a Trainer summary places them on steps (epochs.py)
        self.epochs = EpochPlacer()
        #: per file: the last progress-bar counts seen, (line, count, total) (epochs.bar_summary)
        self._bars: dict[str, deque] = {}

    # -- the reader's consumer ------------------------------------------------------------
    def prime(self, path: str) -> None:
        """Learn the file's per-line prefixes from its first lines (all of them, not only candidates)."""
        if path == "-":
            return
        from llmdiag.logs.readers import open_binary

        learner = self._learners.setdefault(path, prefixes.PrefixLearner())
        try:
            with open_binary(path) as fh:
                head = fh.read(PRIME_BYTES)
        except (OSError, EOFError, ValueError):
            return
        lines = head.split(b"\n")[:-1][:PRIME_LINES]
        for raw in lines:
            learner.strip(prefixes.split_prefix(raw.decode("utf-8", "replace").rstrip("\r")).message,
                          raw[:1] in (b" ", b"\t"))
        texts = [raw.decode("utf-8", "replace").rstrip("\r") for raw in lines]
        width = terminal_width(texts)
        if width:
            self._width[path] = width
        if len(head) < PRIME_BYTES and len(lines) <= PRIME_LINES:  # the whole file: a short excerpt
            # its wrapped records are known before reading, including those whose first piece has no
            # keyword (the reader never hands such a piece over, so the width path cannot start there)
            joins = hard_wrapped(texts, cut=bool(width))
            if joins:
                self._joins[path] = joins

    def normalise(self, file: str, text: str) -> prefixes.Prefix:
        """A physical line → its prefixes (known shapes, then the ones learned from the file) and message."""
        pre = prefixes.split_prefix(text.rstrip("\r\n"))
        learner = self._learners.get(file)
        if learner is None:
            learner = self._learners[file] = prefixes.PrefixLearner()
        msg, cut = learner.strip(pre.message, text[:1] in (" ", "\t"))
        if cut:
            again = prefixes.split_prefix(msg)
            pre = prefixes.Prefix(pre.rank if pre.rank is not None else again.rank, pre.host or again.host,
                                  pre.ts if pre.ts is not None else again.ts, again.message,
                                  pre.clock if pre.clock is not None else again.clock)
        if _WIDE_GAP in pre.message:  # a terminal-wrapped line pasted back with its padding
            pre = pre._replace(message=_PADDING.sub("", pre.message))
        m = pre.message
        if len(m) > 4 and ((m[:2] == "**" == m[-2:] and m[2] != "*" and m[-3] != "*") or m[0] == "`" == m[-1]):
            # a line pasted into markdown as bold or code ("**RuntimeError: CUDA error: ...**"): its text is inside
            # (not Slurm's and glibc's own "*** ... ***")
            pre = pre._replace(message=m[2:-2].strip() if m[0] == "*" else m[1:-1].strip())
        return pre

    def __call__(self, file: str, lineno: int, text: str) -> int:
        self._line_text = None
        # a progress bar's redraw that a later redraw of the same line follows (readers.scan keeps its '\r')
        self._redrawn = text.endswith("\r")
        joins = self._joins.get(file)
        if joins:
            # a piece of a hard-wrapped record: the record, once (records before this line whose pieces
            # had no keyword, e.g. one cut inside its only keyword, are read first)
            self._flush_joins(file, lineno)
            hit = joins.get(lineno)
            if hit:
                return self._read_join(file, hit[0])
        width = self._width.get(file)
        if width:  # a terminal capture cut at ``width`` columns: a full-width piece continues on the next line
            piece = text.rstrip("\r\n")
            if self._tw is not None:
                first, pieces = self._tw
                pieces.append(piece)
                if _cut_at(piece, width) and len(pieces) < MAX_WRAPPED:
                    return 1
                self._tw = None
                return self._whole(file, first, "".join(pieces), joined=True)
            if _cut_at(piece, width):
                self._tw, self._tw_file = (lineno, [piece]), file
                return 1
        return self._whole(file, lineno, text)

    def _read_join(self, file: str, start: int) -> int:
        done = self._joins_done.setdefault(file, set())
        if start in done:
            return 0
        done.add(start)
        return self._whole(file, start, self._joins[file][start][1] or "")

    def _flush_joins(self, file: str, before: float) -> None:
        for start in sorted(n for n, (_, rec) in self._joins[file].items() if rec is not None and n < before):
            self._read_join(file, start)  # once: a record already read is skipped there

    def _whole(self, file: str, lineno: int, text: str, joined: bool = False) -> int:
        if "|" in text and "/" in text:
            bar = _BAR_AT.search(text)
            if bar is not None:  # a tqdm bar's count (epochs.bar_summary reads the one after the last record)
                self._bars.setdefault(file, deque(maxlen=_BARS_KEPT)).append((lineno, int(bar[1]), int(bar[2])))
        if self._wrap is None and self._block is None and text.count("%|") >= 2:
            starts = [m.start() for m in _BAR_FRAME.finditer(text)]
            if len(starts) >= 2:  # bar redraws glued without their '\r': each one a redraw of its own
                want = 0
                for a, b in zip([0] + starts, starts + [len(text)]):
                    if text[a:b].strip(" ,"):
                        want = max(want, self._one(file, lineno, text[a:b].rstrip(" ,"), glued=True))
                return want
        if self._wrap is None and self._block is None and (text.count("]:") >= 2 or text.count("[rank ") >= 2):
            parts = _GLUED.split(text)
            if len(parts) > 1:  # two ranks' output glued into one line: each part on its own
                want = 0
                for part in parts:
                    want = max(want, self._one(file, lineno, part, glued=True))
                return want
        return self._one(file, lineno, text, glued=joined)

    def _one(self, file: str, lineno: int, text: str, glued: bool = False) -> int:
        if self._wrap is not None:
            wfile, wline, pre, parts = self._wrap
            parts.append(self.normalise(file, text).message)
            joined = join_wrapped(parts[0], parts[1:])
            if not needs_continuation(joined) or len(parts) > 3:
                self._wrap = None
                self._handle(wfile, wline, pre._replace(message=joined))
                return 0
            return 1
        pre = self.normalise(file, text)
        if pre.rank is None:
            rank = self.rank_of_file(file)
            if rank is not None:
                pre = pre._replace(rank=rank)
        else:
            self.ranks_seen.add(pre.rank)  # a rank whose own line is in the log, whatever the line says
        want_more = 0
        if file in self._last_error:
            pre, want_more = self._last_error_text(file, lineno, pre)
        if self._frames:
            # a traceback's frames are read for the failing call, and as every line is (a frame's path names
            # the rendezvous backend); the lines after them too while any traceback of this file is open
            if (file, pre.rank) in self._frames:
                self._traceback_frame((file, pre.rank), lineno, pre)
            if any(k[0] == file for k in self._frames):
                want_more = 1
        if self._block is not None:
            self._block.feed(pre.message)
            if self._block.done:
                self._close_block()
            else:
                return 1
        if ("WorkNCCL(" in pre.message or "timeout:" in pre.message or "exception:" in pre.message) \
                and needs_continuation(pre.message):
            self._wrap = (file, lineno, pre, [pre.message])
            return 1
        self._line_text = None if glued else text
        return max(want_more, self._handle(file, lineno, pre))

    def _last_error_text(self, file: str, lineno: int, pre: prefixes.Prefix) -> tuple[prefixes.Prefix, int]:
        """A line after an empty "Last error:" of the same rank is that error's text (the message read
        as "Last error: TEXT"); a line of another rank in between (interleaved output) keeps waiting."""
        start, rank = self._last_error[file]
        if lineno - start > _LAST_ERROR_SPAN:
            del self._last_error[file]
            return pre, 0
        if rank is not None and pre.rank is not None and pre.rank != rank:
            return pre, 1
        del self._last_error[file]
        text = pre.message.strip()
        if not text or text.startswith(_NOT_LAST_ERROR):
            return pre, 0
        return pre._replace(message="Last error: " + text), 0

    def _traceback_frame(self, key: tuple[str, int | None], lineno: int, pre: prefixes.Prefix) -> bool:
        """A line of a traceback being read: True while its frames go on. The
        source line under the innermost frame outside the libraries names the failing call
        (``torch.distributed.barrier``); the first other line (the exception) ends the frames."""
        tb = self._frames[key]
        start, pending = tb[0], tb[1]
        if lineno - start > _TRACEBACK_SPAN:
            del self._frames[key]
            return False
        msg = pre.message.strip()
        m = _FRAME.match(msg)
        if m:
            tb[1] = "lib" if _LIBRARY_FILE.search(m[1]) else "user"
            tb[3] = m[1]  # the innermost frame so far
            tb[4] = tb[4] or m[1].endswith(_DATALOADER_FILE)
            return True
        if pending is not None and not _EXCEPTION_LINE.match(msg):
            if pending == "user":  # the frame's source line
                c = _CALL.search(msg)
                if c:
                    tb[2] = c[1]
            tb[1] = None
            return True
        if msg and (not msg.strip("^~ ") or msg.startswith("[Previous line repeated")):
            return True  # Python 3.11's markers under a source line; a recursion's summary
        del self._frames[key]
        if tb[2]:
            self._failing_call[key] = tb[2]
        if tb[4] and tb[3] and _HANDOFF_FILE.search(tb[3]):
            self._handoff[key] = (tb[0], tb[3])
        return False

    def _worker_died_in_handoff(self, file: str, line: int, rank, host, ts, innermost: str, how: str) -> None:
        """A rank whose traceback ends in the DataLoader's handoff of a worker's batch (``how``: the exception it
        ended in, or that it was cut off): the worker died while handing the batch over, and no line says so
        ("is killed by signal" comes from a check this path never reaches)."""
        where = innermost.rsplit("/", 2)
        self.events.append(Event("dataloader_worker_killed", file, line,
                                 f"traceback through the DataLoader ending in {'/'.join(where[-2:])} ({how})", rank, host,
                                 ts, {"evidence": f"the rank's traceback ends in the DataLoader's handoff of a worker's "
                                      f"batch ({'/'.join(where[-2:])}): {how}"}))

    def _handle(self, file: str, lineno: int, pre: prefixes.Prefix) -> int:
        msg = pre.message
        ts = timestamp_of(pre)
        want = 0
        if "(local_rank:" in msg:
            row = _LOOSE_RANK_ROW.match(msg)
            if row:
                rows = self._loose_rows.setdefault(file, [])
                rows.append((lineno, int(row[1]), int(row[2])))
                del rows[:-_LOOSE_ROWS]
                return 0
        table = self._tables.get(file)
        if table is not None:
            row = table_row(msg, table)
            if row is not None or table_goes_on(msg, table):
                if row:
                    self._redraw(row, file, lineno, pre.rank, ts)
                return 1  # the table goes on: the next line too (its rows carry no keyword)
            del self._tables[file]
        rec = progress_of(msg)
        if rec is not None and "reward" in msg and "objective" not in self.extra and _RL_RECORD.search(msg):
            self.extra["objective"] = "reinforcement"  # a policy-gradient loss: 0.0 is its normal value
        if rec is None:
            rec = header_of(msg)  # a counter-only line: the record's fields follow on lines of their own
        unplaced = False
        if rec is not None and not rec.get("open") and not self._joiner.pending(file):
            self._redraw(rec, file, lineno, pre.rank, ts)
        elif rec is None and not self._joiner.pending(file):
            table = table_header(msg)
            if table is not None:
                self._tables[file] = table
                return 1
            if "train_runtime" in msg:
                summary = train_summary(msg)
                if summary is not None:
                    self._train_summary(summary, file)
                    return 0
            unplaced = looks_like_record(msg)
        elif rec is not None or self._joiner.pending(file):
            for r, line, rank, t in self._joiner.feed(file, lineno, msg, rec, pre.rank, ts):
                keep = self._line_text
                if line != lineno or r is not rec:
                    self._line_text = None  # a joined record is no line to learn a template from
                self._record(r, file, line, rank, t)
                self._line_text = keep
            if self._joiner.pending(file):
                want = 1  # the record goes on: the next line too, keyword or not (its grad norm, its lr)
        matched = signatures.match_line(msg)
        if unplaced and not matched:  # a record no reader placed (an event line is no record)
            self.unplaced["count"] += 1
            if self.unplaced["example"] is None:
                self.unplaced["example"] = {"file": file, "line": lineno, "text": msg.strip()[:200]}
        for kind, facts, m in matched:
            rank = pre.rank
            host = pre.host
            if kind in _NCCL_LINE_KINDS:
                npre = signatures.nccl_prefix(msg)
                if npre:
                    host = host or npre["host"]
                    facts.setdefault("pid", int(npre["pid"]))
                    facts.setdefault("local_rank", int(npre["dev"]))
                    if kind == "nccl_rc":
                        facts["thread"] = f"{npre['host']}:{npre['pid']}:{npre['tid']}"
            body_rank = signatures.find_rank(msg)
            if rank is None:
                rank = body_rank
            if kind in ("nccl_timeout", "nccl_timeout_status"):
                pg = signatures.pg_of(msg)
                if pg is not None:
                    facts["pg"] = pg
            if kind == "nccl_last_error" and not facts["last_error"]:
                self._last_error[file] = (lineno, rank)  # the text follows on a line of its own
                want = max(want, 1)
                continue
            if kind == "overflow" and rank is None:
                rank = facts.pop("rank", None)
            if rank is None and isinstance(facts.get("rank"), int):  # "Rank 11: found NaN ..." names its rank
                rank = facts.pop("rank")
            ev = Event(kind, file, lineno, msg.strip()[:500], rank, host, ts, facts, clock=pre.clock)
            if kind == "child_failed":
                if self._block is None:
                    self._block = _ChildFailedBlock(ev)
                    if self._block.section == "root":
                        self._block.adopt(self._rows_above(file, lineno))
                    self._loose_rows.pop(file, None)
                    want = 1
                continue
            if kind == "traceback":
                self._in_traceback[(file, rank)] = lineno
                self._frames[(file, pre.rank)] = [lineno, None, None, None, False]
                want = max(want, 1)  # its frames carry no keyword
            if kind == "exception_ignored":
                # Python printed an exception it ignored (a __del__ at shutdown): the next one is not an error
                self._ignored.setdefault((file, rank), []).append(lineno)
                continue
            if kind == "exception":
                start = self._in_traceback.pop((file, rank), None)
                pending = [n for n in self._ignored.get((file, rank), ()) if lineno - n <= _IGNORED_SPAN]
                if pending:  # the exception of an "Exception ignored in" report (its traceback is short)
                    self._ignored[(file, rank)] = pending[1:]
                    continue
                ev.facts["has_traceback"] = start is not None
                call = self._failing_call.pop((file, pre.rank), None)
                if call:
                    ev.facts["failing_call"] = call
                handoff = self._handoff.pop((file, pre.rank), None)
                if handoff and facts.get("exception_type", "").rsplit(".", 1)[-1] in _HANDOFF_ERRORS:
                    self._worker_died_in_handoff(file, lineno, rank, host, ts, handoff[1], facts["exception_type"])
                if start is not None:
                    ev.facts["traceback_line"] = start
            if kind in ("launcher", "rdzv_context", "dtype", "torch_version", "world_size", "nccl_version"):
                own = facts.pop("own_rank", None)
                if own is not None:  # a line a rank prints about itself: the log covers that rank
                    self.ranks_seen.add(own)
                for k, v in facts.items():
                    if k == "rdzv_backend" and v is None:
                        continue
                    self.extra.setdefault(k, v if v is not None else m[2])
                continue
            self.events.append(ev)
        return want

    def rank_of_file(self, file: str) -> int | None:
        """The rank a file's name gives (``rank3.log``), for lines without a rank of their own."""
        rank = self._file_rank.get(file, -1)
        if rank == -1:
            m = _FILE_RANK.search(file.rsplit("/", 1)[-1]) or _LOG_DIR_RANK.search(file)
            rank = self._file_rank[file] = int(m[1]) if m else None
        return rank

    def bar_line(self, file: str, lineno: int, raw: bytes) -> int | None:
        """Every redraw of a progress bar's line at once (readers._redraws): one pass over the line, built
        from its first bar record (formats.bar_reader), gives the rows the redraw-by-redraw reading gives; the
        number of records, or None (the line is then read redraw by redraw) when the line is no plain bar:
        a redraw that is no bar (an error glued in), a prefix, a shape the regex does not take.

        The pass is the C kernel's (``_fastscan.bars``: every redraw's counter and postfix numbers, no Python
        object per redraw) where it is sure to read what the regexes read, else the regexes themselves."""
        if self._joiner.pending(file) or self._tables.get(file) is not None or b"\r" not in raw:
            return None
        at = raw.find(b"oss")
        if at < 0:
            return None
        end = raw.find(b"\r", at)
        first = raw[raw.rfind(b"\r", 0, at) + 1:len(raw) if end < 0 else end].decode("utf-8", "replace")
        if not first.startswith(("Epoch ", " ", "\x1b")) and "|" not in first[:40]:
            return None
        pre = self.normalise(file, first)
        if pre.message != first.rstrip("\r\n") or pre.rank is not None:
            return None  # prefixes: the redraw-by-redraw reading knows them
        rec = progress_of(first)
        got = bar_reader(first, rec) if rec is not None and not rec.get("open") else None
        if got is None:
            return None
        head, fields, epochs = got
        if signatures.match_line(raw[raw.rfind(b"\r") + 1:].decode("utf-8", "replace")):
            return None  # a redraw that is no bar, or an error glued to the last one: read each one
        cols = _bar_columns(raw, head, fields, epochs)
        if cols is None:
            return None  # a redraw that is no bar of this shape: read each one
        ep, count, tot, vals, present = cols
        if epochs:
            it = ep * tot + count
            keep = count != 0  # a bar drawn before its first step (formats.parse_progress)
        else:
            ep, it, keep = None, count, np.ones(len(count), dtype=bool)
        has = present.get("loss", np.zeros(len(count), dtype=bool))
        keep &= has  # a redraw without the loss in its postfix is no record (as redraw by redraw)
        rows = int(has.sum())
        # a redraw of the same count replaces the one before (the last one of each run is the step's)
        sel = np.flatnonzero(keep)
        last = np.r_[it[sel][1:] != it[sel][:-1], True]
        idx = sel[last]
        if not len(idx):
            return 0
        self._flush_held()
        b = empty_batch(len(idx))  # table.empty_batch
        b["iter"] = it[idx]
        if ep is not None:
            b["epoch"] = ep[idx].astype(np.float64)
        for c, v in vals.items():
            b[c] = v[idx]
        b["has_loss"][:] = 1
        b["has_grad_norm"] = present["grad_norm"][idx].astype(np.int64) if "grad_norm" in present else 0 * b["line"]
        b["line"][:] = lineno
        b["file"][:] = self.table.file_id(file)
        rank = self.rank_of_file(file)
        if rank is not None:
            b["rank"][:] = rank
        self.lines_with_loss += len(idx)
        self._stage_pending()
        self._stage(b)
        return rows

    def _redraw(self, rec: dict, file: str, lineno: int, rank, ts) -> None:
        """A progress bar redraws: each redraw is a record, and a redraw of the same count replaces the one
        before (tqdm draws a count, then again with the step's loss in its postfix), on the same line
        (``\r``) or on the next ones (a collector that turned the ``\r`` into newlines)."""
        held = self._held.pop(file, None)
        if held is not None:
            h = held[0]
            same = (0 <= lineno - held[1] <= REDRAW_GAP and held[2] == rank and rec.get("bar")
                    and (h.get("iter"), h.get("step"), h.get("epoch")) == (rec.get("iter"), rec.get("step"),
                                                                          rec.get("epoch")))
            if not same:
                keep, self._line_text = self._line_text, None
                self._record(*held[:1], file, *held[1:])
                self._line_text = keep
        if self._redrawn or rec.get("bar"):
            # held until the next record says whether it was redrawn; a bar is no template for the bulk path
            # (that reads a line's last segment alone)
            self._held[file] = (rec, lineno, rank, ts)
            return
        self._record(rec, file, lineno, rank, ts)

    def _flush_held(self) -> None:
        for file, held in list(self._held.items()):
            del self._held[file]
            self._line_text = None
            self._record(held[0], file, *held[1:])

    def _rows_above(self, file: str, lineno: int) -> list[tuple[int, int | None]]:
        """The loose rank rows right above ``lineno``: one entry per few lines, back to the first gap."""
        out, at = [], lineno
        for n, rank, local in reversed(self._loose_rows.get(file, ())):
            if at - n > _ENTRY_GAP:
                break
            out.append((rank, local))
            at = n
        return out[::-1]

    def _close_block(self) -> None:
        blk = self._block
        self._block = None
        if blk is None:
            return
        blk.ev.facts.update(blk.facts())
        self.events.append(blk.ev)

    def _record(self, rec: dict, file: str, lineno: int, rank: int | None, ts: float | None) -> None:
        if rec.get("eval"):
            self.evals.append({"step": rec.get("step", rec.get("iter")), "train_loss": rec.get("loss"),
                               "val_loss": rec.get("val_loss"), "line": lineno, "file": file})
            return
        if "loss" in rec:
            self.lines_with_loss += 1
        if rec.get("optimizer_step"):
            self.optimizer_step_lines += 1
        if rec.get("train_iters") is not None:
            self.extra["train_iters"] = rec["train_iters"]
        if rec.get("global_batch_size") is not None:
            self.extra["global_batch_size"] = rec["global_batch_size"]
        self._pending.append((rec, lineno, rank, ts, self.table.file_id(file)))
        if len(self._pending) >= PENDING_ROWS:
            self._stage_pending()
        self._slow_records[file] = self._slow_records.get(file, 0) + 1
        if (self._line_text is not None and (file not in self._templates or self._learn_more.get(file))
                and self._learn_budget.get(file, LEARN_FAILURES) > 0):
            tpl = bulk.learn(self._line_text, self._file_rank.get(file), _plain_prefilter())
            if tpl is None:  # only failures count: a shape that changes (wider numbers) is learned again
                self._learn_budget[file] = self._learn_budget.get(file, LEARN_FAILURES) - 1
                return
            self._learn_more[file] = False
            tpls = self._templates.setdefault(file, [])
            if len(tpls) >= MAX_TEMPLATES:
                tpls.remove(min(tpls, key=lambda t: t.hits))  # the one that took the fewest lines last
            tpl.hits = 0
            tpl.idle = 0
            tpls.append(tpl)

    # -- progress lines in bulk (llmdiag.logs.bulk) ----------------------------------------
    def fast_path(self, path: str, buf: bytes, base: int):
        """The reader's hook: ``buf`` with this file's template lines emptied, and their feed.

        A file has up to MAX_TEMPLATES templates (progress lines of several shapes, or one
        shape whose numbers grew wider); each takes its lines from what the ones before left.
        """
        tpls = self._templates.get(path)
        if not tpls or self._block is not None or self._wrap is not None:
            return None
        slow, self._slow_records[path] = self._slow_records.get(path, 0), 0
        if slow > 64:  # progress lines of another shape keep coming line by line: learn one more
            self._learn_more[path] = True
        parts, view, newlines = [], buf, 0
        for tpl in list(tpls):
            got = tpl.split(view)
            tpl.hits = 0 if got is None else len(got[1])
            tpl.idle = 0 if got is not None else tpl.idle + 1
            if got is None:
                if tpl.idle >= IDLE_CHUNKS and len(tpls) > 1:
                    tpls.remove(tpl)
                continue
            view, lines, values, newlines = got
            parts.append((tpl, lines + base, values))
        if not parts:
            return None
        feed = _BulkFeed(self, parts, self.table.file_id(path))
        feed.newlines = newlines  # of the chunk, which ``view`` shares
        return view, feed

    def bulk(self, tpl, values: dict, lines, file_id: int) -> None:
        """The counters for template lines ``lines`` (with their numbers by slot), as ``_record``
        keeps them; their rows reach the step table through the feed (_BulkFeed.until)."""
        n = len(lines)
        if "loss" in tpl.fields:
            self.lines_with_loss += n
        if tpl.const.get("optimizer_step"):
            self.optimizer_step_lines += n
        for k in ("train_iters", "global_batch_size"):
            v = tpl.last_value(k, values)
            if v is not None:
                self.extra[k] = v

    # -- step records in batches ----------------------------------------------------------
    def _stage_pending(self) -> None:
        if self._pending:
            rows, self._pending = self._pending, []
            self._stage(rows_to_batch(rows))

    def _stage(self, b: dict) -> None:
        """Gather batches in log order into one of at least STAGE_ROWS rows: where per-line records
        interleave with template lines, each piece would otherwise be a tiny batch, and a batch's
        cost (duplicate check, detectors) is mostly fixed."""
        self._staged.append(b)
        self._staged_n += batch_len(b)
        # a parallel worker's batches are replayed one by one in the parent: bigger ones there
        if self._staged_n >= (RAW_BATCH_ROWS if self.raw is not None else STAGE_ROWS):
            self._drain()

    def _drain(self) -> None:
        if self._staged:
            parts, self._staged, self._staged_n = self._staged, [], 0
            self.ingest(concat(parts))

    def flush(self) -> None:
        """Hand the buffered records to the step table (or the worker's spill)."""
        self._stage_pending()
        self._drain()

    def ingest(self, b: dict) -> None:
        """A batch of step records in log order: drop duplicates, count, store (records that print only an
        epoch wait for the summary that places them on steps, see epochs.py)."""
        if self.raw is not None:  # a parallel worker: the parent dedups and stores, in file order
            pickle.dump(pack(b), self.raw, protocol=pickle.HIGHEST_PROTOCOL)
            return
        now = self.epochs.admit(b)
        if now is not None:
            self._store(now)
        if self.epochs.full():
            self._store(self.epochs.release(None))

    def _train_summary(self, summary: dict, file: str) -> None:
        """The Trainer's end-of-training record: the records before it are placed on steps."""
        self._flush_held()
        self.flush()
        if self.raw is not None:  # a parallel worker: the parent holds the records and places them (finish)
            self.extra.setdefault("train_summary", summary)
            return
        self._store(self.epochs.release(summary, self.table.file_id(file)))

    def _store(self, b: dict | None) -> None:
        if b is None:
            return
        self.table.note_progress(b)
        b = self._dedup(b)
        n = batch_len(b)
        if not n:
            return
        ranks, has = b["rank"], b["has_loss"]
        if (ranks == ranks[0]).all():
            r = None if ranks[0] == NONE else int(ranks[0])
            if has.any():
                self.unique_steps[r] = self.unique_steps.get(r, 0) + int(has.sum())
        else:  # interleaved ranks: each rank's count in one pass
            got, counts = np.unique(ranks[has != 0], return_counts=True)
            for rk, c in zip(got.tolist(), counts.tolist()):
                r = None if rk == NONE else rk
                self.unique_steps[r] = self.unique_steps.get(r, 0) + c
        self.table.add_batch(b)
        fids = b["file"]
        for fid in ([int(fids[0])] if (fids == fids[0]).all() else np.unique(fids).tolist()):
            i = n - 1 if len(fids) and fids[-1] == fid else int(np.flatnonzero(fids == fid)[-1])
            ts = float(b["ts"][i])
            self.last_progress[self.table.files[fid]] = (int(b["line"][i]), None if math.isnan(ts) else ts)

    def _dedup(self, b: dict) -> dict:
        """A duplicate line (pasted twice, or tee'd) is not a new step: keys are iter, else step.

        Ranks keep their keys apart, so each rank's rows are checked on their own, in log order:
        a rank whose keys rise and are all above those it has seen (the common case, also where
        eight ranks' lines interleave) in one vectorised step, any other one row by row."""
        keys = np.where(b["iter"] != NONE, b["iter"], b["step"])
        ranks = b["rank"]
        one = bool((ranks == ranks[0]).all())
        groups = [(ranks[0], np.arange(len(keys)))] if one else [(r, np.flatnonzero(ranks == r))
                                                                for r in np.unique(ranks)]
        drop: list[int] = []
        merged: dict = {}  # column -> its copy, once a split record's later line fills its first
        for rk, rows in groups:
            k = keys[rows]
            has = k != NONE
            if not has.all():
                rows, k = rows[has], k[has]
            if not len(k):
                continue
            r = None if rk == NONE else int(rk)
            seen = self._seen_keys.setdefault(r, set())
            top = self._seen_max.get(r)
            if (not seen or (top is not None and top < k[0])) and (len(k) == 1 or (np.diff(k) > 0).all()):
                _add_seen(seen, k)  # strictly increasing, all new
                self._seen_max[r] = int(k[-1])
                continue
            kept: dict[int, int] = {}
            for i, key in zip(rows.tolist(), k.tolist()):
                if key in seen:
                    drop.append(i)
                    j = kept.get(key)
                    if j is not None and b["file"][i] == b["file"][j] and 0 < b["line"][i] - b["line"][j] <= SPLIT_GAP:
                        _merge_split(b, merged, j, i)
                    continue
                kept[key] = i
                if len(seen) > SEEN_KEYS:  # keep memory constant: steps only move forward
                    seen.clear()
                    self._seen_max.pop(r, None)
                seen.add(key)
                top = self._seen_max.get(r)
                self._seen_max[r] = key if top is None or key > top else top
        if merged:
            b = {**b, **merged}
        if not drop:
            return b
        keep = np.ones(len(keys), dtype=bool)
        keep[drop] = False
        return take(b, np.flatnonzero(keep))

    def finish(self, end_of_input: bool = True) -> None:
        """The records and events still held, out. ``end_of_input``: nothing follows what was read (not a followed
        file's latest read, not a range of a file split among workers), so a traceback still open was cut off."""
        self._redrawn = False  # what finish reads below is no bar's redraw
        self._flush_held()
        if end_of_input:
            for (file, rank), tb in list(self._frames.items()):
                # a traceback cut off before its exception (the rank died printing it: "lost sys.stderr")
                if tb[4] and tb[3] and _HANDOFF_FILE.search(tb[3]):
                    self._worker_died_in_handoff(file, tb[0], rank, None, None, tb[3], "cut off before its exception")
            self._frames.clear()
        for file, (r, line, rank, t) in self._joiner.close_all():
            self._line_text = None
            self._record(r, file, line, rank, t)
        for file in list(self._joins):
            self._flush_joins(file, math.inf)
        self._joins.clear()
        self._joins_done.clear()
        self.flush()
        if self._tw is not None:
            (first, pieces), self._tw = self._tw, None
            self._whole(self._tw_file, first, "".join(pieces), joined=True)
        if self._wrap is not None:
            wfile, wline, pre, parts = self._wrap
            self._wrap = None
            self._handle(wfile, wline, pre._replace(message=join_wrapped(parts[0], parts[1:])))
        self._close_block()
        self._flush_held()
        self.flush()
        if self.raw is None and "train_summary" not in self.extra:
            # no Trainer summary (a run that died): the progress bar redrawn after the last record shows its step
            last = self.epochs.last_held()
            bars = self._bars.get(self.table.files[last[0]]) if last is not None else None
            if bars:
                fid, line, epoch, n = last
                count = next((c for ln, c, t in bars if ln > line and n <= c <= t), None)
                if count is not None:
                    self.extra["train_summary"] = bar_summary(epoch, count)
                    self.extra["train_summary_file"] = fid
        if self.raw is None:
            # the end of a file: held records are placed by a summary that a parallel worker read (the first one:
            # a file split over workers is taken as one run), else they keep their epochs
            self._store(self.epochs.release(self.extra.pop("train_summary", None),
                                            self.extra.pop("train_summary_file", None)))


def _bar_columns(raw: bytes, head, fields, epochs: bool):
    """A bar line's redraws as columns: epoch, count, total (int64), {canonical: values}, {canonical: where
    present}; None when a non-blank redraw has no head of the bar's shape. The C kernel reads them where it can
    (``_fastscan.bars`` answers None where the regexes might read otherwise), the regexes the rest."""
    keys = [rx.pattern.split("=", 1)[0].replace("\\", "") for rx, _c in fields]
    bars = getattr(bulk._fastscan, "bars", None)  # None: no kernel, or one built before bars() (rebuild it)
    if bars is not None and all(k.isascii() and re.escape(k) + "=" == rx.pattern.split("(?<!", 1)[0]
                                          for k, (rx, _c) in zip(keys, fields)):
        got = bars(raw, epochs, tuple(k.encode() for k in keys))
        if got is not None:
            hcols, vbytes, pbytes, n = got
            ep, count, tot = np.frombuffer(hcols, dtype=np.int64).reshape(3, n)
            v = np.frombuffer(vbytes, dtype=np.float64).reshape(n, len(fields))
            p = np.frombuffer(pbytes, dtype=np.uint8).reshape(n, len(fields)).astype(bool)
            vals, present, loss = {}, {}, np.zeros(n, dtype=bool)
            for j, (_rx, c) in enumerate(fields):
                vals[c] = v[:, j].copy()
                if p[:, j].any():
                    present[c] = p[:, j]
                    if c == "loss":
                        loss |= p[:, j]
            present["loss"] = loss
            return ep, count, tot, vals, present
    text = raw.decode("utf-8", "replace")
    nonblank = sum(1 for s in text.split("\r") if s.strip())
    heads = [(m.start(), m[1], m[2], m[3]) for m in head.finditer(text)]
    if len(heads) != nonblank:
        return None
    starts = np.array([h[0] for h in heads], dtype=np.int64)
    count = np.array([h[2] for h in heads], dtype=np.int64)
    tot = np.array([h[3] for h in heads], dtype=np.int64)
    ep = np.array([h[1] for h in heads], dtype=np.int64) if epochs else np.zeros(len(count), dtype=np.int64)
    vals, present = {}, {}
    loss = np.zeros(len(count), dtype=bool)
    for rx, c in fields:
        ms = [(m.start(), m[1]) for m in rx.finditer(text)]
        col = np.full(len(count), np.nan)
        if ms:
            at = np.searchsorted(starts, np.array([m[0] for m in ms], dtype=np.int64), side="right") - 1
            raw_v = [m[1] for m in ms]
            try:
                v = np.array(raw_v, dtype=np.float64)  # "nan", "inf" and exponents convert in C
            except ValueError:  # thousands separators
                v = np.array([to_float(x) for x in raw_v], dtype=np.float64)
            ok = at >= 0
            col[at[ok]] = v[ok]
            present[c] = np.zeros(len(count), dtype=bool)
            present[c][at[ok]] = True
            if c == "loss":
                loss[at[ok]] = True
        vals[c] = col
    present["loss"] = loss
    return ep, count, tot, vals, present


class _BulkFeed:
    """A chunk's template lines, handed to the analyzer in line order (see readers.scan).

    The rows of every template are built into one batch, in line order, once per chunk;
    ``until`` stages slices of it between the line-by-line records.
    """

    def __init__(self, an: LogAnalyzer, parts: list, file_id: int) -> None:
        self.an, self.parts, self.file_id = an, parts, file_id
        batches = [tpl.batch(values, lines, file_id) for tpl, lines, values in parts]
        self.batch = concat(batches)
        if len(batches) > 1:
            self.batch = take(self.batch, np.argsort(self.batch["line"], kind="stable"))
        self.lines = self.batch["line"]
        self.count = len(self.lines)
        self.pos = [0] * len(parts)
        self.done = 0  # rows of ``batch`` staged or dropped
        self.taken = 0  # rows staged: the reader counts them as candidate lines

    def holds(self, line: int) -> bool:
        """Whether ``line`` is one of the template lines (emptied in the reader's view)."""
        i = int(np.searchsorted(self.lines, line))
        return i < self.count and int(self.lines[i]) == line

    def until(self, line: int | None) -> None:
        """Every template line before ``line`` (all of them for None); a template row on ``line``
        itself is dropped: the reader hands that line over, so its record is not the line's (a
        keyword in a carriage-return segment before the template's, see bulk.Template._split_fast)."""
        end = self.count if line is None else int(np.searchsorted(self.lines, line))
        if line is not None and end < self.count and self.lines[end] == line:
            self._stage_to(end, line)
            self.done = end + 1
            for t, (_tpl, lines, _values) in enumerate(self.parts):
                self.pos[t] = max(self.pos[t], int(np.searchsorted(lines, line, side="right")))
            return
        self._stage_to(end, line)

    def _stage_to(self, end: int, line: int | None) -> None:
        if end <= self.done:
            return
        k0, self.done = self.done, end
        self.taken += end - k0
        self.an._flush_held()  # a bar's redraw held before these template lines comes first, as line by line
        slices = []
        for t, (_tpl, lines, _values) in enumerate(self.parts):
            a = self.pos[t]
            b = len(lines) if line is None else int(np.searchsorted(lines, line))
            if b > a:
                slices.append((int(lines[b - 1]), t, a, b))
                self.pos[t] = b
        for _last, t, a, b in sorted(slices):  # the counters' "last value" in line order
            tpl, lines, values = self.parts[t]
            self.an.bulk(tpl, {k: v[a:b] for k, v in values.items()}, lines[a:b], self.file_id)
        self.an._stage_pending()
        self.an._stage(take(self.batch, slice(k0, end)))


_PLAIN = None


def _plain_prefilter():
    global _PLAIN
    if _PLAIN is None:
        _PLAIN = prefilter_regex("re")
    return _PLAIN


def terminal_width(lines: list[str]) -> int | None:
    """The column width a terminal capture was cut at: many lines of one length (>= 60), none longer, and
    what follows a full-width line mostly does not start like it (a continuation, not the next record of a
    fixed-width format)."""
    if len(lines) < 8:
        return None
    lengths = [len(x) for x in lines]
    top = max(lengths)
    full = [i for i, n in enumerate(lengths[:-1]) if _cut_at(lines[i], top)]
    if top < 60 or len(full) < 3 or len(full) < 0.05 * len(lines):
        return None
    head = [_HEAD.sub("#", x[:8]) for x in lines]
    after_full = {i + 1 for i in full}
    heads = Counter(h for i, h in enumerate(head) if i not in after_full)
    # line starts: the heads of full-width lines that follow a short one, and frequent heads of lines after a
    # short one
    starts = {h for h, n in heads.items() if n >= 3} | {head[i] for i in full if i not in after_full}
    # an indented line that follows a full-width one with the indentation many lines after short ones have
    # (OLMo's fixed-width record headers, each with its "    name=value" lines under it) is one of those lines
    indents = Counter(_indent(x) for i, x in enumerate(lines) if i not in after_full and _indent(x) >= 2)
    # a continuation rarely starts the way the file's lines start
    starts_like_a_line = sum(head[i + 1] in starts or indents[_indent(lines[i + 1])] >= 3 for i in full)
    return top if starts_like_a_line < 0.3 * len(full) else None


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


_HEAD = re.compile(r"\d+")
#: a full-width line that ends in a long run of blanks was padded to the width by its writer (tqdm.write clears
#: the bar that way, so does a terminal pasted with its trailing blanks): its text ended there, the terminal did
#: not cut it, and the next line is a line of its own. A cut inside text leaves at most the blanks between two
#: of its words or columns.
_PADDED_END = " " * 16


def _cut_at(line: str, width: int) -> bool:
    """``line`` is a piece the terminal cut at ``width`` columns (its text goes on on the next line)."""
    return len(line) == width and not line.endswith(_PADDED_END)


def _kinds(text: str) -> set[str]:
    return {kind for kind, _, _ in signatures.match_line(prefixes.split_prefix(text).message)}


def _seen_kinds(text: str) -> set[str]:
    """What the analyzer learns from ``text`` as a line of its own: nothing unless the prefilter hands it over."""
    return _kinds(text) if _plain_prefilter().search(text.encode("utf-8", "replace")) else set()


def hard_wrapped(lines: list[str], cut: bool = False) -> dict[int, tuple[int, str | None]]:
    """Records of a short excerpt that a fixed width split, with a failure signature in them.

    The pieces of a split record but the last are exactly the excerpt's longest length (>= 60
    columns, the width it was cut at). When :func:`terminal_width` found that width (``cut``), every
    such record with a signature in it or in one of its pieces counts; otherwise (too few lines to
    tell) only one whose joined pieces say all that the pieces read as lines do, and more (a
    signature that spans the cut, or sits in a piece without a keyword of its own). Returns line
    number -> (first line of the record, the joined record on that first line, None on the others)."""
    if len(lines) < 2:
        return {}
    top = max(len(x) for x in lines)
    if top < 60:
        return {}
    out: dict[int, tuple[int, str | None]] = {}
    i = 0
    while i < len(lines) - 1:
        if not _cut_at(lines[i], top):
            i += 1
            continue
        j = i + 1
        while j < len(lines) - 1 and _cut_at(lines[j], top) and j - i < MAX_WRAPPED - 1:
            j += 1
        pieces = lines[i:j + 1]
        said = _kinds("".join(pieces))
        alone = [_kinds(p) for p in pieces] if cut else [_seen_kinds(p) for p in pieces]
        seen = set().union(*alone)
        # without a known width, a join must add and lose nothing: a record of its own after a long
        # line (a signature anchored at its start) keeps being read on its own
        if (said or seen) if cut else (said > seen):
            out[i + 1] = (i + 1, "".join(pieces))
            out.update({n + 1: (i + 1, None) for n in range(i + 1, j + 1)})
            i = j + 1
        else:
            i += 1
    return out


#: a record of a policy-gradient objective (TRL's GRPO/PPO/RLOO print the sampled completions' ``reward`` and
#: ``reward_std``; not DPO/ORPO's implicit ``rewards/chosen``, whose loss is no policy gradient)
_RL_RECORD = re.compile(r"""(?<![\w/])['"]?(?:reward|reward_std|objective/rlhf_reward|objective/scores)['"]?\s*[:=]""")
#: lines between a bar's redraw and the one of the same count that replaces it, at most
REDRAW_GAP = 2
#: pieces of one terminal-wrapped line joined at most
MAX_WRAPPED = 16
#: lines between "Exception ignored in" and the exception that ends its traceback, at most
_IGNORED_SPAN = 60
#: how much of a file's head teaches its per-line prefixes
PRIME_BYTES = 64 << 10
PRIME_LINES = 400
_WIDE_GAP = " " * 24
_PADDING = re.compile(r"(?<=\S) {24,}(?=\S)")
#: progress-bar counts kept per file: the bar redrawn after the last record is among the last ones
_BARS_KEPT = 256
#: a tqdm bar's count and total ("| 10/30 [")
_BAR_AT = re.compile(r"\|\s*(\d+)/(\d+) \[")
#: where a second rank's output starts inside a line ("...loss 2.1[rank1]:[E1107 ...")
_GLUED = re.compile(r"(?<=\S)(?=\[(?:rank|default)\d+\]:|\[rank \d+\] )")
#: where a progress bar's frame starts: its description (``Epoch 0:``) and percentage (``  3%|``); a line with
#: two or more is several redraws whose ``\r`` a paste or a collector dropped
_BAR_FRAME = re.compile(r"(?:[A-Za-z][\w./-]*(?: [\w./-]+){0,3}:)?\s*\d{1,3}%\|")

#: progress-line templates per file, learning attempts that may fail per file, and chunks
#: without a match after which a template (not the last) is dropped
MAX_TEMPLATES = 4
LEARN_FAILURES = 8
IDLE_CHUNKS = 8
#: rows gathered into one batch for the step table (see LogAnalyzer._stage)
STAGE_ROWS = 1 << 14
#: rows a parallel worker gathers before it writes a batch for the replay
RAW_BATCH_ROWS = 1 << 16
#: keys remembered per rank for duplicate detection before the set starts over
SEEN_KEYS = 4096
#: lines between the first and a later line of one record printed a field per line, at most
SPLIT_GAP = 8


def _merge_split(b: dict, merged: dict, j: int, i: int) -> None:
    """Row ``i`` repeats row ``j``'s step a few lines below it in the same file: one record printed a field
    per line (TensorFlowTTS's ``(Step: N) train_mel_loss = nan.`` lines). The fields the first line lacks are
    taken from the later one, and a NaN loss component there makes the step a NaN step, as on one line."""

    def col(c: str):
        if c not in merged:
            merged[c] = np.array(b[c], copy=True)
        return merged[c]

    if b["has_loss"][i] and not b["has_loss"][j]:
        col("loss")[j] = b["loss"][i]
        col("has_loss")[j] = 1
    elif b["has_loss"][i] and not math.isfinite(b["loss"][i]) and math.isfinite(b["loss"][j]):
        col("nan_iters")[j] = max(1.0, b["nan_iters"][j] if not math.isnan(b["nan_iters"][j]) else 0.0)
    if b["has_grad_norm"][i] and not b["has_grad_norm"][j]:
        col("grad_norm")[j] = b["grad_norm"][i]
        col("has_grad_norm")[j] = 1
    for c in FLOAT_COLS:
        if c not in ("loss", "grad_norm", "nan_iters", "ts") and math.isnan(b[c][j]) and not math.isnan(b[c][i]):
            col(c)[j] = b[c][i]


def _add_seen(seen: set, keys) -> None:
    """``seen`` after adding new ``keys`` (a list or an int array) one by one with the
    clear-when-full rule of ``_dedup``; of a long batch only the kept tail becomes Python ints."""
    s, n, full = len(seen), len(keys), SEEN_KEYS + 1
    if s + n <= full:
        seen.update(keys.tolist() if isinstance(keys, np.ndarray) else keys)
        return
    i0 = full - s  # the key whose arrival finds the set full
    last = i0 + full * ((n - 1 - i0) // full)
    seen.clear()
    tail = keys[last:]
    seen.update(tail.tolist() if isinstance(tail, np.ndarray) else tail)


def grep_pattern() -> str:
    """The prefilter as a POSIX ERE for ``grep -cE`` (the benchmark's baseline)."""
    import re as _re

    def ere(lit: str) -> str:
        return _re.sub(r"([.\[\]()*+?{}|^$\\])", r"\\\1", lit)

    # ERE has no (?:...) groups: a plain group matches the same lines
    pats = [ere(k) for k in signatures.KEYWORDS] + [p.replace(r"\d", "[0-9]").replace(r"\s", "[[:space:]]")
                                                     .replace("(?:", "(") for p in signatures.PATTERNS]
    return "|".join(pats)
