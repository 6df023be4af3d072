"""bench/gpu_validate.py: the one-call GPU validation, in its CPU mode (what CI can run).

The whole script runs with --quick on this machine: every GPU part must be skipped with its
reason, every CPU-checkable part must pass, and the JSON must hold the typed results. Its
parts are tested on their own too: the per-check budget, the memory grid's plans against the
real estimate-memory CLI, the signed error, the Markdown table.
"""

import json
import subprocess
import sys
import time

import jsonschema
import pytest
from click.testing import CliRunner

from llmdiag.cli import cli
from tests.conftest import REPO

sys.path.insert(0, str(REPO / "bench"))
import gpu_memtruth as MT  # noqa: E402
import gpu_validate as GV  # noqa: E402

SCRIPT = str(REPO / "bench" / "gpu_validate.py")
GPU_ONLY = {"nvml-vs-nvidia-smi", "xid-events", "nccl-bench", "trainer-fsdp"}


def _no_gpu() -> bool:
    n, _, _ = GV.machine_facts()
    return n == 0


@pytest.mark.slow
def test_quick_cpu_run_writes_typed_results(tmp_path):
    if not _no_gpu():
        pytest.skip("this test checks the CPU mode; a GPU machine runs the full kit (docs/gpu-validation.md)")
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, SCRIPT, str(out), "--quick"], capture_output=True, text=True, timeout=400)
    assert p.returncode == 0, p.stdout + p.stderr
    doc = json.loads((out / "gpu-validation.json").read_text())
    jsonschema.validate(doc, json.loads((REPO / "docs" / "gpu-validation-schema.json").read_text()))
    assert doc["schema"] == GV.SCHEMA and doc["gpus"] == 0 and doc["no_gpu_reason"]
    checks = {c["name"]: c for c in doc["checks"]}
    assert set(checks) == {"environment", "nvml-vs-nvidia-smi-recorded", "nvml-vs-nvidia-smi", "gpu-probe", "dcgm-platform",
                           "xid-events", "monitor+ddp+resume", "nccl-bench", "probes-in-nccl-group",
                           "trainer-fsdp", "trainer-fault", "memory-truth"}
    for c in doc["checks"]:
        assert c["status"] in ("pass", "skip"), c
        assert c["seconds"] <= c["budget_s"] + 5
        if c["status"] == "skip":
            assert c["summary"].startswith("no GPU"), c
    for name in GPU_ONLY:
        assert doc["no_gpu_reason"] in checks[name]["summary"]
    assert checks["nvml-vs-nvidia-smi-recorded"]["status"] == "pass"
    assert checks["nvml-vs-nvidia-smi-recorded"]["numbers"]["mismatch"] == 0
    # the CPU parts really ran: a monitored DDP run that was killed and resumed from its checkpoint
    ddp = checks["monitor+ddp+resume"]["numbers"]
    assert ddp["samples"] >= 2 and ddp["metric_families"] > 5 and ddp["resume_exit"] == 0
    assert ddp["job_steps_per_s_monitored"] > 0 and ddp["job_steps_per_s_unmonitored"] > 0
    assert 0 < ddp["resumed_at"] < ddp["resume_target"]
    fault = checks["trainer-fault"]["numbers"]
    assert fault["root_causes"][0] == "cuda_oom" and fault["first_failing_rank"] == 0
    probes = checks["probes-in-nccl-group"]["numbers"]  # the same worker, in a gloo group here
    assert probes["backend"] == "gloo" and probes["results"]["smoke-train/loss"] == "pass"
    assert any(k.startswith("nccl/") for k in probes["results"])
    mem = checks["memory-truth"]["numbers"]
    assert mem["tiny_worker"]["finite"] and mem["estimate_first_grid_point"]["params"] == MT.param_count(MT.grid()[0])
    mech = mem["mechanisms"]  # MoE routing and a stage's 1F1B order run tiny; paged needs CUDA: skipped with why
    assert mech["moe"]["tiny_worker"]["finite"] and mech["pp"]["tiny_worker"]["finite"]
    assert "CUDA" in mech["paged"]["tiny_worker"]["skipped"]
    for m in MT.MECHANISMS:
        assert mech[m["mode"]]["estimate"]["params"] == MT.param_count(m), m["mode"]
    assert doc["counts"] == {"pass": 2, "fail": 0, "skip": 10}
    md = (out / "gpu-validation.md").read_text()
    assert "| monitor+ddp+resume | skip |" in md and "# GPU validation: no GPU" in md


