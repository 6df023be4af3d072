"""GPU health through NVML: one result per check, aggregated over the node's GPUs.

Each check looks at :class:`llmdiag.nvml.GpuSnapshot` values only, so recorded readings of real
nodes drive the same code as the live driver. A result names the GPUs (index and PCI bus id)
that failed it; ``data`` carries per-GPU facts for cross-node comparison.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from llmdiag.context import Context
from llmdiag.nvml import GpuSnapshot
from llmdiag.probe import BaseProbe, Requirement
from llmdiag.result import Result

MiB = 1024 * 1024

#: Clock-event reasons that say "the GPU is slower than it should be". Idle, application
#: clocks, sync boost and display clock are normal states, not faults.
HW_THROTTLE = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown")
SW_THROTTLE = ("sw_power_cap", "sw_thermal_slowdown")


def _gpu(s: GpuSnapshot) -> str:
    return f"GPU {s.index}" + (f" ({s.pci_bus_id})" if s.pci_bus_id else "")


def _mib(b: int | None) -> int | None:
    return None if b is None else round(b / MiB)


class GpuProbe(BaseProbe):
    name = "gpu"
    description = "GPU count, model, memory, leftover processes, ECC, thermals, clocks, PCIe, NVLink"
    requires = frozenset({Requirement.GPU})
    timeout_s = 30.0

    def unmet(self, ctx: Context, reason: str) -> list[Result]:
        """No usable GPU here: a failure when the job expects GPUs on every node, else a skip."""
        expected = ctx.config.get("cluster", "gpus_per_node")
        if not expected:
            return []
        return [self.fail(ctx, "count", f"0 GPU(s) usable, {expected} expected: {reason}",
                          evidence=[("gpus", 0, expected, "")], data={"gpu_count": 0}, runbook="gpu-count-mismatch",
                          remediation="Check `nvidia-smi` on this node: install or load the NVIDIA driver (lsmod | grep "
                                      "nvidia), or start the container with the GPUs (--gpus all / the device plugin).")]

    def run(self, ctx: Context) -> Iterable[Result]:
        from llmdiag import nvml  # noqa: PLC0415

        api = (ctx.nvml or nvml.load)()
        gpus: list[GpuSnapshot] = []
        unreadable: list[tuple[int, str]] = []
        try:
            for i in range(api.device_count()):
                try:
                    gpus.append(api.snapshot(i))
                except nvml.GpuUnreadable as exc:
                    unreadable.append((i, str(exc)))
            driver = api.driver_version()
        finally:
            api.close()
        checks = (
            self.check_count, self.check_model, self.check_memory, self.check_processes, self.check_ecc,
            self.check_retired, self.check_temperature, self.check_power, self.check_throttle, self.check_pcie,
            self.check_nvlink, self.check_persistence, self.check_compute_mode, self.check_xid,
        )
        results = [self.check_readable(ctx, gpus, unreadable)] if unreadable else []
        for check in checks:
            r = check(ctx, gpus)
            if r is not None:
                results.append(r)
        if results:
            results[0] = results[0].replace(data=dict(results[0].data, driver=driver))
        return results

    # -- count and model ------------------------------------------------------------------

    def check_readable(self, ctx: Context, gpus: Sequence[GpuSnapshot], unreadable: Sequence[tuple[int, str]]) -> Result:
        return self.fail(
            ctx, "readable", "NVML cannot read " + "; ".join(f"GPU {i}: {why}" for i, why in unreadable),
            evidence=[(f"GPU {i}", why, "readable", "") for i, why in unreadable],
            data={"gpus_unreadable": [i for i, _ in unreadable]}, runbook="gpu-count-mismatch",
            remediation="Check `dmesg | grep -i xid` (Xid 79: fell off the bus) and `nvidia-smi`; drain the node "
                        "and reset or reboot it.",
        )

    def check_count(self, ctx: Context, gpus: Sequence[GpuSnapshot]) -> Result:
        n = len(gpus)  # readable GPUs: a lost GPU cannot run a rank
        expected = ctx.config.get("cluster", "gpus_per_node")
        ranks = ctx.launcher.nproc_per_node or ctx.config.get("cluster", "nproc_per_node")
        data = {"gpu_count": n}
        if expected is not None and n != expected:
            return self.fail(
                ctx, "count", f"{n} GPU(s) visible, {expected} expected",
                evidence=[("gpus", n, expected, "")], data=data, runbook="gpu-count-mismatch",
                remediation="Run `nvidia-smi -L` and `dmesg | grep -i xid`; check CUDA_VISIBLE_DEVICES and the "
                            "container's --gpus; a GPU that fell off the bus needs a node drain and reset.",
            )
        if ranks is not None and ranks > n:
            return self.fail(
                ctx, "count", f"{ranks} ranks per node planned but only {n} GPU(s) visible",
                evidence=[("ranks per node", ranks, f"<= {n}", "")], data=data, runbook="gpu-count-mismatch",
                remediation=f"Start at most {n} processes per node (--nproc-per-node {n}) or fix GPU visibility.",
            )
        return self.ok(ctx, "count", f"{n} GPU(s) visible" + (" (as expected)" if expected is not None else ""),
                       evidence=[("gpus", n, expected, "")], data=data)

    def check_model(self, ctx: Context, gpus: Sequence[GpuSnapshot]) -> Result:
        models = [g.name or "unknown" for g in gpus]
        distinct = sorted(set(models))
        data = {"gpu_models": models}
        if len(distinct) > 1:
            counts = ", ".join(f"{models.count(m)}x {m}" for m in distinct)
            odd = [g for g in gpus if models.count(g.name or "unknown") < len(gpus) / 2]
            return self.warn(
                ctx, "model", f"mixed GPU models on one node: {counts}",
                evidence=[(_gpu(g), g.name, distinct[0] if g.name != distinct[0] else distinct[-1], "") for g in odd]
                or [("models", counts, "one model", "")],
                data=data, runbook="gpu-mixed-models",
                remediation="Replace the odd GPU or exclude it with CUDA_VISIBLE_DEVICES: the slowest/smallest GPU "
                            "sets the pace and the memory limit of every rank.",
            )
        return self.ok(ctx, "model", f"{len(gpus)}x {distinct[0] if distinct else 'none'}", data=data)

    # -- memory and leftover processes ----------------------------------------------------

    def check_memory(self, ctx: Context, gpus: Sequence[GpuSnapshot]) -> Result:
        limit = ctx.config.get("thresholds", "gpu_memory_used_max_mib")
        busy = [g for g in gpus if (_mib(g.memory_used_bytes) or 0) > limit]
        data = {"memory_total_mib": [_mib(g.memory_total_bytes) for g in gpus],
                "memory_used_mib": [_mib(g.memory_used_bytes) for g in gpus]}
        if busy:
            return self.warn(
                ctx, "memory", "memory already in use on " + ", ".join(f"GPU {g.index}" for g in busy),
                evidence=[(_gpu(g), _mib(g.memory_used_bytes), f"<= {limit}", "MiB") for g in busy],
                data=data, runbook="gpu-leftover-process",
                remediation="Find the holder with `nvidia-smi --query-compute-apps=pid,process_name,used_memory "
                            "--format=csv` and stop it before launching.",
            )
        total = min((_mib(g.memory_total_bytes) or 0) for g in gpus) if gpus else 0
        used = max((u or 0) for u in data["memory_used_mib"]) if gpus else 0
        return self.ok(ctx, "memory", f"{total} MiB per GPU, at most {used} MiB in use",
                       evidence=[("smallest GPU memory", total, None, "MiB")], data=data)

    def check_processes(self, ctx: Context, gpus: Sequence[GpuSnapshot]) -> Result:
        found = [(g, p) for g in gpus for p in (g.processes or ())]
        if any(g.processes is None for g in gpus) and not found:
            return self.skip(ctx, "processes", "the driver does not report compute processes on these GPUs")
        if found:
            names = "; ".join(f"pid {p.get('pid')} ({p.get('name') or 'unknown'}) on GPU {g.index}" for g, p in found)
            pids = " ".join(sorted({str(p.get("pid")) for _, p in found}))
            return self.fail(
                ctx, "processes", f"processes already hold GPU memory: {names}",
                evidence=[(f"{_gpu(g)} pid {p.get('pid')} {p.get('name') or ''}".strip(), _mib(p.get("used_bytes")), 0, "MiB")
                          for g, p in found],
                data={"gpu_processes": [{"gpu": g.index, **dict(p)} for g, p in found]},
                runbook="gpu-leftover-process",
                remediation=f"A leftover job holds the GPUs: check `ps -o pid,user,etime,cmd -p {pids}` and stop it "
                            f"(`kill {pids}`), or drain the node.",
            )
        return self.ok(ctx, "processes", "no process holds GPU memory")

    # -- memory errors --------------------------------------------------------------------

    def check_ecc(self, ctx: Context, gpus: Sequence[GpuSnapshot]) -> Result:
        now = [g for g in gpus if (g.ecc_uncorrectable_volatile or 0) > 0]
        past = [g for g in gpus if g not in now and (g.ecc_uncorrectable_aggregate or 0) > 0]
        off = [g for g in gpus if g.ecc_mode_enabled is False]
        data = {"ecc_uncorrectable_volatile": [g.ecc_uncorrectable_volatile for g in gpus]}
        if now:
            return self.fail(
                ctx, "ecc", "uncorrectable ECC errors since the last reset on " + ", ".join(f"GPU {g.index}" for g in now),
                evidence=[(_gpu(g), g.ecc_uncorrectable_volatile, 0, "errors") for g in now], data=data,
                runbook="gpu-ecc-errors",
                remediation="Drain the node and reset the GPU (`nvidia-smi -r -i N` with no process on it); "
                            "errors that come back mean an RMA.",
            )
        if past or off:
            parts = [f"GPU {g.index} had {g.ecc_uncorrectable_aggregate} uncorrectable ECC error(s) in its lifetime" for g in past]
            parts += [f"ECC disabled on GPU {g.index}" for g in off]
            return self.warn(
                ctx, "ecc", "; ".join(parts),
                evidence=[(_gpu(g), g.ecc_uncorrectable_aggregate, 0, "errors (aggregate)") for g in past]
                + [(_gpu(g), "disabled", "enabled", "") for g in off],
                data=data, runbook="gpu-ecc-errors",
                remediation="Watch these GPUs (`nvidia-smi -q -d ECC`); enable ECC with `nvidia-smi -e 1` and a reset.",
            )
        if all(g.ecc_mode_enabled is None for g in gpus):
            return self.skip(ctx, "ecc", "ECC is not supported on these GPUs")
        return self.ok(ctx, "ecc", "no uncorrectable ECC errors", data=data)

    def check_retired(self, ctx: Context, gpus: Sequence[GpuSnapshot]) -> Result:
        bad, warn = [], []
        for g in gpus:
            if g.remapped_rows_failure:
                bad.append((_gpu(g), "row remapping failed", "no failure", ""))
            if g.remapped_rows_pending:
                bad.append((_gpu(g), "row remap pending", "none pending", ""))
            if g.retired_pages_pending:
                bad.append((_gpu(g), "page retirement pending", "none pending", ""))
            if (g.retired_pages_dbe or 0) > 0:
                warn.append((_gpu(g), g.retired_pages_dbe, 0, "pages retired (double-bit)"))
        if bad:
            return self.fail(
                ctx, "retired-memory", "; ".join(f"{e[0]}: {e[1]}" for e in bad), evidence=bad,
                runbook="gpu-retired-memory",
                remediation="Reset the GPU to apply the pending remap/retirement (drain, then `nvidia-smi -r -i N`); "
                            "a remapping failure means the GPU must be replaced.",
            )
        if warn:
            return self.warn(ctx, "retired-memory", "; ".join(f"{e[0]}: {e[1]} {e[3]}" for e in warn), evidence=warn,
                             runbook="gpu-retired-memory",
                             remediation="Track the count with `nvidia-smi -q -d PAGE_RETIREMENT`; plan an RMA if it grows.")
        return self.ok(ctx, "retired-memory", "no pending retired pages or remapped rows")

    # -- thermals, power, clocks ----------------------------------------------------------

    def check_temperature(self, ctx: Context, gpus: Sequence[GpuSnapshot]) -> Result:
        warn_c = ctx.config.get("thresholds", "gpu_temp_warn_c")
        fail_c = ctx.config.get("thresholds", "gpu_temp_fail_c")
        temps = [g.temperature_c for g in gpus]
        data = {"temperature_c": temps}
        hot = [g for g in gpus if g.temperature_c is not None and (
            g.temperature_c >= warn_c or (g.temperature_slowdown_c and g.temperature_c >= g.temperature_slowdown_c))]
        if not hot:
            known = [t for t in temps if t is not None]
            return self.ok(ctx, "temperature", f"hottest GPU {max(known)} °C" if known else "temperature not reported",
                           evidence=[("hottest", max(known) if known else None, f"< {warn_c}", "°C")], data=data)
        ev = [(_gpu(g), g.temperature_c, f"< {min(warn_c, g.temperature_slowdown_c or warn_c)}", "°C") for g in hot]
        summary = "hot GPUs: " + ", ".join(f"GPU {g.index} {g.temperature_c} °C" for g in hot)
        kw = dict(evidence=ev, data=data, runbook="gpu-temperature",
                  remediation="Check airflow and fans (`nvidia-smi -q -d TEMPERATURE,PERFORMANCE`, `ipmitool sdr type "
                              "Fan`); an idle GPU this hot needs the datacenter team.")
        if any(g.temperature_c >= fail_c for g in hot):
            return self.fail(ctx, "temperature", summary, **kw)
        return self.warn(ctx, "temperature", summary, **kw)

    def check_power(self, ctx: Context, gpus: Sequence[GpuSnapshot]) -> Result:
        capped = [g for g in gpus if g.power_limit_w and g.power_default_limit_w
                  and g.power_limit_w < 0.9 * g.power_default_limit_w]
        over = [g for g in gpus if g.power_w and g.power_limit_w and g.power_w > 1.05 * g.power_limit_w]
        data = {"power_w": [g.power_w for g in gpus], "power_limit_w": [g.power_limit_w for g in gpus]}
        if capped or over:
            ev = [(f"{_gpu(g)} power limit", g.power_limit_w, g.power_default_limit_w, "W") for g in capped]
            ev += [(f"{_gpu(g)} power draw", g.power_w, f"<= {g.power_limit_w}", "W") for g in over]
            return self.warn(
                ctx, "power", "; ".join([f"GPU {g.index} capped to {g.power_limit_w:g} W (default "
                                         f"{g.power_default_limit_w:g} W)" for g in capped]
                                        + [f"GPU {g.index} draws {g.power_w:g} W above its limit" for g in over]),
                evidence=ev, data=data, runbook="gpu-power",
                remediation="Restore the default limit with `nvidia-smi -i N -pl DEFAULT_W` (see `nvidia-smi -q -d POWER`).",
            )
        return self.ok(ctx, "power", "power limits at their defaults", data=data)

    def check_throttle(self, ctx: Context, gpus: Sequence[GpuSnapshot]) -> Result:
        hw = [(g, [r for r in g.throttle_reasons or () if r in HW_THROTTLE]) for g in gpus]
        sw = [(g, [r for r in g.throttle_reasons or () if r in SW_THROTTLE]) for g in gpus]
        hw = [(g, rs) for g, rs in hw if rs]
        sw = [(g, rs) for g, rs in sw if rs]
        data = {"throttle_reasons": [list(g.throttle_reasons or ()) for g in gpus]}
        if not hw and not sw:
            return self.ok(ctx, "throttle", "no clock throttling (idle is normal)", data=data)
        bad = hw + sw
        ev = [(_gpu(g), ", ".join(rs) + (f" at {g.sm_clock_mhz} of {g.max_sm_clock_mhz} MHz" if g.sm_clock_mhz else ""),
               "no slowdown", "") for g, rs in bad]
        summary = "clocks throttled: " + "; ".join(f"GPU {g.index} {', '.join(rs)}" for g, rs in bad)
        kw = dict(evidence=ev, data=data, runbook="gpu-throttling",
                  remediation="Read `nvidia-smi -q -d PERFORMANCE` on the node: HW slowdown / power brake point at "
                              "cooling or the power supply (datacenter ticket), SW caps at a power limit someone set.")
        if hw:
            return self.fail(ctx, "throttle", summary, **kw)
        return self.warn(ctx, "throttle", summary, **kw)

    # -- links ---------------------------------------------------------------------------

    def check_pcie(self, ctx: Context, gpus: Sequence[GpuSnapshot]) -> Result:
        narrow = [g for g in gpus if g.pcie_width and g.pcie_width_max and g.pcie_width < g.pcie_width_max]
        # The link generation drops to Gen1 when a GPU idles (power saving), so a low
        # generation only means something while the GPU is busy.
        slow = [g for g in gpus if g.pcie_gen and g.pcie_gen_max and g.pcie_gen < g.pcie_gen_max
                and "gpu_idle" not in (g.throttle_reasons or ()) and (g.utilization_gpu_pct or 0) > 0]
        data = {"pcie": [f"gen{g.pcie_gen}x{g.pcie_width}" for g in gpus]}
        if narrow or slow:
            ev = [(f"{_gpu(g)} width", f"x{g.pcie_width}", f"x{g.pcie_width_max}", "lanes") for g in narrow]
            ev += [(f"{_gpu(g)} generation", g.pcie_gen, g.pcie_gen_max, "") for g in slow]
            return self.warn(
                ctx, "pcie", "PCIe link below its maximum: " + ", ".join(sorted({f"GPU {g.index}" for g in narrow + slow})),
                evidence=ev, data=data, runbook="gpu-pcie-downtrained",
                remediation="Confirm with `nvidia-smi -q -d PCIE` and `lspci -vv -s BUS_ID | grep LnkSta`; reseat the "
                            "GPU or riser (datacenter ticket).",
            )
        return self.ok(ctx, "pcie", "PCIe links at full width (generation drops at idle; that is normal)", data=data)

    def check_nvlink(self, ctx: Context, gpus: Sequence[GpuSnapshot]) -> Result:
        if all(not g.nvlink_total for g in gpus):
            return self.ok(ctx, "nvlink", "no NVLink on these GPUs (PCIe-only)")
        down = [g for g in gpus if g.nvlink_down]
        data = {"nvlink_total": [g.nvlink_total for g in gpus]}
        if down:
            return self.fail(
                ctx, "nvlink", "NVLink links down: " + "; ".join(f"GPU {g.index} links {list(g.nvlink_down)}" for g in down),
                evidence=[(_gpu(g), f"{g.nvlink_total - len(g.nvlink_down)} of {g.nvlink_total} up", f"{g.nvlink_total} up", "links")
                          for g in down],
                data=data, runbook="nvlink-down",
                remediation="Check `nvidia-smi nvlink -s` and `nvidia-smi -q | grep -i fabric`; restart "
                            "nvidia-fabricmanager, then reset or drain the node.",
            )
        return self.ok(ctx, "nvlink", f"all NVLink links up ({sum(g.nvlink_total or 0 for g in gpus)} links)", data=data)

    # -- modes ---------------------------------------------------------------------------

    def check_persistence(self, ctx: Context, gpus: Sequence[GpuSnapshot]) -> Result:
        off = [g for g in gpus if g.persistence_mode is False]
        if off:
            return self.warn(
                ctx, "persistence", "persistence mode off on " + ", ".join(f"GPU {g.index}" for g in off),
                evidence=[(_gpu(g), "off", "on", "") for g in off], runbook="gpu-persistence-mode",
                remediation="Enable it: `systemctl enable --now nvidia-persistenced` (or `nvidia-smi -pm 1`).",
            )
        return self.ok(ctx, "persistence", "persistence mode on")

    def check_compute_mode(self, ctx: Context, gpus: Sequence[GpuSnapshot]) -> Result:
        prohibited = [g for g in gpus if g.compute_mode == "prohibited"]
        taken = [g for g in gpus if g.compute_mode in ("exclusive_process", "exclusive_thread") and g.processes]
        if prohibited or taken:
            ev = [(_gpu(g), "prohibited", "default", "") for g in prohibited]
            ev += [(_gpu(g), f"{g.compute_mode} held by pid {g.processes[0].get('pid')}", "free", "") for g in taken]
            return self.fail(
                ctx, "compute-mode", "GPUs refuse new CUDA contexts: " + ", ".join(f"GPU {g.index} ({g.compute_mode})" for g in prohibited + taken),
                evidence=ev, runbook="gpu-compute-mode",
                remediation="Set the default mode with `nvidia-smi -i N -c DEFAULT`, or stop the process holding an "
                            "exclusive-process GPU.",
            )
        modes = sorted({g.compute_mode or "unknown" for g in gpus})
        return self.ok(ctx, "compute-mode", f"compute mode {', '.join(modes)}")

    def check_xid(self, ctx: Context, gpus: Sequence[GpuSnapshot]) -> Result | None:
        events = [(g, e) for g in gpus for e in g.xid_events or ()]
        if not events:
            return None  # live NVML does not collect Xid events yet: no claim either way
        return self.fail(
            ctx, "xid", "Xid errors reported: " + ", ".join(f"GPU {g.index} Xid {e.get('xid')}" for g, e in events),
            evidence=[(_gpu(g), f"Xid {e.get('xid')}", "none", "") for g, e in events], runbook="gpu-ecc-errors",
            remediation="Read `dmesg | grep -i xid` on the node and drain it if the Xid is 48, 63, 64, 74, 79, 94 or 95.",
        )
