"""Progress lines in bulk: a per-file line template learned from one parsed line, applied to
whole chunks with one ``re.split``.

In a training log the progress line repeats with only its numbers changing. After the
per-line parsers have turned one such line into a step record, :func:`learn` replaces every
number in it by a capture group and works out, by re-parsing the line with probe numbers,
which group feeds which field and how (``int``, ``float``, × 1000 for seconds, ÷ 1024 for
MiB, negated). The template is accepted only when every probe line — numbers of 1 to 15
digits, zero, leading zeros, and the line's own numbers — gives exactly the record the
per-line path gives, with the same rank, no timestamp and no failure signature.

``split(buf)`` then runs one regex over a whole chunk: the chunk comes back with every
template line emptied (so line numbers and the remaining lines are unchanged and go to the
normal prefilter) plus one column of strings per group, converted (vectorised, see
:func:`decimals`) into the NumPy batch the step table takes. Nothing here decides a finding;
where a chunk holds a line that starts a multi-line block, the reader goes back to reading
the rest of that chunk line by line.
"""

from __future__ import annotations

import os
import re

import numpy as np

from llmdiag.logs import prefixes, signatures
from llmdiag.logs.progress import read_line
from llmdiag.logs.table import FLOAT_COLS, NONE, empty_batch

try:  # the optional C accelerator (setup.py); without it the re.split path below does the same
    from llmdiag.logs import _fastscan
except ImportError:  # pragma: no cover - depends on the install
    _fastscan = None
if os.environ.get("LLMDIAG_NO_FASTSCAN"):  # compare with the pure-Python path (bench, debugging)
    _fastscan = None

