"""estimate-memory end to end: JSON document, exit codes, plan checks, suggestions that fit."""

from __future__ import annotations

import json
import subprocess

from llmdiag.memory import estimate
from tests.conftest import cli_env, llmdiag_argv


def run(*args):
    return subprocess.run(llmdiag_argv("estimate-memory", *args), capture_output=True, text=True, env=cli_env(), timeout=60)


def test_fitting_plan_json():
    p = run("--model", "llama2-7b", "--tp", "2", "--pp", "1", "--dp", "auto", "--world-size", "16", "--zero", "1",
            "--micro-batch", "1", "--seq-len", "4096", "--recompute", "selective", "--gpu-memory", "80GiB", "--format", "json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["kind"] == "memory-estimate" and doc["verdict"] == "fits"
    b = doc["breakdown"]
    for k in ("weights", "gradients", "optimizer_states", "master_weights", "activations", "logits", "overheads", "total"):
        assert k in b
    assert b["total"] == sum(v for k, v in b.items() if k != "total")
    assert doc["plan"]["dp_size"] == 8


def test_oom_plan_suggestions_fit_and_pass_checks():
    p = run("--model", "llama3-70b", "--tp", "8", "--world-size", "64", "--micro-batch", "2", "--seq-len", "8192",
            "--gpu-memory", "80GiB", "--format", "json")
    assert p.returncode == 1
    doc = json.loads(p.stdout)
    assert doc["verdict"] == "out-of-memory" and doc["suggestions"]
    for s in doc["suggestions"]:
        assert s["total"] <= estimate.FITS_FRACTION * 80 * 2**30
        args = []
        for k, v in s["settings"].items():
            flag = "--" + k.replace("_", "-")
            args += [flag] if v is True else [flag, str(v)]
        q = run("--model", "llama3-70b", "--tp", "8", "--world-size", "64", "--micro-batch", "2", "--seq-len", "8192",
                "--gpu-memory", "80GiB", "--format", "json", *args)
        assert q.returncode == 0, (s["change"], q.stdout[-500:])


def test_invalid_plan_is_a_usage_error_naming_both_numbers():
    p = run("--model", "llama2-7b", "--tp", "3", "--world-size", "16", "--gpu-memory", "80GiB", "--format", "json")
    assert p.returncode == 2
    checks = {c["check"]: c for c in json.loads(p.stdout)["plan_checks"]}
    assert "heads (32)" in checks["heads-tp"]["message"] and "tp (3)" in checks["heads-tp"]["message"]
    assert "16" in checks["world-size"]["message"]
    assert "invalid plan: attention heads (32) are not divisible by tp (3)" in p.stderr
    # Megatron asserts num_query_groups % tp == 0: tp 16 over 8 KV groups is refused
    p = run("--model", "llama3-70b", "--tp", "16", "--world-size", "16", "--gpus-per-node", "16", "--gpu-memory", "80GiB")
    assert p.returncode == 2 and "KV groups (8) are not divisible by tp (16)" in p.stderr


def test_sizes_need_a_unit():
    for size, n in (("80G", 80 * 2**30), ("80GiB", 80 * 2**30), ("81920MiB", 80 * 2**30), ("1TB", 10**12)):
        doc = json.loads(run("--model", "gpt2", "--gpu-memory", size, "--format", "json").stdout)
        assert doc["gpu_memory"] == n, size
    doc = json.loads(run("--model", "gpt2", "--gpu-memory", "80GB", "--format", "json").stdout)
    assert doc["gpu_memory"] == 80 * 10**9
    p = run("--model", "gpt2", "--gpu-memory", "80")
    assert p.returncode == 2 and "80GiB" in p.stderr and "Traceback" not in p.stderr
    for absurd in ("1e400G", "2000000000G"):  # infinity and an exabyte: a usage error, not an internal one
        p = run("--model", "gpt2", "--gpu-memory", absurd)
        assert p.returncode == 2 and "out of range" in p.stderr and "internal error" not in p.stderr, p.stderr


def test_unknown_gpu_memory_is_not_fits():
    p = run("--model", "gpt2", "--format", "json")
    doc = json.loads(p.stdout)
    if doc["gpu_memory"] is None:  # no GPU on this machine
        assert doc["verdict"] == "unknown" and p.returncode == 1
        assert "cannot judge the fit" in p.stderr


def test_params_only_and_bad_input():
    p = run("--params", "7.5e9", "--dp", "64", "--zero", "3", "--format", "json", "--gpu-memory", "80GiB")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["breakdown"]["activations"] == 0
    assert run("--model", "nope").returncode == 2
    assert run("--model", "llama2-7b", "--gpu-memory", "lots").returncode == 2
    assert run("--params", "7.5e9", "--dp", "8", "--offload", "everything").returncode == 2
    assert run("--model", "llama2-7b", "--megatron-yaml", "/nonexistent.yaml").returncode == 2


def test_megatron_yaml(tmp_path):
    y = tmp_path / "m.yaml"
    y.write_text("parallel_policy: {tensor_model_parallel_size: 8, pipeline_model_parallel_size: 4, data_parallel_size: auto}\n")
    p = run("--model", "llama2-70b", "--world-size", "64", "--megatron-yaml", str(y), "--format", "json", "--gpu-memory", "80GiB")
    doc = json.loads(p.stdout)
    assert (doc["plan"]["tp"], doc["plan"]["pp"], doc["plan"]["dp_size"]) == (8, 4, 2)
    assert doc["worst_stage"] in (0, 3)


def test_job_config_section_and_flag_precedence(tmp_path):
    cfg = tmp_path / "llmdiag.toml"
    cfg.write_text('[job]\nmodel = "llama2-13b"\nworld_size = 16\ntp = 4\nseq_len = 2048\ngpu_memory = "80GiB"\n')
    doc = json.loads(run("-c", str(cfg), "--tp", "8", "--format", "json").stdout)
    assert doc["model"]["name"] == "llama2-13b" and doc["plan"]["tp"] == 8 and doc["plan"]["dp_size"] == 2
    assert doc["gpu_memory"] == 80 * 2**30 and doc["gpu_memory_source"] == "config job.gpu_memory"
    cfg.write_text('[job]\nzero = 7\n')
    p = run("-c", str(cfg), "--model", "gpt2")
    assert p.returncode == 2 and "job.zero" in p.stderr


def test_deepspeed_config_and_hf_config(tmp_path):
    ds = tmp_path / "ds.json"
    ds.write_text(json.dumps({"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 3}}))
    hf = tmp_path / "config.json"
    hf.write_text(json.dumps({"model_type": "gpt2", "n_layer": 12, "n_embd": 768, "n_head": 12, "vocab_size": 50257}))
    doc = json.loads(run("--hf-config", str(hf), "--deepspeed-config", str(ds), "--dp", "8", "--format", "json").stdout)
    assert doc["model"]["params"] == 124_439_808
    assert doc["plan"]["zero"] == 3 and doc["plan"]["micro_batch"] == 2
    if not str(doc["gpu_memory_source"]).startswith("NVML total"):  # no GPU and no --gpu-memory: no fit claimed
        assert doc["verdict"] == "unknown" and doc["gpu_memory"] is None


def test_terminal_and_markdown_renderers(tmp_path):
    args = ("--model", "llama3-70b", "--tp", "8", "--world-size", "64", "--micro-batch", "2", "--seq-len", "8192",
            "--gpu-memory", "80GiB")
    term = run(*args, "--width", "160", "--no-color")
    assert term.returncode == 1
    for word in ("optimizer_states", "activations", "logits", "total", "out-of-memory", "What fits"):
        assert word in term.stdout
    out = tmp_path / "r.md"
    md = run(*args, "--format", "markdown", "-o", str(out))
    assert md.returncode == 1 and out.read_text().startswith("# Memory estimate: FAIL")
    assert "| **total** |" in out.read_text()


def test_reports_show_the_peak_phase_stages_and_warnings(tmp_path):
    """The terminal and Markdown reports carry what the JSON says: the phase that peaks with
    allocated/reserved/device sizes, one row per pipeline stage, and every warning."""
    ds = tmp_path / "ds.json"
    ds.write_text(json.dumps({"zero_optimization": {"stage": 1, "not_a_real_key": 3}, "train_micro_batch_size_per_gpu": 1}))
    args = ("--model", "llama3-8b", "--pp", "4", "--world-size", "8", "--deepspeed-config", str(ds),
            "--gpu-memory", "80GiB")
    doc = json.loads(run(*args, "--format", "json").stdout)
    assert len(doc["stages"]) == 4 and doc["warnings"]
    gib = lambda n: f"{n / 2**30:.2f} GiB"  # noqa: E731
    md = run(*args, "--format", "markdown").stdout
    peak = doc["peak"]
    assert (f"Peak in {peak['phase']}: {gib(peak['allocated'])} allocated, {gib(peak['reserved'])} reserved"
            in md), md
    rows = [ln for ln in md.split("## Per pipeline stage", 1)[1].splitlines() if ln.startswith("| ") and ln[2].isdigit()]
    assert len(rows) == 4 and f"| {doc['worst_stage']} (worst) |" in md
    for st, row in zip(doc["stages"], rows):
        assert gib(st["allocated"]) in row and gib(st["device"]) in row
    assert "## Warnings" in md and "zero_optimization.not_a_real_key" in md
    term = run(*args, "--width", "200", "--no-color").stdout
    assert f"Peak in {peak['phase']}" in term and "Per pipeline stage" in term and "(worst)" in term
    # a single stage has no stage table
    assert "Per pipeline stage" not in run("--model", "llama3-8b", "--gpu-memory", "80GiB", "--no-color").stdout


def test_world_size_is_capped_with_one_line_and_bounded_time():
    p = run("--model", "llama2-7b", "--world-size", "1000000000", "--gpu-memory", "80GiB")
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "1048576" in p.stderr
    # the largest allowed world still searches in seconds (divisors up to √n); a timeout fails it
    p = run("--model", "mixtral-8x7b", "--world-size", "1048576", "--ep", "8", "--gpu-memory", "24GiB",
            "--search", "--format", "json")
    assert p.returncode == 1 and json.loads(p.stdout)["verdict"] == "out-of-memory"


def test_invalid_plan_never_says_fits():
    p = run("--model", "llama2-7b", "--tp", "3", "--world-size", "3", "--gpu-memory", "80GiB", "--no-color")
    assert p.returncode == 2
    head = p.stdout.splitlines()[0]
    assert head.startswith("FAIL") and "invalid-plan (heads-tp" in head and "fits" not in head
    doc = json.loads(run("--model", "llama2-7b", "--tp", "3", "--world-size", "3", "--gpu-memory", "80GiB",
                         "--format", "json").stdout)
    assert doc["verdict"] == "invalid-plan" and doc["oom_when"] is None


def test_placement_device_outside_allocator_and_host(tmp_path):
    p = run("--model", "llama3-8b", "--world-size", "8", "--zero", "3", "--offload", "optimizer", "--gpu-kind", "v100",
            "--gpu-memory", "32GiB", "--format", "json")
    doc = json.loads(p.stdout)
    mem = doc["memory"]
    assert mem["host_per_gpu"] > 0 and mem["host_per_node"] == 8 * mem["host_per_gpu"]
    assert {x["name"] for x in mem["host_lines"]} == {"master_weights", "optimizer_states", "gradients"}
    ctx = next(x for x in doc["lines"] if x["name"] == "cuda_context")
    assert ctx["bytes"] == int(1.2 * 2**30) and mem["outside_allocator"] >= ctx["bytes"]
    text = run("--model", "llama3-8b", "--world-size", "8", "--zero", "3", "--offload", "optimizer",
               "--gpu-memory", "32GiB", "--no-color", "--width", "200").stdout
    assert "in the caching allocator" in text and "host RAM" in text and "per node of 8 GPUs" in text
