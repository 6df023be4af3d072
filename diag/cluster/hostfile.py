"""Hostfiles (DeepSpeed ``host slots=N``, OpenMPI ``host slots=N``, MPICH ``host:N``, Slurm-style
ranges ``gpu[01-64] slots=8``) and host names.

A host name from a file ends up as an argument of ``ssh``: a name starting with ``-`` would be
an ssh option, a name with spaces or ``;`` would be a shell command on the remote side. So
every name is checked against a strict pattern (RFC 1123 labels, IPv4, bare IPv6, optional
``user@``) before anything is started, and a bad line is a usage error naming the line.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from llmdiag.errors import UsageError

_LABEL = r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?"
_HOST_RE = re.compile(rf"^{_LABEL}(?:\.{_LABEL})*$")
_IPV6_RE = re.compile(r"^[0-9A-Fa-f:]+(?:%[A-Za-z0-9_.-]+)?$")
_USER_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,31}$")
_SLOTS_RE = re.compile(r"^(?:slots|max_slots|max-slots)=(\d+)$")


@dataclasses.dataclass(frozen=True)
class HostEntry:
    """One host of a hostfile; ``target`` is what ssh gets (``user@host`` or ``host``)."""

    host: str
    slots: int | None = None
    user: str | None = None
    line: int = 0

    @property
    def target(self) -> str:
        return f"{self.user}@{self.host}" if self.user else self.host


def host_problem(name: str) -> str | None:
    """Why ``name`` is not an acceptable host (None when it is)."""
    if not name:
        return "empty host name"
    if name.startswith("-"):
        return "a host name must not start with '-' (it would be read as an ssh option)"
    if len(name) > 253:
        return "host name longer than 253 characters"
    if _HOST_RE.match(name) or (":" in name and _IPV6_RE.match(name) and name.count(":") >= 2):
        return None
    return "not a valid host name (letters, digits, '-', '_', '.'; or an IP address)"


def parse_target(text: str, line: int = 0) -> HostEntry:
    """``host`` or ``user@host`` → HostEntry, or UsageError naming the problem."""
    user = None
    host = text
    if "@" in text:
        user, host = text.split("@", 1)
        if not _USER_RE.match(user):
            raise UsageError(_where(line) + f"{text!r}: not a valid user name before '@'")
    why = host_problem(host)
    if why:
        raise UsageError(_where(line) + f"{text!r}: {why}")
    return HostEntry(host=host, user=user, line=line)


def _where(line: int) -> str:
    return f"hostfile line {line}: " if line else ""


def parse_hostfile(text: str) -> list[HostEntry]:
    """Parse a hostfile's text. Comments (``#``) and blank lines are ignored; order is kept."""
    entries: list[HostEntry] = []
    seen: dict[str, int] = {}
    for no, raw in enumerate(text.splitlines(), start=1):
        body = raw.split("#", 1)[0].strip()
        if not body:
            continue
        tokens = body.split()
        first, rest = tokens[0], tokens[1:]
        slots = None
        # MPICH / Hydra: host:N (not an IPv6 address, which has several colons)
        if first.count(":") == 1:
            first, _, count = first.partition(":")
            if not count.isdigit():
                raise UsageError(f"hostfile line {no}: {raw.strip()!r}: expected HOST:N with N a number")
            slots = int(count)
        names = [first]
        if "[" in first:
            # a Slurm-style range (gpu[01-64], user@gpu[1-4,7]): one entry per host
            from llmdiag.cluster.world import expand_nodelist

            user, at, body = first.rpartition("@")
            try:
                names = [f"{user}{at}{h}" for h in expand_nodelist(body)]
            except UsageError as exc:
                raise UsageError(f"hostfile line {no}: {exc}") from None
        for tok in rest:
            m = _SLOTS_RE.match(tok)
            if not m:
                raise UsageError(f"hostfile line {no}: unknown field {tok!r} (expected slots=N)")
            if tok.startswith("slots"):
                slots = int(m.group(1))
        if slots is not None and slots < 1:
            raise UsageError(f"hostfile line {no}: slots must be at least 1")
        for name in names:
            entry = parse_target(name, no)
            if entry.host in seen:
                raise UsageError(f"hostfile line {no}: host {entry.host!r} already listed on line {seen[entry.host]}")
            seen[entry.host] = no
            entries.append(dataclasses.replace(entry, slots=slots))
    if not entries:
        raise UsageError("the hostfile lists no hosts")
    return entries


def read_hostfile(path: str | Path) -> list[HostEntry]:
    p = Path(path)
    try:
        text = p.read_text()
    except FileNotFoundError:
        raise UsageError(f"hostfile {p} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read hostfile {p}: {exc}") from None
    return parse_hostfile(text)
