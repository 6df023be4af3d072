"""Mount table parsing: which mount (and which kind of filesystem) holds a path."""

from __future__ import annotations

CLASSES = {"nfs": "nfs", "nfs4": "nfs", "lustre": "lustre", "gpfs": "gpfs", "beegfs": "beegfs", "ceph": "cephfs",
           "fuse.ceph-fuse": "cephfs", "overlay": "overlay", "tmpfs": "tmpfs", "fuse.sshfs": "network"}
NETWORK_CLASSES = {"nfs", "lustre", "gpfs", "beegfs", "cephfs", "network"}

def classify(fstype: str) -> str:
    return CLASSES.get(fstype, "local")


def parse_mountinfo(text: str) -> list[dict]:
    """Lines of /proc/self/mountinfo → [{mount_point, fstype, source}] (octal escapes decoded)."""
    out = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        f, r = left.split(), right.split()
        if not sep or len(f) < 5 or len(r) < 2:
            continue
        point = f[4].encode().decode("unicode_escape")
        out.append({"mount_point": point, "fstype": r[0], "source": r[1]})
    return out


def mount_of(path: str, mounts: list[dict]) -> dict | None:
    """The last-mounted entry whose mount point is the longest prefix of ``path``."""
    best = None
    for m in mounts:
        mp = m["mount_point"].rstrip("/") or "/"
        if path == mp or path.startswith(mp if mp.endswith("/") else mp + "/"):
            if best is None or len(mp) >= len(best["mount_point"].rstrip("/") or "/"):
                best = m
    return best
