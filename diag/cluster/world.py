"""Who this agent is in the cluster and where the rendezvous lives, from flags or a launcher.

Precedence (the same as everywhere): flags (``--nnodes``, ``--node-rank``, ``--master-addr``,
``--master-port``) override the launcher's variables (torchrun, Kubernetes, Slurm, MPI, plain
``NNODES``/``NODE_RANK``/``MASTER_ADDR``/``MASTER_PORT``), which override the config file's
``[cluster]`` section. One agent runs per node: when a launcher starts several processes per
node, only local rank 0 is the agent and the others exit at once.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping

from llmdiag.errors import UsageError
from llmdiag.launcher import LauncherInfo


class RendezvousUnknown(UsageError):
    """A multi-node job whose rendezvous cannot be known: a usage error, never a single-node run."""


@dataclasses.dataclass(frozen=True)
class World:
    """One agent's place: node ``node_rank`` of ``nnodes``; rank 0 hosts the store."""

    node_rank: int
    nnodes: int
    master_addr: str
    master_port: int
    launcher: str = "env"
    #: torchrun's agent already hosts a store on MASTER_PORT: connect to it, never host one
    agent_store: bool = False
    #: expected node names by node rank (hostfile entries, Slurm's node list) when known
    hosts: tuple[str, ...] = ()
    is_agent: bool = True

    @property
    def is_root(self) -> bool:
        return self.node_rank == 0

    def expected_name(self, node_rank: int) -> str:
        """How a missing node is named: its hostfile/Slurm host when known, else its rank."""
        return expected_name(node_rank, self.hosts)

    def to_dict(self) -> dict:
        return {"node_rank": self.node_rank, "nnodes": self.nnodes, "master_addr": self.master_addr,
                "master_port": self.master_port, "launcher": self.launcher, "hosts": list(self.hosts)}


def expected_name(node_rank: int, hosts: tuple[str, ...] | list[str] = (), host: str | None = None) -> str:
    """``node rank 2 (gpu03)``: a node known only by its place, with its host when known."""
    host = host or (hosts[node_rank] if 0 <= node_rank < len(hosts) else None)
    return f"node rank {node_rank} ({host})" if host else f"node rank {node_rank}"


_BRACKET = re.compile(r"^(.*?)\[([^\]]+)\](.*)$")


def expand_nodelist(text: str) -> list[str]:
    """Slurm's compressed host list (``gpu[01-03,07],login1``) → host names, in order."""
    parts, depth, cur = [], 0, ""
    for ch in text.strip():
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += ch == "["
        depth -= ch == "]"
        cur += ch
    if cur:
        parts.append(cur)
    out: list[str] = []
    for part in parts:
        out.extend(_expand_one(part.strip()))
    return [h for h in out if h]


def _expand_one(part: str) -> list[str]:
    m = _BRACKET.match(part)
    if not m:
        return [part]
    head, body, tail = m.groups()
    names = []
    for piece in body.split(","):
        if "-" in piece:
            lo, hi = piece.split("-", 1)
            width = len(lo)
            if not (lo.isdigit() and hi.isdigit()) or int(hi) < int(lo):
                raise UsageError(f"cannot expand node list {part!r}")
            names += [f"{head}{i:0{width}d}" for i in range(int(lo), int(hi) + 1)]
        else:
            names.append(head + piece)
    out = []
    for n in names:
        out.extend(_expand_one(n + tail) if "[" in tail else [n + tail])
    return out


