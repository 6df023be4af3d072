"""Line prefixes that launchers, loggers and viewers put in front of a message.

``split_prefix(line)`` peels them off repeatedly and returns the rank (when a prefix names
one), the host, a timestamp in epoch seconds and the message. Recognised: torchrun
``[rank3]:`` / ``[default7]:``, mpirun ``[1,0]<stdout>:``, Ray ``(RayTrainWorker pid=…)``,
Slurm ``srun -l`` ``12: ``, pdsh/nccl-tests ``host: ``, ISO / bracketed timestamps, kernel
``[12345.678]``, log-viewer line numbers ``[4370] ``, glog ``[E610 19:41:10.7 file.cpp:12]``
and Python-logging ``[INFO] [file.py:12:fn]`` tags.
"""

from __future__ import annotations

import datetime as _dt
import re
from typing import NamedTuple

_TS = (r"(?P<y>\d{4})[-/](?P<mo>\d{2})[-/](?P<d>\d{2})[ T_](?P<h>\d{2}):(?P<mi>\d{2}):(?P<s>\d{2})"
       r"(?P<frac>[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?")

_PREFIXES: list[tuple[str, re.Pattern[str]]] = [
    # a log quoted in an e-mail, a forum or an issue's markdown ("> ", "> > ")
    ("quote", re.compile(r"(?:>[ \t]?)+")),
    ("lineno", re.compile(r"\[\d+\] ")),
    ("rank", re.compile(r"\[(?:rank|default|worker|trainer)(?P<rank>\d+)\]:\s?")),
    # the program's own rank tag in front of its message: "[rank 2] step 26 ...", "[Rank 1] Watchdog ...",
    # "rank 1: leaving the loop" (a space before the number: not torchrun's prefix)
    ("rank_tag", re.compile(r"\[[Rr]ank (?P<rank>\d+)\]:?[ \t]+")),
    ("rank_colon", re.compile(r"[Rr]ank (?P<rank>\d+):[ \t]+")),
    ("mpi", re.compile(r"\[\d+,(?P<rank>\d+)\]<(?:stdout|stderr)>:\s?")),
    ("ray", re.compile(r"\((?:[\w.-]+ )?pid=\d+(?:, ip=[\d.:a-f]+)?\)\s*")),
    ("ts", re.compile(r"\[?" + _TS + r"\]?(?: -|:)?\s+")),
    ("kernel", re.compile(r"\[\s*\d+\.\d+\]\s*")),
    # "Jun 10 10:00:00 host kernel: ", "... host python[1234]: ", "... host slurmstepd[88]: "
    ("syslog", re.compile(r"(?:[A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2}) (?P<host>[\w.-]+) (?:[\w./-]+(?:\[\d+\])?: )?")),
    ("glog", re.compile(r"\[?[IWEF](?:(?P<gmd>\d{4}) (?P<ghms>\d{2}:\d{2}:\d{2}\.\d+))?(?: +\d+)? ?[\w.]+\.(?:cpp|cc|h|py):\d+\]\s*")),
    ("pylog", re.compile(r"\[(?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL)\]\s*(?:\[[\w.]+:\d+:\w+\]\s*)?")),
    ("tag", re.compile(r"\[(?:titan|deepspeed|deepscale)\]\s+")),
    ("srun", re.compile(r"(?P<rank>\d{1,5}): ")),
    # a host name contains a digit (node-1, h100-13, GPUHOST23) and no underscore, which tells it
    # from an exception name ("RuntimeError: ...") or a key ("loss: ...").
    ("host", re.compile(r"(?P<host>(?=[\w.-]*\d)(?=[\w.-]*[A-Za-z])[A-Za-z0-9][A-Za-z0-9.-]*): (?=\S)")),
]


class Prefix(NamedTuple):
    rank: int | None
    host: str | None
    ts: float | None
    message: str
    #: a glog header's time of day, year unknown (seconds from Jan 1, 00:00 of an unknown year): orders lines
    #: that carry one (a collective timeout's reports in per-rank files), never mixed with ``ts``
    clock: float | None = None


def parse_timestamp(m: re.Match[str]) -> float | None:
    try:
        frac = m.group("frac")
        dt = _dt.datetime(int(m["y"]), int(m["mo"]), int(m["d"]), int(m["h"]), int(m["mi"]), int(m["s"]),
                          tzinfo=_dt.timezone.utc)
        return dt.timestamp() + (float("0." + frac[1:]) if frac else 0.0)
    except (ValueError, OverflowError):
        return None


_TS_ANYWHERE = TS_ANYWHERE = re.compile(_TS)


def find_timestamp(text: str) -> float | None:
    """A timestamp anywhere in the first part of a line (the logger put it after a tag)."""
    m = _TS_ANYWHERE.search(text, 0, 80)
    return parse_timestamp(m) if m else None


#: terminal colour and cursor sequences (CSI), kept by ``script``, ``tee`` under FORCE_COLOR, CI
#: consoles, and Python 3.13's coloured tracebacks; also in caret notation (``^[[34m``: ``cat -v``,
#: ``less``, a pasted terminal)
_ANSI = re.compile(r"(?:\x1b|\^\[)\[[0-9;?]*[ -/]*[@-~]")


