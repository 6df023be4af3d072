"""The built wheel, as users install it: one import package, on every supported Python.

For each of Python 3.10-3.13 (pyenv's interpreters; the running one always) the wheel is built
with that interpreter, installed with its declared dependencies (from the package index, no
torch) into a fresh virtual environment, and smoke-tested from a directory that holds its own
``diag/``, ``probes/`` and ``reports/`` packages (a user's project): none of them may shadow
llmdiag's code.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PYENV = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
SUPPORTED = ("3.10", "3.11", "3.12", "3.13")
LOG = REPO / "tests" / "fixtures" / "logs" / "failing" / "cuda_error.log"


def interpreter(version: str) -> str | None:
    if f"{sys.version_info[0]}.{sys.version_info[1]}" == version:
        return sys.executable
    found = sorted(PYENV.glob(f"{version}.*/bin/python3")) if PYENV.is_dir() else []
    return str(found[-1]) if found else shutil.which(f"python{version}")


def source_tree(dest: Path) -> Path:
    """The files a clean clone has (tracked, plus untracked but not ignored): a build in the
    checkout would pack whatever an earlier build left in build/lib."""
    listed = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            capture_output=True, check=True, timeout=60).stdout
    for rel in filter(None, listed.decode().split("\0")):
        src = REPO / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


def build_wheel(python: str, out: Path) -> Path:
    # build isolation: the wheel is built as pip builds it for a user (setuptools from the index)
    src = source_tree(out.parent / "src")
    build = subprocess.run([python, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(src)],
                           capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr[-3000:]
    (wheel,) = out.glob("llmdiag-*.whl")
    return wheel


def top_level_names(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as zf:
        record = next(n for n in zf.namelist() if n.endswith(".dist-info/RECORD"))
        rows = zf.read(record).decode().splitlines()
    return {row.split(",", 1)[0].split("/", 1)[0] for row in rows if row}


def user_project(tmp: Path) -> Path:
    """A working directory with packages named like llmdiag's folders, which must not be used."""
    cwd = tmp / "project"
    for name in ("diag", "probes", "reports", "runbooks"):
        (cwd / name).mkdir(parents=True)
        (cwd / name / "__init__.py").write_text(f"raise ImportError('the user project {name}/ was imported')\n")
    (cwd / "reports" / "base.py").write_text("raise ImportError('user reports.base')\n")
    return cwd


@pytest.mark.slow
@pytest.mark.parametrize("version", SUPPORTED)
def test_wheel_installs_and_runs(version, tmp_path):
    python = interpreter(version)
    if python is None:
        pytest.skip(f"no Python {version} here (pyenv install {version})")
    wheel = build_wheel(python, tmp_path / "wheel")

    names = top_level_names(wheel)
    assert {n for n in names if not n.endswith(".dist-info")} == {"llmdiag"}, names
    with zipfile.ZipFile(wheel) as zf:
        files = zf.namelist()
        meta = zf.read(next(n for n in files if n.endswith(".dist-info/METADATA"))).decode()
    for path in ("llmdiag/cli.py", "llmdiag/probes/gpu.py", "llmdiag/reports/base.py",
                 "llmdiag/runbooks/nccl-timeout.md", "llmdiag/logs/analyzer.py", "llmdiag/util/bounded.py",
                 "llmdiag/documents.py", "llmdiag/schemas/nccl-bench.json", "llmdiag/schemas/cluster.json"):
        assert path in files, f"{path} missing from the wheel"
    assert any(n.endswith("licenses/LICENSE") for n in files), "licence file missing from the wheel"
    assert "License-Expression: Apache-2.0" in meta
    required = [line.split(":", 1)[1].strip() for line in meta.splitlines()
                if line.startswith("Requires-Dist:") and "extra ==" not in line]
    assert not [r for r in required if r.split(">")[0].split(";")[0].strip() in ("torch", "pandas", "matplotlib")], required

    venv = tmp_path / "venv"
    subprocess.run([python, "-m", "venv", str(venv)], check=True, timeout=300)
    vpy, exe = venv / "bin" / "python", venv / "bin" / "llmdiag"
    inst = subprocess.run([str(vpy), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheel)],
                          capture_output=True, text=True, timeout=900)
    assert inst.returncode == 0, inst.stderr[-3000:]

    cwd = user_project(tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LLMDIAG_CONFIG")}
    env["COLUMNS"] = "120"

    def run(*argv: str, ok=(0,)) -> subprocess.CompletedProcess:
        p = subprocess.run(list(argv), capture_output=True, text=True, cwd=cwd, env=env, timeout=300)
        assert p.returncode in ok, f"{argv}: exit {p.returncode}\n{p.stderr[-3000:]}"
        assert "Traceback" not in p.stderr, p.stderr
        return p

    assert run(str(vpy), "-c", "import importlib.util as u; print(u.find_spec('torch') is None)").stdout.strip() == "True"
    where = run(str(vpy), "-c", "import llmdiag; print(llmdiag.__file__)").stdout
    assert str(venv) in where, where  # from the wheel, not the checkout
    assert "preflight" in run(str(exe), "--help").stdout
    assert "analyze-log" in run(str(vpy), "-m", "llmdiag", "--help").stdout
    doc = json.loads(run(str(exe), "preflight", "--probe", "system", "--format", "json", ok=(0, 1)).stdout)
    assert doc["kind"] == "cluster" and doc["status"] in ("pass", "warn", "fail")
    doc = json.loads(run(str(exe), "analyze-log", str(LOG), "-f", "json", ok=(1,)).stdout)
    assert [f["kind"] for f in doc["findings"]] == ["cuda_error"]
    out = run(str(exe), "estimate-memory", "--model", "llama3-8b", ok=(0, 1)).stdout
    assert "llama3-8b" in out and "GiB" in out
    assert run(str(exe), "runbook", "nccl-timeout").stdout.startswith("# NCCL")


@pytest.mark.slow
def test_torchrun_module_from_a_user_project(tmp_path):
    """``torchrun -m llmdiag preflight`` from a project with its own reports/ and diag/."""
    pytest.importorskip("torch")
    torchrun = Path(sys.executable).with_name("torchrun")
    # the torchrun script, or the module it runs (a venv reusing a system torch has no script)
    launcher = [str(torchrun)] if torchrun.exists() else [sys.executable, "-m", "torch.distributed.run"]
    cwd = user_project(tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LLMDIAG_CONFIG")}
    p = subprocess.run([*launcher, "--nproc-per-node", "1", "--master-port", "0", "-m", "llmdiag", "preflight",
                        "--probe", "system", "-f", "json"], capture_output=True, text=True, cwd=cwd, env=env,
                       timeout=300)
    assert p.returncode in (0, 1), p.stderr[-3000:]
    assert "Traceback" not in p.stderr, p.stderr[-3000:]
    assert json.loads(p.stdout)["kind"] == "cluster"
