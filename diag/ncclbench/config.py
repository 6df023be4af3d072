"""The ``[nccl_bench]`` config section and :class:`BenchSpec`, the validated run description.

Flags override the file, which overrides the defaults below. A :class:`BenchSpec` is plain
data (JSON-serialisable) because it crosses process boundaries: the standalone launcher
hands it to every worker process.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from llmdiag.config import section, setting
from llmdiag.errors import UsageError
from llmdiag.ncclbench.sizes import parse_size, size_sweep
from llmdiag.vocab import Backend

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "sendrecv")
DTYPES = ("float", "half", "bfloat16", "double", "int8", "uint8", "int32", "int64")
OPS = ("sum", "prod", "min", "max", "avg")
BACKENDS = Backend.words()


def _size_ok(value: Any) -> str | None:
    try:
        parse_size(value)
    except ValueError as exc:
        return str(exc)
    return None


def _collectives_ok(value: Any) -> str | None:
    bad = [c for c in value if c not in COLLECTIVES and c != "all"]
    return f"unknown collective(s) {', '.join(bad)} (accepted: {', '.join(COLLECTIVES)}, all)" if bad else None


@section("nccl_bench", "Collective benchmark (llmdiag nccl-bench and the preflight 'nccl' probe).")
class Settings:
    expected_busbw_gbps: float | None = setting(None, "plateau bus bandwidth the hardware should reach (GB/s)",
                                                min=0, flag=("--expect-busbw",), metavar="GB/S")
    min_fraction: float = setting(0.9, "pass when plateau busbw >= this fraction of the expected value",
                                  min=0.01, max=1.0)
    collectives: list[str] = setting(["all_reduce"], "collectives to run (all: every one; the flag is repeatable)",
                                     validator=_collectives_ok,
                                     flag=("-C", "--collective"))
    min_bytes: str = setting("1K", "smallest message, e.g. 8, 1K, 16M (nccl-tests -b)", validator=_size_ok,
                             flag=("-b", "--min-bytes"), metavar="SIZE")
    max_bytes: str = setting("16M", "largest message, e.g. 1G (nccl-tests -e)", validator=_size_ok,
                             flag=("-e", "--max-bytes"), metavar="SIZE")
    step_factor: int = setting(2, "size multiplier between rows (nccl-tests -f)", min=1, max=1024,
                               flag=("-f", "--step-factor"))
    warmup_iters: int = setting(5, "untimed iterations per size (nccl-tests -w)", min=0, max=100000,
                                flag=("-w", "--warmup-iters"))
    iters: int = setting(20, "timed iterations per size (nccl-tests -n)", min=1, max=1000000, flag=("-n", "--iters"))
    check: bool = setting(True, "count wrong elements after each collective (nccl-tests -c; on the command line "
                          "1 or 0)", flag=("-c", "--check"))
    dtype: str = setting("float", "element type (nccl-tests -d)", choices=DTYPES, flag=("-d", "--dtype"))
    op: str = setting("sum", "reduction operation (nccl-tests -o)", choices=OPS, flag=("-o", "--op"))
    root: int = setting(0, "root rank of broadcast (nccl-tests -r)", min=0, flag=("-r", "--root"))
    backend: str = setting("auto", "nccl on GPUs, gloo on CPU; auto picks", choices=BACKENDS, flag=("--backend",))
    nproc: int | None = setting(None, "local processes of a standalone run (unset: one per GPU with NCCL, else 2 "
                                "CPU processes with gloo)", min=1, max=256, flag=("--nproc",))
    plateau_sizes: int = setting(3, "the largest N sizes whose busbw form the plateau", min=1, max=64)
    straggler_fraction: float = setting(
        0.5, "a rank whose own busbw is below this fraction of the median rank's is a straggler", min=0.0, max=1.0)
    pairwise_bytes: str = setting("16M", "message size of each pairwise send/recv", validator=_size_ok)
    pairwise_iters: int = setting(5, "timed exchanges per pair", min=1, max=100000)
    pairwise_low_fraction: float = setting(0.5, "a link below this fraction of the reference bandwidth is slow",
                                           min=0.01, max=1.0)
    pairwise_samples: int = setting(2, "extra partners measured per suspect node after the ring", min=0, max=64)
    memory_check: bool = setting(True, "refuse (exit 2) a run whose buffers would not fit in free host/GPU memory")
    timeout_s: float = setting(300.0, "bound on the whole run (rendezvous included)", min=1, max=86400)
    # The preflight probe's short version: small sizes, few iterations.
    probe_max_bytes: str = setting("4M", "largest message of the preflight probe", validator=_size_ok)
    probe_iters: int = setting(5, "timed iterations per size in the preflight probe", min=1, max=10000)
    probe_nproc: int = setting(2, "local CPU processes of the probe without a cluster group", min=2, max=64)
    auto_pairwise: bool = setting(True, "run --pairwise from preflight when busbw is low")


_DEFAULT = Settings()


@dataclasses.dataclass(frozen=True)
class BenchSpec:
    """What every rank runs: the ``[nccl_bench]`` settings resolved (sizes in bytes, the sweep
    expanded); its defaults are the section's. ``inject_corruption`` is a test hook."""

    collectives: tuple[str, ...] = tuple(_DEFAULT.collectives)
    sizes: tuple[int, ...] = (parse_size(_DEFAULT.min_bytes),)
    warmup_iters: int = _DEFAULT.warmup_iters
    iters: int = _DEFAULT.iters
    check: bool = _DEFAULT.check
    dtype: str = _DEFAULT.dtype
    op: str = _DEFAULT.op
    root: int = _DEFAULT.root
    backend: str = _DEFAULT.backend
    pairwise: bool = False
    pairwise_bytes: int = parse_size(_DEFAULT.pairwise_bytes)
    pairwise_iters: int = _DEFAULT.pairwise_iters
    pairwise_low_fraction: float = _DEFAULT.pairwise_low_fraction
    pairwise_samples: int = _DEFAULT.pairwise_samples
    timeout_s: float = _DEFAULT.timeout_s
    #: (rank, elements): that rank overwrites this many elements of its result before the check.
    inject_corruption: tuple[int, int] | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> BenchSpec:
        d = dict(d)
        for key in ("collectives", "sizes"):
            d[key] = tuple(d[key])
        if d.get("inject_corruption") is not None:
            d["inject_corruption"] = tuple(d["inject_corruption"])
        return cls(**d)


