"""The built wheel, installed into a fresh virtual environment, gives a working `llmdiag`.

Generic top-level package names (diag, probes, reports, runbooks) are listed explicitly in
pyproject.toml; this catches a package or the runbook data missing from the wheel.
"""

from __future__ import annotations

import site
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_wheel_installs_and_runs(tmp_path):
    pytest.importorskip("setuptools")
    wheel_dir = tmp_path / "wheel"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheel_dir), str(REPO)],
        capture_output=True, text=True, timeout=300,
    )
    assert build.returncode == 0, build.stderr
    (wheel,) = wheel_dir.glob("llmdiag-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for pkg in ("diag/cli.py", "probes/__init__.py", "reports/base.py", "runbooks/nccl-timeout.md"):
        assert pkg in names, f"{pkg} missing from the wheel"

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    vpy = venv / "bin" / "python"
    purelib = subprocess.run([str(vpy), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    # Dependencies come from the test environment (a .pth), llmdiag itself only from the wheel.
    deps = [p for p in site.getsitepackages() + [sysconfig.get_paths()["purelib"]] if Path(p).is_dir()]
    Path(purelib, "_test_deps.pth").write_text("\n".join(dict.fromkeys(deps)) + "\n")
    inst = subprocess.run([sys.executable, "-m", "pip", "--python", str(vpy), "install", "--no-deps", "-q", str(wheel)],
                          capture_output=True, text=True, timeout=300)
    assert inst.returncode == 0, inst.stderr
    exe = venv / "bin" / "llmdiag"
    out = subprocess.run([str(exe), "--help"], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert out.returncode == 0 and "preflight" in out.stdout, out.stderr
    rb = subprocess.run([str(exe), "runbook", "nccl-timeout"], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert rb.returncode == 0 and rb.stdout.startswith("# NCCL"), rb.stderr
    where = subprocess.run([str(vpy), "-c", "import diag; print(diag.__file__)"], capture_output=True, text=True,
                           cwd=tmp_path).stdout
    assert str(venv) in where, where  # imported from the wheel, not the checkout
