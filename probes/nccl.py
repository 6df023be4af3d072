"""The preflight ``nccl`` probe: a short nccl-bench with the thresholds of ``[nccl_bench]``.

Where it runs, in order:
1. in the cluster agent's process group (``ctx.services["process_group"]``, one process per
   node): the numbers are the cluster's; after a low plateau (or a straggler) it also runs the
   pairwise measurement to name the slow node or link (``auto_pairwise``). A finding that
   names a node (slow node, slow link, straggler) is reported by that node only; busbw and
   correctness by every node, as each took part;
2. otherwise, only when the config has a ``[nccl_bench]`` section, a local run of
   ``probe_nproc`` CPU processes with gloo (checks the collective stack of this node);
3. otherwise it skips: a default preflight must stay fast.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from llmdiag.probe import BaseProbe, Requirement
from llmdiag.result import Status

#: The links' automatic comparison (no expected busbw, no low result): a link or node below
#: this fraction of the median is slow (``nccl_bench.pairwise_low_fraction``, when set, rules).
AUTO_LOW_FRACTION = 0.2


def probe_settings(section: dict[str, Any]) -> dict[str, Any]:
    """The short version: four sizes up to ``probe_max_bytes``, ``probe_iters`` iterations."""
    from llmdiag.ncclbench.sizes import parse_size

    top = parse_size(section["probe_max_bytes"])
    # pairwise messages stay short too, but not below 4 MiB: a shaped link passes a small
    # message in its burst at full speed (tc tbf, switch buffers) and would look healthy
    pair = min(parse_size(section["pairwise_bytes"]), max(top, 4 << 20))
    return dict(section, min_bytes=str(max(1, top // 64)), max_bytes=str(top), step_factor=4, warmup_iters=2,
                iters=section["probe_iters"], plateau_sizes=min(int(section["plateau_sizes"]), 2),
                pairwise_bytes=str(pair))


class NcclBenchProbe(BaseProbe):
    name = "nccl"
    description = "Short collective benchmark: busbw plateau, #wrong, straggler; pairwise after a low result."
    requires = frozenset({Requirement.TORCH})
    config_section = "nccl_bench"
    timeout_s = 180.0
    group = True

    def run(self, ctx):
        section = ctx.config.section("nccl_bench")
        settings = probe_settings(section)
        group = ctx.services.get("process_group")
        if group is not None:
            import torch.distributed as dist

            doc = self._in_group(ctx, group, settings)
            nodes = doc["world"].get("nodes")
            where = (f"cluster process group: {dist.get_backend(group)}, {dist.get_world_size(group)} rank(s)"
                     + (f" on {nodes} node(s)" if nodes else ""))
            yield from self._group_results(ctx, doc, where)
            return
        elif ctx.config.has_section("nccl_bench"):
            doc = self._local(ctx, settings, int(section["probe_nproc"]))
            where = f"local {section['probe_nproc']}-process gloo run"
            if isinstance(doc, str):
                yield self.fail(ctx, "run", f"local nccl-bench failed: {doc}", runbook="nccl-timeout",
                                remediation="Run `llmdiag nccl-bench --nproc 2` and read its error.")
                return
        else:
            yield self.skip(ctx, "run", "no cluster process group and no [nccl_bench] section (kept fast by default)")
            return
        yield from self._results(ctx, doc, where)

    def _in_group(self, ctx, group, settings):
        import torch.distributed as dist

        from llmdiag.ncclbench import launch, pairwise, verdict
        from llmdiag.ncclbench.config import build_spec

        backend = dist.get_backend(group)
        spec = build_spec(settings)
        result = launch.run_on_group(spec, group, backend=backend, node_name=ctx.node)
        doc = verdict.build_doc(result, settings)
        low = any(f["status"] != "pass" and f["check"].endswith("/busbw") for f in doc["findings"])
        strag = bool(doc.get("straggler") and doc["straggler"]["flagged"])
        # Every rank sees the same doc, so every rank takes the same branch here. From three
        # nodes on, the links are always compared with each other: a slow node or link is an
        # outlier among its peers whether or not an expected busbw is configured.
        if settings["auto_pairwise"] and ((low or strag) and result["nodes"] >= 2 or result["nodes"] >= 3):
            import torch

            if not low and not ctx.config.is_set("nccl_bench", "pairwise_low_fraction"):
                # no expected busbw was missed: only a clear outlier counts (CPU load on shared hosts
                # moves a healthy link by 2-3x; a broken one is 5x and more below)
                spec = dataclasses.replace(spec, pairwise_low_fraction=min(spec.pairwise_low_fraction,
                                                                           AUTO_LOW_FRACTION))

            device = torch.device("cuda", torch.cuda.current_device()) if backend == "nccl" else torch.device("cpu")
            result["pairwise"] = pairwise.measure(
                group, device, dist.get_rank(group), dist.get_world_size(group),
                nbytes=spec.pairwise_bytes, iters=spec.pairwise_iters, low_fraction=spec.pairwise_low_fraction,
                samples=spec.pairwise_samples, node_name=ctx.node)
            doc = verdict.build_doc(result, settings)
        return doc

    def _local(self, ctx, settings, nproc):
        with tempfile.TemporaryDirectory(prefix="llmdiag-nccl-probe-") as tmp:
            out = Path(tmp) / "bench.json"
            argv = [sys.executable, "-m", "llmdiag", "nccl-bench", "--nproc", str(nproc), "--backend", "gloo",
                    "-b", settings["min_bytes"], "-e", settings["max_bytes"], "-f", str(settings["step_factor"]),
                    "-w", str(settings["warmup_iters"]), "-n", str(settings["iters"]),
                    "--format", "json", "--output", str(out)]
            for c in settings["collectives"]:
                argv += ["-C", c]
            if settings.get("expected_busbw_gbps"):
                argv += ["--expect-busbw", str(settings["expected_busbw_gbps"])]
            res = ctx.run(argv, timeout=ctx.deadline.remaining())
            if res.returncode not in (0, 1) or not out.exists():
                why = res.error or f"exit code {res.returncode}"
                tail = (res.stderr or res.stdout or "").strip().splitlines()[-1:] or [""]
                return f"{why}; {tail[0][:300]}"
            doc = json.loads(out.read_text())
        # The command used the full plateau; recompute with the probe's settings and thresholds.
        from llmdiag.ncclbench import verdict

        return verdict.build_doc({**doc["world"], "spec": doc["spec"], "rows": doc["results"],
                                  "pairwise": doc.get("pairwise")}, settings)

    def _group_results(self, ctx, doc, where):
        """Every node holds the same document. Group-wide results (busbw, correctness) are each
        node's too (all took part); a finding that names a node (a slow node or link, a
        straggler) is reported only by that node, so the cluster report blames the right one."""
        pw = doc.get("pairwise") or {}
        culprits = {n["node"] for n in pw.get("slow_nodes") or ()} | {lk["a"] for lk in pw.get("slow_links") or ()}
        mine = []
        for f in doc["findings"]:
            if f["node"] is None and f["status"] != Status.PASS.value and f["check"].endswith("/busbw") and culprits:
                # the group's low busbw has a named cause: it is the culprits' finding, not every node's
                if ctx.node in culprits:
                    mine.append(dict(f, node=ctx.node, summary=f"{f['summary']}; the pairwise test names "
                                                               f"{', '.join(sorted(culprits))}"))
                continue
            if not f["node"] or f["node"] == ctx.node:
                mine.append(f)
        yield from self._results(ctx, dict(doc, findings=mine), where)

    def _results(self, ctx, doc, where):
        data = {"plateau_busbw": doc["plateau_busbw"], "avg_busbw": doc["avg_busbw"], "where": where,
                "world_size": doc["world"]["world_size"], "collectives": doc["collectives"],
                "pairwise": doc.get("pairwise"),
                # where each rank ran (rank i on placement[i]) and the busbw of every row measured
                "placement": list(doc["world"].get("hosts") or ()),
                "rows": [{"collective": r["collective"], "size": r["size"],
                          "busbw": [(r.get(k) or {}).get("busbw") for k in ("out_of_place", "in_place")]}
                         for r in doc["results"]]}
        for f in doc["findings"]:
            summary = f"{f['summary']} ({where})"
            ev = [(e["name"], e["observed"], e["expected"], e["unit"]) for e in f["evidence"]]
            if f["status"] == Status.PASS.value:
                yield self.ok(ctx, f["check"], summary, evidence=ev, data=data)
            else:
                yield self.result(ctx, f["check"], Status(f["status"]), summary, evidence=ev,
                                  remediation=f["remediation"], runbook=f["runbook"], data=data)
        if doc.get("expected_busbw") is None:
            yield self.ok(ctx, "busbw", f"plateau busbw {doc['plateau_busbw']:.3g} GB/s ({where}; no "
                                        "expected_busbw_gbps set, so nothing to compare)", data=data)
