"""The launcher contract: torchrun, Kubernetes, Slurm, MPI (OpenMPI, MPICH/Hydra, PMIx) and plain
variables, read in one place from one table.

Every command that needs to know "who am I in this job" reads a :class:`LauncherInfo` built
by :func:`parse_launcher` from an environment mapping. :data:`LAUNCHERS` lists each launcher
kind once: how it is recognised, and for every quantity (node rank, node count, rendezvous
address and port, ranks) the variables that give it, in precedence order, and which of them
are twins (two names a launcher sets for one value, e.g. ``MASTER_ADDR`` and
``PET_MASTER_ADDR`` in a PyTorchJob). What was read is recorded with the variable it came
from (:attr:`LauncherInfo.sources`), so every message names the variable that was used.

Values out of range are not exceptions: they are collected in ``problems`` so that preflight
can report them as findings (a broken launch script is exactly what preflight is for); twins
that disagree are ``warnings``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from llmdiag.vocab import LauncherKind

DEFAULT_MASTER_PORT = 29500

#: the quantities a launcher gives, as LauncherInfo fields
FIELDS = ("nnodes", "node_rank", "nproc_per_node", "rank", "world_size", "local_rank", "local_world_size",
          "master_addr", "master_port", "nodelist", "job_id")
_TEXT = {"master_addr", "nodelist", "job_id"}
_SIZES = {"world_size", "local_world_size", "nnodes", "nproc_per_node"}
#: markers of a Slurm step started by srun (the batch script and an salloc shell have none)
_SRUN_STEP = ("SLURM_STEP_ID", "SLURM_STEPID", "SLURM_STEP_NUM_TASKS", "SLURM_STEP_NUM_NODES", "SLURM_STEP_NODELIST")
_SLURM_NODELIST = ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST")


@dataclasses.dataclass(frozen=True)
class Launcher:
    """One launcher kind: how it is recognised and where each quantity comes from.

    ``when``: every group needs one of its variables set; ``unless``: none of these may be set.
    ``fields``: quantity → variables in precedence order (the first one set wins).
    ``twins``: pairs of variables that name one value; both set and different is a warning.
    ``derive_nodes``: node count = world size / processes per node, node rank = rank / per node
    when no variable gives them (MPI, Slurm: one rank per process, not per node).
    ``per_pod``: one process per pod; world size and rank are the job's, from node x per node.
    """

    name: str
    kind: LauncherKind
    when: tuple[tuple[str, ...], ...]
    fields: Mapping[str, tuple[str, ...]]
    unless: tuple[str, ...] = ()
    twins: tuple[tuple[str, str], ...] = ()
    derive_nodes: bool = False
    per_pod: bool = False
    #: what to tell a user whose node rank is missing (instead of "set VARIABLE")
    rank_hint: str = ""
    #: what to tell a user whose rendezvous host is missing
    addr_hint: str = "pass --master-addr or set MASTER_ADDR"

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", LauncherKind(self.kind))  # a misspelt kind fails at import

    def matches(self, env: Mapping[str, str]) -> bool:
        return all(_first(env, *group) for group in self.when) and not _first(env, *self.unless)

    def variables(self) -> tuple[str, ...]:
        """Every variable this launcher reads, detection first (for "what was found")."""
        names = [n for group in self.when for n in group]
        for field in FIELDS:
            names += self.fields.get(field, ())
        return tuple(dict.fromkeys(names))


_PET_TWINS = (("PET_NNODES", "NNODES"), ("PET_NODE_RANK", "NODE_RANK"), ("PET_NPROC_PER_NODE", "NPROC_PER_NODE"),
              ("PET_MASTER_ADDR", "MASTER_ADDR"), ("PET_MASTER_PORT", "MASTER_PORT"))
_MPI_ADDR = "set MASTER_ADDR=<the first host> for every rank"
#: what an MPI launcher leaves to the user's exports: the node layout and the rendezvous address
_MPI_USER = {"nnodes": ("NNODES",), "node_rank": ("NODE_RANK",), "nproc_per_node": ("NPROC_PER_NODE",),
             "master_addr": ("MASTER_ADDR",), "master_port": ("MASTER_PORT",)}

#: The launcher kinds, in detection order: torchrun first (under srun, mpirun or a PyTorchJob it
#: sets its workers' RANK / GROUP_RANK itself), then Kubernetes, MPI, Slurm, plain variables.
LAUNCHERS: tuple[Launcher, ...] = (
    Launcher(
        "torchrun", "torchrun", when=(("TORCHELASTIC_RUN_ID", "LOCAL_RANK"), ("RANK", "WORLD_SIZE")),
        # GROUP_RANK / GROUP_WORLD_SIZE are the rendezvous' answer (an elastic rendezvous assigns
        # them); NNODES / NODE_RANK / PET_* are what the script or the operator asked for.
        fields={"rank": ("RANK",), "world_size": ("WORLD_SIZE",), "local_rank": ("LOCAL_RANK",),
                "local_world_size": ("LOCAL_WORLD_SIZE",),
                "nnodes": ("GROUP_WORLD_SIZE", "NNODES", "PET_NNODES"),
                "node_rank": ("GROUP_RANK", "NODE_RANK", "PET_NODE_RANK"),
                "nproc_per_node": ("NPROC_PER_NODE", "PET_NPROC_PER_NODE"),
                # the workers' store (torchrun sets these for its workers; PET_* are its rendezvous)
                "master_addr": ("MASTER_ADDR",), "master_port": ("MASTER_PORT",),
                "job_id": ("TORCHELASTIC_RUN_ID", "SLURM_JOB_ID")},
        twins=(("NNODES", "PET_NNODES"), ("NODE_RANK", "PET_NODE_RANK")), derive_nodes=True),
    Launcher(
        "PyTorchJob", "kubernetes", when=(("PET_NNODES", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_RDZV_ENDPOINT"),),
        # one pod per node; PET_* are torchrun's settings, and without torchrun RANK / WORLD_SIZE
        # are the pod's index and the number of pods
        fields={"nnodes": ("PET_NNODES", "NNODES", "WORLD_SIZE"), "node_rank": ("PET_NODE_RANK", "NODE_RANK", "RANK"),
                "nproc_per_node": ("PET_NPROC_PER_NODE", "NPROC_PER_NODE"),
                "master_addr": ("PET_MASTER_ADDR", "MASTER_ADDR", "PET_RDZV_ENDPOINT"),
                "master_port": ("PET_MASTER_PORT", "MASTER_PORT", "PET_RDZV_ENDPOINT")},
        twins=_PET_TWINS, per_pod=True,
        addr_hint="set MASTER_ADDR (or PET_MASTER_ADDR) to the first pod's service name"),
    Launcher(
        "LeaderWorkerSet", "kubernetes", when=(("LWS_LEADER_ADDRESS", "LWS_WORKER_INDEX"),),
        # the leader is worker 0 and the rendezvous host
        fields={"nnodes": ("LWS_GROUP_SIZE", "NNODES"), "node_rank": ("LWS_WORKER_INDEX", "NODE_RANK"),
                "nproc_per_node": ("NPROC_PER_NODE",), "master_addr": ("MASTER_ADDR", "LWS_LEADER_ADDRESS"),
                "master_port": ("MASTER_PORT",)},
        twins=(("LWS_GROUP_SIZE", "NNODES"), ("LWS_WORKER_INDEX", "NODE_RANK")),
        addr_hint="set MASTER_ADDR (or LWS_LEADER_ADDRESS) to the leader pod's address"),
    Launcher(
        "Indexed Job", "kubernetes", when=(("JOB_COMPLETION_INDEX",), ("NNODES", "MASTER_ADDR", "JOBSET_NAME")),
        # an Indexed Job (also inside a JobSet): the completion index is the node
        fields={"nnodes": ("NNODES",), "node_rank": ("JOB_COMPLETION_INDEX", "NODE_RANK"),
                "nproc_per_node": ("NPROC_PER_NODE",), "master_addr": ("MASTER_ADDR",), "master_port": ("MASTER_PORT",)},
        twins=(("JOB_COMPLETION_INDEX", "NODE_RANK"),),
        addr_hint="set MASTER_ADDR to the first pod's host name (<jobset>-<job>-0-0.<jobset>)"),
    Launcher(
        "pod", "kubernetes", when=(("RANK", "WORLD_SIZE"), ("KUBERNETES_SERVICE_HOST",)), unless=("NNODES",),
        # plain per-pod RANK / WORLD_SIZE / MASTER_ADDR, one pod per node
        fields={"nnodes": ("WORLD_SIZE",), "node_rank": ("RANK",), "nproc_per_node": ("NPROC_PER_NODE",),
                "master_addr": ("MASTER_ADDR",), "master_port": ("MASTER_PORT",)},
        per_pod=True, addr_hint="set MASTER_ADDR to the first pod's service name"),
    Launcher(
        "Open MPI", "openmpi", when=(("OMPI_COMM_WORLD_RANK",),),
        # (OMPI_COMM_WORLD_NODE_RANK is the rank among this node's processes, not the node's index)
        fields={"rank": ("OMPI_COMM_WORLD_RANK",), "world_size": ("OMPI_COMM_WORLD_SIZE",),
                "local_rank": ("OMPI_COMM_WORLD_LOCAL_RANK",), "local_world_size": ("OMPI_COMM_WORLD_LOCAL_SIZE",),
                **_MPI_USER},
        derive_nodes=True,
        addr_hint="mpirun gives no rendezvous address: export MASTER_ADDR=<the first host> to every rank "
                  "(mpirun -x MASTER_ADDR=HOST ...)"),
    Launcher(
        "MPICH/Hydra", "mpich", when=(("PMI_RANK",),), unless=("SLURM_PROCID",),
        fields={"rank": ("PMI_RANK",), "world_size": ("PMI_SIZE", "WORLD_SIZE"), "local_rank": ("MPI_LOCALRANKID",),
                "local_world_size": ("MPI_LOCALNRANKS",), **_MPI_USER},
        derive_nodes=True,
        addr_hint="mpiexec gives no rendezvous address: " + _MPI_ADDR + " (mpiexec -genv MASTER_ADDR HOST ...)"),
    Launcher(
        "PMIx", "pmix", when=(("PMIX_RANK",),), unless=("SLURM_PROCID",),
        fields={"rank": ("PMIX_RANK",), "world_size": ("PMI_SIZE", "WORLD_SIZE"), "local_rank": ("PMIX_LOCAL_RANK",),
                "local_world_size": ("PMIX_LOCAL_SIZE",), **_MPI_USER},
        derive_nodes=True, addr_hint="PMIx gives no rendezvous address: " + _MPI_ADDR),
    Launcher(
        "srun", "slurm", when=(("SLURM_PROCID",), ("SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS")),
        # the step's own layout (srun inside an allocation may use part of it), else the job's
        fields={"rank": ("SLURM_PROCID",), "world_size": ("SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS"),
                "local_rank": ("SLURM_LOCALID",),
                "local_world_size": ("SLURM_STEP_TASKS_PER_NODE", "SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE"),
                "nnodes": ("SLURM_STEP_NUM_NODES", "SLURM_NNODES", "SLURM_JOB_NUM_NODES"),
                "node_rank": ("SLURM_NODEID",), "nproc_per_node": ("NPROC_PER_NODE",),
                "master_addr": ("MASTER_ADDR",), "master_port": ("MASTER_PORT",),
                "nodelist": _SLURM_NODELIST, "job_id": ("SLURM_JOB_ID", "SLURM_JOBID")},
        # (no twins: inside a step srun may set the older names to the step's values, not the job's)
        derive_nodes=True),
    Launcher(
        # the batch script or an salloc shell: the allocation is known, this process is no task of it
        "Slurm allocation", "slurm", when=(("SLURM_JOB_NUM_NODES", "SLURM_NNODES"),), unless=_SRUN_STEP,
        fields={"nnodes": ("SLURM_JOB_NUM_NODES", "SLURM_NNODES", "NNODES"), "node_rank": ("NODE_RANK",),
                "nproc_per_node": ("NPROC_PER_NODE",), "master_addr": ("MASTER_ADDR",), "master_port": ("MASTER_PORT",),
                "nodelist": ("SLURM_JOB_NODELIST", "SLURM_NODELIST"), "job_id": ("SLURM_JOB_ID", "SLURM_JOBID")},
        twins=(("SLURM_JOB_NUM_NODES", "SLURM_NNODES"), ("SLURM_JOB_NODELIST", "SLURM_NODELIST")),
        rank_hint="this is the batch script or an salloc shell, not an srun task (SLURM_PROCID is not set): "
                  "run it on every node with `srun --ntasks-per-node=1 llmdiag preflight`"),
    Launcher(
        "plain variables", "env", when=(("NNODES", "NODE_RANK", "MASTER_ADDR"),),
        fields={"rank": ("RANK",), "world_size": ("WORLD_SIZE",), "local_rank": ("LOCAL_RANK",),
                "local_world_size": ("NPROC_PER_NODE", "LOCAL_WORLD_SIZE"), "nnodes": ("NNODES",),
                "node_rank": ("NODE_RANK",), "nproc_per_node": ("NPROC_PER_NODE",),
                "master_addr": ("MASTER_ADDR",), "master_port": ("MASTER_PORT",)},
        twins=(("NPROC_PER_NODE", "LOCAL_WORLD_SIZE"),)),
)
_BY_NAME = {spec.name: spec for spec in LAUNCHERS}


@dataclasses.dataclass(frozen=True)
class LauncherInfo:
    """Who this process is in the job, and where the rendezvous lives.

    ``kind`` is one of ``torchrun``, ``kubernetes`` (PyTorchJob, LeaderWorkerSet, Indexed
    Job/JobSet, plain per-pod variables), ``openmpi``, ``mpich`` (Hydra's PMI_*), ``pmix``,
    ``slurm``, ``env`` (plain NNODES/NODE_RANK variables) or ``none`` (not part of a job);
    ``launcher`` names the table entry (:data:`LAUNCHERS`) that matched. ``sources`` maps each
    field to the variable its value came from; ``found`` is every variable of that launcher
    that is set, with its value.
    """

    kind: LauncherKind = LauncherKind.NONE
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
    launcher: str = "none"
    sources: Mapping[str, str] = dataclasses.field(default_factory=dict)
    found: Mapping[str, str] = dataclasses.field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    @property
    def distributed(self) -> bool:
        """True when this process is one of several (a real multi-process job)."""
        return self.kind != LauncherKind.NONE and (self.world_size or 1) > 1

    @property
    def spec(self) -> Launcher | None:
        return _BY_NAME.get(self.launcher)

    def var(self, field: str, default: str) -> str:
        """The variable ``field`` was read from, else ``default`` (a derived or defaulted value)."""
        return self.sources.get(field, default)

    def variables_for(self, field: str) -> tuple[str, ...]:
        """The variables this launcher reads ``field`` from, in precedence order."""
        spec = self.spec
        return spec.fields.get(field, ()) if spec else ()

    def found_text(self) -> str:
        """``found A=1, B=x`` (what was set), for a one-line message."""
        if not self.found:
            return "found no launcher variables"
        return "found " + ", ".join(f"{k}={v}" for k, v in self.found.items())

    def to_dict(self) -> dict:
        return dataclasses.asdict(self) | {"problems": list(self.problems), "warnings": list(self.warnings),
                                           "sources": dict(self.sources), "found": dict(self.found)}


def _first(env: Mapping[str, str], *names: str) -> str | None:
    for n in names:
        v = env.get(n)
        if v not in (None, ""):
            return n
    return None


def _int(raw: str, name: str, problems: list[str], lo: int = 0, hi: int | None = None) -> int | None:
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


def _tasks_per_node(raw: str, name: str, problems: list[str]) -> int | None:
    """Slurm's tasks per node ("8", "8(x2)"); a heterogeneous layout ("8(x2),4") has no single count."""
    groups = {g.split("(")[0] for g in raw.split(",")}
    if len(groups) != 1:
        return None
    value = groups.pop()
    if not value.isdigit() or int(value) < 1:
        problems.append(f"{name}={raw!r} is not a task count")
        return None
    return int(value)


def _nnodes_spec(raw: str, name: str, problems: list[str]) -> int | None:
    """``PET_NNODES`` / torchrun's ``--nnodes`` is ``N`` or an elastic ``MIN:MAX``: MAX nodes when all come."""
    if ":" in raw:
        lo, _, hi = raw.partition(":")
        if lo.strip().isdigit() and hi.strip().isdigit() and 1 <= int(lo) <= int(hi):
            return int(hi)
        problems.append(f"{name}={raw!r} is not N or MIN:MAX")
        return None
    return _int(raw, name, problems, lo=1)


def _endpoint(raw: str, name: str, field: str, problems: list[str]) -> str | int | None:
    """``HOST[:PORT]`` (torchrun's rendezvous endpoint): the host, or the port when there is one."""
    host, sep, port = raw.strip().rpartition(":")
    if not sep or "]" in port:  # no port (or a bare IPv6 literal)
        host, port = raw.strip(), ""
    host = host.strip("[]")
    if field == "master_addr":
        return host or None
    return _int(port, name, problems, lo=1, hi=65535) if port else None


def read_var(env: Mapping[str, str], name: str, field: str, problems: list[str]):
    """The value of variable ``name`` read as the quantity ``field``, None when unset or bad."""
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return None
    if name.endswith("RDZV_ENDPOINT"):
        return _endpoint(raw, name, field, problems)
    if field in _TEXT:
        return raw.strip()
    if name.endswith("TASKS_PER_NODE"):
        return _tasks_per_node(raw.strip(), name, problems)
    if name in ("PET_NNODES",):
        return _nnodes_spec(raw, name, problems)
    if field == "master_port":
        return _int(raw, name, problems, lo=1, hi=65535)
    return _int(raw, name, problems, lo=1 if field in _SIZES else 0)


def detect(env: Mapping[str, str]) -> Launcher | None:
    """The first launcher of :data:`LAUNCHERS` whose variables are set, None outside a job."""
    return next((spec for spec in LAUNCHERS if spec.matches(env)), None)


def parse_launcher(env: Mapping[str, str]) -> LauncherInfo:
    """Read the launcher variables from ``env`` (:data:`LAUNCHERS`) with range and coherence checks."""
    problems: list[str] = []
    spec = detect(env)
    if spec is None:  # not a job; still, a malformed variable that is set is a problem (a job would trip on it)
        for name, field in (("RANK", "rank"), ("LOCAL_RANK", "local_rank"), ("WORLD_SIZE", "world_size"),
                            ("LOCAL_WORLD_SIZE", "local_world_size"), ("NPROC_PER_NODE", "nproc_per_node")):
            read_var(env, name, field, problems)
        port = read_var(env, "MASTER_PORT", "master_port", problems)
        return LauncherInfo(kind=LauncherKind.NONE, master_port=port, problems=tuple(problems),
                            sources={"master_port": "MASTER_PORT"} if port else {})

    values: dict[str, object] = {}
    sources: dict[str, str] = {}
    parsed: dict[str, object] = {}  # each variable read once, its problem reported once

    def read(name: str, field: str):
        key = f"{name}/{field}" if name.endswith("RDZV_ENDPOINT") else name
        if key not in parsed:
            parsed[key] = read_var(env, name, field, problems)
        return parsed[key]

    for field in FIELDS:
        for name in spec.fields.get(field, ()):
            if (value := read(name, field)) is not None:
                values[field], sources[field] = value, name
                break

    warnings = []
    for a, b in spec.twins:
        field = next(f for f in FIELDS if a in spec.fields.get(f, ()))
        va, vb = read(a, field), read(b, field)
        if va is not None and vb is not None and va != vb:
            warnings.append(f"{a}={env[a].strip()} but {b}={env[b].strip()} "
                            f"(using {sources.get(field, a)})")

    get = values.get
    rank, world, local_rank = get("rank"), get("world_size"), get("local_rank")
    local_world, nnodes, node_rank = get("local_world_size"), get("nnodes"), get("node_rank")
    nproc = get("nproc_per_node")
    if spec.per_pod:
        local_world = nproc
        world = nnodes * nproc if nnodes and nproc else nnodes
        rank = node_rank * nproc if node_rank is not None and nproc else node_rank
        sources.pop("world_size", None)
        sources.pop("rank", None)
    if spec.derive_nodes and local_world:
        if nnodes is None and world and world % local_world == 0:
            nnodes = world // local_world
        if node_rank is None and rank is not None:
            node_rank = rank // local_world
    if nproc is not None and local_world is not None and nproc != local_world and not spec.per_pod:
        if sources.get("local_world_size") != sources.get("nproc_per_node"):
            problems.append(f"{sources['nproc_per_node']}={nproc} != {spec.kind}'s processes per node ({local_world})")
    nproc = nproc or local_world

    # Coherence: the checks a launch script most often gets wrong, named by the variables used.
    var = sources.get
    if nnodes is not None and node_rank is not None and node_rank >= nnodes:
        problems.append(f"{var('node_rank', 'NODE_RANK')}={node_rank} must be < {var('nnodes', 'NNODES')}={nnodes}")
    if world is not None and rank is not None and rank >= world:
        problems.append(f"{var('rank', 'RANK')}={rank} must be < {var('world_size', 'WORLD_SIZE')}={world}")
    if local_world is not None and local_rank is not None and local_rank >= local_world:
        problems.append(f"{var('local_rank', 'LOCAL_RANK')}={local_rank} must be < "
                        f"{var('local_world_size', 'LOCAL_WORLD_SIZE')}={local_world}")
    if world is not None and nnodes is not None and nproc is not None and world != nnodes * nproc:
        problems.append(f"{var('world_size', 'WORLD_SIZE')}={world} != {var('nnodes', 'NNODES')}({nnodes}) * "
                        f"{var('nproc_per_node', 'NPROC_PER_NODE')}({nproc}) = {nnodes * nproc}")
    master_addr = get("master_addr")
    if spec.kind in (LauncherKind.TORCHRUN, LauncherKind.ENV, LauncherKind.KUBERNETES) and (world or nnodes or 1) > 1 and not master_addr:
        problems.append("MASTER_ADDR is not set but the job has more than one process")

    found = {n: env[n].strip() for n in spec.variables() if _first(env, n)}
    return LauncherInfo(
        kind=spec.kind, launcher=spec.name, master_addr=master_addr, master_port=get("master_port"),
        world_size=world, rank=rank, local_rank=local_rank, local_world_size=local_world, nnodes=nnodes,
        node_rank=node_rank, nproc_per_node=nproc, job_id=get("job_id"),
        # Slurm's node list belongs to the allocation, whichever launcher runs inside it (torchrun or
        # mpirun under srun): it names the hosts, and so the nodes that never reported.
        nodelist=get("nodelist") or next((env[n].strip() for n in _SLURM_NODELIST if _first(env, n)), None),
        problems=tuple(problems), sources=sources, found=found, warnings=tuple(warnings),
    )
