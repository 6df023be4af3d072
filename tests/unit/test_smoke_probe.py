"""The smoke-train probe: skip by default, a real local 2-process run when [smoke] is enabled."""

from __future__ import annotations

import pytest

from llmdiag.config import Config
from llmdiag.context import Context
from llmdiag.result import Status
from llmdiag.probes.smoke import SmokeTrainProbe
from tests.conftest import cli_env


def test_skips_without_group_or_config():
    ctx = Context.create(config=Config.default(), env=cli_env())
    (res,) = list(SmokeTrainProbe().run(ctx))
    assert res.status == Status.SKIP and "enabled" in res.summary


@pytest.mark.distributed
def test_local_run_passes_every_check():
    # the default 90 s bound is the probe's on a node; a test machine at load 12 needs more for two torch
    # imports and a gloo group (seen: the run cut, so no "params" result)
    cfg = Config.from_mapping({"smoke": {"enabled": True, "steps": 8, "straggler_factor": 20.0, "timeout_s": 600}})
    ctx = Context.create(config=cfg, env=cli_env())
    results = {r.check: r for r in SmokeTrainProbe().run(ctx)}
    assert "params" in results, {k: r.summary for k, r in results.items()}
    assert results["loss"].status == Status.PASS, results["loss"].summary
    assert results["params"].status == Status.PASS
    assert len(set(results["params"].data["checksums"].values())) == 1
    assert results["step-time"].status == Status.PASS


def test_judge_flags_diverged_params_and_straggler():
    ctx = Context.create(config=Config.default(), env=cli_env())
    ranks = [{"rank": 0, "losses": {"1": 5.0, "2": 4.0}, "checksum": "a", "step_ms": [50, 10, 10]},
             {"rank": 1, "losses": {"1": 5.0, "2": 4.0}, "checksum": "b", "step_ms": [50, 10, 11]},
             {"rank": 2, "losses": {"1": 5.0, "2": 4.0}, "checksum": "a", "step_ms": [50, 90, 95]}]
    out = {r.check: r for r in SmokeTrainProbe()._judge(ctx, ranks, "test", 1.5)}
    assert out["params"].status == Status.FAIL and out["params"].runbook == "params-diverged"
    assert out["step-time"].status == Status.WARN and "rank 2" in out["step-time"].summary


@pytest.mark.distributed
def test_in_a_gloo_group_it_trains_on_cpu_in_that_group():
    """The agent's group is gloo: the steps run on the CPU there (an NCCL group gets the GPU,
    which bench/gpu_validate.py checks on a GPU machine)."""
    import socket

    import torch.distributed as dist

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    try:
        ctx = Context.create(config=Config.default(), env=cli_env())
        ctx.services["process_group"] = dist.group.WORLD
        results = {r.check: r for r in SmokeTrainProbe().run(ctx)}
    finally:
        dist.destroy_process_group()
    assert results["loss"].status == Status.PASS and "cluster process group" in results["loss"].summary
    assert results["params"].status == Status.PASS
