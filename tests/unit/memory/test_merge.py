"""estimate-memory's inputs merge in one place (llmdiag.memory.job.resolve / gpu_memory), in the
documented order, and the plan checks run once per call."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from llmdiag.config import Config
from llmdiag.memory import checks, job


def _section(**job_keys):
    return Config.from_mapping({"job": job_keys}).section("job")


def test_plan_layers_later_wins(tmp_path):
    ds = tmp_path / "ds.json"
    ds.write_text(json.dumps({"train_micro_batch_size_per_gpu": 3, "zero_optimization": {"stage": 2}}))
    mg = tmp_path / "m.yaml"
    mg.write_text("tensor_model_parallel_size: 4\nmicro_batch_size: 5\n")
    sec = _section(model="llama2-7b", tp=2, micro_batch=2, zero=1, seq_len=1024)

    def plan(flags=None, **files):
        return job.resolve(sec, flags or {}, **files).plan

    assert (plan().tp, plan().micro_batch, plan().zero, plan().seq_len) == (2, 2, 1, 1024)  # [job] over defaults
    assert job.resolve(_section(model="llama2-7b"), {}).plan.tp == 1  # the Plan's default
    p = plan(deepspeed=str(ds))
    assert (p.micro_batch, p.zero, p.tp) == (3, 2, 2)  # DeepSpeed JSON over [job]
    p = plan(deepspeed=str(ds), megatron=str(mg))
    assert (p.micro_batch, p.zero, p.tp) == (5, 2, 4)  # Megatron YAML over DeepSpeed JSON
    p = plan({"tp": 8, "micro_batch": None}, deepspeed=str(ds), megatron=str(mg))
    assert (p.tp, p.micro_batch) == (8, 5)  # a given flag over every file; None is "not given"


def test_model_params_and_shorthands():
    sec = _section(model="llama2-13b", params=7e9, framework="megatron")
    got = job.resolve(sec, {})
    assert got.model.name == "llama2-13b" and got.params is None  # a model makes params moot
    assert job.resolve(sec, {"model": "llama2-7b"}).model.name == "llama2-7b"  # --model over [job] model
    assert job.resolve(_section(params=7e9), {}).params == 7e9
    assert job.resolve(_section(params=7e9), {"params": 3e9}).params == 3e9
    fsdp = job.resolve(sec, {}, extra_flags={"fsdp": True}).plan
    assert (fsdp.zero, fsdp.framework) == (3, "torch")  # --fsdp's own framework, as before
    q = job.resolve(sec, {"lora_rank": 16}, extra_flags={"qlora": True}).plan
    assert (q.base_quant, q.lora_rank) == ("nf4", 16)
    assert job.resolve(sec, {}, dims={"layers": 10}).model.layers == 10  # dimensions replace the preset's


def test_gpu_memory_order():
    no_nvml = lambda: (_ for _ in ()).throw(OSError("no driver"))  # noqa: E731
    assert job.gpu_memory(5 * 2**30, _section(gpu_memory="80GiB"), no_nvml) == (5 * 2**30, "--gpu-memory")
    assert job.gpu_memory(None, _section(gpu_memory="80GiB"), no_nvml) == (80 * 2**30, "config job.gpu_memory")
    gpu, source = job.gpu_memory(None, _section(), no_nvml)
    assert gpu is None and source.startswith("NVML not available")


@pytest.mark.parametrize("args, code", [
    (["--model", "llama2-7b", "--tp", "2", "--world-size", "8", "--gpu-memory", "80GiB"], 0),
    (["--model", "llama2-7b", "--tp", "3", "--world-size", "8", "--gpu-memory", "1000GiB"], 2),  # invalid plan
])
def test_check_plan_runs_once_per_call(monkeypatch, args, code):
    from llmdiag.cli import cli

    calls = []
    real = checks.check_plan

    def counted(m, p):
        calls.append(p)
        return real(m, p)

    monkeypatch.setattr(checks, "check_plan", counted)
    monkeypatch.setattr(job, "gpu_memory_from_nvml", lambda *a, **k: (None, "no NVML in this test"))
    r = CliRunner().invoke(cli, ["estimate-memory", *args, "--format", "json"])
    assert r.exit_code == code, r.output
    # the user's plan is checked first; the plan search checks its own candidates (other plans)
    assert calls and sum(p == calls[0] for p in calls) == 1, f"the plan was checked {calls.count(calls[0])} times"


def test_a_plan_flag_accepts_what_the_job_section_accepts(tmp_path):
    from llmdiag.cli import cli

    for flag, value in (("--zero", "4"), ("--gpus-per-node", "65"), ("--precision", "fp64")):
        r = CliRunner().invoke(cli, ["estimate-memory", "--model", "llama2-7b", flag, value])
        assert r.exit_code == 2, (flag, r.output)
        cfg = tmp_path / "llmdiag.toml"
        key = flag[2:].replace("-", "_")
        cfg.write_text(f"[job]\n{key} = {value if value.isdigit() else repr(value)}\n".replace("'", '"'))
        r = CliRunner().invoke(cli, ["estimate-memory", "--model", "llama2-7b", "--config", str(cfg)])
        assert r.exit_code == 2, (key, r.output)
