"""Launcher variables checked for coherence, before the job hangs on a wrong rendezvous.

Parsing lives in :mod:`llmdiag.launcher` (one place); this probe turns its problems into
results and adds what parsing cannot know: whether ``MASTER_ADDR`` resolves (in a thread,
bounded, so a dead resolver cannot stall preflight), whether node 0 is the master, and whether
the launcher agrees with the config file's plan.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterable

from llmdiag.context import Context
from llmdiag.probe import BaseProbe
from llmdiag.result import Result

RESOLVE_TIMEOUT_S = 3.0


def resolve(host: str, timeout: float) -> tuple[list[str] | None, str | None]:
    """(addresses, error). Runs getaddrinfo in a daemon thread so a hung resolver is bounded."""
    box: dict[str, object] = {}

    def work() -> None:
        try:
            infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
            box["addrs"] = sorted({i[4][0] for i in infos})
        except (OSError, UnicodeError) as exc:
            box["error"] = str(exc)

    t = threading.Thread(target=work, name="resolve-master", daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive():
        return None, f"no answer within {timeout:g} s"
    return box.get("addrs"), box.get("error")  # type: ignore[return-value]


def _local_addresses() -> set[str]:
    import psutil  # noqa: PLC0415

    return {a.address.split("%")[0] for addrs in psutil.net_if_addrs().values() for a in addrs}


class LauncherProbe(BaseProbe):
    name = "launcher"
    description = "torchrun / Slurm / MPI variables: ranks, world size, MASTER_ADDR/PORT, agreement with the config"
    timeout_s = 10.0

    def run(self, ctx: Context) -> Iterable[Result]:
        info = ctx.launcher
        data = {"launcher": info.kind, "nnodes": info.nnodes, "node_rank": info.node_rank,
                "nproc_per_node": info.nproc_per_node, "world_size": info.world_size}
        if info.kind == "none" and info.problems:
            return [self.check_variables(ctx, data)]
        if info.kind == "none":
            return [self.ok(ctx, "variables", "not launched as part of a job (no launcher variables): single-node run",
                            data=data)]
        results = [self.check_variables(ctx, data)]
        if info.warnings:
            results.append(self.check_twins(ctx))
        if info.master_addr:
            results.append(self.check_master_addr(ctx))
        results.append(self.check_config(ctx))
        return results

    def check_variables(self, ctx: Context, data: dict) -> Result:
        info = ctx.launcher
        if info.problems:
            return self.fail(
                ctx, "variables", (f"{info.kind} variables are inconsistent: " if info.kind != "none" else
                                   "launcher variables are malformed: ") + "; ".join(info.problems),
                evidence=[("problem", p, "consistent launcher variables", "") for p in info.problems],
                data=data, runbook="launcher-variables",
                remediation="Fix the launch script so NODE_RANK < NNODES, WORLD_SIZE = NNODES x NPROC_PER_NODE and "
                            "MASTER_PORT is 1-65535 (print them with `env | grep -E 'RANK|WORLD|MASTER|NNODES|NPROC'`).",
            )
        shape = f"node {info.node_rank}/{info.nnodes}" if info.nnodes else "node ?"
        used = ", ".join(f"{label} {info.sources[f]}" for f, label in (
            ("node_rank", "node rank from"), ("nnodes", "nodes from"), ("master_addr", "master from"),
            ("master_port", "port from")) if f in info.sources)
        return self.ok(ctx, "variables",
                       f"{info.kind}: {shape}, {info.nproc_per_node or '?'} per node, world size {info.world_size or '?'}, "
                       f"master {info.master_addr or '-'}:{info.master_port or '-'}" + (f" ({used})" if used else ""),
                       evidence=[("world size", info.world_size, None, "ranks")],
                       data=data | {"sources": dict(info.sources)})

    def check_twins(self, ctx: Context) -> Result:
        """Two variables a launcher sets for one value (MASTER_ADDR / PET_MASTER_ADDR) disagree."""
        info = ctx.launcher
        return self.warn(
            ctx, "twins", f"{info.launcher} variables disagree: " + "; ".join(info.warnings),
            evidence=[("twin variables", w, "the same value", "") for w in info.warnings],
            data={"warnings": list(info.warnings), "sources": dict(info.sources)}, runbook="launcher-variables",
            remediation="Two names for one setting hold different values: processes that read the other name join "
                        "a different rendezvous or count a different job. Set both to the same value in the pod "
                        "spec / launch script.",
        )

    def check_master_addr(self, ctx: Context) -> Result:
        info = ctx.launcher
        host = info.master_addr or ""
        var = info.var("master_addr", "MASTER_ADDR")  # the variable the address came from
        addrs, err = resolve(host, ctx.deadline.bound(RESOLVE_TIMEOUT_S))
        if not addrs:
            return self.fail(
                ctx, "master-addr", f"{var}={host!r} does not resolve: {err}",
                evidence=[(var, host, "a resolvable host", "")], runbook="launcher-variables",
                remediation=f"Use an address every node can resolve (`getent hosts {host}`); in Slurm: "
                            "MASTER_ADDR=$(scontrol show hostnames $SLURM_JOB_NODELIST | head -n1).",
            )
        data = {"master_addrs": addrs}
        if info.node_rank == 0 and (info.nnodes or 1) > 1:
            local = _local_addresses()
            if not set(addrs) & local and not any(a.startswith("127.") or a == "::1" for a in addrs):
                return self.warn(
                    ctx, "master-addr", f"this is node 0 but {var}={host} ({', '.join(addrs)}) is not one of its addresses",
                    evidence=[(var, ", ".join(addrs), "an address of node 0", "")], data=data,
                    runbook="launcher-variables",
                    remediation="Node rank 0 hosts the rendezvous: set MASTER_ADDR to this node's address, or give "
                                "NODE_RANK=0 to the node MASTER_ADDR names.",
                )
        return self.ok(ctx, "master-addr", f"{var} {host} resolves to {', '.join(addrs)}",
                       evidence=[(var, ", ".join(addrs), None, "")], data=data)

    def check_config(self, ctx: Context) -> Result:
        info, cfg = ctx.launcher, ctx.config
        # only what the user wrote down: a default (master_port 29500) is nobody's plan
        pairs = [(k, cfg.get("cluster", k), got, info.var(field, var)) for k, field, got, var in (
            ("nodes", "nnodes", info.nnodes, "NNODES"),
            ("nproc_per_node", "nproc_per_node", info.nproc_per_node, "NPROC_PER_NODE"),
            ("master_addr", "master_addr", info.master_addr, "MASTER_ADDR"),
            ("master_port", "master_port", info.master_port, "MASTER_PORT"),
        ) if cfg.is_set("cluster", k)]
        diffs = [(f"[cluster] {k} vs {var}", got, want, "") for k, want, got, var in pairs
                 if want is not None and got is not None and want != got]
        if diffs:
            return self.fail(
                ctx, "config", "launcher disagrees with the config: " + "; ".join(f"{e[0]}: {e[1]} != {e[2]}" for e in diffs),
                evidence=diffs, runbook="launcher-variables",
                remediation="Make the launch script and llmdiag.toml describe the same job (or pass the right --config).",
            )
        checked = [k for k, want, got, _ in pairs if want is not None and got is not None]
        if not checked:
            return self.ok(ctx, "config", "no job shape in the config to compare with (set [cluster] nodes / nproc_per_node)")
        return self.ok(ctx, "config", "launcher matches the config (" + ", ".join(checked) + ")")
