"""The PCI tree as sysfs shows it: devices, the bridges above them, NUMA nodes, ACS control.

Read through ``ctx.path`` so a test can build the tree (real sysfs uses relative symlinks,
``/sys/bus/pci/devices/0000:1b:00.0 -> ../../../devices/pci0000:00/0000:00:01.0/.../0000:1b:00.0``,
which resolve the same way inside a temporary root). A device's ancestors are the PCI
functions whose directories contain it: its upstream bridges, up to the root complex
(``pci0000:00``), which is not a PCI function.

ACS (Access Control Services) is a PCIe extended capability (id 0x000D) of switch ports and
root ports; its control register (capability + 6) redirects peer-to-peer requests and
completions up to the root complex, which is what breaks or slows GPUDirect RDMA between a
GPU and a NIC under the same switch. The register is read from the device's ``config`` file
(the extended space from offset 0x100 is readable by root only); without it, from
``lspci -vvv -s BDF`` (its ``ACSCtl:`` line), else it is unknown.
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

from llmdiag.context import Context

NVIDIA = 0x10DE
BDF_RE = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
#: ACS control register bits, in the order and with the names lspci prints them
ACS_BITS = ("SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl", "DirectTrans")
#: bits that restrict or redirect peer-to-peer traffic (DirectTrans allows translated P2P: harmless)
ACS_RESTRICTING = ("SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl")
_ACS_CAP_ID = 0x000D
_ACSCTL_RE = re.compile(r"ACSCtl:\s*(.*)")


@dataclasses.dataclass(frozen=True)
class PciDevice:
    bdf: str
    path: Path  # the resolved directory under /sys/devices
    vendor: int | None
    class_code: int | None  # 24 bits: class, subclass, prog-if
    numa_node: int | None  # None: not reported (-1 in sysfs)

    @property
    def is_nvidia_gpu(self) -> bool:
        # 0x0300xx VGA, 0x0302xx 3D controller (datacenter GPUs)
        return self.vendor == NVIDIA and self.class_code is not None and self.class_code >> 8 in (0x0300, 0x0302)

    @property
    def is_nvswitch(self) -> bool:
        # NVSwitches enumerate as "Bridge: NVIDIA Corporation" of class 0x0680 (other bridge)
        return self.vendor == NVIDIA and self.class_code is not None and self.class_code >> 8 == 0x0680


def _hex(path: Path) -> int | None:
    try:
        return int(path.read_text().strip(), 16)
    except (OSError, ValueError):
        return None


def _numa(path: Path) -> int | None:
    try:
        n = int(path.read_text().strip())
    except (OSError, ValueError):
        return None
    return n if n >= 0 else None


def device_at(path: Path) -> PciDevice:
    return PciDevice(path.name, path, _hex(path / "vendor"), _hex(path / "class"), _numa(path / "numa_node"))


def devices(ctx: Context) -> list[PciDevice]:
    """Every PCI function under ``/sys/bus/pci/devices`` (empty when there is no PCI bus to read)."""
    base = ctx.path("/sys/bus/pci/devices")
    try:
        names = sorted(p.name for p in base.iterdir())
    except OSError:
        return []
    return [device_at(Path(os.path.realpath(base / n))) for n in names if BDF_RE.match(n)]


def rdma_nics(ctx: Context) -> list[tuple[str, PciDevice]]:
    """(name, PCI function) of every RDMA device (``/sys/class/infiniband``: InfiniBand and RoCE)."""
    base = ctx.path("/sys/class/infiniband")
    try:
        names = sorted(p.name for p in base.iterdir())
    except OSError:
        return []
    out = []
    for n in names:
        dev = Path(os.path.realpath(base / n / "device"))
        if BDF_RE.match(dev.name):
            out.append((n, device_at(dev)))
    return out


def ancestors(dev: PciDevice) -> list[PciDevice]:
    """The bridges above ``dev``, nearest first (root port last)."""
    out = []
    for parent in dev.path.parents:
        if not BDF_RE.match(parent.name):
            break
        out.append(device_at(parent))
    return out


def bridges_between(a: PciDevice, b: PciDevice) -> tuple[list[PciDevice], PciDevice | None]:
    """The bridges on the PCIe path from ``a`` to ``b`` and their nearest common bridge (None when
    the path crosses the root complex: different root ports or sockets)."""
    up_a, up_b = ancestors(a), ancestors(b)
    b_paths = {d.path for d in up_b}
    common = next((d for d in up_a if d.path in b_paths), None)
    if common is None:
        return up_a + up_b, None
    left = [d for d in up_a if len(d.path.parts) > len(common.path.parts)]
    right = [d for d in up_b if len(d.path.parts) > len(common.path.parts)]
    return left + [common] + right, common


def switch_ports_between(a: PciDevice, b: PciDevice) -> list[PciDevice] | None:
    """The bridges below the nearest common bridge of ``a`` and ``b``: the switch ports whose ACS
    decides whether the switch routes ``a`` <-> ``b`` peer-to-peer itself or sends it up to the
    root complex. None when their path crosses the root complex anyway (different root ports),
    where ACS on the way changes nothing."""
    bridges, common = bridges_between(a, b)
    if common is None:
        return None
    return [d for d in bridges if d.path != common.path]


def _acs_from_config(dev: PciDevice) -> tuple[str, ...] | None:
    """ACS control flags set, from the config space; None when the extended space is not readable."""
    try:
        raw = (dev.path / "config").read_bytes()
    except OSError:
        return None
    if len(raw) < 0x104:
        return None  # non-root readers get the first 64 or 256 bytes only
    offset, seen = 0x100, set()
    while 0x100 <= offset <= len(raw) - 8 and offset not in seen:
        seen.add(offset)
        header = int.from_bytes(raw[offset:offset + 4], "little")
        if header in (0, 0xFFFFFFFF):
            break
        if header & 0xFFFF == _ACS_CAP_ID:
            ctl = int.from_bytes(raw[offset + 6:offset + 8], "little")
            return tuple(name for i, name in enumerate(ACS_BITS) if ctl >> i & 1)
        offset = header >> 20 & 0xFFC
    return ()  # readable, and no ACS capability: nothing to redirect


def parse_lspci_acsctl(text: str) -> tuple[str, ...] | None:
    """Flags with a '+' on lspci's ``ACSCtl:`` line; () with no ACS line, None when access was denied."""
    m = _ACSCTL_RE.search(text)
    if not m:
        return None if "access denied" in text else ()
    return tuple(tok[:-1] for tok in m.group(1).split() if tok.endswith("+") and tok[:-1] in ACS_BITS)


def acs_control(ctx: Context, dev: PciDevice) -> tuple[tuple[str, ...] | None, str]:
    """(flags set or None when unknown, where the answer came from)."""
    flags = _acs_from_config(dev)
    if flags is not None:
        return flags, "config space"
    if ctx.runner.which("lspci") is None:
        return None, "extended config space not readable (not root) and lspci not installed"
    res = ctx.run(["lspci", "-vvv", "-s", dev.bdf], timeout=5.0)
    if not res.ok:
        return None, f"lspci failed: {res.error or res.stderr.strip() or res.returncode}"
    flags = parse_lspci_acsctl(res.stdout)
    if flags is None:
        return None, "lspci: capabilities access denied (run as root)"
    return flags, "lspci -vvv"
