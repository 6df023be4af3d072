"""Software inventory: OS, kernel, Python, torch and its CUDA/cuDNN/NCCL, driver, ML packages.

torch is queried in a child interpreter (``ctx.run([python, -c, ...], timeout)``): a torch that
segfaults, hangs or cannot find its CUDA libraries on import becomes a finding, never a
crashed or stalled preflight. The child prints package versions first (importlib.metadata,
no imports) and torch's facts second, so a torch crash still leaves the inventory.
Every version lands in ``data`` under flat keys so cluster aggregation can diff nodes.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable

from llmdiag.context import Context
from llmdiag.probe import BaseProbe
from llmdiag.result import Result

#: Distributions reported when installed (importlib.metadata names; data keys use "_").
PACKAGES = ("deepspeed", "megatron-core", "transformers", "accelerate", "flash-attn", "apex", "triton",
            "nvidia-nccl-cu12", "numpy")

_CHILD = r"""
import json, platform, sys
from importlib import metadata
pk = {}
for name in %(packages)r:
    try:
        pk[name] = metadata.version(name)
    except Exception:
        pk[name] = None
print(json.dumps({"python": platform.python_version(), "executable": sys.executable, "packages": pk}), flush=True)
import torch
t = {"torch": str(torch.__version__), "torch_cuda": torch.version.cuda, "torch_hip": getattr(torch.version, "hip", None)}
try:
    t["cudnn"] = torch.backends.cudnn.version()
except Exception:
    t["cudnn"] = None
try:
    v = torch.cuda.nccl.version() if torch.version.cuda else None
    t["nccl"] = ".".join(map(str, v)) if isinstance(v, tuple) else v
except Exception:
    t["nccl"] = None
try:
    t["cuda_available"] = bool(torch.cuda.is_available())
    t["cuda_devices"] = torch.cuda.device_count() if t["cuda_available"] else 0
except Exception as exc:
    t["cuda_available"] = False
    t["cuda_error"] = f"{type(exc).__name__}: {exc}"
