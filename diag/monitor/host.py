"""Host readings through psutil: CPU, load, memory, swap, network and disk counters.

Counters (bytes since boot) are reported as read; rates are computed against the previous
reading of the same sampler, so the first sample has no rates. Every reading that psutil
cannot make here (no disks in a container, no load average) is left out, never guessed.
"""

from __future__ import annotations

import time
from typing import Any


class HostSampler:
    def __init__(self, clock=time.monotonic) -> None:
        import psutil  # lazy: only the monitor needs it at import time

        self._ps = psutil
        self._clock = clock
        self._prev: tuple[float, int, int] | None = None
        self.cpu_count = psutil.cpu_count() or 1
        psutil.cpu_percent(interval=None)  # primes the counter: the first real call measures from here

    def sample(self) -> dict[str, Any]:
        ps = self._ps
        out: dict[str, Any] = {"cpu_pct": ps.cpu_percent(interval=None), "cpu_count": self.cpu_count}
        try:
            out["load_1m"] = ps.getloadavg()[0]
        except (AttributeError, OSError):
            pass
        vm = ps.virtual_memory()
        out.update(mem_total_bytes=vm.total, mem_used_bytes=vm.total - vm.available,
                   mem_pct=round(100.0 * (vm.total - vm.available) / vm.total, 2) if vm.total else None)
        try:
            out["swap_used_bytes"] = ps.swap_memory().used
        except (OSError, RuntimeError):
            pass
        net = _safe(ps.net_io_counters)
        now = self._clock()
        if net is not None:
            out.update(net_rx_bytes=net.bytes_recv, net_tx_bytes=net.bytes_sent,
                       net_errors=net.errin + net.errout + net.dropin + net.dropout)
            if self._prev is not None and now > self._prev[0]:
                dt = now - self._prev[0]
                out["net_rx_bps"] = round(max(0, net.bytes_recv - self._prev[1]) / dt, 1)
                out["net_tx_bps"] = round(max(0, net.bytes_sent - self._prev[2]) / dt, 1)
            self._prev = (now, net.bytes_recv, net.bytes_sent)
        disk = _safe(ps.disk_io_counters)
        if disk is not None:
            out.update(disk_read_bytes=disk.read_bytes, disk_write_bytes=disk.write_bytes)
        return out


def _safe(fn):
    try:
        return fn()
    except (OSError, RuntimeError, ValueError):
        return None
