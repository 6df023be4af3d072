"""Host limits that break distributed training before the first step.

/dev/shm (NCCL's shared-memory transport and data-loader workers live there; a container's
64 MiB default is the classic cause of "Bus error" and NCCL shm failures), the open-files and
locked-memory limits (RDMA registers memory, so InfiniBand wants memlock unlimited), host
memory and swap, and usable CPU cores against the ranks this node will run.

Limits are read with :mod:`resource` (the limits this process, and the job it stands for,
inherits); ``/dev/shm``, ``/sys`` and ``/proc`` through ``ctx.path`` so tests can point them at
a mounted tmpfs or a recorded tree.
"""

from __future__ import annotations

import os
import resource
from collections.abc import Iterable

from llmdiag.context import Context
from llmdiag.probe import BaseProbe
from llmdiag.result import Result

MiB = 1024 * 1024
GiB = 1024 * MiB


def _limit(v: int) -> str | int:
    return "unlimited" if v == resource.RLIM_INFINITY else v


def _read(ctx: Context, path: str) -> str | None:
    try:
        return ctx.path(path).read_text().strip()
    except OSError:
        return None


class SystemProbe(BaseProbe):
    name = "system"
    description = "/dev/shm size, open-files and locked-memory limits, host memory and swap, CPU cores"
    timeout_s = 10.0

    def run(self, ctx: Context) -> Iterable[Result]:
        return [self.check_shm(ctx), self.check_nofile(ctx), self.check_memlock(ctx),
                self.check_memory(ctx), self.check_cpu(ctx)]

    def check_shm(self, ctx: Context) -> Result:
        want = ctx.config.get("thresholds", "shm_min_mib")
        path = ctx.path("/dev/shm")
        try:
            st = os.statvfs(path)
        except OSError as exc:
            return self.fail(ctx, "shm", f"/dev/shm is not usable: {exc.strerror}", evidence=[("/dev/shm", None, want, "MiB")],
                             runbook="shm-too-small",
                             remediation="Mount a tmpfs there (docker: --shm-size=16g or --ipc=host).")
        size = st.f_blocks * st.f_frsize // MiB
        free = st.f_bavail * st.f_frsize // MiB
        data = {"shm_mib": size, "shm_free_mib": free}
        ev = [("/dev/shm size", size, f">= {want}", "MiB"), ("/dev/shm free", free, None, "MiB")]
        fix = ("Give the container a larger /dev/shm: `docker run --shm-size=16g` (or `--ipc=host`), Kubernetes: an "
               "emptyDir with medium: Memory at /dev/shm; on a host `mount -o remount,size=16G /dev/shm`.")
        if size < want:
            return self.fail(ctx, "shm", f"/dev/shm is {size} MiB, {want} MiB needed (NCCL shm and data loaders fail)",
                             evidence=ev, data=data, runbook="shm-too-small", remediation=fix)
        if free < want:
            return self.warn(ctx, "shm", f"/dev/shm has only {free} MiB free of {size} MiB (leftover segments?)",
                             evidence=ev, data=data, runbook="shm-too-small",
                             remediation="Remove stale files: `ls -la /dev/shm` (nccl-*, torch_*, psm_*) of jobs that are gone.")
        return self.ok(ctx, "shm", f"/dev/shm {size} MiB ({free} MiB free)", evidence=ev, data=data)

    def check_nofile(self, ctx: Context) -> Result:
        want = ctx.config.get("thresholds", "nofile_min")
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        data = {"nofile_soft": _limit(soft), "nofile_hard": _limit(hard)}
        ev = [("open files soft limit", _limit(soft), f">= {want}", "files"), ("open files hard limit", _limit(hard), None, "files")]
        if soft != resource.RLIM_INFINITY and soft < want:
            if hard == resource.RLIM_INFINITY or hard >= want:
                fix = f"Raise the soft limit in the launch script: `ulimit -n {want}` (the hard limit allows it)."
            else:
                fix = (f"Raise both limits: `* - nofile {max(want, 1048576)}` in /etc/security/limits.conf, "
                       f"docker `--ulimit nofile={max(want, 1048576)}`, or LimitNOFILE= in the systemd unit.")
            return self.warn(ctx, "nofile", f"open-files soft limit {soft} < {want} (data loaders and NCCL run out: "
                             "'Too many open files')", evidence=ev, data=data, runbook="nofile-low", remediation=fix)
        return self.ok(ctx, "nofile", f"open-files limit {_limit(soft)} (hard {_limit(hard)})", evidence=ev, data=data)

    def check_memlock(self, ctx: Context) -> Result:
        soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
        ib_dir = ctx.path("/sys/class/infiniband")
        try:
            hcas = sorted(p.name for p in ib_dir.iterdir())
        except OSError:
            hcas = []
        want_mib = ctx.config.get("thresholds", "memlock_min_mib")
        data = {"memlock_soft": _limit(soft), "memlock_hard": _limit(hard), "rdma_devices": hcas}
        soft_mib = None if soft == resource.RLIM_INFINITY else soft // MiB
        ev = [("locked-memory limit", "unlimited" if soft_mib is None else soft_mib,
               "unlimited" if want_mib is None else f">= {want_mib}", "MiB")]
        fix = ("Set memlock unlimited: `* - memlock unlimited` in /etc/security/limits.conf, docker "
               "`--ulimit memlock=-1:-1`, LimitMEMLOCK=infinity for systemd/slurmd (then restart slurmd).")
        limited = soft_mib is not None and (want_mib is None or soft_mib < want_mib)
        if hcas and limited:
            return self.fail(ctx, "memlock", f"locked memory limited to {soft_mib} MiB but RDMA devices are present "
                             f"({', '.join(hcas)}): NCCL's IB transport cannot register buffers",
                             evidence=ev, data=data, runbook="memlock-limited", remediation=fix)
        if want_mib is not None and soft_mib is not None and soft_mib < want_mib:
            return self.warn(ctx, "memlock", f"locked memory limited to {soft_mib} MiB < {want_mib} MiB",
                             evidence=ev, data=data, runbook="memlock-limited", remediation=fix)
        where = f"RDMA devices {', '.join(hcas)}" if hcas else "no RDMA devices, so this only matters for RDMA"
        return self.ok(ctx, "memlock", f"locked-memory limit {'unlimited' if soft_mib is None else f'{soft_mib} MiB'} ({where})",
                       evidence=ev, data=data)

    def check_memory(self, ctx: Context) -> Result:
        import psutil  # noqa: PLC0415

        vm, sw = psutil.virtual_memory(), psutil.swap_memory()
        want = ctx.config.get("thresholds", "host_memory_min_gib")
        total_gib, avail_gib = vm.total / GiB, vm.available / GiB
        data = {"host_memory_gib": round(total_gib, 1), "host_memory_available_gib": round(avail_gib, 1),
                "swap_gib": round(sw.total / GiB, 1), "swap_used_gib": round(sw.used / GiB, 1)}
        thp = _read(ctx, "/sys/kernel/mm/transparent_hugepage/enabled")
        if thp:
            data["transparent_hugepages"] = thp.split("[")[-1].split("]")[0] if "[" in thp else thp
        ev = [("host memory", round(total_gib, 1), None if want is None else f">= {want}", "GiB"),
              ("available", round(avail_gib, 1), None, "GiB"), ("swap used", round(sw.used / GiB, 1), None, "GiB")]
        if want is not None and total_gib < want:
            return self.fail(ctx, "memory", f"host memory {total_gib:.1f} GiB < {want} GiB required", evidence=ev, data=data,
                             runbook="host-memory-low", remediation="Use nodes with more memory or fewer data-loader "
                             "workers / smaller prefetch; check the container's memory limit (`cat /sys/fs/cgroup/memory.max`).")
        if avail_gib < 0.1 * total_gib:
            return self.warn(ctx, "memory", f"only {avail_gib:.1f} of {total_gib:.1f} GiB host memory available",
                             evidence=ev, data=data, runbook="host-memory-low",
                             remediation="Find what holds it: `ps aux --sort=-rss | head`; stop leftover jobs before launching.")
        return self.ok(ctx, "memory", f"{total_gib:.1f} GiB host memory, {avail_gib:.1f} GiB available, "
                       f"swap {sw.total / GiB:.1f} GiB", evidence=ev, data=data)

    def check_cpu(self, ctx: Context) -> Result:
        try:
            usable = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            usable = os.cpu_count() or 1
        quota = _read(ctx, "/sys/fs/cgroup/cpu.max")  # cgroup v2: "max 100000" or "200000 100000"
        if quota and not quota.startswith("max"):
            try:
                q, period = (int(x) for x in quota.split()[:2])
                usable = min(usable, max(1, q // period))
            except ValueError:
                pass
        nodes = ctx.path("/sys/devices/system/node")
        try:
            numa = len([p for p in nodes.iterdir() if p.name.startswith("node") and p.name[4:].isdigit()])
        except OSError:
            numa = None
        ranks = ctx.launcher.nproc_per_node or ctx.config.get("cluster", "nproc_per_node")
        data = {"cpus_usable": usable, "cpus_logical": os.cpu_count(), "numa_nodes": numa}
        ev = [("usable CPU cores", usable, None if ranks is None else f">= {2 * ranks}", "cores")]
        if ranks is None:
            return self.ok(ctx, "cpu", f"{usable} usable CPU cores (ranks per node unknown)", evidence=ev, data=data)
        if usable < 2 * ranks:
            return self.warn(ctx, "cpu", f"{usable} usable CPU cores for {ranks} ranks per node: under 2 cores per rank "
                             "(one for the training loop, one or more for data loading)", evidence=ev, data=data,
                             runbook="cpu-oversubscribed",
                             remediation=f"Give the job at least {2 * ranks} cores (Slurm --cpus-per-task, docker --cpus), "
                                         "or set num_workers and OMP_NUM_THREADS low.")
        return self.ok(ctx, "cpu", f"{usable} usable CPU cores for {ranks} ranks per node", evidence=ev, data=data)
