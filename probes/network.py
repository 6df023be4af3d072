"""Network, local view: interfaces, InfiniBand ports, the NIC NCCL/gloo will pick, the route to MASTER_ADDR.

A wrong NIC choice (a 1 Gb/s management port, a docker bridge, ``lo``) is the most common
reason a multi-node job times out or runs at a fraction of its bandwidth; this probe shows
what the job will pick before it starts.
"""

from __future__ import annotations

import ipaddress
import json
import socket
from typing import Any

from llmdiag.probe import BaseProbe
from llmdiag.probes import nicselect
from llmdiag.util.bounded import Hung, call_bounded


def _read(path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


class NetworkProbe(BaseProbe):
    name = "network"
    description = "interfaces, InfiniBand ports, NCCL/gloo interface choice, route to MASTER_ADDR"
    config_section = "network"
    timeout_s = 10.0

    def run(self, ctx):
        ifaces = self.interfaces(ctx)
        usable = [n for n, i in ifaces.items() if i["up"] and i["addresses"]]
        yield self.interface_summary(ctx, ifaces)
        yield from self.infiniband(ctx)
        nccl = nicselect.select_nccl(ctx.env.get("NCCL_SOCKET_IFNAME"), usable)
        yield self.selection(ctx, "nccl_ifname", nccl, ifaces, usable)
        if ctx.env.get("GLOO_SOCKET_IFNAME"):
            gloo = nicselect.select_gloo(ctx.env["GLOO_SOCKET_IFNAME"], usable)
            yield self.selection(ctx, "gloo_ifname", gloo, ifaces, usable)
        yield from self.expected(ctx, ifaces)
        yield from self.mtu(ctx, ifaces, nccl.names)
        yield self.route(ctx, nccl.names)
        yield self.own_name(ctx, ifaces)

    # -- facts ---------------------------------------------------------------------------
    def interfaces(self, ctx) -> dict[str, dict[str, Any]]:
        """name → {up, state, mtu, speed_mbps, addresses} from psutil plus /sys/class/net."""
        import psutil

        stats = psutil.net_if_stats()
        addrs = psutil.net_if_addrs()
        out: dict[str, dict[str, Any]] = {}
        for name, st in sorted(stats.items()):
            sysdir = ctx.path(f"/sys/class/net/{name}")
            speed = st.speed or None
            raw = _read(sysdir / "speed")
            if raw and raw.lstrip("-").isdigit() and int(raw) > 0:
                speed = int(raw)
            out[name] = {
                "up": bool(st.isup),
                "state": _read(sysdir / "operstate") or ("up" if st.isup else "down"),
                "mtu": st.mtu,
                "speed_mbps": speed,
                "kind": nicselect.kind_of(name, sysdir),
                "addresses": [a.address.split("%")[0] for a in addrs.get(name, ())
                              if a.family in (socket.AF_INET, socket.AF_INET6)],
            }
        return out

    def interface_summary(self, ctx, ifaces):
        data = {"interfaces": {n: {k: i[k] for k in ("mtu", "speed_mbps", "state", "up")} for n, i in ifaces.items()}}
        ev = [(n, f"{i['state']} mtu={i['mtu']} speed={i['speed_mbps'] or '?'}Mb/s {','.join(i['addresses']) or '-'}",
               None, "") for n, i in ifaces.items()]
        up = [n for n, i in ifaces.items() if i["up"] and i["kind"] != "loopback" and i["addresses"]]
        if not up:
            return self.fail(ctx, "interfaces", "no interface except loopback is up with an address",
                             evidence=ev, data=data, runbook="interface-down",
                             remediation="Bring the job's NIC up: ip link set IF up, and check its address (ip addr).")
        return self.ok(ctx, "interfaces", f"{len(up)} interface(s) up with an address: {', '.join(up)}",
                       evidence=ev, data=data)

    def infiniband(self, ctx):
        base = ctx.path("/sys/class/infiniband")
        if not base.is_dir():
            yield self.skip(ctx, "infiniband", "no InfiniBand/RoCE devices (/sys/class/infiniband absent)")
            return
        for dev in sorted(p for p in base.iterdir()):
            for port in sorted((dev / "ports").glob("*")):
                st = {k: _read(port / k) or "?" for k in ("state", "phys_state", "rate", "link_layer")}
                check = f"ib_port:{dev.name}/{port.name}"
                ev = [("state", st["state"], "4: ACTIVE", ""), ("phys_state", st["phys_state"], "5: LinkUp", ""),
                      ("rate", st["rate"], None, ""), ("link_layer", st["link_layer"], None, "")]
                data = {"ib_ports": {f"{dev.name}/{port.name}": st}}
                if "ACTIVE" not in st["state"].upper() or "DOWN" in st["phys_state"].upper():
                    yield self.fail(ctx, check, f"{dev.name} port {port.name} is {st['state']} ({st['phys_state']})",
                                    evidence=ev, data=data, runbook="ib-port-down",
                                    remediation=f"Check the cable/switch port and the subnet manager: ibstat {dev.name}; "
                                                f"exclude it with NCCL_IB_HCA=^{dev.name} until fixed.")
                else:
                    yield self.ok(ctx, check, f"{dev.name} port {port.name} ACTIVE, {st['rate']}, {st['link_layer']}",
                                  evidence=ev, data=data)

    def selection(self, ctx, check, sel, ifaces, usable):
        var = "NCCL_SOCKET_IFNAME" if check == "nccl_ifname" else "GLOO_SOCKET_IFNAME"
        fastest = max((ifaces[n]["speed_mbps"] or 0 for n in usable if ifaces[n]["kind"] in nicselect.ROUTABLE),
                      default=0)
        ev = [("selected", ",".join(sel.names) or "(none)", None, ""), ("rule", sel.rule, None, ""),
              ("fastest_up_speed", fastest or None, None, "Mb/s")]
        data = {f"{check}_selected": list(sel.names)}
        fix = f"Set {var} to the job's fast NIC, e.g. {var}=" + (self._best(ifaces, usable) or "eth0") + "."
        if not sel.names:
            return self.fail(ctx, check, f"{sel.rule} selects no usable interface (up, with an address)",
                             evidence=ev, data=data, remediation=fix, runbook="nic-selection")
        first = sel.names[0]
        kind = ifaces[first]["kind"]
        # a veth is a container's (pod's) own NIC when nothing physical is here to use instead
        container = kind == "veth" and not any(i["kind"] in nicselect.ROUTABLE for i in ifaces.values())
        if kind not in nicselect.ROUTABLE and not container:
            return self.warn(ctx, check, f"{sel.rule} selects {first}, a {kind} interface: other nodes cannot reach it "
                             "or it is slow", evidence=ev, data=data, remediation=fix, runbook="nic-selection")
        speed = ifaces[first]["speed_mbps"] or 0
        floor = ctx.config.get("network", "min_speed_mbps")
        if floor and speed and speed < floor:
            return self.warn(ctx, check, f"{sel.rule} selects {first} at {speed} Mb/s, below network.min_speed_mbps "
                             f"{floor}", evidence=ev + [("speed", speed, floor, "Mb/s")], data=data,
                             remediation=fix, runbook="nic-selection")
        if speed and fastest and speed < fastest:
            return self.warn(ctx, check, f"{sel.rule} selects {first} at {speed} Mb/s; a faster interface "
                             f"({fastest} Mb/s) is up", evidence=ev, data=data, remediation=fix, runbook="nic-selection")
        return self.ok(ctx, check, f"{sel.rule} selects {', '.join(sel.names)}", evidence=ev, data=data)

    @staticmethod
    def _best(ifaces, usable) -> str | None:
        """The interface a fix may name: physical (or bond/VLAN) first, a container's veth next,
        never a bridge or tunnel."""
        for kinds in (nicselect.ROUTABLE, ("veth",)):
            found = [n for n in usable if ifaces[n]["kind"] in kinds]
            if found:
                return max(found, key=lambda n: ifaces[n]["speed_mbps"] or 0)
        return None

    def expected(self, ctx, ifaces):
        for want in ctx.config.get("network", "interfaces") or []:
            found = [n for n in ifaces if n == want or n.startswith(want)]
            up = [n for n in found if ifaces[n]["up"]]
            ev = [("interface", ",".join(found) or "(absent)", want, ""),
                  ("state", ",".join(ifaces[n]["state"] for n in found) or "-", "up", "")]
            if not found:
                yield self.fail(ctx, f"interface:{want}", f"configured interface {want} does not exist here",
                                evidence=ev, runbook="interface-down",
                                remediation=f"Check the NIC name on this node (ip -br link) and fix network.interfaces "
                                            f"or the driver; {want} is missing.")
            elif not up:
                yield self.fail(ctx, f"interface:{want}", f"configured interface {want} is down",
                                evidence=ev, runbook="interface-down",
                                remediation=f"Bring it up: ip link set {found[0]} up (and check the cable/switch).")
            else:
                yield self.ok(ctx, f"interface:{want}", f"{', '.join(up)} present and up", evidence=ev)

    def mtu(self, ctx, ifaces, selected):
        want = ctx.config.get("network", "mtu")
        if want is None:
            return
        names = [n for n in (ctx.config.get("network", "interfaces") or []) if n in ifaces] or list(selected)
        for n in names:
            got = ifaces[n]["mtu"]
            ev = [("mtu", got, want, "bytes")]
            if got != want:
                yield self.warn(ctx, f"mtu:{n}", f"{n} MTU is {got}, expected {want}", evidence=ev,
                                runbook="mtu-mismatch",
                                remediation=f"ip link set {n} mtu {want} (and the same on every node and switch port).")
            else:
                yield self.ok(ctx, f"mtu:{n}", f"{n} MTU {got}", evidence=ev)

    def route(self, ctx, selected):
        addr = ctx.launcher.master_addr or ctx.config.get("cluster", "master_addr")
        if not addr:
            return self.skip(ctx, "master_route", "MASTER_ADDR is not set (nor cluster.master_addr)")
        try:
            infos = call_bounded(socket.getaddrinfo, ctx.deadline.bound(2.0), addr, None, 0, socket.SOCK_DGRAM)
            ip = infos[0][4][0]
        except (Hung, OSError) as exc:
            return self.fail(ctx, "master_route", f"MASTER_ADDR {addr} does not resolve: {exc}",
                             evidence=[("master_addr", addr, "resolvable", "")], runbook="nic-selection",
                             remediation=f"Fix name resolution (getent hosts {addr}) or set MASTER_ADDR to an IP.")
        dev, how = self._route_dev(ctx, ip)
        ev = [("master_addr", f"{addr} ({ip})", None, ""), ("route_dev", dev or "?", ",".join(selected) or None, ""),
              ("method", how, None, "")]
        data = {"master_route_dev": dev}
        if dev is None:
            return self.warn(ctx, "master_route", f"could not tell which interface reaches {ip}", evidence=ev,
                             data=data, runbook="nic-selection", remediation=f"Check routing by hand: ip route get {ip}")
        if ipaddress.ip_address(ip).is_loopback or dev == "lo":
            return self.ok(ctx, "master_route", f"MASTER_ADDR {ip} is local (via {dev})", evidence=ev, data=data)
        if selected and dev not in selected:
            return self.warn(ctx, "master_route", f"the route to MASTER_ADDR {ip} leaves by {dev}, but NCCL will use "
                             f"{','.join(selected)}", evidence=ev, data=data, runbook="nic-selection",
                             remediation=f"Make them agree: NCCL_SOCKET_IFNAME={dev} (or route {ip} via the NCCL NIC).")
        return self.ok(ctx, "master_route", f"the route to MASTER_ADDR {ip} leaves by {dev}", evidence=ev, data=data)

    def own_name(self, ctx, ifaces):
        """What this node's own host name resolves to: without GLOO_SOCKET_IFNAME, gloo (torch's CPU collectives,
        and the store's peers through it) binds and advertises that address. A name mapped to a loopback address
        (Debian's ``127.0.1.1 HOST`` line in /etc/hosts) or not resolvable at all (gloo then falls back to the
        loopback) makes every peer on another node dial itself; an address no interface here holds fails the bind."""
        name = socket.gethostname()
        nnodes = ctx.launcher.nnodes or ctx.config.get("cluster", "nodes") or 1
        gloo_if = ctx.env.get("GLOO_SOCKET_IFNAME")
        ev = [("hostname", name, None, ""), ("nnodes", str(nnodes), None, ""),
              ("GLOO_SOCKET_IFNAME", gloo_if or "unset", None, "")]
        if gloo_if:
            return self.ok(ctx, "hostname", f"gloo binds GLOO_SOCKET_IFNAME={gloo_if}; the host name {name} is not "
                           "used to choose its address", evidence=ev)
        fix = ("Set GLOO_SOCKET_IFNAME (and NCCL_SOCKET_IFNAME) to the interface the nodes reach each other on, or map "
               f"{name} to this node's address in /etc/hosts (not to 127.0.1.1).")
        try:
            infos = call_bounded(socket.getaddrinfo, ctx.deadline.bound(2.0), name, None, 0, socket.SOCK_STREAM)
        except (Hung, OSError) as exc:
            # gloo then says so itself at the job's start ("Unable to resolve hostname ... Using the loopback address
            # as fallback"), and a job whose collectives are all NCCL never asks; a name that resolves is the rule on
            # real clusters (DNS, Slurm's node names, the kubelet's /etc/hosts): a fact to show, not a finding, where
            # a name mapped to the loopback on purpose is a fault
            ev.append(("resolves_to", "-", None, ""))
            return self.ok(ctx, "hostname", f"the host name {name} does not resolve ({exc}): without "
                           "GLOO_SOCKET_IFNAME a gloo group falls back to the loopback (a multi-node gloo job needs "
                           "GLOO_SOCKET_IFNAME)", evidence=ev, data={"hostname": name, "hostname_addresses": []})
        addrs = list(dict.fromkeys(i[4][0].split("%")[0] for i in infos))
        ev.append(("resolves_to", ",".join(addrs) or "-", None, ""))
        data = {"hostname": name, "hostname_addresses": addrs}
        local = {a: n for n, i in ifaces.items() for a in i["addresses"]}
        routable = [a for a in addrs if not ipaddress.ip_address(a).is_loopback]
        if not routable:
            msg = f"the host name {name} resolves only to the loopback ({', '.join(addrs)}): gloo binds the loopback"
            if nnodes > 1:
                return self.fail(ctx, "hostname", msg + f", and peers on the other {nnodes - 1} node(s) cannot reach "
                                 "this node (connection refused or a hang at the first collective)", evidence=ev,
                                 data=data, runbook="hostname-loopback", remediation=fix)
            return self.ok(ctx, "hostname", msg + "; fine on one node, a multi-node job needs GLOO_SOCKET_IFNAME",
                           evidence=ev, data=data)
        foreign = [a for a in routable if a not in local]
        if len(foreign) == len(routable):
            return self.fail(ctx, "hostname", f"the host name {name} resolves to {', '.join(routable)}, which no "
                             "interface of this node holds: gloo cannot bind it (a stale /etc/hosts or DNS entry)",
                             evidence=ev, data=data, runbook="hostname-loopback", remediation=fix)
        dev = local[next(a for a in routable if a in local)]
        return self.ok(ctx, "hostname", f"the host name {name} resolves to {', '.join(routable)} (on {dev}): gloo "
                       "binds that interface", evidence=ev, data={**data, "hostname_dev": dev})

    def _route_dev(self, ctx, ip: str) -> tuple[str | None, str]:
        res = ctx.run(["ip", "-j", "route", "get", ip], timeout=2.0)
        if res.ok:
            try:
                return json.loads(res.stdout)[0].get("dev"), "ip route get"
            except (ValueError, IndexError, AttributeError):
                pass
        # Fallback: a UDP connect() sends nothing but makes the kernel choose the source address.
        import psutil

        fam = socket.AF_INET6 if ":" in ip else socket.AF_INET
        try:
            with socket.socket(fam, socket.SOCK_DGRAM) as s:
                s.connect((ip, 9))
                src = s.getsockname()[0]
        except OSError:
            return None, "udp connect"
        for name, addrs in psutil.net_if_addrs().items():
            if any(a.address.split("%")[0] == src for a in addrs):
                return name, "udp connect"
        return None, "udp connect"
