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


#: Kinds a job may use to reach other nodes (a bond or VLAN sits on physical NICs).
ROUTABLE = ("physical", "bond", "vlan")


def _sysfs_read(path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def kind_of(name: str, sysdir=None) -> str:
    """What an interface is: ``loopback``, ``physical`` (a device behind it), ``bond``, ``vlan``,
    ``bridge``, ``veth``, ``tun``, or ``virtual`` (anything else without a device).

    Read from sysfs (``/sys/class/net/NAME``) when ``sysdir`` exists there: a bridge is a
    bridge whatever its name (``br0``, ``lxdbr0``), an ``eth0`` that is a veth is a veth. Only
    without sysfs does the name decide.
    """
    if name == "lo" or name.startswith("lo:"):
        return "loopback"
    if sysdir is not None and sysdir.is_dir():
        uevent = dict(line.split("=", 1) for line in (_sysfs_read(sysdir / "uevent") or "").splitlines()
                      if "=" in line)
        devtype = uevent.get("DEVTYPE", "")
        if _sysfs_read(sysdir / "type") == "772":
            return "loopback"
        if (sysdir / "bridge").is_dir() or devtype == "bridge":
            return "bridge"
        if (sysdir / "bonding").is_dir() or devtype == "bond":
            return "bond"
        if (sysdir / "tun_flags").exists() or devtype in ("wireguard", "vxlan", "geneve", "ipip", "gre"):
            return "tun"
        if devtype == "vlan":
            return "vlan"
        if (sysdir / "device").exists():
            return "physical"
        iflink, ifindex = _sysfs_read(sysdir / "iflink"), _sysfs_read(sysdir / "ifindex")
        if iflink and ifindex and iflink != ifindex and not devtype:
            return "veth"  # a pair's end (a container's eth0 is one)
        return "virtual"
    if name.startswith(("br", "virbr", "docker", "lxdbr", "cni")):
        return "bridge"
    if name.startswith(VIRTUAL_PREFIXES):
        return "virtual"
    return "physical"
