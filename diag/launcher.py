"""The launcher contract: torchrun, Slurm, OpenMPI and plain variables, parsed in one place.

Every command that needs to know "who am I in this job" reads a :class:`LauncherInfo` built
by :func:`parse_launcher` from an environment mapping. Values out of range are not
exceptions: they are collected in ``problems`` so that preflight can report them as findings
(a broken launch script is exactly what preflight is for).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

DEFAULT_MASTER_PORT = 29500


@dataclasses.dataclass(frozen=True)
class LauncherInfo:
    """Who this process is in the job, and where the rendezvous lives.

    ``kind`` is one of ``torchrun``, ``slurm``, ``openmpi``, ``env`` (plain NNODES/NODE_RANK
    variables) or ``none`` (not launched as part of a job).
    """

    kind: str = "none"
    master_addr: str | None = None
    master_port: int | None = None
    world_size: int | None = None
    rank: int | None = None
    local_rank: int | None = None
    local_world_size: int | None = None
    nnodes: int | None = None
    node_rank: int | None = None
    nproc_per_node: int | None = None
    job_id: str | None = None
    nodelist: str | None = None
    problems: tuple[str, ...] = ()

    @property
    def distributed(self) -> bool:
        """True when this process is one of several (a real multi-process job)."""
        return self.kind != "none" and (self.world_size or 1) > 1

    def to_dict(self) -> dict:
        return dataclasses.asdict(self) | {"problems": list(self.problems)}


def _int(env: Mapping[str, str], name: str, problems: list[str], lo: int = 0, hi: int | None = None) -> int | None:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        problems.append(f"{name}={raw!r} is not an integer")
        return None
    if value < lo or (hi is not None and value > hi):
        rng = f"{lo}..{hi}" if hi is not None else f">= {lo}"
        problems.append(f"{name}={value} is out of range (accepted: {rng})")
        return None
    return value


def _slurm_per_node(env: Mapping[str, str], problems: list[str]) -> int | None:
    """Tasks per node from ``SLURM_NTASKS_PER_NODE`` or ``SLURM_TASKS_PER_NODE`` ("8", "8(x2)").

    A heterogeneous layout ("8(x2),4") has no single per-node count: None, no problem.
    """
    for name in ("SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE"):
        raw = (env.get(name) or "").strip()
        if not raw:
            continue
        groups = {g.split("(")[0] for g in raw.split(",")}
        if len(groups) != 1:
            return None
        value = groups.pop()
        if not value.isdigit() or int(value) < 1:
            problems.append(f"{name}={raw!r} is not a task count")
            return None
        return int(value)
    return None


def _first(env: Mapping[str, str], *names: str) -> str | None:
    for n in names:
        v = env.get(n)
        if v not in (None, ""):
            return n
    return None


def parse_launcher(env: Mapping[str, str]) -> LauncherInfo:
    """Read the launcher variables from ``env`` with range and coherence checks.

    Precedence when several launchers' variables are present: torchrun's (``RANK`` /
    ``WORLD_SIZE`` / ``LOCAL_RANK``) win, because torchrun under srun or mpirun sets them
    for its workers; then OpenMPI's, then Slurm's, then plain ``NNODES`` / ``NODE_RANK``.
    """
    problems: list[str] = []
    if _first(env, "TORCHELASTIC_RUN_ID", "LOCAL_RANK") and _first(env, "RANK", "WORLD_SIZE"):
        kind = "torchrun"
        rank = _int(env, "RANK", problems)
        world = _int(env, "WORLD_SIZE", problems, lo=1)
        local_rank = _int(env, "LOCAL_RANK", problems)
        local_world = _int(env, "LOCAL_WORLD_SIZE", problems, lo=1)
        nnodes = _int(env, "NNODES", problems, lo=1) or _int(env, "GROUP_WORLD_SIZE", problems, lo=1)
        node_rank = _int(env, "NODE_RANK", problems)
        if node_rank is None:
            node_rank = _int(env, "GROUP_RANK", problems)
    elif _first(env, "OMPI_COMM_WORLD_RANK"):
        kind = "openmpi"
        rank = _int(env, "OMPI_COMM_WORLD_RANK", problems)
        world = _int(env, "OMPI_COMM_WORLD_SIZE", problems, lo=1)
        local_rank = _int(env, "OMPI_COMM_WORLD_LOCAL_RANK", problems)
        local_world = _int(env, "OMPI_COMM_WORLD_LOCAL_SIZE", problems, lo=1)
        node_rank = _int(env, "OMPI_COMM_WORLD_NODE_RANK", problems)
        nnodes = _int(env, "NNODES", problems, lo=1)
        if nnodes is None and world and local_world and world % local_world == 0:
            nnodes = world // local_world
    elif _first(env, "SLURM_PROCID") and _first(env, "SLURM_NTASKS", "SLURM_NPROCS"):
        kind = "slurm"
        rank = _int(env, "SLURM_PROCID", problems)
        world = _int(env, "SLURM_NTASKS", problems, lo=1) or _int(env, "SLURM_NPROCS", problems, lo=1)
        local_rank = _int(env, "SLURM_LOCALID", problems)
        local_world = _slurm_per_node(env, problems)
        nnodes = _int(env, "SLURM_NNODES", problems, lo=1) or _int(env, "SLURM_JOB_NUM_NODES", problems, lo=1)
        node_rank = _int(env, "SLURM_NODEID", problems)
    elif _first(env, "NNODES", "NODE_RANK", "MASTER_ADDR"):
        kind = "env"
        nnodes = _int(env, "NNODES", problems, lo=1)
        node_rank = _int(env, "NODE_RANK", problems)
        local_world = _int(env, "NPROC_PER_NODE", problems, lo=1)
        world = _int(env, "WORLD_SIZE", problems, lo=1)
        rank = _int(env, "RANK", problems)
        local_rank = _int(env, "LOCAL_RANK", problems)
    else:  # not a job; still, a malformed variable that is set is a problem (a job would trip on it)
        for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "NPROC_PER_NODE"):
            _int(env, name, problems, lo=0 if "RANK" in name else 1)
        return LauncherInfo(kind="none", master_port=_int(env, "MASTER_PORT", problems, 1, 65535),
                            problems=tuple(problems))

    # (kind "env" already read NPROC_PER_NODE as local_world: read it once, report it once)
    nproc = local_world if kind == "env" else _int(env, "NPROC_PER_NODE", problems, lo=1)
    if kind != "env" and nproc is not None and local_world is not None and nproc != local_world:
        problems.append(f"NPROC_PER_NODE={nproc} != {kind}'s processes per node ({local_world})")
    nproc = nproc or local_world
    master_addr = env.get("MASTER_ADDR") or None
    master_port = _int(env, "MASTER_PORT", problems, lo=1, hi=65535)

    # Coherence: the checks a launch script most often gets wrong.
    if nnodes is not None and node_rank is not None and node_rank >= nnodes:
        problems.append(f"NODE_RANK={node_rank} must be < NNODES={nnodes}")
    if world is not None and rank is not None and rank >= world:
        problems.append(f"RANK={rank} must be < WORLD_SIZE={world}")
    if local_world is not None and local_rank is not None and local_rank >= local_world:
        problems.append(f"LOCAL_RANK={local_rank} must be < LOCAL_WORLD_SIZE={local_world}")
    if world is not None and nnodes is not None and nproc is not None and world != nnodes * nproc:
        problems.append(
            f"WORLD_SIZE={world} != NNODES({nnodes}) * NPROC_PER_NODE({nproc}) = {nnodes * nproc}"
        )
    if kind in ("torchrun", "env") and (world or nnodes or 1) > 1 and not master_addr:
        problems.append("MASTER_ADDR is not set but the job has more than one process")

    return LauncherInfo(
        kind=kind,
        master_addr=master_addr,
        master_port=master_port,
        world_size=world,
        rank=rank,
        local_rank=local_rank,
        local_world_size=local_world,
        nnodes=nnodes,
        node_rank=node_rank,
        nproc_per_node=nproc,
        job_id=env.get("SLURM_JOB_ID") or env.get("TORCHELASTIC_RUN_ID") or None,
        nodelist=env.get("SLURM_JOB_NODELIST") or None,
        problems=tuple(problems),
    )
