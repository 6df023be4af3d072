"""Writing output files safely: whole or not at all, and never destroying what is there.

Every output of every command goes through :func:`write_output` (or :func:`open_output` for a
writer that streams):

- a regular file or a new path is replaced atomically (a temporary file in the same directory,
  renamed over it), keeping an existing file's mode and owner; a new file gets the mode the
  umask gives (0666 & ~umask), like ``>`` in a shell;
- a symlink is written through: its final target is replaced, in the target's directory;
- a character device or a FIFO (``/dev/null``, ``/dev/stdout``, a pipe) is written to directly,
  never replaced;
- anything else (a directory, a block device, a socket) is refused.

Failures (read-only file system, missing directory, ``ENOSPC``) raise :class:`OutputError`
with one line naming the option and the path, and leave no temporary file behind.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

#: kinds of output target
NEW, REGULAR, STREAM = "new", "regular", "stream"


class OutputError(Exception):
    """An output cannot be written; ``str()`` is the one line shown to the user."""


def _describe(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file, character device or FIFO"


def classify(path: str | os.PathLike[str], label: str = "-o") -> tuple[str, Path]:
    """(kind, target): where writing ``path`` really goes. Raises :class:`OutputError` for a
    target that must not be written (a directory, a block device, a socket, a symlink loop)."""
    p = Path(path)
    if str(p).startswith(("/dev/std", "/dev/fd/", "/proc/self/fd/")) and os.path.exists(p):
        return STREAM, p  # a descriptor this process already holds: written where it points, in place
    try:
        st = os.stat(p)  # follows symlinks
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise OutputError(f"{label} {str(p)!r}: {exc.strerror or exc}") from None
    if st is not None:
        if stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode):
            return STREAM, p
        if not stat.S_ISREG(st.st_mode):
            raise OutputError(f"{label} {str(p)!r} is {_describe(st.st_mode)}; give a file name")
        return REGULAR, Path(os.path.realpath(p))
    target = Path(os.path.realpath(p)) if os.path.islink(p) else p  # a dangling link: create its target
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        raise OutputError(f"{label} {str(p)!r}: directory {str(parent)!r} does not exist")
    return NEW, target


def check_writable(path: str | os.PathLike[str], label: str = "-o") -> tuple[str, Path]:
    """:func:`classify`, and refuse a target this process cannot write (before any work)."""
    kind, target = classify(path, label)
    if kind == STREAM:
        where, what = target, str(target)
    else:  # replaced by a rename: the directory must be writable
        where = target.parent if str(target.parent) else Path(".")
        what = f"directory {str(where)!r}"
    if not os.access(where, os.W_OK):
        raise OutputError(f"{label} {str(path)!r}: {what} is not writable")
    return kind, target


def _umask() -> int:
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    old = os.umask(0o22)
    os.umask(old)
    return old


def _fail(label: str, path, exc: OSError) -> OutputError:
    return OutputError(f"{label} {str(path)!r}: cannot write: {exc.strerror or exc}")


@contextlib.contextmanager
def open_output(path: str | os.PathLike[str], label: str = "-o", *, binary: bool = False,
                atomic: bool = True, newline: str | None = None) -> Iterator[IO]:
    """A file object for the output ``path``, following the rules of this module.

    With ``atomic`` (the default) a regular file is written to a temporary file that replaces
    it when the block ends without an exception (removed otherwise). ``atomic=False`` writes in
    place (for a file appended as it runs, readable after a SIGKILL): the file is truncated, its
    mode and owner kept.
    """
    kind, target = classify(path, label)
    text_kw = {} if binary else {"encoding": "utf-8", "newline": newline}
    fmode = "wb" if binary else "w"
    if kind == STREAM or not atomic:
        try:
            if kind == STREAM:
                # O_APPEND: /dev/stdout may be a file the shell opened (`>>` appends, `>` is empty)
                fd = os.open(target, os.O_WRONLY | os.O_APPEND | getattr(os, "O_CLOEXEC", 0))
            else:
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o666)
            fh = os.fdopen(fd, fmode, **text_kw)
        except OSError as exc:
            raise _fail(label, path, exc) from None
        try:
            yield fh
            fh.flush()
        except OSError as exc:
            raise _fail(label, path, exc) from None
        finally:
            try:
                fh.close()
            except OSError:
                pass
        return
    directory = target.parent if str(target.parent) else Path(".")
    try:
        old = os.stat(target) if kind == REGULAR else None
    except OSError:
        old = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise _fail(label, path, exc) from None
    try:
        with os.fdopen(fd, fmode, **text_kw) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        if old is not None:
            os.chmod(tmp, stat.S_IMODE(old.st_mode))
            if (old.st_uid, old.st_gid) != (os.geteuid(), os.getegid()):
                with contextlib.suppress(OSError):  # only root may give a file away
                    os.chown(tmp, old.st_uid, old.st_gid)
        else:
            os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise _fail(label, path, exc) from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_output(path: str | os.PathLike[str], data: str | bytes, label: str = "-o") -> None:
    """Write ``data`` (text as UTF-8) to the output ``path``: whole or not at all."""
    with open_output(path, label, binary=isinstance(data, bytes)) as fh:
        fh.write(data)


#: the name every caller used before outputs had rules; the same function
write_atomic = write_output
