"""Is a "shared" path really the same filesystem on every node?

Per node and path: exists, filesystem type, source and mount root (from mountinfo),
writable, and a bounded content fingerprint (the first ``MAX_ENTRIES`` names with their
sizes and whole-second modification times, plus SHA-256 of the first ``MAX_HASHED`` small
files). Then the decisive test: rank 0 writes a file named after the run's random token and
every node must see it within ``share_wait_s``. "Same path, same contents, different local
disks" passes every static comparison and fails only this one.

Everything touching the path is bounded (a hung NFS mount blocks ``stat`` in the kernel),
and the token file is removed by whoever wrote it, whatever happens.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable

from llmdiag.util.bounded import Hung, call_bounded
from llmdiag.util.mounts import mount_of, parse_mountinfo

MAX_ENTRIES = 256
MAX_HASHED = 32
SMALL_FILE = 64 * 1024
TOKEN_PREFIX = ".llmdiag-share-"
#: llmdiag's own files (token files, the filesystem probe's throughput-test temp files): every
#: node writes them into a shared path at the same moment, so they never count as contents.
OWN_PREFIX = ".llmdiag-"


def _mounts() -> list[dict]:
    try:
        with open("/proc/self/mountinfo") as f:
            text = f.read()
    except OSError:
        return []
    out = parse_mountinfo(text)
    # parse_mountinfo keeps point/type/source; the mount root (field 4) tells bind mounts apart
    roots = []
    for line in text.splitlines():
        f = line.partition(" - ")[0].split()
        if len(f) >= 5:
            roots.append((f[4].encode().decode("unicode_escape"), f[3].encode().decode("unicode_escape")))
    for m, (_, root) in zip(out, roots):
        m["root"] = root
    return out


def fingerprint(path: str) -> dict:
    """Bounded summary of a directory's top level (llmdiag's own ``.llmdiag-*`` files are left out)."""
    h = hashlib.sha256()
    hashed = 0
    with os.scandir(path) as it:
        entries = sorted((e for e in it if not e.name.startswith(OWN_PREFIX)), key=lambda e: e.name)
    for e in entries[:MAX_ENTRIES]:
        try:
            st = e.stat(follow_symlinks=False)
        except OSError:
            continue
        kind = "d" if e.is_dir(follow_symlinks=False) else "f"
        h.update(f"{e.name}\0{kind}\0{st.st_size}\0{int(st.st_mtime)}\n".encode())
        if kind == "f" and st.st_size <= SMALL_FILE and hashed < MAX_HASHED:
            try:
                with open(e.path, "rb") as f:
                    h.update(hashlib.sha256(f.read()).digest())
                hashed += 1
            except OSError:
                pass
    return {"digest": h.hexdigest()[:16], "entries": len(entries), "truncated": len(entries) > MAX_ENTRIES}


def _facts(path: str) -> dict:
    if not os.path.exists(path):
        return {"exists": False}
    real = os.path.realpath(path)
    m = mount_of(real, _mounts()) or {}
    out = {"exists": True, "is_dir": os.path.isdir(real), "fstype": m.get("fstype"), "source": m.get("source"),
           "mount_point": m.get("mount_point"), "mount_root": m.get("root"),
           "writable": os.access(real, os.W_OK)}
    if out["is_dir"]:
        out["fingerprint"] = fingerprint(real)
    return out


def path_facts(path: str, timeout: float) -> dict:
    """Facts of one path, or ``{"exists": None, "error": ...}`` when it does not answer."""
    try:
        return call_bounded(_facts, timeout, os.path.abspath(path))
    except Hung as exc:
        return {"exists": None, "error": f"no answer ({exc}): a hung mount?"}
    except OSError as exc:
        return {"exists": None, "error": f"{type(exc).__name__}: {exc}"}


def token_name(token: str, index: int) -> str:
    return f"{TOKEN_PREFIX}{token[:16]}-{index}"


def write_token(path: str, token: str, index: int, track: Callable[[str], object], timeout: float) -> str | None:
    """Rank 0: create the token file (registered for cleanup first); its path or None."""
    name = os.path.join(os.path.abspath(path), token_name(token, index))

    def write() -> None:
        fd = os.open(name, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        try:
            os.write(fd, token.encode())
            os.fsync(fd)
        finally:
            os.close(fd)

    track(name)
    try:
        call_bounded(write, timeout)
    except (Hung, OSError):
        return None
    return name


def see_token(path: str, token: str, index: int, wait_s: float) -> dict:
    """Other nodes: does rank 0's token file show up (with its contents) within ``wait_s``?"""
    name = os.path.join(os.path.abspath(path), token_name(token, index))
    start = time.monotonic()

    def look() -> bool:
        # listing the directory revalidates an NFS client's cached view of it
        os.listdir(os.path.dirname(name))
        with open(name, "rb") as f:
            return f.read(64) == token.encode()

    while True:
        left = wait_s - (time.monotonic() - start)
        try:
            if call_bounded(look, max(0.1, left)):
                return {"seen": True, "after_s": round(time.monotonic() - start, 3)}
        except (Hung, OSError):
            pass
        if left <= 0:
            return {"seen": False, "waited_s": round(wait_s, 3)}
        time.sleep(min(0.1, max(0.0, left)))


def remove_token(name: str | None) -> None:
    if name:
        try:
            os.unlink(name)
        except OSError:
            pass
