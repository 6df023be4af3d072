"""A multi-host cluster on one machine: network namespaces on a bridge (needs root + iproute2).

``Testbed(n)`` creates ``n`` hosts. Host ``k`` is a network namespace with its own ``eth0``
(address ``tb.addr(k)`` in a /24 of 10.213.0.0/16), its own loopback, and — for processes
started through :meth:`Testbed.popen` / :meth:`Testbed.run` — its own hostname ``node-k``
(``unshare --uts``). The hosts' veth peers sit on a bridge inside a private *hub* namespace,
so nothing is added to the machine's own network namespace: two test beds (other
engineers', parallel CI jobs) can never see each other or the host's interfaces.

Faults are injected for real, inside the node's namespace: iptables ``DROP`` (a connect
hangs until its timeout) and ``REJECT --reject-with tcp-reset`` (refused at once, like a
closed port), ``tc`` tbf/netem for slow or lossy links, the interface MTU, bind mounts in a
private mount namespace (a "shared" path that is really a local directory on one host), and
``SIGKILL`` of a host's process group.

Cleanup removes every process, namespace (and with it every link, rule and qdisc) this test
bed created, on normal exit, on exceptions, and at interpreter exit; stale ``ld-<pid>-*``
namespaces left by dead processes (a SIGKILLed pytest) are swept when a new test bed starts.
"""

from __future__ import annotations

import atexit
import os
import random
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence

PREFIX = "ld-"
#: The /16 all test beds draw their /24 from; nothing else on a CI machine uses it.
NET_A, NET_B = 10, 213
_ip_lock = threading.Lock()
_live: set[Testbed] = set()

# Inside the namespace: set the hostname, apply bind mounts, then exec the command. The
# command and the mounts arrive as positional arguments, never interpolated into the script.
_WRAPPER = (
    'hostname "$1" || exit 96; shift; '
    'while [ "$1" != "--" ]; do mount --bind "$1" "$2" || exit 97; shift 2; done; shift; '
    'exec "$@"'
)


def available(*, iptables: bool = False, tc: bool = False) -> tuple[bool, str]:
    """Can a test bed be built here? ``(True, "")`` or ``(False, reason)`` for ``pytest.skip``."""
    if os.name != "posix" or not hasattr(os, "geteuid"):
        return False, "network namespaces need Linux"
    if os.geteuid() != 0:
        return False, "network namespaces need root"
    for tool, pkg in (("ip", "iproute2"), ("unshare", "util-linux"), ("hostname", "hostname")):
        if shutil.which(tool) is None:
            return False, f"{tool} not found (install {pkg})"
    if iptables and shutil.which("iptables") is None:
        return False, "iptables not found (apt-get install iptables)"
    if tc and shutil.which("tc") is None:
        return False, "tc not found (install iproute2)"
    ok, why = _can_create_netns()
    return ok, why


_probe_result: tuple[bool, str] | None = None


def _can_create_netns() -> tuple[bool, str]:
    """Create and delete one namespace once per process (a container may forbid it)."""
    global _probe_result
    if _probe_result is None:
        name = f"{PREFIX}{os.getpid()}-probe"
        p = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True, timeout=10)
        if p.returncode != 0:
            _probe_result = (False, f"cannot create a network namespace: {p.stderr.strip()}")
        else:
            subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=10)
            _probe_result = (True, "")
    return _probe_result


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _list_netns() -> list[str]:
    p = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=10)
    return [line.split()[0] for line in p.stdout.splitlines() if line.strip()]


def _kill_netns_pids(ns: str) -> None:
    p = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True, timeout=10)
    for tok in p.stdout.split():
        try:
            os.kill(int(tok), signal.SIGKILL)
        except (ValueError, ProcessLookupError, PermissionError):
            pass


def _delete_netns(ns: str) -> None:
    _kill_netns_pids(ns)
    subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=10)


def sweep_stale() -> list[str]:
    """Delete ``ld-<pid>-*`` namespaces whose creating process is gone; returns their names."""
    removed = []
    for ns in _list_netns():
        if not ns.startswith(PREFIX):
            continue
        pid_part = ns[len(PREFIX):].split("-", 1)[0]
        if pid_part.isdigit() and not _pid_alive(int(pid_part)):
            _delete_netns(ns)
            removed.append(ns)
    return removed