_NUM = re.compile(r"\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
# unbounded repeats are faster in re; Template.split checks the lengths (_MAX_LEN)
_SHAPE_RX = {"int": r"(\d+)", "dec": r"(\d+\.\d+)", "exp": r"(\d+(?:\.\d+)?[eE][-+]?\d+)"}
_OPS = {
    "int": int,
    "negint": lambda t: -int(t),
    "id": float,
    "ms": lambda t: float(t) * 1000.0,
    "mib": lambda t: float(t) / 1024.0,
    "neg": lambda t: -float(t),
    "negms": lambda t: -float(t) * 1000.0,
    "negmib": lambda t: -float(t) / 1024.0,
}
_DAYS_IN_MONTH = np.array([0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31], dtype=np.int64)


def epoch_seconds(y, mo, d, h, mi, s) -> tuple[np.ndarray, np.ndarray]:
    """UTC epoch seconds (float64) of date-time columns, and which rows are valid dates.

    The same value as ``prefixes.parse_timestamp`` (``datetime(..., tzinfo=utc).timestamp()``)
    before its fraction is added: days from the civil date (Hinnant's algorithm) in int64.
    Invalid rows (month 13, 30 February, hour 24, second 60, year 0) are flagged.
    """
    leap = ((y % 4 == 0) & (y % 100 != 0)) | (y % 400 == 0)
    dim = _DAYS_IN_MONTH[np.clip(mo, 0, 12)] + ((mo == 2) & leap)
    ok = (y >= 1) & (mo >= 1) & (mo <= 12) & (d >= 1) & (d <= dim) & (h <= 23) & (mi <= 59) & (s <= 59)
    yy = y - (mo <= 2)
    era = yy // 400
    yoe = yy - era * 400
    doy = (153 * ((mo + 9) % 12) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    days = era * 146097 + doe - 719468
    return (days * 86400 + h * 3600 + mi * 60 + s).astype(np.float64), ok


def _token_parts(tok: str) -> list[str]:
    """A number token as digits, separator, digits, ... (it starts and ends with digits)."""
    return re.split(r"(\d+)", tok)[1:-1]


def _ts_regex(tok: str) -> str:
    """A capture group for timestamps laid out like ``tok``: fixed-width fields, any fraction."""
    runs = _token_parts(tok)
    out = []
    for j, part in enumerate(runs):
        if j % 2:
            out.append(re.escape(part))
        else:
            out.append(r"\d+" if j == 12 else r"\d{%d}" % len(part))
    return "(" + "".join(out) + ")"


_TS_PROBES = {  # year, month, day, hour, minute, second, fraction digits
    "a": (2021, 3, 4, 5, 6, 7, "25"), "b": (2022, 8, 9, 10, 11, 12, "5"), "one": (1970, 1, 1, 0, 0, 0, "0"),
    "long": (9999, 12, 31, 23, 59, 59, "123456789012345"), "zero": (2000, 1, 1, 0, 0, 0, "000"),
    "lead": (2004, 2, 29, 0, 0, 1, "007"),
}


def _ts_probe(own: str, kind: str) -> str:
    """A valid timestamp laid out like ``own`` (its separators and field widths)."""
    runs = _token_parts(own)
    vals = _TS_PROBES[kind]
    out = []
    for j, part in enumerate(runs):
        if j % 2:
            out.append(part)
        elif j == 12:
            out.append(vals[6])
        else:
            out.append(str(vals[j // 2]).zfill(len(part)))
    return "".join(out)


def _ts_span(text: str, ts: float) -> tuple[int, int] | None:
    """Where in ``text`` the timestamp the per-line path read (``ts``) is written; None when it
    cannot be templated (a time zone, digits glued to it)."""
    for m in prefixes.TS_ANYWHERE.finditer(text):
        if prefixes.parse_timestamp(m) != ts:
            continue
        core = m.end("frac") if m["frac"] else m.end("s")
        if text[core:m.end()] not in ("", "Z") or len(m["y"]) != 4:
            return None  # a numeric time zone; "Z" stays in the text after the slot
        if (m.start() and text[m.start() - 1].isdigit()) or (core < len(text) and text[core].isdigit()):
            return None
        return m.start(), core
    return None


def _literal_rx(lit: str, flex: bool) -> str:
    """A literal as a regex; with ``flex`` its leading and trailing runs of spaces become " +"."""
    if not flex or not lit.strip(" "):
        return (" +" if lit else "") if flex else re.escape(lit)
    mid = lit.strip(" ")
    return (" +" if lit[0] == " " else "") + re.escape(mid) + (" +" if lit[-1] == " " else "")


def _repad(lit: str, how: str) -> str:
    """``lit`` with its leading and trailing runs of spaces made one space ("narrow") or two
    wider ("wide"): the padding in front of and after a number."""
    if not how:
        return lit
    return re.sub(r"^ +| +$", " " if how == "narrow" else (lambda m: m[0] + "  "), lit)


def _ts_value(tok: str) -> float | None:
    """The per-line value of a timestamp token, through the vectorised conversion."""
    digits = re.findall(r"\d+", tok)
    base, ok = epoch_seconds(*(np.array([int(v)]) for v in digits[:6]))
    if not ok[0]:
        return None
    return float(base[0]) + (int(digits[6]) / 10.0 ** len(digits[6]) if len(digits) > 6 else 0.0)


def _shape(tok: str) -> str:
    return "exp" if ("e" in tok or "E" in tok) else "dec" if "." in tok else "int"


def _probe(shape: str, kind: str, i: int, own: str = "") -> str:
    """A probe number of ``shape`` for slot ``i`` (``kind`` picks the family)."""
    if shape == "ts":
        return _ts_probe(own, kind)
    if kind in ("a", "b"):  # distinct per slot: tells which slot feeds which field
        base = (1000 + 37 * i) if kind == "a" else (2000 + 53 * i)
        return {"int": str(base), "dec": f"{base}.25", "exp": f"{base}.5e-0{1 + i % 7}"}[shape]
    return {
        "one": {"int": "7", "dec": "0.5", "exp": "5e-07"},
        "long": {"int": "123456789012345", "dec": "123456789012.125", "exp": "123456789012.125E+12"},
        "zero": {"int": "0", "dec": "0.0", "exp": "0.0e+00"},
        "lead": {"int": "0042", "dec": "007.50", "exp": "01.5e-3"},
    }[kind][shape]


class Template:
    def __init__(self, literals: list[str], shapes: list[str], fields: dict, const: dict, rank,
                 own: list[str] | None = None, flex: bool = False) -> None:
        self.literals, self.shapes = literals, shapes
        #: the leading and trailing runs of spaces of each literal match any run of spaces (padded
        #: numbers); set only when learn() saw the per-line parsers read re-padded lines alike
        self.flex = flex
        self.fields = fields  # canon -> (slot, op)
        self.const = const  # canon -> value
        self.rank = rank  # ("slot", i, op) or ("const", value)
        #: the slot holding the line's timestamp (shape "ts": its layout is the own line's)
        self.ts_slot = shapes.index("ts") if "ts" in shapes else None
        ts_rx = _ts_regex(own[self.ts_slot]) if self.ts_slot is not None and own is not None else None
        body = "".join(_literal_rx(lit, flex) + ((ts_rx if shapes[i] == "ts" else _SHAPE_RX[shapes[i]])
                                                 if i < len(shapes) else "")
                       for i, lit in enumerate(literals))
        self.regex = re.compile(("\n" + body + "(?=\n)").encode())
        self.groups = len(shapes)
        #: the C kernel's form: digit-free pieces around the digit runs of the template's own line
        #: (a subset of the lines the regex matches: a number's inner text, e.g. the "." and "e-"
        #: of 3.0e-04, is fixed too), per run an exact width (0: any; a timestamp's fields have
        #: theirs), and per used slot its kernel columns
        self.pieces: tuple | None = None
        self.slot_spec: tuple = ()
        self.widths: tuple = ()
        self.flexible: tuple = ()
        if own is not None and _fastscan is not None:
            pieces, spec, widths, run = [literals[0].encode()], {}, [], 0
            flexible = [flex]  # the literals between numbers stretch, a number's inner text never
            for i, tok in enumerate(own):
                parts = _token_parts(tok)
                nruns = (len(parts) + 1) // 2
                pieces.extend(p.encode() for p in parts[1::2])
                pieces.append(literals[i + 1].encode())
                flexible += [False] * (nruns - 1) + [flex]
                if shapes[i] == "ts":  # year, month, day, hour, minute, second (fixed widths), fraction
                    widths += [len(d) for d in parts[0:12:2]] + [0] * (nruns - 6)
                    spec[i] = [(run + j, run + j, 0) for j in range(6)] + ([(run + 6, run + 6, 3)] if nruns > 6 else [])
                else:
                    widths += [0] * nruns
                    spec[i] = [(run, run + nruns - 1, {"int": 0, "dec": 1, "exp": 2}[shapes[i]])]
                run += nruns
            if not any(re.search(rb"[0-9\n]", p) for p in pieces):
                self.pieces = tuple(pieces)
            self.slot_spec = tuple(c for k in self.used_slots() for c in spec[k])
            self.widths = tuple(widths)
            self.flexible = tuple(flexible)

    def line(self, nums: list[str]) -> str:
        return "".join(lit + (nums[i] if i < len(nums) else "") for i, lit in enumerate(self.literals))

    def expected(self, nums: list[str]) -> tuple[dict, int | None]:
        rec = dict(self.const)
        for canon, (slot, op) in self.fields.items():
            rec[canon] = _OPS[op](nums[slot])
        rank = self.rank[1] if self.rank[0] == "const" else _OPS[self.rank[2]](nums[self.rank[1]])
        return rec, rank

    # -- bulk -----------------------------------------------------------------------------
    def used_slots(self) -> list[int]:
        slots = {slot for slot, _op in self.fields.values()}
        if self.rank[0] == "slot":
            slots.add(self.rank[1])
        if self.ts_slot is not None:
            slots.add(self.ts_slot)
        return sorted(slots)

    def split(self, buf: bytes):
        """(rest, line numbers (1-based, in ``buf``) of the template lines, {slot: values}, newlines)
        or None.

        ``rest`` is ``buf`` with every template line emptied: the same lines, numbered alike.
        The first line of ``buf`` is never a template line here (the regex needs the newline
        before it); the line-by-line path reads it. None when a number is longer than the
        template was verified for (the chunk is then read line by line).
        """
        if self.pieces is not None:
            return self._split_fast(buf)
        if self.ts_slot is not None:
            return None  # timestamps are converted in bulk by the C kernel only
        parts = self.regex.split(buf)
        g = self.groups + 1
        n = (len(parts) - 1) // g
        if not n:
            return None
        values = _convert(parts, g, n, self.used_slots(), self.shapes)
        if values is None:
            return None
        pieces = parts[0::g]
        rest = b"\n".join(pieces)
        lens = np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces))
        seps = np.cumsum(lens[:-1]) + np.arange(n)  # the joining newlines stand for the template lines
        nl = np.flatnonzero(np.frombuffer(rest, dtype=np.uint8) == 10)
        lines = np.searchsorted(nl, seps) + 2
        return rest, lines, values, len(nl)

    def _split_fast(self, buf: bytes):
        """``split`` through the C kernel: template lines are blanked with '\\r' instead of emptied
        (same line numbers; they strip to "" and match no keyword), and may include line 1.

        A line may also match with its last carriage-return segment (a record that ``tqdm.write``
        printed after the bar's updates on the same physical line, a CRLF line): only that segment
        is blanked, and a keyword in the segments before it makes the reader hand that line over,
        which drops the template's row for it (``_BulkFeed.until``): as line by line, where the
        line's first matching segment is read and the rest of the line is not."""
        idx, offs, vals, rest, newlines = _fastscan.scan(buf, self.pieces, self.slot_spec, self.widths, self.flexible,
                                                         True)
        lines = np.frombuffer(idx, dtype=np.int64)
        n = len(lines)
        if not n:
            return None
        cols = np.frombuffer(vals, dtype=np.float64).reshape(n, len(self.slot_spec))
        values, j = {}, 0
        for k in self.used_slots():
            if self.shapes[k] == "ts":
                parts = [cols[:, j + t].astype(np.int64) for t in range(6)]
                ts, ok = epoch_seconds(*parts)
                nfrac = int(j + 6 < len(self.slot_spec) and self.slot_spec[j + 6][2] == 3)
                values[k] = ts + cols[:, j + 6] if nfrac else ts
                j += 6 + nfrac
                if not ok.all():  # an impossible date: give those lines back to the per-line path
                    rest = bytearray(rest)
                    for start in np.frombuffer(offs, dtype=np.int64)[~ok].tolist():
                        end = buf.index(b"\n", start)
                        rest[start:end] = buf[start:end]
                    rest = bytes(rest)
                    lines, cols = lines[ok], cols[ok]
                    values = {kk: v[ok] for kk, v in values.items()}
                    n = len(lines)
                    if not n:
                        return None
            else:
                values[k] = cols[:, j].astype(np.int64) if self.shapes[k] == "int" else cols[:, j]
                j += 1
        return rest, lines + 1, values, newlines

    def batch(self, values: dict, lines: np.ndarray, file_id: int) -> dict:
        n = len(lines)
        b = empty_batch(n)
        for canon, (slot, op) in self.fields.items():
            if canon not in FLOAT_COLS and canon not in ("step", "iter"):
                continue
            b[canon] = _apply(op, values[slot])
        for canon, val in self.const.items():
            if canon in FLOAT_COLS and val is not None:
                b[canon] = np.full(n, float(val))
            elif canon in ("step", "iter") and val is not None:
                b[canon] = np.full(n, int(val), dtype=np.int64)
        if self.rank[0] == "const":
            b["rank"][:] = NONE if self.rank[1] is None else self.rank[1]
        else:
            b["rank"] = _apply(self.rank[2], values[self.rank[1]])
        if self.ts_slot is not None:
            b["ts"] = values[self.ts_slot]
        b["line"] = lines.astype(np.int64)
        b["file"][:] = file_id
        b["has_loss"][:] = int("loss" in self.fields or "loss" in self.const)
        b["has_grad_norm"][:] = int("grad_norm" in self.fields or "grad_norm" in self.const)
        return b

    def last_value(self, canon: str, values: dict):
        if canon in self.fields:
            slot, op = self.fields[canon]
            return _apply(op, values[slot][-1:])[0].item()
        return self.const.get(canon)


def _apply(op: str, v: np.ndarray) -> np.ndarray:
    """An op of ``_OPS`` on converted numbers, with the same float operations."""
    if op in ("int", "negint"):
        return -v if op == "negint" else v
    v = v.astype(np.float64)
    if op.startswith("neg"):
        v = -v
    if op.endswith("ms"):
        v = v * 1000.0
    elif op.endswith("mib"):
        v = v / 1024.0
    return v


#: longest number per shape the template was verified for (its probes) and that converts exactly
_MAX_LEN = {"int": 15, "dec": 16, "exp": 24}
_POW10 = 10 ** np.arange(19, dtype=np.int64)
_POW10F = np.array([10.0 ** k for k in range(23)])  # exact doubles


def _convert(parts: list, g: int, n: int, slots: list[int], shapes: list[str]) -> dict | None:
    """The numbers of the used slots, as int64 (``int``) or float64 arrays; None if one is too long."""
    out: dict = {}
    flat_slots = [k for k in slots if shapes[k] != "exp"]
    if flat_slots:
        toks: list[bytes] = []
        for k in flat_slots:
            toks += parts[k + 1::g]
        lens = np.fromiter(map(len, toks), dtype=np.int64, count=len(toks))
        per = lens.reshape(len(flat_slots), n).max(axis=1)
        if any(int(m) > _MAX_LEN[shapes[k]] for k, m in zip(flat_slots, per)):
            return None
        mant, frac = _decimals(b"".join(toks), lens)
        mant, frac = mant.reshape(len(flat_slots), n), frac.reshape(len(flat_slots), n)
        for i, k in enumerate(flat_slots):
            out[k] = mant[i] if shapes[k] == "int" else mant[i] / _POW10F[frac[i]]
    for k in slots:
        if shapes[k] == "exp":
            col = parts[k + 1::g]
            if max(map(len, col)) > _MAX_LEN["exp"]:
                return None
            out[k] = _floats(col, n)
    return out


def _decimals(chars: bytes, lens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mantissas and fraction-digit counts of concatenated numbers (digits, at most one '.').

    mantissa / 10**fraction_digits, with at most 15 digits (callers check the length), is
    exact in a double, and so is 10**k (k <= 15): one IEEE division then gives the correctly
    rounded value, i.e. exactly ``float(text)`` (Clinger's fast path).
    """
    c = np.frombuffer(chars, dtype=np.uint8)
    if not len(c):
        return np.zeros(len(lens), dtype=np.int64), np.zeros(len(lens), dtype=np.int64)
    ends = np.cumsum(lens)
    starts = ends - lens
    digit = c != 46
    cs = np.cumsum(digit)
    last = cs[ends - 1]
    after = np.repeat(last, lens) - cs  # digits to the right of each character, in its number
    vals = np.where(digit, c.astype(np.int64) - 48, 0) * _POW10[np.minimum(after, 18)]
    mant = np.add.reduceat(vals, starts)
    has_dot = np.add.reduceat(~digit, starts).astype(bool)
    frac = np.zeros(len(lens), dtype=np.int64)
    frac[has_dot] = last[has_dot] - cs[np.flatnonzero(~digit)]  # digits after the (one) dot
    return mant, frac


def _floats(col: list[bytes], n: int) -> np.ndarray:
    """``float`` of each string; a column of few distinct strings (lr, loss scale) converts each once."""
    if len(set(col[:256])) * 4 < min(n, 256):
        conv = {t: float(t) for t in set(col)}
        return np.fromiter(map(conv.__getitem__, col), dtype=np.float64, count=n)
    return np.fromiter(map(float, col), dtype=np.float64, count=n)


def _same(a, b) -> bool:
    return a == b and type(a) is type(b)


def _find_op(value, text: str) -> str | None:
    for name, op in _OPS.items():
        try:
            if _same(op(text), value):
                return name
        except ValueError:
            continue
    return None


def learn(text: str, file_rank: int | None, prefilter) -> Template | None:
    """A template for lines shaped like ``text`` (a progress line), or None when it is unsafe."""
    text = text.rstrip("\r\n")
    if not text.isascii() or not text.isprintable() or len(text) > 2000:
        return None
    got = read_line(text, file_rank)
    span = None
    if got is not None and got[2] is not None:  # a timestamp: one slot of shape "ts"
        span = _ts_span(text, got[2])
        if span is None:
            return None
    toks = [(m.start(), m.end()) for m in _NUM.finditer(text)
            if span is None or m.end() <= span[0] or m.start() >= span[1]]
    if span is not None:
        toks = sorted(toks + [span])
    if not toks or len(toks) > 40:
        return None
    literals, pos = [], 0
    for start, end in toks:
        literals.append(text[pos:start])
        pos = end
    literals.append(text[pos:])
    own = [text[a:b] for a, b in toks]
    for i, lit in enumerate(literals):
        # thousands separators ("5,580") and glued numbers change meaning with the digit count
        if 0 < i < len(toks) and lit in ("", ","):
            return None
    if any("->" in lit for lit in literals):
        return None  # the NCCL return-code prefilter pattern is numeric
    fixed = "0".join(literals)
    if any((r.keyword.lower() in fixed.lower()) if r.keyword == "nccl" else (r.keyword in fixed)
           for r in signatures.RULES):
        return None  # a signature rule could fire for some numbers (e.g. "exitcode: -9") but not the probes
    shapes = ["ts" if span == t else _shape(own[i]) for i, t in enumerate(toks)]
    nums_a = [_probe(s, "a", i, own[i]) for i, s in enumerate(shapes)]
    nums_b = [_probe(s, "b", i, own[i]) for i, s in enumerate(shapes)]
    draft = Template(literals, shapes, {}, {}, ("const", None), own)
    got_a, got_b = read_line(draft.line(nums_a), file_rank), read_line(draft.line(nums_b), file_rank)
    if got_a is None or got_b is None or got_a[0] is None or got_b[0] is None:
        return None
    rec_a, rank_a, _ = got_a
    rec_b, rank_b, _ = got_b
    if rec_a.get("eval") or "extra" in rec_a or set(rec_a) != set(rec_b):
        return None
    fields: dict = {}
    const: dict = {}
    for canon, va in rec_a.items():
        vb = rec_b[canon]
        for slot in range(len(shapes)):
            op = _find_op(va, nums_a[slot])
            if op is not None and _find_op(vb, nums_b[slot]) == op:
                fields[canon] = (slot, op)
                break
        else:
            if not _same(va, vb):
                return None
            const[canon] = va
    if rank_a == rank_b:
        rank = ("const", rank_a)
    else:
        rank = None
        for slot in range(len(shapes)):
            op = _find_op(rank_a, nums_a[slot])
            if op in ("int", "negint") and _find_op(rank_b, nums_b[slot]) == op:
                rank = ("slot", slot, op)
                break
        if rank is None:
            return None
    probes = [nums_a, nums_b, own] + [[_probe(s, k, i, own[i]) for i, s in enumerate(shapes)]
                                      for k in ("one", "long", "zero", "lead")]
    if any(" " in lit for lit in literals):  # padded fields: try spaces that stretch first
        tpl = Template(literals, shapes, fields, const, rank, own, flex=True)
        if _verified(tpl, probes, file_rank, prefilter, ("", "narrow", "wide")):
            return tpl
    tpl = Template(literals, shapes, fields, const, rank, own)
    return tpl if _verified(tpl, probes, file_rank, prefilter, ("",)) else None


def _verified(tpl: Template, probes: list, file_rank, prefilter, pads: tuple) -> bool:
    """Every probe line (and its re-padded forms) gives, line by line, what the template gives."""
    for nums in probes:
        for pad in pads:
            line = "".join(_repad(lit, pad) + (nums[i] if i < len(nums) else "") for i, lit in enumerate(tpl.literals))
            got = read_line(line, file_rank)
            want_ts = None if tpl.ts_slot is None else _ts_value(nums[tpl.ts_slot])
            if got is None or got[0] is None or got[2] != want_ts:
                return False
            rec, rank_got, _ = got
            want, want_rank = tpl.expected(nums)
            if set(rec) != set(want) or any(not _same(rec[k], want[k]) for k in rec) or rank_got != want_rank:
                return False
            m = tpl.regex.match(("\n" + line + "\n").encode())
            if not prefilter.search(line.encode()) or m is None or m.end() != len(line) + 1:
                return False
    return True
