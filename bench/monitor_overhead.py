"""What ``llmdiag monitor`` costs per sample: wall time of one round and CPU time of the process.

Runs the monitor in-process for N samples at each interval, on this host's real psutil
readings, with GPUs either from the real NVML (when a driver is present) or replayed from a
recorded 8x H100 fixture (``--recorded``; that measures everything but the driver calls), and
with every sink on (CSV timeline, Prometheus file). Prints one line per interval.

    python bench/monitor_overhead.py [--samples 50] [--intervals 0.1,1] [--recorded]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=50)
    ap.add_argument("--intervals", default="0.1,1")
    ap.add_argument("--recorded", action="store_true", help="replay 8 recorded H100s instead of the real NVML")
    args = ap.parse_args()

    from llmdiag import nvml
    from llmdiag.monitor import sinks as S
    from llmdiag.monitor.config import Rules
    from llmdiag.monitor.gpus import GpuSampler
    from llmdiag.monitor.host import HostSampler
    from llmdiag.monitor.loop import Monitor, Sinks

    fixture = REPO / "tests" / "fixtures" / "nvml" / "timeline-h100-faults.json"
    factory = (lambda: nvml.replay(fixture)) if args.recorded else None
    for interval in (float(x) for x in args.intervals.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            sinks = Sinks(timeline=S.Timeline(f"{tmp}/t.csv"), prometheus_file=S.PrometheusFile(f"{tmp}/m.prom"))
            gpus = GpuSampler(factory, Rules().throttle_reasons)
            mon = Monitor(node="bench", interval_s=interval, rules=Rules(), gpus=gpus, host=HostSampler(),
                          sinks=sinks)
            doc = mon.run(count=args.samples)
        oh = doc["overhead"]
        print(f"interval {interval:g} s, {doc['samples']} samples, {doc['gpu_count']} GPU(s)"
              f"{' (recorded)' if args.recorded else ''}: round {oh['round_ms_mean']:.2f} ms mean, "
              f"{oh['round_ms_max']:.2f} ms max; CPU {oh['cpu_ms_per_sample']:.2f} ms per sample = "
              f"{oh['cpu_pct_of_one_core']:.2f}% of one core")


if __name__ == "__main__":
    main()