print(json.dumps(t), flush=True)
"""


def _os_release(ctx: Context) -> str | None:
    for path in ("/etc/os-release", "/usr/lib/os-release"):
        try:
            text = ctx.path(path).read_text()
        except OSError:
            continue
        fields = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
        name = fields.get("PRETTY_NAME") or fields.get("NAME")
        if name:
            return name.strip().strip('"')
    return None


def _major_minor(v: str) -> tuple[int, int] | None:
    try:
        parts = v.split(".")
        return int(parts[0]), int(parts[1])
    except (ValueError, IndexError):
        return None


class SoftwareProbe(BaseProbe):
    name = "software"
    description = "OS, kernel, Python, torch with its CUDA/cuDNN/NCCL, NVIDIA driver, ML package versions"
    timeout_s = 30.0
    torch_timeout_s = 20.0  # importing a CUDA torch on a busy node can take several seconds

    def run(self, ctx: Context) -> Iterable[Result]:
        # The child gets what is left of this probe's deadline less a margin for the checks after
        # it: a child cut exactly at the deadline left no time for them, so the whole probe timed
        # out and the os/python/package findings were lost (a cluster run's share of 14.5 s under
        # load 10, where importing torch alone took longer).
        left = ctx.deadline.remaining()
        wait = max(0.5, min(self.torch_timeout_s, left - max(1.5, 0.15 * left)))
        child = ctx.run([sys.executable, "-c", _CHILD % {"packages": PACKAGES}], timeout=wait)
        lines = [json.loads(x) for x in child.stdout.splitlines() if x.startswith("{")]
        inventory = lines[0] if lines else {}
        torch_facts = lines[1] if len(lines) > 1 else None
        driver, cuda_driver, nvml_error = self._driver(ctx)
        results = [self.check_os(ctx), self.check_python(ctx, inventory),
                   self.check_torch(ctx, child, torch_facts, wait),
                   self.check_driver(ctx, driver, cuda_driver, nvml_error),
                   self.check_torch_cuda(ctx, torch_facts, driver, cuda_driver),
                   self.check_packages(ctx, inventory)]
        return [r for r in results if r is not None]

    def _driver(self, ctx: Context) -> tuple[str | None, int | None, str | None]:
        """(driver version, CUDA version the driver supports as 12040, reason when unknown)."""
        from llmdiag import nvml  # noqa: PLC0415

        try:
            api = (ctx.nvml or nvml.load)()
        except Exception as exc:  # noqa: BLE001 - no driver is a finding
            return None, None, str(exc)
        try:
            return api.driver_version(), api.cuda_driver_version(), None
        except Exception as exc:  # noqa: BLE001
            return None, None, f"NVML error: {exc}"
        finally:
            api.close()

    def check_os(self, ctx: Context) -> Result:
        os_name = _os_release(ctx)
        kernel = None
        try:
            kernel = ctx.path("/proc/sys/kernel/osrelease").read_text().strip()
        except OSError:
            pass
        return self.ok(ctx, "os", f"{os_name or 'unknown OS'}, kernel {kernel or 'unknown'}",
                       data={"os": os_name, "kernel": kernel})

    def check_python(self, ctx: Context, inventory: dict) -> Result:
        version = inventory.get("python") or ".".join(map(str, sys.version_info[:3]))
        return self.ok(ctx, "python", f"Python {version} ({inventory.get('executable') or sys.executable})",
                       data={"python": version})

    def check_torch(self, ctx: Context, child, facts: dict | None, waited_s: float | None = None) -> Result:
        if facts:
            summary = f"torch {facts['torch']}, " + (
                f"CUDA {facts['torch_cuda']}, cuDNN {facts.get('cudnn')}, NCCL {facts.get('nccl')}"
                if facts.get("torch_cuda") else "CPU-only build" if not facts.get("torch_hip") else f"ROCm {facts['torch_hip']}")
            return self.ok(ctx, "torch", summary, data={k: facts.get(k) for k in ("torch", "torch_cuda", "cudnn", "nccl")})
        err = (child.stderr or "").strip().splitlines()
        last = err[-1] if err else ""
        if child.timed_out and waited_s is not None and waited_s < self.torch_timeout_s:
            # cut by the share of a run's time budget, not by the check's own limit: the budget's finding, not this
            # node's (on a loaded node of a short cluster run a healthy import can take longer than its share)
            return self.skip(ctx, "torch", f"not judged: importing torch did not finish within the {round(waited_s, 1):g} s "
                             f"the run's time budget left it (its own limit is {self.torch_timeout_s:g} s): raise "
                             "cluster.timeout_s / --timeout to judge it", runbook="probe-timeout",
                             data={"torch_unknown": "budget"})
        if child.timed_out:
            waited = self.torch_timeout_s if waited_s is None else waited_s
            why = (f"importing torch did not finish within {round(waited, 1):g} s (hung CUDA init, a stalled filesystem, or "
                   "a starved CPU)" + ("" if waited >= self.torch_timeout_s else
                                      f"; that was what the probe's deadline left of {self.torch_timeout_s:g} s"))
        elif "No module named 'torch'" in last or "No module named torch" in last:
            why = "torch is not installed for this Python"
        elif child.returncode is not None and child.returncode < 0:
            why = f"importing torch crashed the interpreter (signal {-child.returncode})"
        else:
            why = f"importing torch failed: {last or child.error or f'exit code {child.returncode}'}"
        # "not installed" is a value nodes can compare; a timeout or crash is not a version at all
        # (it stays out of the cluster's consistency comparison)
        missing = "not installed" in why
        return self.fail(
            ctx, "torch", why, evidence=[("import torch", last or child.error or child.returncode, "imports", "")],
            data={"torch": None} if missing else {"torch_unknown": why}, runbook="software-torch-missing",
            remediation=f"Check with `{sys.executable} -c 'import torch; print(torch.__version__)'`; install a torch "
                        "built for this node's CUDA driver (pip install torch) into the job's environment.",
        )

    def check_driver(self, ctx: Context, driver, cuda_driver, nvml_error) -> Result:
        if driver is None:
            return self.skip(ctx, "driver", f"no NVIDIA driver: {nvml_error or 'NVML did not report a version'}")
        cuda = f"{cuda_driver // 1000}.{cuda_driver % 1000 // 10}" if cuda_driver else None
        return self.ok(ctx, "driver", f"NVIDIA driver {driver}" + (f" (supports CUDA {cuda})" if cuda else ""),
                       data={"driver": driver, "cuda_driver": cuda})

    def check_torch_cuda(self, ctx: Context, facts: dict | None, driver, cuda_driver) -> Result | None:
        """torch must be able to use the GPUs this node has (a CPU wheel on a GPU node is common)."""
        if facts is None:
            return None
        if driver is None:
            return self.skip(ctx, "torch-cuda", "no NVIDIA driver here, so torch's CUDA support is not checked")
        fix = ("Install the torch wheel for the driver's CUDA, e.g. `pip install torch --index-url "
               "https://download.pytorch.org/whl/cu121`, or upgrade the driver.")
        if not facts.get("torch_cuda"):
            return self.fail(ctx, "torch-cuda", f"torch {facts['torch']} is a CPU-only build on a node with NVIDIA driver {driver}",
                             evidence=[("torch CUDA", None, "a CUDA build", "")], runbook="software-torch-cuda",
                             remediation=fix)
        need, have = _major_minor(facts["torch_cuda"]), None
        if cuda_driver:
            have = (cuda_driver // 1000, cuda_driver % 1000 // 10)
        if need and have and need[0] > have[0]:
            return self.fail(ctx, "torch-cuda", f"torch needs CUDA {facts['torch_cuda']} but driver {driver} supports only "
                             f"CUDA {have[0]}.{have[1]} ('CUDA driver version is insufficient')",
                             evidence=[("CUDA", f"{have[0]}.{have[1]}", f">= {facts['torch_cuda']}", "")],
                             runbook="software-torch-cuda", remediation=fix)
        if not facts.get("cuda_available"):
            return self.fail(ctx, "torch-cuda", f"torch cannot use the GPUs: {facts.get('cuda_error') or 'torch.cuda.is_available() is False'}",
                             evidence=[("torch.cuda.is_available()", False, True, "")], runbook="software-torch-cuda",
                             remediation="Check CUDA_VISIBLE_DEVICES and `nvidia-smi`; then " + fix[0].lower() + fix[1:])
        return self.ok(ctx, "torch-cuda", f"torch sees {facts.get('cuda_devices')} GPU(s) with CUDA {facts['torch_cuda']}")

    def check_packages(self, ctx: Context, inventory: dict) -> Result:
        if "packages" not in inventory:
            # the child never printed its inventory (timed out or crashed first): unknown, not "none"
            return self.skip(ctx, "packages", "package versions unknown: the inventory child printed nothing "
                             "(see the torch check)")
        pk = inventory.get("packages") or {}
        data = {name.replace("-", "_"): pk.get(name) for name in PACKAGES}
        present = [f"{n} {v}" for n, v in pk.items() if v]
        return self.ok(ctx, "packages", ", ".join(present) if present else "none of " + ", ".join(PACKAGES) + " installed",
                       data=data)
