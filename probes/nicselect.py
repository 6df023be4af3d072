"""Which interfaces NCCL (``NCCL_SOCKET_IFNAME``) or gloo (``GLOO_SOCKET_IFNAME``) would pick.

Pure functions, no I/O: the probe feeds them the interfaces that are up and have an address.

NCCL rules (modelled on its documented behaviour): the value is a comma list of name
prefixes; a leading ``^`` turns the list into exclusions; a leading ``=`` (after an optional
``^``) means exact names instead of prefixes. Without the variable NCCL prefers ``ib*``, then
anything but ``docker*`` and ``lo``, then ``docker*``, then ``lo``.
Gloo takes a comma list of exact interface names (no prefixes, no ``^``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

VIRTUAL_PREFIXES = ("docker", "br-", "virbr", "veth", "cni", "flannel", "cali", "vxlan", "kube", "tun", "tap")


@dataclasses.dataclass(frozen=True)
class IfSpec:
    exclude: bool
    exact: bool
    names: tuple[str, ...]

    def matches(self, name: str) -> bool:
        hit = any(name == n if self.exact else name.startswith(n) for n in self.names)
        return not hit if self.exclude else hit


def parse_spec(value: str) -> IfSpec:
    """``"^=docker0,lo"`` → IfSpec(exclude=True, exact=True, names=("docker0", "lo"))."""
    v = value.strip()
    exclude = v.startswith("^")
    if exclude:
        v = v[1:]
    exact = v.startswith("=")
    if exact:
        v = v[1:]
    return IfSpec(exclude, exact, tuple(n.strip() for n in v.split(",") if n.strip()))


@dataclasses.dataclass(frozen=True)
class Selection:
    names: tuple[str, ...]
    rule: str  # what decided it, for the report


def select_nccl(value: str | None, candidates: Sequence[str]) -> Selection:
    """Interfaces NCCL would use among ``candidates`` (in their order)."""
    if value is not None and value.strip():
        spec = parse_spec(value)
        return Selection(tuple(c for c in candidates if spec.matches(c)), f"NCCL_SOCKET_IFNAME={value}")
    for rule in ("ib", "^docker,lo", "docker", "lo"):
        spec = parse_spec(rule)
        picked = tuple(c for c in candidates if spec.matches(c))
        if picked:
            return Selection(picked, f"NCCL default ({rule})")
    return Selection((), "NCCL default (no usable interface)")


def select_gloo(value: str, candidates: Sequence[str]) -> Selection:
    """Gloo: exact names only; names not present are simply not found."""
    wanted = [n.strip() for n in value.split(",") if n.strip()]
    return Selection(tuple(n for n in wanted if n in candidates), f"GLOO_SOCKET_IFNAME={value}")


def kind_of(name: str) -> str:
    """``loopback``, ``virtual`` (container/VM bridges, veth, tunnels) or ``physical``."""
    if name == "lo" or name.startswith("lo:"):
        return "loopback"
    if name.startswith(VIRTUAL_PREFIXES):
        return "virtual"
    return "physical"
