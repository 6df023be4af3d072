"""``llmdiag preflight --hostfile FILE``: start the agents over ssh, return rank 0's report.

The first hostfile entry is rank 0 and hosts the rendezvous (as DeepSpeed and MPI
launchers do) unless ``--master-addr`` says otherwise. Every entry is started the same way,
over ssh, the local node included when it is listed. Rank 0's agent prints the cluster report
as JSON; this process adds the ssh check of every host (passwordless ssh is itself a check),
names missing nodes by their hostfile entries, and renders. When rank 0 itself cannot be
started, the report is built from what is known: every node missing, with the ssh reasons.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import time
from collections.abc import Sequence

from llmdiag.cluster import merge, ssh
from llmdiag.cluster.hostfile import HostEntry
from llmdiag.result import ClusterReport, Evidence, Result, Status


def remote_argv(command: str, rank: int, entries: Sequence[HostEntry], *, master_addr: str, master_port: int,
                timeout_s: float, passthrough: Sequence[str]) -> list[str]:
    return [*shlex.split(command), "preflight", "--nnodes", str(len(entries)), "--node-rank", str(rank),
            "--master-addr", master_addr, "--master-port", str(master_port), "--timeout", f"{timeout_s:g}",
            "--expected-hosts", ",".join(e.host for e in entries), "--format", "json", *passthrough]


def _ssh_result(launch: ssh.Launch) -> Result:
    host = launch.entry.host
    if launch.ssh_failed and launch.returncode == ssh.SSH_FAILED or launch.error and launch.proc is None:
        why = launch.reason()
        return Result(probe="cluster", check="ssh", node=host, status=Status.FAIL,
                      summary=f"ssh {launch.entry.target} failed: {why}",
                      evidence=(Evidence("ssh exit status", launch.returncode, 0, ""), Evidence("ssh said", why, None, "")),
                      remediation=ssh_fix(why, launch.entry.target), runbook="cluster-ssh-failed")
    if launch.error:
        return Result(probe="cluster", check="ssh", node=host, status=Status.FAIL, summary=launch.error,
                      remediation="Look at that host's agent (its stderr is in the JSON report's sections.ssh).",
                      runbook="cluster-node-died")
    return Result(probe="cluster", check="ssh", node=host, status=Status.PASS,
                  summary=f"ssh {launch.entry.target}: agent started and finished ({launch.elapsed_s:.1f} s)")


def ssh_fix(why: str, target: str) -> str:
    """The fix for what ssh actually said: sshd down, keys refused, host key, name, network."""
    host = target.rpartition("@")[2]
    if "Connection refused" in why:
        return (f"Nothing accepts ssh on {host}: sshd is not running or listens elsewhere. On {host}: systemctl "
                "status ssh (or sshd); check the Port in sshd_config and any firewall REJECT on 22.")
    if "Permission denied" in why:
        return (f"sshd on {host} refused the key: add your public key to ~/.ssh/authorized_keys there (or set "
                f"IdentityFile in ~/.ssh/config); test with ssh -o BatchMode=yes {target} true.")
    if "Host key verification" in why:
        return f"{host}'s host key is unknown or changed: ssh-keyscan {host} >> ~/.ssh/known_hosts (after checking it)."
    if "Could not resolve" in why:
        return f"{host} does not resolve: fix the hostfile name, /etc/hosts or DNS (getent hosts {host})."
    if "timed out" in why or "No route" in why:
        return (f"{host} did not answer on port 22 (host down, a firewall DROP, or it needs a ProxyJump in "
                "~/.ssh/config); test with nc -vz HOST 22.")
    if "kex_exchange" in why or "Connection closed" in why or "reset" in why:
        return (f"sshd on {host} (or a bastion) closed the connection during the handshake: too many at once "
                "(sshd MaxStartups) or a ban (fail2ban); lower cluster.ssh_window.")
    return (f"Make passwordless ssh work: ssh -o BatchMode=yes {target} true (keys in ~/.ssh/authorized_keys there, "
            "the host key known, ProxyJump in ~/.ssh/config).")


def run_hostfile(entries: Sequence[HostEntry], *, master_addr: str | None, master_port: int, timeout_s: float,
                 remote_command: str, ssh_config: str | None, connect_timeout: int, passthrough: Sequence[str],
                 skew_warn_ms: float, strict: bool, log=lambda s: None, window: int = ssh.DEFAULT_WINDOW) -> ClusterReport:
    addr = master_addr or entries[0].host
    started = time.monotonic()
    launches = ssh.fan_out(
        entries, lambda r: remote_argv(remote_command, r, entries, master_addr=addr, master_port=master_port,
                                       timeout_s=timeout_s, passthrough=passthrough),
        connect_timeout=connect_timeout, config=ssh_config,
        timeout_s=timeout_s + connect_timeout + 15, log=log, window=window)
    ssh_results = [_ssh_result(la) for la in launches]
    section = [{"host": la.entry.host, "rank": la.rank, "returncode": la.returncode,
                "ok": not la.ssh_failed and not la.error, "reason": None if not la.ssh_failed else la.reason(),
                "stderr_tail": la.stderr.strip().splitlines()[-5:]} for la in launches]
    doc = None
    root = launches[0]
    if not root.ssh_failed and root.stdout.strip():
        try:
            doc = json.loads(root.stdout)
        except json.JSONDecodeError:
            doc = None
    hosts = [e.host for e in entries]
    if doc is None or doc.get("kind") != "cluster":
        lost = {la.rank: f"ssh failed: {la.reason()}" for la in launches if la.ssh_failed}
        if not root.ssh_failed:
            lost.setdefault(0, "rank 0's agent printed no report: " + (root.reason() if root.stderr else "no output"))
        return merge.build_report([], nnodes=len(entries), lost=lost, hosts=hosts, skew_warn_ms=skew_warn_ms,
                                  extra_results=ssh_results, extra_sections={"ssh": section}, strict=strict,
                                  duration_s=time.monotonic() - started)
    report = ClusterReport.from_dict(doc)
    ssh_failed = {la.rank: la for la in launches if la.ssh_failed}
    results = list(report.cluster_results)
    # a node whose ssh failed is missing because of ssh: say so on its missing-node result
    for i, r in enumerate(results):
        if r.check == "node-missing":
            for rank, la in ssh_failed.items():
                if r.node == f"node rank {rank} ({la.entry.host})":
                    results[i] = r.replace(summary=f"{r.node} is missing: ssh failed ({la.reason()})",
                                           runbook="cluster-ssh-failed")
    sections = dict(report.sections, ssh=section)
    return dataclasses.replace(report, cluster_results=tuple(ssh_results + results), sections=sections, strict=strict)
