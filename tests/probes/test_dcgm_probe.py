"""The dcgm probe: ``dcgmi diag -j`` documents built here with the structure dcgmi prints (DCGM 4:
entity groups, metadata, per-entity results and test summaries; DCGM 3: gpu_id results and the
deployment tests' "warnings" quirk), read directly and through a fake ``dcgmi`` on PATH that
exits as the real one does (0 all passed, 226 = -30 NVVS_ERROR, 205 = -51 NVVS_ISOLATE_ERROR)."""

from __future__ import annotations

import json

import pytest

from llmdiag.probes.dcgm import DcgmError, DcgmProbe, parse_diag
from llmdiag.result import Status
from llmdiag.runner import run_probe, with_timeout
from tests.probes.nodeutil import assert_actionable, by_check, context
from tests.probes.sysfs_tree import executable, path_env

ISOLATE, RESET, CONFIG = 2, 6, 5


def warning(text: str, error_id: int, severity: int, category: int = 1) -> dict:
    return {"warning": text, "error_id": error_id, "error_category": category, "error_severity": severity}


def dcgm4(tests: list[tuple[str, str, dict[int, tuple[str, list[dict]]]]], gpus: int = 2) -> dict:
    """A DCGM 4 document: ``tests`` = (category, test name, {gpu: (status, warnings)})."""
    cats: dict[str, list] = {}
    for category, name, per_gpu in tests:
        results = []
        for gpu, (status, warns) in sorted(per_gpu.items()):
            r = {"entity_group_id": 1, "entity_group": "GPU", "entity_id": gpu, "status": status}
            if warns:
                r["warnings"] = warns
            results.append(r)
        worst = next((s for s in ("Fail", "Warn", "Pass", "Skip") if any(v[0] == s for v in per_gpu.values())), "Pass")
        cats.setdefault(category, []).append({"name": name, "results": results, "test_summary": {"status": worst}})
    return {
        "entity_groups": [{"entity_group_id": 1, "entity_group": "GPU",
                           "entities": [{"entity_id": i, "serial_num": f"13240230{i:05d}", "device_id": "2330"}
                                        for i in range(gpus)]}],
        "metadata": {"version": "4.2.3", "Driver Version Detected": "570.124.06"},
        "DCGM Diagnostic": {"test_categories": [{"category": c, "tests": t} for c, t in cats.items()]},
    }


def dcgm3(fail_gpu: int | None) -> dict:
    """A DCGM 3 document: deployment results without a GPU, per-GPU results with string gpu_ids."""
    deploy = [{"name": n, "results": [{"status": "Pass"}]} for n in ("Denylist", "NVML Library", "Persistence Mode")]
    deploy.append({"name": "Page Retirement/Row Remap", "results": [{
        "status": "Fail" if fail_gpu is not None else "Pass", "gpu_id": fail_gpu or 0,
        "warnings": [{"warnings": "Pending row remapping on GPU 1", "error_id": 85, "error_category": 3,
                      "error_severity": RESET}]}] if fail_gpu is not None else [{"status": "Pass"}]})
    pcie = {"name": "PCIe", "results": [{"gpu_id": str(g), "status": "Pass", "info": "GPU to Host bandwidth: 24 GB/s"}
                                        for g in range(2)]}
    return {"version": "3.3.5", "Driver Version Detected": "535.129.03", "GPU Device IDs": ["2330", "2330"],
            "DCGM Diagnostic": {"test_categories": [{"category": "Deployment", "tests": deploy},
                                                    {"category": "Integration", "tests": [pcie]}]}}


LEVEL2_PASS = dcgm4([("Deployment", "software", {0: ("Pass", []), 1: ("Pass", [])}),
                     ("Integration", "pcie", {0: ("Pass", []), 1: ("Pass", [])}),
                     ("Hardware", "memory", {0: ("Pass", []), 1: ("Skip", [])})])
LEVEL2_ISOLATE = dcgm4([("Deployment", "software", {0: ("Pass", []), 1: ("Pass", [])}),
                        ("Hardware", "memory", {0: ("Pass", []), 1: ("Fail", [warning(
                            "A memory mismatch was detected on GPU 1, but no error was reported by CUDA or NVML.",
                            58, ISOLATE)])})])


def test_dcgm4_document_entries():
    entries = parse_diag(json.dumps(LEVEL2_ISOLATE, indent=3))
    mem = [e for e in entries if e.test == "memory"]
    assert [(e.entity, e.status) for e in mem] == [("GPU 0", Status.PASS), ("GPU 1", Status.FAIL)]
    assert mem[1].warnings[0][1:] == (58, ISOLATE)


def test_dcgm3_document_entries():
    entries = parse_diag(json.dumps(dcgm3(fail_gpu=1)))
    remap = next(e for e in entries if e.test == "Page Retirement/Row Remap")
    assert (remap.entity, remap.status, remap.warnings[0]) == ("GPU 1", Status.FAIL,
                                                              ("Pending row remapping on GPU 1", 85, RESET))
    assert [e.entity for e in entries if e.test == "PCIe"] == ["GPU 0", "GPU 1"]
    assert next(e for e in entries if e.test == "Denylist").entity is None


