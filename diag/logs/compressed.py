"""Compressed logs read to the last recoverable byte, and logs that are not text at all.

``gzip.GzipFile`` (and ``bz2``/``lzma`` files) raise on a truncated stream and lose what the
failing ``read`` had already decompressed: a log cut by a full disk or a killed ``gzip`` then
hides its last lines, where the failure usually is. :class:`Recovering` feeds the raw bytes to
an incremental decompressor itself, returns everything that decompresses, and only then says
what was wrong, as an ``EOFError`` the reader records as a "truncated" read problem.

Formats: gzip (``1f 8b``, members concatenated), bzip2 (``BZh``), xz (``fd 37 7a 58 5a 00``),
zstd (``28 b5 2f fd``, needs the ``zstandard`` package: without it the message says so).
"""

from __future__ import annotations

import io
import os
import zlib

MAGIC = ((b"\x1f\x8b", "gzip"), (b"BZh", "bzip2"), (b"\xfd7zXZ\x00", "xz"), (b"\x28\xb5\x2f\xfd", "zstd"))
RAW_CHUNK = 1 << 20


class Unsupported(OSError):
    """A compressed format this installation cannot read (zstd without ``zstandard``)."""


def sniff(head: bytes) -> str | None:
    for magic, name in MAGIC:
        if head.startswith(magic):
            return name
    return None


def _decompressor(fmt: str):
    if fmt == "gzip":
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if fmt == "bzip2":
        import bz2

        return bz2.BZ2Decompressor()
    if fmt == "xz":
        import lzma

        return lzma.LZMADecompressor()
    try:
        import zstandard
    except ImportError:
        raise Unsupported("a zstd-compressed log needs the zstandard package (pip install zstandard), "
                          "or decompress it first: zstd -d FILE") from None
    return zstandard.ZstdDecompressor().decompressobj()


class Recovering(io.RawIOBase):
    """A readable stream of the decompressed bytes of ``raw`` (a binary file object)."""

    def __init__(self, raw, fmt: str) -> None:
        self._raw = raw
        self.fmt = fmt
        self._dec = _decompressor(fmt)
        self._fresh = True  # the current decompressor has been given nothing yet
        self._buf = b""
        self._eof = False
        self._error: str | None = None
        self._consumed = 0  # compressed bytes fed so far

    def readable(self) -> bool:
        return True

    def _fill(self, want: int) -> None:
        while len(self._buf) < want and not self._eof and self._error is None:
            data = self._raw.read(RAW_CHUNK)
            if not data:
                self._eof = True
                if not self._fresh and not self._dec.eof:
                    self._error = (f"the {self.fmt} stream is truncated after {self._consumed} compressed bytes "
                                   "(the end of the file is missing); everything before that was read")
                return
            self._buf += self._feed(data)

    def _feed(self, data: bytes) -> bytes:
        """Decompress ``data`` in slices, so that damage loses as little as possible (with a
        decompressor that can be copied, zlib's and zstd's, nothing before the damaged byte);
        a finished stream followed by another (concatenated files) goes on with a new one."""
        parts = []
        while data and self._error is None:
            copyable = hasattr(self._dec, "copy")
            piece, data = data[:(64 << 10) if copyable else (4 << 10)], data[(64 << 10) if copyable else (4 << 10):]
            saved = self._dec.copy() if copyable else None
            self._fresh = False
            try:
                parts.append(self._dec.decompress(piece))
            except Exception as exc:  # noqa: BLE001 - zlib.error, OSError, lzma.LZMAError, ZstdError
                if saved is not None:  # replay the slice byte by byte from before it
                    self._dec = saved
                    for i in range(len(piece)):
                        try:
                            parts.append(self._dec.decompress(piece[i:i + 1]))
                        except Exception:  # noqa: BLE001
                            break
                self._error = f"corrupt {self.fmt} data near compressed byte {self._consumed}: {exc}"
                break
            self._consumed += len(piece)
            if self._dec.eof:
                rest = (getattr(self._dec, "unused_data", b"") + data).lstrip(b"\x00")  # padding
                if rest and sniff(rest) != self.fmt and not (self.fmt == "gzip" and len(rest) < 2):
                    self._error = f"{len(rest)} bytes after the end of the {self.fmt} stream are not {self.fmt}"
                    break
                self._dec, self._fresh, data = _decompressor(self.fmt), True, rest
        return b"".join(parts)

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            size = 1 << 62
        self._fill(size)
        if not self._buf and self._error is not None:
            msg, self._error = self._error, None
            self._eof = True
            raise EOFError(msg)
        out, self._buf = self._buf[:size], self._buf[size:]
        return out

    def readinto(self, b) -> int:
        data = self.read(len(b))
        b[:len(data)] = data
        return len(data)

    def readline(self, size: int = -1) -> bytes:
        parts = []
        while True:
            self._fill(1)
            if not self._buf:
                break
            nl = self._buf.find(b"\n")
            if nl >= 0:
                parts.append(self._buf[:nl + 1])
                self._buf = self._buf[nl + 1:]
                break
            parts.append(self._buf)
            self._buf = b""
        return b"".join(parts)

    def close(self) -> None:
        try:
            self._raw.close()
        finally:
            super().close()


