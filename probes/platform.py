"""Bare-metal causes of low NCCL bandwidth that no software setting fixes.

- ``gpudirect-rdma``: with GPUs and RDMA NICs on the node, NCCL reads and writes GPU memory from
  the NIC only when the peer-memory module is loaded (``nvidia_peermem``, or the older
  ``nv_peer_mem``; ``/proc/modules``); without it every message is staged through host memory.
- ``pcie-acs``: ACS on the ports of a PCIe switch that holds both a GPU and a NIC redirects
  their peer-to-peer traffic up to the root complex (slow, or hangs where the root complex does
  not route P2P). Root ports are not judged: a path between root ports goes through the root
  complex anyway, and Linux enables ACS there for IOMMU groups.
- ``fabric-manager``: on NVSwitch systems (HGX), CUDA and NCCL cannot use the GPUs until
  ``nvidia-fabricmanager`` has configured the switches (CUDA error 802, "system not yet
  initialized").
- ``gpu-nic-numa``: a GPU whose NUMA node has no RDMA NIC sends its traffic across the socket
  interconnect.

Everything comes from sysfs and procfs under ``ctx.root`` (:mod:`llmdiag.probes.pcitree`) and
from ``systemctl`` through ``ctx.run``, so tests build the tree and the command.
"""

from __future__ import annotations

from collections.abc import Iterable

from llmdiag.context import Context
from llmdiag.probe import BaseProbe
from llmdiag.probes import pcitree
from llmdiag.result import Result

PEERMEM_MODULES = ("nvidia_peermem", "nv_peer_mem")
FABRIC_MANAGER = "nvidia-fabricmanager"


def _gpus(devs):
    return [d for d in devs if d.is_nvidia_gpu]