@pytest.mark.parametrize("args, needle", [([], "required"), (["--budget", "0", "x"], "--budget must be > 0")])
def test_bad_arguments_exit_2(tmp_path, args, needle):
    p = subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert p.returncode == 2 and needle in p.stderr


def test_outdir_that_is_a_file_is_refused(tmp_path):
    f = tmp_path / "f"
    f.write_text("")
    p = subprocess.run([sys.executable, SCRIPT, str(f)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "not a directory" in p.stderr and "Traceback" not in p.stderr


def _run():
    return GV.Run(REPO, REPO, True, 0, "test", {})


def test_a_hanging_check_fails_at_its_budget_and_a_crash_is_reported():
    def hangs(run, budget):
        time.sleep(60)

    def crashes(run, budget):
        raise KeyError("boom")

    t0 = time.monotonic()
    c = GV.run_check("hangs", hangs, _run(), 0.2)
    assert c.name == "hangs" and c.status == "fail" and "overran its budget" in c.summary
    assert time.monotonic() - t0 < 10
    c = GV.run_check("crashes", crashes, _run(), 5)
    assert c.status == "fail" and "KeyError" in c.summary


def test_subprocess_is_killed_with_its_group_at_the_budget():
    t0 = time.monotonic()
    p = GV.sh(["sh", "-c", "sleep 30 & sleep 30"], GV.Budget(1.0))
    assert p.timed_out and p.returncode is None and time.monotonic() - t0 < 10


def test_a_skip_needs_its_reason_and_status_is_typed():
    with pytest.raises(ValueError):
        GV.Check("x", "skip", "")
    with pytest.raises(ValueError):
        GV.Check("x", "ok", "fine")


def test_every_grid_plan_is_accepted_by_estimate_memory_and_counts_the_same_parameters():
    grid = MT.grid()
    assert 18 <= len(grid) <= 24
    assert {c["recompute"] for c in grid} == {"none", "selective", "full"}
    assert {c["mode"] for c in grid} == {"single", "fsdp", "moe", "paged", "pp"}  # the last three: MT.MECHANISMS
    assert {c["seq"] for c in grid} == {2048, 4096, 8192} and {c["micro_batch"] for c in grid} >= {1, 2, 4}
    sizes = sorted(MT.param_count(c) for c in grid)
    assert 0.5e9 <= sizes[0] and sizes[-1] <= 8.1e9
    runner = CliRunner()
    for c in grid:
        argv = MT.estimate_argv(c, 143771 * 2**20)[3:]  # drop "python -m llmdiag"
        r = runner.invoke(cli, argv)
        assert r.exit_code == 0, (c, r.output[-500:])
        doc = json.loads(r.output)
        assert doc["params_total"] == MT.param_count(c), c
        assert doc["plan"]["recompute"] == c["recompute"] and doc["plan"]["zero"] == (3 if c["mode"] == "fsdp" else 0)
        assert doc["verdict"] in ("fits", "tight"), (c, doc["breakdown"])  # the grid must fit the card
        if c["mode"] == "moe":  # every expert on this GPU: the expert data-parallel group is 1
            assert doc["plan"]["ep"] == 1 and doc["model"]["experts"] == c["experts"], doc["plan"]
        if c["mode"] == "paged":
            assert doc["plan"]["optimizer"] == "paged-adam8bit" and doc["memory"]["host_per_gpu"] > 0
        if c["mode"] == "pp":  # the worker runs stage 0: the estimate's stage 0 is what it is compared with
            assert doc["plan"]["pp"] == c["pp"] and doc["stages"][0]["layers"] == MT.stage_layers(c)
            assert MT.run_estimate(c, 143771 * 2**20, 120)["stage"] == 0


def test_signed_error_and_the_memory_table():
    assert MT.signed_error(110, 100) == 10.0 and MT.signed_error(90, 100) == -10.0
    assert MT.signed_error(None, 100) is None and MT.signed_error(100, 0) is None
    row = {**MT.grid()[0], "params": 601683456,
           "measured": {"peak_allocated": 10 * 2**30, "peak_reserved": 11 * 2**30, "process_used": 12 * 2**30},
           "estimate": {"total": 13 * 2**30, "without_overheads": 9 * 2**30}, "estimate_fused_norm": {"total": 12 * 2**30},
           "error_total_vs_process_pct": MT.signed_error(13, 12), "error_states_act_vs_allocated_pct": MT.signed_error(9, 10)}
    doc = {"facts": {"gpu_name": "NVIDIA H200", "host": "h"}, "gpus": 1, "started": "2026-12-03 12:00:00 UTC",
           "quick": False, "seconds": 400.0, "counts": {"pass": 1, "fail": 0, "skip": 0},
           "checks": [GV.Check("memory-truth", "pass", "ok", 1.0, 2.0, {}, [row]).to_dict()]}
    md = GV.render_markdown(doc)
    line = next(x for x in md.splitlines() if x.startswith("| 0.6b"))
    cells = [x.strip() for x in line.strip("|").split("|")]
    assert cells[6:] == ["10.00", "11.00", "12.00", "13.00", "+8.3%", "9.00", "-10.0%", "+0.0%"]


def test_memory_worker_rejects_a_bad_config():
    p = subprocess.run([sys.executable, str(REPO / "bench" / "gpu_memtruth.py"), "worker", "{}"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "bad worker config" in p.stderr


def test_live_comparison_plumbing_with_a_recorded_adapter_and_nvidia_smi(tmp_path):
    """check_nvsmi_live end to end with the recorded H200 in place of the driver: the same code
    the GPU run executes (both reads, nvidia-smi -q -x and nvlink -s, matching, the saved files)."""
    from llmdiag.nvml import RecordedNvml

    fix = REPO / "tests" / "fixtures" / "nvidia-smi"
    smi = tmp_path / "nvidia-smi"
    smi.write_text(f'#!/bin/sh\nif [ "$1" = "-q" ]; then cat {fix / "h200-q.xml"}; exit 0; fi\n'
                   'if [ "$1" = nvlink ]; then exit 0; fi\nexit 9\n')
    smi.chmod(0o755)
    run = GV.Run(tmp_path, tmp_path, True, 1, "", {}, lambda: RecordedNvml.from_file(fix / "h200-nvml.json"), str(smi))
    c = GV.check_nvsmi_live(run, GV.Budget(30))
    assert c.status == "pass", c
    assert c.numbers["mismatch"] == 0 and c.numbers["driver_equal"] == 1 and c.numbers["equal"] >= 20
    assert (tmp_path / "nvidia-smi-q.xml").read_text() == (fix / "h200-q.xml").read_text()
    assert json.loads((tmp_path / "nvml-record.json").read_text())["devices"][0]["uuid"].startswith("GPU-5f3c")
    # another GPU's XML in place of this one: no GPU matches, which fails
    smi.write_text('#!/bin/sh\nsed "s/GPU-5f3c/GPU-0000/; s/00000000:18:00.0/00000000:99:00.0/" '
                   f'{fix / "h200-q.xml"}\n')
    c = GV.check_nvsmi_live(run, GV.Budget(30))
    assert c.status == "fail" and "no GPU with this UUID" in json.dumps(c.details)


def test_memory_grid_plumbing_with_tiny_plans(tmp_path, monkeypatch):
    """check_memory's GPU branch (workers, estimates in parallel, signed errors) on two tiny
    single-GPU plans; on CPU the worker measures no peaks, so the errors stay empty."""
    tiny = [MT.config("tiny", 32, 1, "none", "single"), MT.config("tiny", 64, 2, "full", "single")]
    # a pipeline stage (compared with the estimate's stage 0) and a paged optimizer (no CUDA: skipped)
    mech = [{**m, **MT.MODELS["tiny"], "seq": 32, "micro_batch": 1} for m in MT.MECHANISMS if m["mode"] in ("pp", "paged")]
    monkeypatch.setattr(MT, "grid", lambda quick=False: tiny + mech)
    run = GV.Run(tmp_path, tmp_path, True, 1, "", {"gpu_memory_bytes": 80 * 2**30})
    c = GV.check_memory(run, GV.Budget(200))
    assert c.numbers["points"] == 4 and c.numbers["measured"] == 3 and c.numbers["failed"] == 0, c
    assert c.numbers["skipped"] == 1 and "paged skipped: paged optimizers need CUDA" in c.summary
    pp_row = next(r for r in c.details if r["mode"] == "pp")
    assert pp_row["estimate"]["stage"] == 0 and pp_row["measured"]["params"] < pp_row["params"]  # stage 0 only
    assert "skipped: paged" in GV.render_markdown({"facts": {}, "gpus": 1, "started": "", "quick": True, "seconds": 1.0,
                                                   "counts": {}, "checks": [c.to_dict()]})
    for row in [r for r in c.details if r.get("measured")]:
        assert row["measured"]["finite"] and row["estimate"]["params"] == MT.param_count(row)
        assert row["estimate"]["total"] > row["estimate"]["without_overheads"] > 0
        assert row["error_total_vs_process_pct"] is None  # no CUDA: no peak to compare with


def test_timeline_max_reads_the_monitors_own_csv(tmp_path):
    from llmdiag import nvml
    from llmdiag.monitor import sinks as S
    from llmdiag.monitor.config import Rules
    from llmdiag.monitor.gpus import GpuSampler
    from llmdiag.monitor.host import HostSampler
    from llmdiag.monitor.loop import Monitor, Sinks

    fixture = REPO / "tests" / "fixtures" / "nvml" / "timeline-h100-faults.json"
    mon = Monitor(node="t", interval_s=0.05, rules=Rules(),
                  gpus=GpuSampler(lambda: nvml.replay(fixture), Rules().throttle_reasons), host=HostSampler(),
                  sinks=Sinks(timeline=S.Timeline(str(tmp_path / "t.csv"))))
    mon.run(count=3)
    ref = GpuSampler(lambda: nvml.replay(fixture))
    samples = [g for _ in range(3) for g in ref.sample() if "error" not in g]
    util, mem = GV._timeline_max(tmp_path / "t.csv")
    assert util == max(g["utilization_gpu_pct"] for g in samples if g["utilization_gpu_pct"] is not None)
    assert mem == max(g["memory_used_bytes"] for g in samples if g["memory_used_bytes"] is not None)
    assert GV._timeline_max(tmp_path / "missing.csv") == (None, None)


def test_only_runs_the_named_checks(tmp_path):
    p = subprocess.run([sys.executable, SCRIPT, str(tmp_path), "--only", "recorded", "--only", "environment"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    doc = json.loads((tmp_path / "gpu-validation.json").read_text())
    schema = json.loads((REPO / "docs" / "gpu-validation-schema.json").read_text())
    jsonschema.validate(doc, schema)
    broken = dict(doc, checks=[dict(doc["checks"][0], status="ok")])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)
    assert [c["name"] for c in doc["checks"]] == ["environment", "nvml-vs-nvidia-smi-recorded"]