def split_prefix(line: str) -> Prefix:
    if "\x1b" in line or "^[[" in line:
        line = _ANSI.sub("", line)
    rank = host = ts = clock = None
    pos = 0
    n = len(line)
    while pos < n and line[pos] == " ":
        pos += 1
    seen: set[str] = set()
    from_srun = False
    progressed = True
    while progressed and pos < n:
        progressed = False
        for name, rx in _PREFIXES:
            if name in seen:
                continue
            m = rx.match(line, pos)
            if not m or m.end() == pos:
                continue
            if name in ("rank", "mpi", "rank_tag", "rank_colon") and (rank is None or from_srun):
                # torchrun's or mpirun's rank wins over an srun label in front of it: with one torchrun per
                # node, ``srun -l`` numbers the node's task, not the rank
                rank, from_srun = int(m["rank"]), False
            elif name == "srun" and rank is None:
                rank, from_srun = int(m["rank"]), True
            elif name in ("host", "syslog") and host is None:
                host = m["host"]
            elif name == "ts":
                ts = parse_timestamp(m)
            elif name == "glog" and m["gmd"]:
                clock = _glog_clock(m["gmd"], m["ghms"])
            seen.add(name)
            pos = m.end()
            progressed = True
            break
    return Prefix(rank, host, ts, line[pos:], clock)


def _glog_clock(mmdd: str, hms: str) -> float | None:
    """``1204``, ``10:20:10.123456`` → seconds from Jan 1 (a leap year's calendar: Feb 29 has a place)."""
    import datetime

    try:
        t = datetime.datetime(2000, int(mmdd[:2]), int(mmdd[2:]))
        h, mi, sec = hms.split(":")
    except ValueError:
        return None
    return (t - datetime.datetime(2000, 1, 1)).total_seconds() + int(h) * 3600 + int(mi) * 60 + float(sec)


#: a token a launcher or log collector puts in front of every line: a bracketed tag (``[stderr]``,
#: ``<stdout>``), a container runtime's stream (``stdout F``), or a name with a digit or a dot
#: (``job.node-3``, ``pod-7f9c``, ``10.0.0.3``), optionally followed by docker compose's `` | ``; never a
#: quoted or braced value, an exception name or a plain word
_TAG = re.compile(r"(?:\[[^\]\s]{1,48}\]|<[^>\s]{1,48}>|(?:stdout|stderr)(?: [PF])?|(?:DEBUG|INFO|WARNING|WARN|NOTICE)"
                  r"|(?=[\w.@/:-]*[A-Za-z])(?=[\w.@/:-]*[\d.])[\w.@/:-]{2,64}):?(?:[ \t]+\|[ \t]?|[ \t]+)")
_NOT_TAG = re.compile(r"(?:Error|Exception|Warning|Interrupt)\b|^(?:File|line|http)"
                      # a progress counter ("step:12", "[iter=3/100]", "global_step:7") is the record's data: every
                      # line starts with it, yet it is no prefix (stripped, the record loses its step)
                      r"|^[\[(<]?(?i:step|steps|iter|iteration|global_step|batch|epoch)[:=#]?\d"
                      # Python logging's default "LEVEL:logger.name:message": the token ends inside the message
                      r"|^(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):[\w.]+:")
_DIGITS = re.compile(r"\d+")
#: NCCL's own "host:pid:tid [dev] " header carries the host and the device: read, never stripped
_NCCL_HEAD = re.compile(r"[\w.-]+:\d+:\d+ \[\d+\] ")


class PrefixLearner:
    """Per-line prefixes of any shape, learned from the file: the run of tag-like tokens that
    starts a large share of its lines (digits generalised, so ``node-3`` and ``node-4`` are one
    shape) is a prefix, and is stripped from every line that starts with it."""

    MIN_LINES = 3
    SHARE = 0.3

    def __init__(self) -> None:
        self.seen = 0
        self.counts: dict[str, int] = {}
        self.learned: set[str] = set()

    @staticmethod
    def heads(msg: str) -> list[tuple[str, int]]:
        """(shape, end) of the first 1..3 tag tokens of ``msg``."""
        out, pos = [], 0
        for _ in range(3):
            if _NCCL_HEAD.match(msg, pos):
                break
            m = _TAG.match(msg, pos)
            if not m or _NOT_TAG.search(m[0]):
                break
            pos = m.end()
            out.append((_DIGITS.sub("#", msg[:pos].rstrip()), pos))
        return out

    def strip(self, msg: str, indented: bool = False) -> tuple[str, bool]:
        """``msg`` without its learned prefix (and whether one was removed); learns as it goes. ``indented``: the
        physical line began with white space (split_prefix strips it from ``msg``)."""
        heads = self.heads(msg) if msg[:1] not in "{'\" " else []
        if not indented:
            # an indented line goes on the record above it (its fields, a traceback's frames): no line of its own
            # to carry a prefix, so it does not count against a prefix's share
            self.seen += 1
        for shape, _end in heads:
            n = self.counts[shape] = self.counts.get(shape, 0) + 1
            if n >= self.MIN_LINES and n >= self.SHARE * self.seen:
                self.learned.add(shape)
        if len(self.counts) > 4096:  # a file whose heads never repeat: start over, memory stays small
            self.counts = {s: c for s, c in self.counts.items() if s in self.learned}
        for shape, end in reversed(heads):
            if shape in self.learned:
                return msg[end:], True
        return msg, False