class PlatformProbe(BaseProbe):
    name = "platform"
    description = "GPUDirect RDMA module, PCIe ACS between GPU and NIC, NVSwitch fabric manager, GPU-NIC NUMA"
    timeout_s = 20.0

    def run(self, ctx: Context) -> Iterable[Result]:
        devs = pcitree.devices(ctx)
        gpus, nics = _gpus(devs), pcitree.rdma_nics(ctx)
        return [self.check_gdr(ctx, gpus, nics), self.check_acs(ctx, gpus, nics),
                self.check_fabric_manager(ctx, devs), self.check_numa(ctx, gpus, nics)]

    def _no_pair(self, ctx: Context, check: str, gpus, nics) -> Result | None:
        if not gpus:
            return self.skip(ctx, check, "no NVIDIA GPU on the PCI bus (/sys/bus/pci/devices)")
        if not nics:
            return self.skip(ctx, check, "no RDMA NIC (/sys/class/infiniband is empty): GPU-NIC paths do not apply")
        return None

    def check_gdr(self, ctx: Context, gpus, nics) -> Result:
        skip = self._no_pair(ctx, "gpudirect-rdma", gpus, nics)
        if skip:
            return skip
        try:
            loaded = {line.split()[0] for line in ctx.path("/proc/modules").read_text().splitlines() if line.strip()}
        except OSError as exc:
            return self.skip(ctx, "gpudirect-rdma", f"cannot read /proc/modules: {exc.strerror}")
        have = [m for m in PEERMEM_MODULES if m in loaded]
        data = {"modules": have, "gpus": len(gpus), "rdma_nics": [n for n, _ in nics]}
        ev = [("peer-memory module", ", ".join(have) or "none loaded", " or ".join(PEERMEM_MODULES), "")]
        if have:
            return self.ok(ctx, "gpudirect-rdma", f"{have[0]} loaded: NICs {', '.join(data['rdma_nics'])} read GPU "
                           "memory directly", evidence=ev, data=data)
        return self.warn(ctx, "gpudirect-rdma", f"{len(gpus)} GPU(s) and RDMA NIC(s) {', '.join(data['rdma_nics'])} "
                         "but no peer-memory module: NCCL stages every message through host memory (no GDRDMA in "
                         "NCCL_DEBUG=INFO)", evidence=ev, data=data, runbook="gpudirect-rdma-off",
                         remediation="`modprobe nvidia_peermem` and make it permanent: `echo nvidia_peermem > "
                                     "/etc/modules-load.d/nvidia-peermem.conf` (GPU Operator: "
                                     "driver.rdma.enabled=true).")

    def check_acs(self, ctx: Context, gpus, nics) -> Result:
        skip = self._no_pair(ctx, "pcie-acs", gpus, nics)
        if skip:
            return skip
        enabled: dict[str, tuple[str, ...]] = {}
        unknown: dict[str, str] = {}
        paths = via_root = 0
        for gpu in gpus:
            for _name, nic in nics:
                ports = pcitree.switch_ports_between(gpu, nic)
                if ports is None:
                    via_root += 1  # routed through the root complex whatever ACS says
                    continue
                paths += 1
                for br in ports:
                    if br.bdf in enabled or br.bdf in unknown:
                        continue
                    flags, source = pcitree.acs_control(ctx, br)
                    if flags is None:
                        unknown[br.bdf] = source
                    elif set(flags) & set(pcitree.ACS_RESTRICTING):
                        enabled[br.bdf] = flags
        data = {"acs_enabled": {k: list(v) for k, v in enabled.items()}, "unknown": unknown,
                "paths_via_switch": paths, "paths_via_root_complex": via_root}
        if enabled:
            bdfs = sorted(enabled)
            ev = [(f"ACSCtl {b}", " ".join(f"{f}+" for f in enabled[b]), "all -", "") for b in bdfs]
            return self.warn(ctx, "pcie-acs", f"ACS enabled on {len(bdfs)} PCIe switch port(s) between GPUs and "
                             f"NICs ({', '.join(bdfs[:4])}{' ...' if len(bdfs) > 4 else ''}): their peer-to-peer "
                             "traffic is redirected to the root complex instead of crossing the switch", evidence=ev, data=data, runbook="pcie-acs-enabled",
                             remediation="Disable ACS in the BIOS (PCIe ACS control), or at boot per switch port: "
                                         f"`setpci -s {bdfs[0]} ECAP_ACS+0x6.w=0000` (not in VMs that need IOMMU "
                                         "isolation).")
        if unknown:
            first = sorted(unknown)[0]
            return self.skip(ctx, "pcie-acs", f"ACS state of {len(unknown)} bridge(s) unknown ({first}: "
                             f"{unknown[first]})", data=data)
        if not paths:
            return self.ok(ctx, "pcie-acs", f"no GPU shares a PCIe switch with a NIC ({via_root} path(s) through the "
                           "root complex, where ACS changes nothing)", data=data)
        return self.ok(ctx, "pcie-acs", f"no ACS redirect on the switch ports of {paths} GPU-NIC path(s)",
                       evidence=[("switch ports with ACS enabled", 0, 0, "")], data=data)

    def check_fabric_manager(self, ctx: Context, devs) -> Result:
        switches = [d.bdf for d in devs if d.is_nvswitch]
        if not switches:
            return self.skip(ctx, "fabric-manager", "no NVSwitch on the PCI bus: fabric manager not needed")
        data = {"nvswitches": switches}
        if ctx.runner.which("systemctl") is None:
            return self.skip(ctx, "fabric-manager", f"{len(switches)} NVSwitch(es) but no systemctl here (a "
                             f"container?): check {FABRIC_MANAGER} on the host", data=data)
        res = ctx.run(["systemctl", "is-active", FABRIC_MANAGER], timeout=5.0)
        state = res.stdout.strip() or (res.error or "unknown")
        data["state"] = state
        ev = [(f"{FABRIC_MANAGER} state", state, "active", "")]
        if res.timed_out:
            return self.skip(ctx, "fabric-manager", f"systemctl is-active {FABRIC_MANAGER} timed out", data=data)
        if state == "active":
            return self.ok(ctx, "fabric-manager", f"{FABRIC_MANAGER} active for {len(switches)} NVSwitch(es)",
                           evidence=ev, data=data)
        return self.fail(ctx, "fabric-manager", f"{len(switches)} NVSwitch(es) but {FABRIC_MANAGER} is {state}: "
                         "CUDA fails with 'system not yet initialized' (error 802) and NCCL cannot use NVLink",
                         evidence=ev, data=data, runbook="fabric-manager-down",
                         remediation=f"`systemctl enable --now {FABRIC_MANAGER}` (its version must equal the "
                                     "driver's); `journalctl -u nvidia-fabricmanager` says why it stopped.")

    def check_numa(self, ctx: Context, gpus, nics) -> Result:
        skip = self._no_pair(ctx, "gpu-nic-numa", gpus, nics)
        if skip:
            return skip
        nic_numa = {name: d.numa_node for name, d in nics}
        nodes = {n for n in nic_numa.values() if n is not None} | {g.numa_node for g in gpus if g.numa_node is not None}
        placement = {g.bdf: {"numa": g.numa_node, "nearest_nic": self._nearest(g, nics)} for g in gpus}
        data = {"gpus": placement, "nics": nic_numa}
        if len(nodes) <= 1:
            return self.ok(ctx, "gpu-nic-numa", "one NUMA node (or none reported): every GPU is local to every NIC",
                           data=data)
        nic_nodes = sorted({n for n in nic_numa.values() if n is not None})
        if not nic_nodes:
            return self.skip(ctx, "gpu-nic-numa", "the NICs' NUMA nodes are not reported (numa_node -1): cannot "
                             "tell which GPUs are local to them", data=data)
        lonely = [g for g in gpus if g.numa_node is not None and g.numa_node not in nic_nodes]
        if lonely:
            ev = [(f"GPU {g.bdf} NUMA node", g.numa_node, f"one of {nic_nodes}", "") for g in lonely]
            return self.warn(ctx, "gpu-nic-numa", f"{len(lonely)} GPU(s) have no RDMA NIC on their NUMA node "
                             f"({', '.join(g.bdf for g in lonely[:4])}): their traffic crosses the socket "
                             "interconnect", evidence=ev, data=data, runbook="gpu-nic-numa",
                             remediation="Put a NIC on every socket that holds GPUs (HGX: one NIC per GPU pair), "
                                         "and bind each rank to its GPU's NUMA node (`numactl --cpunodebind=N "
                                         "--membind=N`, Slurm --cpu-bind).")
        return self.ok(ctx, "gpu-nic-numa", f"every GPU has an RDMA NIC on its NUMA node ({len(nodes)} NUMA nodes)",
                       evidence=[("GPUs without a local NIC", 0, 0, "")], data=data)

    @staticmethod
    def _nearest(gpu, nics) -> dict | None:
        """The NIC with the shortest PCIe path to ``gpu`` and how they connect (PCIe switch, host
        bridge, or across the root complex), as ``nvidia-smi topo -m`` tells PIX/PXB from PHB/SYS."""
        best = None
        for name, nic in nics:
            bridges, common = pcitree.bridges_between(gpu, nic)
            if common is None:
                via = "root complex"
            elif pcitree.ancestors(common):
                via = "PCIe switch"
            else:
                via = "root port"
            cand = (len(bridges) if common is not None else 1000 + len(bridges), name, via)
            if best is None or cand < best:
                best = cand
        return None if best is None else {"nic": best[1], "via": best[2], "bridges": best[0] % 1000}
