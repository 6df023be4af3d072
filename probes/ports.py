"""Ports, local view: MASTER_PORT and the job's port range bindable here; holders of busy ports.

Bind tests mimic a server (SO_REUSEADDR, all IPv4 addresses), close every socket at once, and
test at most :data:`MAX_TESTED` ports of a range so a range of thousands stays quick.
"""

from __future__ import annotations

import errno
import socket

from llmdiag.probe import BaseProbe
from llmdiag.util.ports import sample_ports

def try_bind(port: int) -> str | None:
    """None when ``port`` is bindable on all IPv4 addresses, else the error text."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("0.0.0.0", port))
        return None
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno)) if exc.errno else str(exc)
    finally:
        s.close()


def holders(ports: set[int]) -> dict[int, list[dict]]:
    """port → [{pid, name, status}] of local TCP sockets bound to it (needs root for others' pids)."""
    import psutil

    out: dict[int, list[dict]] = {}
    try:
        conns = psutil.net_connections(kind="tcp")
    except (psutil.Error, OSError):
        return out
    for c in conns:
        if c.laddr and c.laddr.port in ports and c.status in ("LISTEN", "NONE"):
            name = None
            if c.pid:
                try:
                    name = psutil.Process(c.pid).name()
                except psutil.Error:
                    pass
            entry = {"pid": c.pid, "name": name, "status": c.status}
            if entry not in out.setdefault(c.laddr.port, []):
                out[c.laddr.port].append(entry)
    return out


def compact(ports: list[int]) -> str:
    """[1,2,3,7] → "1-3,7"."""
    parts, start = [], None
    for i, p in enumerate(ports):
        if start is None:
            start = p
        if i + 1 == len(ports) or ports[i + 1] != p + 1:
            parts.append(f"{start}" if start == p else f"{start}-{p}")
            start = None
    return ",".join(parts)


def own_pids(ctx) -> dict[int, str]:
    """pid -> role for the processes of this job that may hold its ports: this process and its
    children when it is a cluster agent (rank 0's store, the port-matrix listeners), and the launcher chain that
    started it under a launcher (torchrun's agent hosts the store on MASTER_PORT)."""
    import os

    import psutil

    out: dict[int, str] = {}
    if ctx.services.get("cluster_agent"):
        out[os.getpid()] = "this llmdiag process (the cluster agent)"
        # A child this process is starting holds every inherited socket between fork and exec
        # (subprocess with preexec_fn forks, runs Python, then closes fds): the store's listening
        # socket shows up under the child's pid for those milliseconds. Its children are this job.
        try:
            for c in psutil.Process().children(recursive=True):
                out[c.pid] = "a process this llmdiag started (an inherited socket)"
        except psutil.Error:
            pass
    if ctx.launcher.kind == "none":
        return out
    try:
        for p in psutil.Process().parents():
            try:
                out[p.pid] = f"the launcher that started this process ({p.name()})"
            except psutil.Error:
                out[p.pid] = "the launcher that started this process"
    except psutil.Error:
        pass
    return out


def ours(hs: list[dict], own: dict[int, str]) -> bool:
    """True when every holder of a port is this job's own process (or its launcher)."""
    return bool(hs) and all(h.get("pid") in own for h in hs)


def settled_holders(ctx, ports: set[int], tries: int = 3, gap_s: float = 0.15) -> tuple[dict[int, list[dict]], dict[int, str]]:
    """Holders of ``ports`` and this job's own pids, with passing holders dropped.

    A process forked by this job (or by anything else) holds every inherited socket until it
    execs or exits: one sample can name a pid that is gone a millisecond later. A holder that is
    not this job's counts only when it is seen in every sample (up to ``tries``, ``gap_s`` apart).
    """
    import time

    persistent: set[tuple[int, object]] | None = None
    who: dict[int, list[dict]] = {}
    own: dict[int, str] = {}
    for i in range(tries):
        who, own = holders(ports), own_pids(ctx)
        foreign = {(p, h.get("pid")) for p, hs in who.items() for h in hs if h.get("pid") not in own}
        persistent = foreign if persistent is None else persistent & foreign
        if not persistent or i == tries - 1 or ctx.deadline.remaining() < 1.0 + gap_s:
            break
        time.sleep(gap_s)
    keep = persistent or set()
    return {p: [h for h in hs if h.get("pid") in own or (p, h.get("pid")) in keep] for p, hs in who.items()}, own


def _holder_text(hs: list[dict]) -> str:
    return "; ".join(f"pid {h['pid']} ({h['name'] or '?'})" if h["pid"] else "a process not visible here" for h in hs)


class PortsProbe(BaseProbe):
    name = "ports"
    description = "MASTER_PORT and the job's port range bindable; busy-port holders; ephemeral-range overlap"
    config_section = "network"
    timeout_s = 10.0

    def run(self, ctx):
        master = ctx.launcher.master_port or ctx.config.get("cluster", "master_port")
        lo, hi = ctx.config.get("network", "port_range")
        yield self.master_port(ctx, master)
        yield self.port_range(ctx, lo, hi, master)
        yield self.ephemeral(ctx, lo, hi)

    def master_port(self, ctx, port: int):
        err = try_bind(port)
        if err is None:
            return self.ok(ctx, "master_port", f"MASTER_PORT {port} is free", evidence=[("port", port, "bindable", "")])
        who, own = settled_holders(ctx, {port})
        hs = who.get(port, [])
        hosted = (ctx.services.get("own_ports") or {}).get(port)
        if ours(hs, own) or (hosted and not [h for h in hs if h.get("pid") and h["pid"] not in own]):
            who = "; ".join(f"pid {h['pid']}, {own[h['pid']]}" for h in hs) or hosted
            return self.ok(ctx, "master_port", f"MASTER_PORT {port} is held by this job's own rendezvous ({who}): "
                           "expected", evidence=[("port", port, "this job's rendezvous", ""), ("holder", who, None, "")],
                           data={"own": True})
        who = _holder_text(hs) if hs else "holder unknown"
        return self.fail(ctx, "master_port", f"MASTER_PORT {port} is busy ({err}): held by {who}",
                         evidence=[("port", port, "bindable", ""), ("holder", who, None, "")],
                         data={"busy": {str(port): hs}}, runbook="port-in-use",
                         remediation=f"Stop the leftover process (ss -ltnp 'sport = :{port}') or pick another "
                                     "MASTER_PORT.")

    def port_range(self, ctx, lo: int, hi: int, master: int):
        tested, busy = [], {}
        for p in sample_ports(lo, hi):
            if p == master:
                continue  # reported by master_port
            if ctx.deadline.remaining() < 1.0:
                break
            tested.append(p)
            err = try_bind(p)
            if err:
                busy[p] = err
        who, own = settled_holders(ctx, set(busy)) if busy else ({}, {})
        for p in [p for p in busy if ours(who.get(p, []), own)]:
            del busy[p]  # held by this job (the cluster port-matrix listeners): bindable for it
        ev = [("range", f"{lo}-{hi}", None, "ports"), ("tested", compact(tested) or "(none)", None, "ports"),
              ("busy", compact(sorted(busy)) or "(none)", "(none)", "ports")]
        data = {"tested": compact(tested), "busy": {str(p): who.get(p, []) for p in busy}}
        if busy:
            detail = "; ".join(f"{p} {busy[p]} by {_holder_text(who[p]) if who.get(p) else 'unknown'}" for p in sorted(busy))
            return self.fail(ctx, "port_range", f"{len(busy)} of {len(tested)} tested ports in {lo}-{hi} are busy: {detail}",
                             evidence=ev, data=data, runbook="port-in-use",
                             remediation="Stop the processes named here (ss -ltnp) or move network.port_range.")
        note = "" if len(tested) >= hi - lo + 1 - (lo <= master <= hi) else f" (sampled {len(tested)} of {hi - lo + 1})"
        return self.ok(ctx, "port_range", f"{len(tested)} tested ports in {lo}-{hi} are free{note}", evidence=ev, data=data)

    def ephemeral(self, ctx, lo: int, hi: int):
        try:
            elo, ehi = (int(x) for x in ctx.path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
        except (OSError, ValueError) as exc:
            return self.skip(ctx, "ephemeral_overlap", f"cannot read ip_local_port_range: {exc}")
        reserved = _reserved(ctx)
        olo, ohi = max(lo, elo), min(hi, ehi)
        exposed = [p for p in range(olo, ohi + 1) if p not in reserved] if olo <= ohi else []
        ev = [("ephemeral_range", f"{elo}-{ehi}", None, "ports"), ("job_range", f"{lo}-{hi}", None, "ports"),
              ("overlap_not_reserved", compact(exposed) or "(none)", "(none)", "ports")]
        if exposed:
            return self.warn(ctx, "ephemeral_overlap", f"{len(exposed)} port(s) of {lo}-{hi} lie in the kernel's "
                             f"ephemeral range {elo}-{ehi}: an outgoing connection may take one first",
                             evidence=ev, runbook="port-range-ephemeral",
                             remediation=f"sysctl -w net.ipv4.ip_local_reserved_ports={lo}-{hi} "
                                         "(or move network.port_range below the ephemeral range).")
        return self.ok(ctx, "ephemeral_overlap", f"{lo}-{hi} is outside the ephemeral range {elo}-{ehi} (or reserved)",
                       evidence=ev)


def _reserved(ctx) -> set[int]:
    try:
        text = ctx.path("/proc/sys/net/ipv4/ip_local_reserved_ports").read_text().strip()
    except OSError:
        return set()
    out: set[int] = set()
    for part in filter(None, text.split(",")):
        a, _, b = part.partition("-")
        out.update(range(int(a), int(b or a) + 1))
    return out
