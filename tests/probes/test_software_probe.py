"""Software probe: the real torch in a child interpreter, and torches that are broken for real."""

from __future__ import annotations

import os
import textwrap

from llmdiag.result import Status
from llmdiag.probes.software import SoftwareProbe
from tests.probes.nodeutil import assert_actionable, by_check, context, nvml_fixture


def fake_torch(tmp_path, body: str) -> dict:
    """An environment whose PYTHONPATH puts a ``torch`` package with ``body`` first."""
    pkg = tmp_path / "torch"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(textwrap.dedent(body))
    return {"PYTHONPATH": str(tmp_path), "PATH": os.environ.get("PATH", "")}


def run(env=None, nvml=None, timeout=None):
    probe = SoftwareProbe()
    if timeout:
        probe.torch_timeout_s = timeout
    results = list(probe.run(context(env=env or dict(os.environ), nvml=nvml or nvml_fixture("no-driver"))))
    assert_actionable(results)
    return by_check(results)


def test_real_torch_and_inventory():
    import platform

    import torch

    r = run()
    assert r["torch"].status is Status.PASS
    assert r["torch"].data["torch"] == torch.__version__
    assert r["torch"].data["torch_cuda"] == torch.version.cuda
    assert r["python"].data["python"] == platform.python_version()
    assert r["os"].data["kernel"] == platform.release()
    assert r["os"].data["os"]
    assert r["driver"].status is Status.SKIP and "libnvidia-ml.so.1" in r["driver"].summary
    assert r["packages"].data["numpy"] == __import__("numpy").__version__
    assert "deepspeed" in r["packages"].data  # absent packages are reported as None


def test_missing_torch(tmp_path):
    env = {"PYTHONPATH": str(tmp_path), "PATH": os.environ.get("PATH", "")}
    bad = tmp_path / "torch.py"
    bad.write_text("raise ModuleNotFoundError(\"No module named 'torch'\", name='torch')\n")
    r = run(env)
    assert r["torch"].status is Status.FAIL and "not installed" in r["torch"].summary
    assert r["torch"].runbook == "software-torch-missing"
    assert r["packages"].status is Status.PASS  # the inventory survives a missing torch


def test_torch_that_segfaults_on_import(tmp_path):
    env = fake_torch(tmp_path, "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    r = run(env)
    assert r["torch"].status is Status.FAIL and "signal 11" in r["torch"].summary


def test_torch_that_hangs_on_import_is_bounded(tmp_path):
    env = fake_torch(tmp_path, "import time\ntime.sleep(60)\n")
    r = run(env, timeout=1.0)
    assert r["torch"].status is Status.FAIL and "within 1 s" in r["torch"].summary


def test_torch_import_error_message_is_kept(tmp_path):
    env = fake_torch(tmp_path, "raise OSError('libcudnn.so.9: cannot open shared object file')\n")
    r = run(env)
    assert "libcudnn.so.9" in r["torch"].summary


CUDA_TORCH = """
__version__ = "2.5.1+cu{tag}"
class version:
    cuda = "{cuda}"
    hip = None
class backends:
    class cudnn:
        @staticmethod
        def version():
            return 90100
class cuda:
    class nccl:
        @staticmethod
        def version():
            return (2, 21, 5)
    @staticmethod
    def is_available():
        return {avail}
    @staticmethod
    def device_count():
        return 8
"""


def test_cpu_torch_on_a_gpu_node():
    r = run(nvml=nvml_fixture("h100-healthy"))
    assert r["driver"].data == {"driver": "550.54.15", "cuda_driver": "12.4"}
    assert r["torch-cuda"].status is Status.FAIL and "CPU-only build" in r["torch-cuda"].summary


def test_cuda_torch_versions_and_driver_support(tmp_path):
    env = fake_torch(tmp_path, CUDA_TORCH.format(tag="124", cuda="12.4", avail=True))
    r = run(env, nvml=nvml_fixture("h100-healthy"))
    assert r["torch"].data == {"torch": "2.5.1+cu124", "torch_cuda": "12.4", "cudnn": 90100, "nccl": "2.21.5"}
    assert r["torch-cuda"].status is Status.PASS and "8 GPU(s)" in r["torch-cuda"].summary


def test_torch_newer_cuda_than_the_driver(tmp_path):
    (tmp_path / "a").mkdir()
    env = fake_torch(tmp_path / "a", CUDA_TORCH.format(tag="130", cuda="13.0", avail=False))
    r = run(env, nvml=nvml_fixture("h100-healthy"))
    assert r["torch-cuda"].status is Status.FAIL and "supports only CUDA 12.4" in r["torch-cuda"].summary