def open_compressed(fh, fmt: str) -> Recovering:
    return Recovering(fh, fmt)


#: bytes that do not occur in text logs (controls other than tab, newlines, form feed, escape)
_TEXT_CONTROLS = set(b"\t\n\r\f\b\x1b\x07\x0b")
SAMPLE = 64 << 10
#: share of non-text bytes above which a file is "not a text log"
BINARY_SHARE = 0.10


def non_text_share(sample: bytes) -> float:
    """Share of ``sample`` that is neither printable ASCII, allowed control, nor valid UTF-8."""
    if not sample:
        return 0.0
    text = sample.decode("utf-8", errors="replace")
    bad = text.count("\ufffd")
    bad += sum(1 for b in sample if (b < 0x20 and b not in _TEXT_CONTROLS) or b == 0x7f)
    return min(1.0, bad / len(sample))


def looks_binary(path: str, opener) -> tuple[bool, float]:
    """(binary?, share) from the first 64 KiB of the (decompressed) file and, for a large plain
    file, 64 KiB from its middle too. ``opener(path)`` returns a binary stream."""
    try:
        fh = opener(path)
    except OSError:
        return False, 0.0
    try:
        try:
            sample = fh.read(SAMPLE)
        except (EOFError, OSError):
            return False, 0.0
        share = non_text_share(sample[:sample.rfind(b"\n") + 1] if len(sample) == SAMPLE and b"\n" in sample
                               else sample)
        if isinstance(fh, io.BufferedReader) and share < BINARY_SHARE:
            size = os.fstat(fh.fileno()).st_size
            if size > 4 * SAMPLE:
                fh.seek(size // 2)
                fh.readline()
                share = max(share, non_text_share(fh.read(SAMPLE)))
        return share > BINARY_SHARE, share
    finally:
        fh.close()


def _finding(kind: str, severity: str, file: str, message: str, cause: str, next_step: str, facts: dict) -> dict:
    return {"kind": kind, "severity": severity, "rank": None, "step": None, "line": None, "file": file,
            "message": message, "facts": facts, "runbook": "log-input-damaged", "cause": cause,
            "next_step": next_step, "ts": None, "count": 1}


def input_findings(doc: dict, binary: dict[str, float]) -> None:
    """Add to an analyze-log document what is wrong with its input itself: a file that is not
    a text log (``binary``: path -> share of non-text bytes; an error: never PASS) and a
    compressed file cut short or corrupt (a warning: what came before it was analysed)."""
    new = []
    for path, share in binary.items():
        new.append(_finding("not_a_text_log", "error", path,
                            f"{path} is not a text log: {share:.0%} of its first bytes are not text",
                            "a binary file (a checkpoint, core dump, archive or random data) was given as a log",
                            "give the training log (stdout/stderr of the job) instead", {"non_text_share": round(share, 3)}))
    for p in doc.get("read", {}).get("problems", []):
        if p.get("kind") == "truncated":
            new.append(_finding("log_truncated", "warning", p["file"], f"{p['file']}: {p['message']}",
                                "the file was cut short (full disk, killed compressor, copy in progress) or "
                                "is corrupt; lines after the damage are missing",
                                "look for the rest of the log on the node; what was readable was analysed",
                                {}))
    doc["findings"] = list(doc.get("findings", [])) + new
    severities = {f["severity"] for f in doc["findings"]}
    doc["status"] = "fail" if "error" in severities else "warn" if doc["findings"] or doc.get("warnings") else "pass"