def resolve_world(launcher: LauncherInfo, env: Mapping[str, str], config, *, nnodes: int | None = None,
                  node_rank: int | None = None, master_addr: str | None = None,
                  master_port: int | None = None, hosts: tuple[str, ...] = ()) -> World | None:
    """The agent's World, or None when this is a single-node run (no cluster to coordinate).

    A multi-node job whose node count, node rank or rendezvous host is unknown is a one-line
    :class:`RendezvousUnknown` naming the variables that would give it and those that were found.
    """
    kind = launcher.kind
    n = nnodes or launcher.nnodes or config.get("cluster", "nodes")
    rank = node_rank if node_rank is not None else launcher.node_rank
    local_rank = launcher.local_rank
    if rank is None and kind in ("openmpi", "mpich", "pmix", "slurm") and launcher.rank is not None:
        per = launcher.local_world_size or 1
        rank = launcher.rank // per
    rank_src = "--node-rank" if node_rank is not None else (
        launcher.sources.get("node_rank") or f"{launcher.var('rank', 'RANK')} / processes per node")
    if not n and kind in ("openmpi", "mpich", "pmix") and (launcher.world_size or 1) > 1:
        raise RendezvousUnknown(
            f"{_who(launcher)}: {launcher.var('world_size', 'WORLD_SIZE')}={launcher.world_size} ranks but the "
            f"number of nodes is unknown (no processes-per-node variable): "
            f"{_set(launcher, 'nnodes', 'NNODES', '--nnodes')}; {launcher.found_text()}")
    if not n and rank is not None and (kind == "kubernetes" or rank > 0):
        raise _unknown(launcher, "nnodes")(f"{_who(launcher)}: this node's index is known ({rank_src}={rank}) but the number "
                                f"of nodes is unknown: {_set(launcher, 'nnodes', 'NNODES', '--nnodes')}; "
                                f"{launcher.found_text()}")
    if not n or n <= 1:
        return None
    n_src = "--nnodes" if nnodes else launcher.var("nnodes", "[cluster] nodes")
    if rank is None:
        how = (launcher.spec.rank_hint if launcher.spec else "") or _set(launcher, "node_rank", "NODE_RANK",
                                                                         "--node-rank")
        raise _unknown(launcher, "node_rank")(f"{_who(launcher)}: {n} nodes expected ({n_src}={n}) but this node's index is "
                                f"unknown: {how}; {launcher.found_text()}")
    if not 0 <= rank < n:
        raise UsageError(f"{rank_src}={rank} must be in 0..{n - 1} ({n_src}={n})")
    slurm_hosts: tuple[str, ...] = ()
    if launcher.nodelist:
        try:
            slurm_hosts = tuple(expand_nodelist(launcher.nodelist))
        except UsageError:
            if kind == "slurm":
                raise
            slurm_hosts = ()  # another launcher inside an allocation: the list only names hosts
    addr = master_addr or launcher.master_addr or config.get("cluster", "master_addr") or (
        slurm_hosts[0] if slurm_hosts and kind == "slurm" else None)
    if not addr:
        how = launcher.spec.addr_hint if launcher.spec else "pass --master-addr or set MASTER_ADDR"
        raise RendezvousUnknown(f"{n} nodes but the rendezvous host is unknown: {how}; {launcher.found_text()}")
    port = master_port or launcher.master_port or config.get("cluster", "master_port")
    agent_store = kind == "torchrun" and str(env.get("TORCHELASTIC_USE_AGENT_STORE", "")).lower() == "true"
    return World(node_rank=rank, nnodes=n, master_addr=addr, master_port=int(port), launcher=kind,
                 agent_store=agent_store,
                 # a list of another length (an allocation larger than the job) cannot name nodes by rank
                 hosts=tuple(hosts) or (slurm_hosts if len(slurm_hosts) == n else ()),
                 is_agent=local_rank in (None, 0))


def _unknown(launcher: LauncherInfo, field: str) -> type[UsageError]:
    """A value no variable gives is a rendezvous that cannot be known; one whose variable is set
    but malformed is a launcher problem the launcher probe reports on this node (a UsageError)."""
    malformed = any(name in launcher.found for name in launcher.variables_for(field))
    return UsageError if malformed else RendezvousUnknown


def _who(launcher: LauncherInfo) -> str:
    return launcher.launcher if launcher.kind != "none" else "no launcher"


def _set(launcher: LauncherInfo, field: str, plain: str, flag: str) -> str:
    """``set A or B (or pass --flag)``: the variables this launcher reads ``field`` from."""
    names = launcher.variables_for(field) or (plain,)
    return f"set {' or '.join(names)} (or pass {flag})"
