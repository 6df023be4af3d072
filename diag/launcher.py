"""The launcher contract: torchrun, Kubernetes, Slurm, MPI (OpenMPI, MPICH/Hydra, PMIx) and plain
variables, parsed in one place.

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

    ``kind`` is one of ``torchrun``, ``kubernetes`` (PyTorchJob, LeaderWorkerSet, Indexed
    Job/JobSet, plain per-pod variables), ``openmpi``, ``mpich`` (Hydra's PMI_*), ``pmix``,
    ``slurm``, ``env`` (plain NNODES/NODE_RANK variables) or ``none`` (not part of a job).
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
    for name in ("SLURM_STEP_TASKS_PER_NODE", "SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE"):
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


def _nnodes_spec(env: Mapping[str, str], name: str, problems: list[str]) -> int | None:
    """``PET_NNODES`` is ``N`` or an elastic ``MIN:MAX``: the job runs with MAX nodes when all come."""
    raw = (env.get(name) or "").strip()
    if ":" in raw:
        lo, _, hi = raw.partition(":")
        if lo.strip().isdigit() and hi.strip().isdigit() and 1 <= int(lo) <= int(hi):
            return int(hi)
        problems.append(f"{name}={raw!r} is not N or MIN:MAX")
        return None
    return _int(env, name, problems, lo=1)


def parse_launcher(env: Mapping[str, str]) -> LauncherInfo:
    """Read the launcher variables from ``env`` with range and coherence checks.

    Precedence when several launchers' variables are present: torchrun's (``RANK`` /
    ``WORLD_SIZE`` / ``LOCAL_RANK``) win, because torchrun under srun or mpirun sets them
    for its workers; then Kubernetes (PyTorchJob ``PET_*``, LeaderWorkerSet ``LWS_*``,
    Indexed Job / JobSet ``JOB_COMPLETION_INDEX``), OpenMPI's, MPICH/Hydra and PMIx
    (``PMI_RANK``/``PMI_SIZE``, ``PMIX_RANK``), Slurm's (the step's, then the job's), then
    plain ``NNODES`` / ``NODE_RANK``.
    """
    problems: list[str] = []
    master_addr = env.get("MASTER_ADDR") or None
    nodelist = None
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
    elif _first(env, "PET_NNODES", "PET_NODE_RANK", "PET_MASTER_ADDR"):
        # Kubeflow PyTorchJob: one pod per node; PET_* are torchrun's settings, and without
        # torchrun RANK / WORLD_SIZE are the pod's index and the number of pods.
        kind = "kubernetes"
        nnodes = _nnodes_spec(env, "PET_NNODES", problems) or _int(env, "WORLD_SIZE", problems, lo=1)
        node_rank = _int(env, "PET_NODE_RANK", problems)
        if node_rank is None:
            node_rank = _int(env, "RANK", problems)
        local_world = _int(env, "PET_NPROC_PER_NODE", problems, lo=1)
        world = nnodes * local_world if nnodes and local_world else nnodes
        rank = node_rank * local_world if node_rank is not None and local_world else node_rank
        local_rank = None
        master_addr = env.get("PET_MASTER_ADDR") or master_addr
    elif _first(env, "LWS_LEADER_ADDRESS", "LWS_WORKER_INDEX"):
        kind = "kubernetes"  # LeaderWorkerSet: the leader is worker 0 and the rendezvous host
        nnodes = _int(env, "LWS_GROUP_SIZE", problems, lo=1) or _int(env, "NNODES", problems, lo=1)
        node_rank = _int(env, "LWS_WORKER_INDEX", problems)
        world = rank = local_rank = local_world = None
        master_addr = master_addr or env.get("LWS_LEADER_ADDRESS") or None
    elif _first(env, "JOB_COMPLETION_INDEX") and _first(env, "NNODES", "MASTER_ADDR", "JOBSET_NAME"):
        kind = "kubernetes"  # an Indexed Job (also inside a JobSet): the completion index is the node
        nnodes = _int(env, "NNODES", problems, lo=1)
        node_rank = _int(env, "JOB_COMPLETION_INDEX", problems)
        world = rank = local_rank = local_world = None
    elif _first(env, "RANK", "WORLD_SIZE") and _first(env, "KUBERNETES_SERVICE_HOST") and not _first(env, "NNODES"):
        kind = "kubernetes"  # plain per-pod RANK / WORLD_SIZE / MASTER_ADDR, one pod per node
        nnodes = _int(env, "WORLD_SIZE", problems, lo=1)
        node_rank = _int(env, "RANK", problems)
        world, rank, local_rank, local_world = nnodes, node_rank, None, None
    elif _first(env, "OMPI_COMM_WORLD_RANK"):
        kind = "openmpi"
        rank = _int(env, "OMPI_COMM_WORLD_RANK", problems)
        world = _int(env, "OMPI_COMM_WORLD_SIZE", problems, lo=1)
        local_rank = _int(env, "OMPI_COMM_WORLD_LOCAL_RANK", problems)
        local_world = _int(env, "OMPI_COMM_WORLD_LOCAL_SIZE", problems, lo=1)
        # (OMPI_COMM_WORLD_NODE_RANK is the rank among this node's processes, not the node's index)
        node_rank = _int(env, "NODE_RANK", problems)
        nnodes = _int(env, "NNODES", problems, lo=1)
        if nnodes is None and world and local_world and world % local_world == 0:
            nnodes = world // local_world
    elif _first(env, "PMI_RANK", "PMIX_RANK") and not _first(env, "SLURM_PROCID"):
        kind = "mpich" if _first(env, "PMI_RANK") else "pmix"
        rank = _int(env, "PMI_RANK", problems) if kind == "mpich" else _int(env, "PMIX_RANK", problems)
        world = _int(env, "PMI_SIZE", problems, lo=1) or _int(env, "WORLD_SIZE", problems, lo=1)
        local_rank = _int(env, "MPI_LOCALRANKID", problems) if _first(env, "MPI_LOCALRANKID") else _int(
            env, "PMIX_LOCAL_RANK", problems)
        local_world = _int(env, "MPI_LOCALNRANKS", problems, lo=1) if _first(env, "MPI_LOCALNRANKS") else _int(
            env, "PMIX_LOCAL_SIZE", problems, lo=1)
        node_rank = _int(env, "NODE_RANK", problems)
        nnodes = _int(env, "NNODES", problems, lo=1)
        if nnodes is None and world and local_world and world % local_world == 0:
            nnodes = world // local_world
    elif _first(env, "SLURM_PROCID") and _first(env, "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS"):
        kind = "slurm"
        # the step's own layout (srun inside an allocation may use part of it), else the job's
        rank = _int(env, "SLURM_PROCID", problems)
        world = (_int(env, "SLURM_STEP_NUM_TASKS", problems, lo=1) or _int(env, "SLURM_NTASKS", problems, lo=1)
                 or _int(env, "SLURM_NPROCS", problems, lo=1))
        local_rank = _int(env, "SLURM_LOCALID", problems)
        local_world = _slurm_per_node(env, problems)
        nnodes = (_int(env, "SLURM_STEP_NUM_NODES", problems, lo=1) or _int(env, "SLURM_NNODES", problems, lo=1)
                  or _int(env, "SLURM_JOB_NUM_NODES", problems, lo=1))
        node_rank = _int(env, "SLURM_NODEID", problems)
        nodelist = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST") or None
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
    port_var = "PET_MASTER_PORT" if kind == "kubernetes" and env.get("PET_MASTER_PORT") else "MASTER_PORT"
    master_port = _int(env, port_var, problems, lo=1, hi=65535)

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
    if kind in ("torchrun", "env", "kubernetes") and (world or nnodes or 1) > 1 and not master_addr:
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
        nodelist=nodelist,
        problems=tuple(problems),
    )
