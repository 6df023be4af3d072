"""Smoke training in preflight: a few real steps on every rank before the real job.

Checks that the loss is finite and falls, that the data-parallel replicas hold bit-identical
parameters afterwards (SHA-256 of every parameter, compared across ranks), and that no rank's
step time stands out (a straggler). Runs in the cluster's process group when the agent
provides ``ctx.services["process_group"]``; else a short local CPU run when ``[smoke] enabled``;
else it skips, so that a default preflight stays fast.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
from pathlib import Path

from llmdiag.probe import BaseProbe, Requirement

_TINY = ["--layers", "2", "--hidden", "32", "--heads", "2", "--seq-len", "32", "--batch-size", "4",
         "--device", "cpu", "--warmup", "2", "--lr", "3e-3"]


class SmokeTrainProbe(BaseProbe):
    name = "smoke-train"
    description = "A few training steps on every rank: finite falling loss, identical replicas, no straggler."
    requires = frozenset({Requirement.TORCH})
    config_section = "smoke"
    timeout_s = 120.0

    def run(self, ctx):
        smoke = ctx.config.section("smoke") if ctx.config is not None else {}
        steps = int(smoke.get("steps") or 8)
        group = ctx.services.get("process_group")
        if group is not None:
            ranks, where = self._in_group(group, steps), "cluster process group"
        elif smoke.get("enabled"):
            ranks, where = self._local(ctx, steps, int(smoke.get("nproc") or 2), float(smoke.get("timeout_s") or 90))
            if isinstance(ranks, str):
                yield self.fail(ctx, "run", f"local smoke training failed: {ranks}",
                                remediation="Run `llmdiag train --nproc 2 --steps 8` and read its log.",
                                runbook="smoke-train-failed")
                return
        else:
            yield self.skip(ctx, "run", "no cluster process group and [smoke] enabled = false (kept fast by default)")
            return
        yield from self._judge(ctx, ranks, where, float(smoke.get("straggler_factor") or 1.5))

    @staticmethod
    def _in_group(group, steps):
        from llmdiag.trainer.config import build_parser
        from llmdiag.trainer.train import train

        import torch.distributed as dist

        # an NCCL group moves CUDA tensors only: the steps run on this rank's GPU there
        device = "cuda" if dist.get_backend(group) == "nccl" else "cpu"
        argv = [*_TINY, "--steps", str(steps)]
        argv[argv.index("--device") + 1] = device
        args = build_parser().parse_args(argv)
        return train(args, group=group, log=lambda line: None)

    @staticmethod
    def _local(ctx, steps, nproc, timeout):
        with tempfile.TemporaryDirectory(prefix="llmdiag-smoke-") as tmp:
            summary = Path(tmp) / "summary.json"
            res = ctx.run([sys.executable, "-m", "llmdiag.trainer", *_TINY, "--nproc", str(nproc), "--threads", "1",
                           "--steps", str(steps), "--collective-timeout", str(max(5, timeout / 3)),
                           "--summary-file", str(summary)], timeout=timeout)
            if not res.ok or not summary.exists():
                why = res.error or ("timed out" if res.timed_out else f"exit code {res.returncode}")
                tail = (res.stderr or res.stdout or "").strip().splitlines()[-1:] or [""]
                return f"{why}; {tail[0][:300]}"
            return json.loads(summary.read_text())["ranks"], f"local {nproc}-process CPU run"

    def _judge(self, ctx, ranks, where, factor):
        losses = [float(v) for _, v in sorted(((int(k), v) for k, v in ranks[0]["losses"].items()))]
        finite = all(v == v and abs(v) != float("inf") for v in losses)
        ev = [("first_loss", round(losses[0], 4), None, None), ("last_loss", round(losses[-1], 4), "< first", None)]
        if not finite:
            yield self.fail(ctx, "loss", f"loss is not finite during smoke training ({where})", evidence=ev,
                            remediation="Check the GPUs (ECC, Xid) and the software stack; rerun `llmdiag train`.",
                            runbook="smoke-train-failed")
        elif losses[-1] >= losses[0]:
            yield self.fail(ctx, "loss", f"loss did not decrease over {len(losses)} steps ({where})", evidence=ev,
                            remediation="Training does not learn here: check the torch build and collectives.",
                            runbook="smoke-train-failed")
        else:
            yield self.ok(ctx, "loss", f"loss fell from {losses[0]:.3f} to {losses[-1]:.3f} in {len(losses)} steps ({where})",
                          evidence=ev)
        sums = {r["rank"]: r["checksum"] for r in ranks}
        odd = sorted(r for r, c in sums.items() if c != sums[min(sums)])
        if odd:
            yield self.fail(ctx, "params", f"parameters differ across data-parallel ranks: rank(s) {odd} vs rank {min(sums)}",
                            evidence=[("diverged_ranks", len(odd), 0, "ranks")],
                            remediation="A rank computes or communicates wrong results: rerun and check its GPU and network.",
                            runbook="params-diverged", data={"checksums": sums})
        else:
            yield self.ok(ctx, "params", f"parameters bit-identical on all {len(sums)} ranks", data={"checksums": sums})
        # Step 1 includes warm-up costs (allocations, first collectives): judge the rest.
        means = {r["rank"]: statistics.mean(r["step_ms"][1:] or r["step_ms"]) for r in ranks}
        median = statistics.median(means.values())
        slow = {r: m for r, m in means.items() if m > factor * median}
        data = {"step_ms_mean": {r: round(m, 2) for r, m in means.items()}}
        if slow:
            worst = max(slow, key=slow.get)
            yield self.warn(ctx, "step-time", f"rank {worst} steps take {slow[worst]:.1f} ms, {slow[worst] / median:.1f}x the median",
                            evidence=[("step_time_ms", round(slow[worst], 1), f"<= {factor:g}x median {median:.1f}", "ms")],
                            remediation="Inspect that rank's host: CPU/GPU clocks, throttling, other processes, its link.",
                            runbook="smoke-slow-rank", data=data)
        else:
            yield self.ok(ctx, "step-time", f"step times even across ranks (median {median:.1f} ms)", data=data)