def _size(value: Any, flag: str) -> int:
    try:
        return parse_size(value)
    except ValueError as exc:
        raise UsageError(f"{flag}: {exc}") from None


def build_spec(section: Mapping[str, Any], *, pairwise: bool = False,
               inject_corruption: tuple[int, int] | None = None) -> BenchSpec:
    """A validated spec from the merged ``[nccl_bench]`` values (flags already applied).

    Raises :class:`UsageError` (exit 2) for contradictions the config types cannot express.
    """
    lo = _size(section["min_bytes"], "--min-bytes")
    hi = _size(section["max_bytes"], "--max-bytes")
    if lo <= 0:
        raise UsageError(f"--min-bytes must be at least 1 byte, got {section['min_bytes']}")
    if lo > hi:
        raise UsageError(f"--min-bytes ({section['min_bytes']}) is larger than --max-bytes ({section['max_bytes']})")
    factor = int(section["step_factor"])
    if factor < 2 and lo != hi:
        raise UsageError(f"--step-factor must be >= 2 when --min-bytes != --max-bytes, got {factor}")
    collectives = list(section["collectives"])
    if "all" in collectives:
        collectives = list(COLLECTIVES)
    collectives = list(dict.fromkeys(collectives))
    return BenchSpec(
        collectives=tuple(collectives),
        sizes=tuple(size_sweep(lo, hi, factor)),
        warmup_iters=int(section["warmup_iters"]),
        iters=int(section["iters"]),
        check=bool(section["check"]),
        dtype=section["dtype"],
        op=section["op"],
        root=int(section["root"]),
        backend=section["backend"],
        pairwise=pairwise,
        pairwise_bytes=_size(section["pairwise_bytes"], "pairwise_bytes"),
        pairwise_iters=int(section["pairwise_iters"]),
        pairwise_low_fraction=float(section["pairwise_low_fraction"]),
        pairwise_samples=int(section["pairwise_samples"]),
        timeout_s=float(section["timeout_s"]),
        inject_corruption=inject_corruption,
    )


def check_world(spec: BenchSpec, world_size: int) -> None:
    """Checks that need the world size (known only once the job is up)."""
    if spec.root >= world_size:
        raise UsageError(f"--root {spec.root} is not a rank of this job (world size {world_size})")
