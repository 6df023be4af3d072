"""Sysfs and procfs trees built in a test: PCI functions under /sys/devices with the relative
symlinks the kernel makes (/sys/bus/pci/devices, /sys/class/infiniband/*/device), config
space with extended capabilities, /proc/modules, and executables for a test's PATH."""

from __future__ import annotations

import os
import stat
from pathlib import Path

GPU, BRIDGE, NIC, NVSWITCH = 0x030200, 0x060400, 0x020700, 0x068000
ACS = {"SrcValid": 1, "TransBlk": 2, "ReqRedir": 4, "CmpltRedir": 8, "UpstreamFwd": 16, "EgressCtrl": 32,
       "DirectTrans": 64}


def config_space(acs: tuple[str, ...] | None, size: int = 4096) -> bytes:
    """A config space whose extended capabilities are AER at 0x100 then (when ``acs`` is not None)
    ACS at 0x148 with those control bits set; ``size`` 64 is what a non-root reader gets."""
    raw = bytearray(4096)
    nxt = 0x148 if acs is not None else 0
    raw[0x100:0x104] = (0x0001 | 1 << 16 | nxt << 20).to_bytes(4, "little")  # AER, version 1
    if acs is not None:
        raw[0x148:0x14C] = (0x000D | 1 << 16).to_bytes(4, "little")  # ACS, version 1, last
        raw[0x14C:0x14E] = (0x5F).to_bytes(2, "little")  # capability register: all but DirectTrans
        raw[0x14E:0x150] = sum(ACS[f] for f in acs).to_bytes(2, "little")
    return bytes(raw[:size])


class Tree:
    def __init__(self, root: Path):
        self.root = root
        (root / "sys/bus/pci/devices").mkdir(parents=True, exist_ok=True)
        (root / "proc").mkdir(parents=True, exist_ok=True)

    def device(self, *chain: str, vendor: int = 0x10DE, cls: int = GPU, numa: int = -1,
               config: bytes | None = None, domain: str = "pci0000:00") -> Path:
        """The PCI function at the end of ``chain`` (BDFs from the root port down); the bridges
        on the way are created as PCIe switch ports unless they exist already."""
        path = self.root / "sys/devices" / domain
        for i, bdf in enumerate(chain):
            path = path / bdf
            last = i == len(chain) - 1
            if last or not path.exists():
                path.mkdir(parents=True, exist_ok=True)
                (path / "vendor").write_text(f"0x{vendor if last else 0x10B5:04x}\n")
                (path / "class").write_text(f"0x{cls if last else BRIDGE:06x}\n")
                (path / "numa_node").write_text(f"{numa}\n")
                (path / "config").write_bytes(config if last and config is not None else config_space(None))
            link = self.root / "sys/bus/pci/devices" / bdf
            if not link.is_symlink():
                link.symlink_to(os.path.relpath(path, link.parent))
        return path

    def acs(self, bdf: str, *flags: str, size: int = 4096) -> None:
        dev = Path(os.path.realpath(self.root / "sys/bus/pci/devices" / bdf))
        (dev / "config").write_bytes(config_space(tuple(flags), size))

    def rdma(self, name: str, device: Path) -> None:
        d = self.root / "sys/class/infiniband" / name
        d.mkdir(parents=True, exist_ok=True)
        (d / "device").symlink_to(os.path.relpath(device, d))

    def modules(self, *names: str) -> None:
        lines = [f"{n} 16384 0 - Live 0x0000000000000000" for n in (*names, "nvidia", "mlx5_ib", "ib_core")]
        (self.root / "proc/modules").write_text("\n".join(lines) + "\n")


def executable(bindir: Path, name: str, script: str) -> Path:
    """A shell script named ``name`` in ``bindir`` (put first on the test's PATH)."""
    bindir.mkdir(parents=True, exist_ok=True)
    path = bindir / name
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def path_env(bindir: Path) -> dict[str, str]:
    return {"PATH": f"{bindir}:/usr/bin:/bin"}