def test_runtime_error_and_garbage_are_errors():
    with pytest.raises(DcgmError, match="host engine"):
        parse_diag(json.dumps({"DCGM Diagnostic": {"version": "4.2.3",
                                                   "runtime_error": "Error: unable to connect to the host engine"}}))
    with pytest.raises(DcgmError):
        parse_diag("Error: Unable to complete diagnostic for group 0. Return: (-30) The NVVS returned an error.")
    with pytest.raises(DcgmError, match="no test results"):
        parse_diag(json.dumps({"DCGM Diagnostic": {"test_categories": []}}))


def fake_dcgmi(tmp_path, doc: dict | str, code: int):
    """``dcgmi`` as a program on PATH: records its argv, prints the document, exits with ``code``."""
    bindir = tmp_path / "bin"
    (tmp_path / "out.json").write_text(doc if isinstance(doc, str) else json.dumps(doc, indent=3))
    executable(bindir, "dcgmi", f'echo "$*" > {tmp_path}/argv\ncat {tmp_path}/out.json\nexit {code}\n')
    return bindir


def run(bindir, level=1, **cfg):
    ctx = context(env=path_env(bindir), config={"dcgm": {"level": level, **cfg}})
    results = run_probe(DcgmProbe(), ctx)
    assert_actionable(results)
    return results


def test_fake_dcgmi_all_pass(tmp_path):
    results = run(fake_dcgmi(tmp_path, LEVEL2_PASS, 0), level=2)
    assert (tmp_path / "argv").read_text().split() == ["diag", "-r", "2", "-j"]
    r = by_check(results)
    assert set(r) == {"diag-software", "diag-pcie", "diag-memory"}
    assert all(x.status is Status.PASS for x in results)
    assert r["diag-memory"].data["entities"] == {"GPU 0": "pass", "GPU 1": "skip"}


def test_fake_dcgmi_isolate_failure_fails_the_gpu(tmp_path):
    r = by_check(run(fake_dcgmi(tmp_path, LEVEL2_ISOLATE, 256 - 51), level=2))
    mem = r["diag-memory"]
    assert mem.status is Status.FAIL and mem.runbook == "dcgm-diag-failed"
    assert "GPU 1" in mem.summary and "memory mismatch" in mem.summary
    assert mem.remediation.startswith("Isolate the GPU")
    assert mem.data["exit_code"] == 205
    assert r["diag-software"].status is Status.PASS


def test_fake_dcgmi_dcgm3_reset_severity(tmp_path):
    r = by_check(run(fake_dcgmi(tmp_path, dcgm3(fail_gpu=1), 256 - 30)))
    remap = r["diag-page-retirement-row-remap"]
    assert remap.status is Status.FAIL and "reset the GPU" in remap.remediation


def test_fake_dcgmi_without_json_warns(tmp_path):
    res = run(fake_dcgmi(tmp_path, "Error: unable to establish a connection to the specified host: localhost\n", 255))
    assert [(r.check, r.status) for r in res] == [("diag", Status.WARN)]
    assert "exit 255" in res[0].summary


def test_a_hung_dcgmi_is_bounded_by_the_run_budget(tmp_path):
    bindir = tmp_path / "bin"
    executable(bindir, "dcgmi", "exec sleep 60\n")
    ctx = context(env=path_env(bindir), config={"dcgm": {"level": 3}})
    res = run_probe(with_timeout(DcgmProbe(), 3.0), ctx)
    assert [(r.check, r.status) for r in res] == [("diag", Status.WARN)]
    assert "did not finish" in res[0].summary and "lower [dcgm] level" in res[0].remediation


def test_skipped_with_the_reason_without_dcgmi(tmp_path):
    res = run_probe(DcgmProbe(), context(env={"PATH": str(tmp_path)}))
    assert [(r.check, r.status) for r in res] == [("diag", Status.SKIP)]
    assert "dcgmi not installed" in res[0].summary


def test_list_probes_shows_the_dcgm_bound_in_force(tmp_path):
    """The probe's deadline is ``[dcgm] timeout_s`` plus its grace, so --list-probes shows the
    configured bound (not a class constant), and a changed setting changes it."""
    from click.testing import CliRunner

    from llmdiag.cli import cli

    def shown(*args: str) -> str:
        out = CliRunner().invoke(cli, ["preflight", *args, "--list-probes"]).output
        return next(line for line in out.splitlines() if line.startswith("dcgm "))

    assert "timeout 310 s" in shown()
    cfg = tmp_path / "c.toml"
    cfg.write_text("[dcgm]\ntimeout_s = 60\n")
    assert "timeout 70 s" in shown("--config", str(cfg))
