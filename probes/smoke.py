"""Smoke training in preflight: a few real steps on every rank before the real job.

Checks that the loss is finite and falls, that the data-parallel replicas hold bit-identical
parameters afterwards (SHA-256 of every parameter, compared across ranks), and that no rank's
step time stands out (a straggler). Runs in the cluster's process group when the agent
provides ``ctx.services["process_group"]`` (a group probe: one replica per rank of the group);
else a short local CPU run when ``[smoke] enabled``; else it skips, so that a default preflight
stays fast.

In the group every node holds every rank's summary. The loss is the group's (every node took
part); a replica that differs from the majority, or a rank that steps slowly, is reported by
the node that runs that rank only, so the cluster report blames the node it concerns. With no
majority (two ranks, or a split) the replicas cannot tell who is right: every rank reports it.
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
    group = True

    def run(self, ctx):
        from llmdiag.trainer.config import SmokeSettings

        smoke = ctx.config.settings(SmokeSettings) if ctx.config is not None else SmokeSettings()
        steps = smoke.steps
        inject = [a for spec in smoke.inject for a in ("--inject", spec)]
        group = ctx.services.get("process_group")
        me = None
        if group is not None:
            import torch.distributed as dist

            ranks = self._in_group(group, steps, inject)
            where = f"cluster process group: {dist.get_backend(group)}, {dist.get_world_size(group)} rank(s)"
            # this node's ranks: the agent's and its extra local ranks (one per GPU, as the job)
            me = set((ctx.services.get("world") or {}).get("local_ranks") or [dist.get_rank(group)])
        elif smoke.enabled:
            got = self._local(ctx, steps, smoke.nproc, smoke.timeout_s, inject)
            if isinstance(got, str):
                yield self.fail(ctx, "run", f"local smoke training failed: {got}",
                                remediation="Run `llmdiag train --nproc 2 --steps 8` and read its log.",
                                runbook="smoke-train-failed")
                return
            ranks, where = got
        else:
            yield self.skip(ctx, "run", "no cluster process group and [smoke] enabled = false (kept fast by default)")
            return
        yield from self._judge(ctx, ranks, where, smoke.straggler_factor, me=me)

    @staticmethod
    def _in_group(group, steps, inject=()):
        from llmdiag.trainer.config import parse_args
        from llmdiag.trainer.train import train

        import torch.distributed as dist

        # an NCCL group moves CUDA tensors only: the steps run on this rank's GPU there
        device = "cuda" if dist.get_backend(group) == "nccl" else "cpu"
        argv = [*_TINY, "--steps", str(steps), *inject]
        argv[argv.index("--device") + 1] = device
        args = parse_args(argv)
        if device == "cuda":
            return train(args, group=group, log=lambda line: None)
        import torch

        # one compute thread per rank, as the local run's workers: a node's cores are shared
        # with its other processes, and oversubscribed threads make the step times noise
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            return train(args, group=group, log=lambda line: None)
        finally:
            torch.set_num_threads(threads)

    @staticmethod
    def _local(ctx, steps, nproc, timeout, inject=()):
        with tempfile.TemporaryDirectory(prefix="llmdiag-smoke-") as tmp:
            summary = Path(tmp) / "summary.json"
            res = ctx.run([sys.executable, "-m", "llmdiag.trainer", *_TINY, "--nproc", str(nproc), "--threads", "1",
                           "--steps", str(steps), "--collective-timeout", str(max(5, timeout / 3)),
                           "--summary-file", str(summary), *inject], timeout=timeout)
            if not res.ok or not summary.exists():
                why = res.error or ("timed out" if res.timed_out else f"exit code {res.returncode}")
                tail = (res.stderr or res.stdout or "").strip().splitlines()[-1:] or [""]
                return f"{why}; {tail[0][:300]}"
            return json.loads(summary.read_text())["ranks"], f"local {nproc}-process CPU run"

    def _judge(self, ctx, ranks, where, factor, *, me=None):
        """``me``: this node's ranks in the cluster group (findings about a rank go to its node), or
        None for a local run (this node's every finding)."""
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
        hosts = {r["rank"]: r.get("host") for r in ranks}

        def who(r: int) -> str:
            return f"rank {r}" + (f" ({hosts[r]})" if me is not None and hosts.get(r) else "")

        sums = {r["rank"]: r["checksum"] for r in ranks}
        counts = {c: list(sums.values()).count(c) for c in set(sums.values())}
        ref = max(counts, key=lambda c: (counts[c], -min(r for r, v in sums.items() if v == c)))
        majority = counts[ref] * 2 > len(sums)
        odd = sorted(r for r, c in sums.items() if c != ref or (not majority and len(counts) > 1))
        data = {"checksums": sums}
        if odd and (me is None or me & set(odd)):
            against = (f"the {counts[ref]} other rank(s)" if majority else "each other (no majority: which replica "
                       "is right cannot be told)")
            subject = (f"this node's replica ({', '.join(who(r) for r in sorted(me & set(odd)))})" if me is not None else
                       f"rank(s) {', '.join(who(r) for r in odd)}")
            yield self.fail(ctx, "params", f"parameters differ across data-parallel ranks: {subject} vs {against}",
                            evidence=[("diverged_ranks", len(odd), 0, "ranks")],
                            remediation="A rank computes or communicates wrong results: rerun and check its GPU and network.",
                            runbook="params-diverged", data=data)
        elif odd:
            yield self.ok(ctx, "params", f"this node's replica matches {counts[ref] - 1} other rank(s); "
                                         f"{', '.join(who(r) for r in odd)} differ (reported by their nodes)", data=data)
        else:
            yield self.ok(ctx, "params", f"parameters bit-identical on all {len(sums)} ranks", data=data)
        # Step 1 includes warm-up costs (allocations, first collectives): judge the rest. In a
        # synchronous group all step times are the slowest rank's; each rank's own time (outside
        # the waits for its peers: backward's all-reduce, the step's sync) tells the straggler.
        # Each step is compared with the same step's median, and a straggler is slow in most
        # steps: load from other processes comes and goes (a healthy rank's own time spread
        # 4-620 ms on shared CPU hosts, its fastest step 4-24 ms), a slow GPU or link stays.
        key = "own_ms" if all(r.get("own_ms") for r in ranks) else "step_ms"
        series = {r["rank"]: r[key][1:] or r[key] for r in ranks}
        n = min(len(v) for v in series.values())
        per_step = [statistics.median(v[i] for v in series.values()) for i in range(n)]
        ratios = {r: [v[i] / per_step[i] if per_step[i] > 0 else 1.0 for i in range(n)] for r, v in series.items()}
        median = statistics.median(statistics.median(v[:n]) for v in series.values())
        slow = {r: statistics.median(x) for r, x in ratios.items()
                if sum(q > factor for q in x) >= max(1, 0.75 * n) and statistics.median(x) > factor}
        data = {"step_ms_median": {r: round(statistics.median(v), 2) for r, v in series.items()},
                "slow_steps": {r: sum(q > factor for q in x) for r, x in ratios.items()}, "judged_steps": n,
                "measured": key}
        mine = slow if me is None else {r: q for r, q in slow.items() if r in me}
        if mine:
            worst = max(mine, key=mine.get)
            own = " (its own time, outside the waits for its peers)" if key == "own_ms" else ""
            yield self.warn(ctx, "step-time", f"{who(worst)} is {mine[worst]:.1f}x the median rank's time{own} in "
                                              f"{data['slow_steps'][worst]} of {n} steps",
                            evidence=[("step_time_ratio", round(mine[worst], 2), f"<= {factor:g}", "x median"),
                                      ("step_time_ms", data["step_ms_median"][worst], f"median {median:.1f}", "ms")],
                            remediation="Inspect that rank's host: CPU/GPU clocks, throttling, other processes, its link.",
                            runbook="smoke-slow-rank", data=data)
        elif slow:
            yield self.ok(ctx, "step-time", f"this node's steps are even with the median ({median:.1f} ms); "
                                            f"{', '.join(who(r) for r in sorted(slow))} slower (reported by their nodes)",
                          data=data)
        else:
            yield self.ok(ctx, "step-time", f"step times even across ranks (median {median:.1f} ms)", data=data)
