"""Filesystems, local view: each path the job needs exists, is readable/writable, has space and speed.

Safety: the probe only creates its own uniquely named files (``.llmdiag-*``), registers them
with ``ctx.cleanup`` (removed even when this thread is abandoned or on Ctrl-C), and never opens
an existing file for writing. Every touch of a path runs bounded by the probe's deadline, so a
dead NFS mount gives a failed check, not a hung preflight.
"""

from __future__ import annotations

import mmap
import os
import tempfile
import time

from llmdiag.probe import BaseProbe
from llmdiag.util.bounded import Hung, call_bounded
from llmdiag.util.mounts import NETWORK_CLASSES, classify, mount_of, parse_mountinfo

CHUNK = 1 << 20


def _probe_io(path: str, size_mb: int, budget: float, track, untrack) -> dict:
    """Create, write (fsync), read back and remove one private file; throughput when size_mb > 0."""
    fd, name = tempfile.mkstemp(prefix=".llmdiag-", suffix=".tmp", dir=path)
    track(name)
    out: dict = {}
    try:
        buf = os.urandom(CHUNK)
        stop = time.monotonic() + budget
        t0 = time.monotonic()
        written = 0
        for _ in range(max(1, size_mb)):
            os.write(fd, buf if size_mb else b"llmdiag")
            written += CHUNK if size_mb else 7
            if time.monotonic() > stop:
                out["truncated"] = True
                break
        os.fsync(fd)
        wt = time.monotonic() - t0
        os.close(fd)
        fd = -1
        if size_mb:
            out["write_mb_s"] = written / CHUNK / max(wt, 1e-6)
            out["written_mb"] = written / CHUNK
            out["read_mb_s"], out["read_method"] = _read_back(name, written)
    finally:
        if fd >= 0:
            os.close(fd)
        os.unlink(name)
        untrack(name)
    return out


