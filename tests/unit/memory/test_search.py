"""The plan search: it finds the plans the issue lists, every plan it shows fits and passes the
checks, the ranking follows the explained cost, and it stays fast."""

from __future__ import annotations

import time

from llmdiag.memory import checks, estimate, models, search
from llmdiag.memory.plan import Plan

GIB = 2**30
L70 = models.preset("llama3-70b")
L7 = models.preset("llama2-7b")


def _has(results, **want):
    return [r for r in results if all(r["plan"].get(k) == v for k, v in want.items())]


def test_llama3_70b_on_16_h100_seq_8192():
    plan = Plan(world_size=16, seq_len=8192)
    assert estimate.estimate(L70, plan, gpu_memory=80 * GIB)["verdict"] == "out-of-memory"
    t0 = time.perf_counter()
    found = search.suggest(L70, plan, 80 * GIB, limit=100)
    assert time.perf_counter() - t0 < 30
    # TP8 + ZeRO-3 + full recompute keeping AdamW, and the 8-bit Adam plans below it
    full = _has(found, tp=8, pp=1, cp=1, zero=3, recompute="full", optimizer="adamw")
    assert full and full[0]["total"] <= 0.95 * 80 * GIB
    tp8_8bit = estimate.estimate(L70, plan.replace(tp=8, zero=3, recompute="full", optimizer="adam8bit", dp="auto"),
                                 gpu_memory=80 * GIB)
    assert tp8_8bit["verdict"] == "fits" and tp8_8bit["breakdown"]["total"] < full[0]["total"] - 15 * GIB
    assert found[0]["plan"]["optimizer"] == "adam8bit"  # the cheapest fitting plan trades optimizer precision
    costs = [r["expected_cost"] for r in found]
    assert costs == sorted(costs)
    for r in found:
        p = plan.replace(dp="auto", **{k: v for k, v in r["settings"].items() if k != "offload"},
                         **search.OFFLOAD[r["settings"].get("offload", "none")][0])
        assert not checks.failing(checks.check_plan(L70, p))
        assert r["total"] == estimate.estimate(L70, p)["breakdown"]["total"]
        assert r["headroom"] == 80 * GIB - r["total"] and r["cost_terms"]


def test_llama2_7b_on_one_80gb_gpu():
    plan = Plan(dp=1, seq_len=4096)
    assert estimate.estimate(L7, plan, gpu_memory=80 * GIB)["verdict"] == "out-of-memory"
    found = search.suggest(L7, plan, 80 * GIB, limit=20)
    assert found and all(r["plan"]["tp"] * r["plan"]["pp"] * r["plan"]["cp"] * r["plan"]["dp_size"] == 1 for r in found)
    assert found[0]["settings"]["optimizer"] == "adam8bit"
    both = estimate.estimate(L7, plan.replace(optimizer="adam8bit", recompute="full"), gpu_memory=80 * GIB)
    assert both["verdict"] == "fits" and 55 * GIB < both["breakdown"]["total"] < 72 * GIB


def test_smallest_gpu_count():
    # 70B: 8 GPUs cannot hold even ZeRO-3 + 8-bit Adam states (10 B/param / 8 > 80 GiB) without offload
    got = search.smallest_gpu_count(L70, Plan(world_size=8, seq_len=4096), 80 * GIB)
    assert got is not None and got["gpus"] == 16 and got["plan"]["total"] <= 0.95 * 80 * GIB
    assert search.suggest(L70, Plan(world_size=8, seq_len=4096), 80 * GIB, offload=False) == []
    assert search.suggest(L70, Plan(world_size=8, seq_len=4096), 80 * GIB)[0]["settings"]["offload"]


def test_min_gpus_reaches_every_format(tmp_path):
    """--min-gpus is part of the typed document: every format shows it (strict reading in tests), and a
    search that finds nothing says so instead of dropping the key."""
    import json
    import subprocess

    from tests.conftest import cli_env, llmdiag_argv

    base = ["estimate-memory", "--model", "llama2-7b", "--world-size", "8", "--gpu-memory", "24GiB", "--min-gpus"]
    for fmt in ("terminal", "markdown", "html"):
        proc = subprocess.run(llmdiag_argv(*base, "-f", fmt, "--width", "200"), env=cli_env(), capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 1 and "Fewest GPUs that fit: 4" in proc.stdout, proc.stderr
    doc = json.loads(subprocess.run(llmdiag_argv(*base, "-f", "json"), env=cli_env(), capture_output=True,
                                    text=True, timeout=120).stdout)
    assert doc["smallest_gpu_count"]["gpus"] == 4 and doc["smallest_gpu_count"]["plan"]["verdict"] == "fits"
    none = search.smallest_gpu_count(L70, Plan(world_size=8, seq_len=4096), 1 * GIB, max_gpus=64)
    assert none == {"searched_up_to": 64, "gpus": None, "plan": None}


def test_min_gpus_tries_its_bound(monkeypatch):
    """Doubling the index jumps past the end of the sizes: the bound itself is still tried, so a plan that
    fits only there is found (it was reported as 'no plan fits')."""
    tried = []

    def fits_only_at_the_bound(m, plan, gpu_memory, *, world, limit, offload):
        tried.append(world)
        return [{"total": 1}] if world >= 4096 else []

    monkeypatch.setattr(search, "suggest", fits_only_at_the_bound)
    got = search.smallest_gpu_count(L70, Plan(world_size=8), GIB)
    assert got["gpus"] == 4096 and 4096 in tried and len(tried) < 30