class Testbed:
    """``n`` namespace hosts on one bridge; use as a context manager.

    >>> with Testbed(3) as tb:                          # doctest: +SKIP
    ...     srv = tb.popen(1, ["python", "-m", "http.server", "8000"])
    ...     tb.run(0, ["curl", f"http://{tb.addr(1)}:8000"], timeout=5)
    """

    __test__ = False  # not a pytest test class despite the name

    def __init__(self, n: int, *, name: str | None = None, subnet: int | None = None):
        if not 1 <= n <= 250:
            raise ValueError("a test bed has 1..250 hosts")
        self.n = n
        tag = name or f"{random.randrange(16**4):04x}"
        if not all(c.isalnum() for c in tag) or len(tag) > 8:
            raise ValueError("test bed name: up to 8 letters or digits")
        self.prefix = f"{PREFIX}{os.getpid()}-{tag}"
        # Namespaces are private, so two test beds cannot clash even on the same /24; the
        # random third octet only keeps addresses in logs distinguishable.
        self.subnet = random.randrange(256) if subnet is None else subnet
        self.hub = f"{self.prefix}-hub"
        self._procs: list[subprocess.Popen] = []
        self._created: list[str] = []
        self._closed = False

    # -- names and addresses -------------------------------------------------------------
    def ns(self, k: int) -> str:
        self._check(k)
        return f"{self.prefix}-n{k}"

    def addr(self, k: int) -> str:
        self._check(k)
        return f"{NET_A}.{NET_B}.{self.subnet}.{k + 1}"

    def hostname(self, k: int) -> str:
        self._check(k)
        return f"node-{k}"

    @property
    def cidr(self) -> str:
        return f"{NET_A}.{NET_B}.{self.subnet}.0/24"

    def _check(self, k: int) -> None:
        if not 0 <= k < self.n:
            raise IndexError(f"host {k} is not in this test bed of {self.n}")

    # -- lifecycle -----------------------------------------------------------------------
    def __enter__(self) -> Testbed:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        ok, why = available()
        if not ok:
            raise RuntimeError(why)
        sweep_stale()
        _live.add(self)
        try:
            self._ip("netns", "add", self.hub)
            self._created.append(self.hub)
            self._ip("-n", self.hub, "link", "add", "br0", "type", "bridge")
            self._ip("-n", self.hub, "link", "set", "br0", "up")
            for k in range(self.n):
                ns = self.ns(k)
                self._ip("netns", "add", ns)
                self._created.append(ns)
                self._ip("-n", self.hub, "link", "add", f"v{k}", "type", "veth", "peer", "name", "eth0", "netns", ns)
                self._ip("-n", self.hub, "link", "set", f"v{k}", "master", "br0", "up")
                self._ip("-n", ns, "link", "set", "lo", "up")
                self._ip("-n", ns, "addr", "add", f"{self.addr(k)}/24", "dev", "eth0")
                self._ip("-n", ns, "link", "set", "eth0", "up")
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Kill every process, delete every namespace (links, rules, qdiscs go with them)."""
        if self._closed:
            return
        self._closed = True
        for p in self._procs:
            self.kill(p)
        for p in self._procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        for ns in reversed(self._created):
            _delete_netns(ns)
        self._created.clear()
        _live.discard(self)

    # -- running things on a host --------------------------------------------------------
    def argv(self, k: int, argv: Sequence[str], *, hostname: bool = True,
             binds: Mapping[str, str] | None = None) -> list[str]:
        """The command line that runs ``argv`` on host ``k``.

        ``binds`` maps a mount point to a source directory bind-mounted over it in a private
        mount namespace for this process only (the host sees its own "local disk" there).
        """
        base = ["ip", "netns", "exec", self.ns(k)]
        if not hostname and not binds:
            return base + list(argv)
        flags = ["--uts"] if hostname else []
        if binds:
            flags += ["--mount", "--propagation", "private"]
        pairs: list[str] = []
        for target, source in (binds or {}).items():
            pairs += [str(source), str(target)]
        script = _WRAPPER if hostname else _WRAPPER.replace('hostname "$1" || exit 96; shift; ', "")
        lead = [self.hostname(k)] if hostname else []
        return base + ["unshare", *flags, "sh", "-c", script, "sh", *lead, *pairs, "--", *argv]

    def popen(self, k: int, argv: Sequence[str], *, env: Mapping[str, str] | None = None,
              hostname: bool = True, binds: Mapping[str, str] | None = None,
              **kwargs) -> subprocess.Popen:
        """Start ``argv`` on host ``k`` in its own process group (so :meth:`kill` gets all of it)."""
        kwargs.setdefault("stdin", subprocess.DEVNULL)
        p = subprocess.Popen(self.argv(k, argv, hostname=hostname, binds=binds),
                             env=None if env is None else dict(env), start_new_session=True, **kwargs)
        self._procs.append(p)
        return p

    def run(self, k: int, argv: Sequence[str], *, timeout: float = 30.0, env: Mapping[str, str] | None = None,
            hostname: bool = True, binds: Mapping[str, str] | None = None, check: bool = False,
            input: str | None = None) -> subprocess.CompletedProcess:
        """Run ``argv`` on host ``k`` to completion (text output captured); killed at ``timeout``."""
        p = self.popen(k, argv, env=env, hostname=hostname, binds=binds, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True,
                       stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL)
        try:
            out, err = p.communicate(input=input, timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill(p)
            out, err = p.communicate()
            raise subprocess.TimeoutExpired(p.args, timeout, out, err) from None
        cp = subprocess.CompletedProcess(p.args, p.returncode, out, err)
        if check:
            cp.check_returncode()
        return cp

    def kill(self, proc: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
        """Kill ``proc`` and everything it started (its process group): a host dying."""
        if proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            try:
                proc.send_signal(sig)
            except ProcessLookupError:
                pass

    # -- faults ----------------------------------------------------------------------------
    def drop_port(self, k: int, port: int, *, src: int | None = None) -> None:
        """Silently drop TCP to ``port`` on host ``k`` (connects hang: a firewall); only from ``src`` if given."""
        self._iptables(k, "-A", "INPUT", "-p", "tcp", *self._from(src), "--dport", str(port), "-j", "DROP")

    def reject_port(self, k: int, port: int, *, src: int | None = None) -> None:
        """Refuse TCP to ``port`` on host ``k`` with a reset (peers see "connection refused")."""
        self._iptables(k, "-A", "INPUT", "-p", "tcp", *self._from(src), "--dport", str(port), "-j", "REJECT",
                       "--reject-with", "tcp-reset")

    def _from(self, src: int | None) -> list[str]:
        return [] if src is None else ["-s", self.addr(src)]

    def drop_from(self, k: int, src: int) -> None:
        """Drop everything host ``k`` receives from host ``src`` (a one-way partition)."""
        self._iptables(k, "-A", "INPUT", "-s", self.addr(src), "-j", "DROP")

    def drop_all(self, k: int) -> None:
        """Drop everything host ``k`` receives on its network (a firewall that cuts it off; its own
        loopback still works, as on a real host)."""
        self._iptables(k, "-A", "INPUT", "-i", "eth0", "-j", "DROP")

    def clear_firewall(self, k: int) -> None:
        self._iptables(k, "-F", "INPUT")

    def set_mtu(self, k: int, mtu: int) -> None:
        self._ip("-n", self.ns(k), "link", "set", "eth0", "mtu", str(int(mtu)))

    def slow_link(self, k: int, rate: str = "40mbit", *, delay: str | None = None, loss: str | None = None) -> None:
        """Shape host ``k``'s egress: tbf at ``rate``, or netem with ``delay``/``loss`` as well."""
        ns = self.ns(k)
        if delay or loss:
            spec = ["netem"] + (["delay", delay] if delay else []) + (["loss", loss] if loss else []) + ["rate", rate]
        else:
            spec = ["tbf", "rate", rate, "burst", "64kb", "latency", "50ms"]
        self._cmd(["ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", "eth0", "root", *spec])

    def link_down(self, k: int) -> None:
        self._ip("-n", self.ns(k), "link", "set", "eth0", "down")

    # -- helpers ---------------------------------------------------------------------------
    def _iptables(self, k: int, *args: str) -> None:
        # -w: the xtables lock file is shared by every namespace on the machine.
        self._cmd(["ip", "netns", "exec", self.ns(k), "iptables", "-w", "10", *args])

    def _ip(self, *args: str) -> None:
        self._cmd(["ip", *args])

    @staticmethod
    def _cmd(argv: list[str]) -> None:
        with _ip_lock:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        if p.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed: {p.stderr.strip() or p.returncode}")


def wait_until(pred, timeout: float, interval: float = 0.05) -> bool:
    """Poll ``pred()`` until true or ``timeout`` seconds passed (tests' bounded waits)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(interval)
    return bool(pred())


@atexit.register
def _close_all() -> None:
    for tb in list(_live):
        tb.close()