def _read_back(name: str, size: int) -> tuple[float, str]:
    """Read throughput bypassing the page cache: O_DIRECT if the fs allows, else after DONTNEED."""
    t0 = time.monotonic()
    try:
        fd = os.open(name, os.O_RDONLY | os.O_DIRECT)
        method = "O_DIRECT"
        buf = mmap.mmap(-1, CHUNK)  # page-aligned, as O_DIRECT requires
        try:
            while os.readv(fd, [buf]) > 0:
                pass
        except OSError:
            os.close(fd)
            raise
        os.close(fd)
    except OSError:
        fd = os.open(name, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        method = "after fadvise DONTNEED (tmpfs/page cache may still serve it)"
        t0 = time.monotonic()
        while os.read(fd, CHUNK):
            pass
        os.close(fd)
    return size / CHUNK / max(time.monotonic() - t0, 1e-6), method


def _stat_facts(path: str, want_write: bool) -> dict:
    st = os.stat(path)
    vfs = os.statvfs(path)
    with os.scandir(path) as it:  # readable: list one entry, never the whole directory
        next(it, None)
    return {"is_dir": os.path.isdir(path), "free_gb": vfs.f_bavail * vfs.f_frsize / 1e9,
            "readonly_mount": bool(vfs.f_flag & os.ST_RDONLY), "mode": oct(st.st_mode & 0o7777)}


class FilesystemProbe(BaseProbe):
    name = "filesystem"
    description = "paths exist, readable/writable, mount type, free space, bounded throughput"
    config_section = "filesystem"
    timeout_s = 20.0

    def run(self, ctx):
        paths = ctx.config.get("filesystem", "paths") or []
        if not paths:
            from llmdiag.util.procs import system_tempdir

            # named by role (path:workdir, path:tempdir), not by the directory: a check keeps its
            # name from run to run (CI test history, Prometheus series) wherever the job starts
            paths = [{"path": os.getcwd(), "role": "workdir", "required_free_gb": 0.0, "writable": True,
                      "shared": False},
                     {"path": system_tempdir(), "role": "tempdir", "required_free_gb": 0.0, "writable": True,
                      "shared": False}]
            yield self.ok(ctx, "paths", "no filesystem.paths configured: checking the working directory and the "
                          "temp dir as defaults", evidence=[("paths", ", ".join(p["path"] for p in paths), None, "")])
        try:
            mounts = parse_mountinfo(ctx.path("/proc/self/mountinfo").read_text())
        except OSError:
            mounts = []
        for i, item in enumerate(paths):
            left = len(paths) - i
            yield from self.check_path(ctx, item, mounts, ctx.deadline.remaining() * 0.9 / left)

    def check_path(self, ctx, item, mounts, budget: float):
        path = os.path.abspath(item["path"])
        check = f"path:{item.get('role') or path}"
        start = time.monotonic()
        try:
            facts = call_bounded(_stat_facts, budget, path, item["writable"])
        except Hung as exc:
            yield self.fail(ctx, check, f"{path} did not answer ({exc}): a hung mount?", runbook="path-hung",
                            evidence=[("stat", "no answer", "answer", "")],
                            remediation=f"Check the mount (mount | grep '{path}'; dmesg | tail) and remount it.")
            return
        except FileNotFoundError:
            yield self.fail(ctx, check, f"{path} does not exist", evidence=[("exists", False, True, "")],
                            runbook="path-missing", remediation=f"Create or mount it: mkdir -p {path} (or mount the share).")
            return
        except (PermissionError, NotADirectoryError, OSError) as exc:
            yield self.fail(ctx, check, f"{path} is not a readable directory: {exc}", runbook="path-missing",
                            evidence=[("readable", False, True, "")],
                            remediation=f"Fix the path or its permissions: ls -ld {path}")
            return
        real = os.path.realpath(path)
        m = mount_of(real, mounts) or {"mount_point": "?", "fstype": "?", "source": "?"}
        cls = classify(m["fstype"])
        data = {"mount_point": m["mount_point"], "fstype": m["fstype"], "source": m["source"], "class": cls,
                "free_gb": round(facts["free_gb"], 3)}
        ev = [("mount", f"{m['mount_point']} ({m['fstype']} from {m['source']})", None, ""),
              ("free", round(facts["free_gb"], 2), item["required_free_gb"], "GB")]
        summary = f"{path}: {cls} ({m['fstype']}) at {m['mount_point']}, {facts['free_gb']:.1f} GB free"
        if facts["free_gb"] < item["required_free_gb"]:
            yield self.fail(ctx, f"{check}:space", f"{path} has {facts['free_gb']:.1f} GB free, needs "
                            f"{item['required_free_gb']:g} GB", evidence=ev[1:], data=data, runbook="path-low-space",
                            remediation=f"Free space (du -sh {path}/* | sort -h) or point the job at a larger volume.")
        if item["shared"] and cls not in NETWORK_CLASSES:
            yield self.warn(ctx, f"{check}:shared", f"{path} should be shared but is on {m['fstype']} ({cls})",
                            evidence=[("class", cls, "network filesystem", "")], data=data, runbook="path-not-shared",
                            remediation=f"Mount the shared filesystem at {path} on every node (findmnt {path}).")
        if not item["writable"]:
            yield self.ok(ctx, check, summary + ", readable", evidence=ev, data=data)
            return
        size = int(ctx.config.get("filesystem", "throughput_test_mb") or 0)
        io_budget = max(0.05, budget - (time.monotonic() - start))
        try:
            io = call_bounded(_probe_io, io_budget, path, size, io_budget * 0.6, ctx.cleanup.track, ctx.cleanup.untrack)
        except Hung as exc:
            yield self.fail(ctx, check, f"{path}: write test did not finish ({exc})", evidence=ev, data=data,
                            runbook="path-slow", remediation=f"Check the storage behind {path} (dmesg; iostat -x 1).")
            return
        except OSError as exc:
            yield self.fail(ctx, check, f"{path} is not writable: {exc.strerror or exc}",
                            evidence=ev + [("writable", False, True, ""),
                                           ("read_only_mount", facts["readonly_mount"], False, "")],
                            data=data, runbook="path-not-writable",
                            remediation=f"Remount read-write or fix permissions/quota (touch {path}/x; findmnt {path}).")
            return
        data.update({k: round(v, 1) if isinstance(v, float) else v for k, v in io.items()})
        if size:
            ev += [("write", round(io["write_mb_s"], 1), ctx.config.get("filesystem", "min_write_mb_s"), "MiB/s"),
                   ("read", round(io["read_mb_s"], 1), None, f"MiB/s ({io['read_method']})"),
                   ("tested", round(io["written_mb"], 1), size, "MiB")]
            summary += f", write {io['write_mb_s']:.0f} MiB/s (fsync), read {io['read_mb_s']:.0f} MiB/s"
        minw = ctx.config.get("filesystem", "min_write_mb_s")
        if size and minw is not None and io["write_mb_s"] < minw:
            yield self.warn(ctx, check, summary + f": below {minw:g} MiB/s", evidence=ev, data=data, runbook="path-slow",
                            remediation=f"Use faster storage for {path} or check its load (iostat -x 1).")
            return
        yield self.ok(ctx, check, summary + ", writable", evidence=ev, data=data)
