"""Classify a TCP connect: open, refused, timed out, no route, name does not resolve.

The classes map onto causes a person can act on: *refused* means the host answered with a
reset (nothing listening there, or a firewall ``REJECT``); *timed out* means nothing
answered at all, which on a live host is a firewall that silently ``DROP``s; *no route*
means the network layer gave up (wrong subnet, host down, ARP unanswered); *unresolved* is
DNS. Every step is bounded: name resolution runs in a bounded thread, connects have a
socket timeout.
"""

from __future__ import annotations

import dataclasses
import errno
import socket
import time

from llmdiag.util.bounded import Hung, call_bounded

OPEN, REFUSED, TIMEOUT, NO_ROUTE, UNRESOLVED, FOREIGN, ERROR = (
    "open", "refused", "timeout", "no-route", "unresolved", "foreign", "error")

#: What each outcome most likely means, for report lines ("node-2 → node-5:29501 timed out (...)").
MEANING = {
    OPEN: "open",
    REFUSED: "refused (nothing listening, or a firewall REJECT)",
    TIMEOUT: "timed out (dropped by a firewall?)",
    NO_ROUTE: "no route to host (host down, wrong subnet or routing)",
    UNRESOLVED: "name does not resolve (DNS, /etc/hosts)",
    FOREIGN: "open, but another program answered (not an llmdiag listener)",
    ERROR: "failed",
}
RUNBOOK = {
    REFUSED: "cluster-port-refused",
    TIMEOUT: "cluster-firewall-drop",
    NO_ROUTE: "cluster-no-route",
    UNRESOLVED: "cluster-name-unresolved",
    FOREIGN: "cluster-port-refused",
    ERROR: "cluster-port-refused",
}

_NO_ROUTE_ERRNOS = {errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EHOSTDOWN, errno.ENETDOWN}


@dataclasses.dataclass(frozen=True)
class Reach:
    """The outcome of one connect to ``host:port`` (``address`` is what it resolved to)."""

    host: str
    port: int
    outcome: str
    detail: str = ""
    address: str | None = None
    elapsed_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.outcome == OPEN

    @property
    def meaning(self) -> str:
        return MEANING.get(self.outcome, self.outcome)

    def to_dict(self) -> dict:
        return {"host": self.host, "port": self.port, "outcome": self.outcome, "detail": self.detail,
                "address": self.address, "elapsed_s": round(self.elapsed_s, 4)}


def resolve(host: str, timeout: float) -> str:
    """First IPv4/IPv6 address of ``host``; raises socket.gaierror or Hung."""
    infos = call_bounded(socket.getaddrinfo, timeout, host, None, 0, socket.SOCK_STREAM)
    if not infos:
        raise socket.gaierror(f"{host}: no address")
    infos.sort(key=lambda i: 0 if i[0] == socket.AF_INET else 1)
    return infos[0][4][0]


def classify_error(exc: BaseException) -> str:
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return TIMEOUT
    if isinstance(exc, ConnectionRefusedError):
        return REFUSED
    if isinstance(exc, OSError) and exc.errno in _NO_ROUTE_ERRNOS:
        return NO_ROUTE
    if isinstance(exc, OSError) and exc.errno == errno.ETIMEDOUT:
        return TIMEOUT
    return ERROR


def connect(host: str, port: int, timeout: float) -> tuple[socket.socket | None, Reach]:
    """Open a TCP connection; returns (socket or None, Reach). Never raises for network errors."""
    start = time.monotonic()
    try:
        addr = resolve(host, timeout)
    except Hung:
        return None, Reach(host, port, UNRESOLVED, f"no DNS answer within {timeout:g} s", None, time.monotonic() - start)
    except (socket.gaierror, UnicodeError, OSError) as exc:
        return None, Reach(host, port, UNRESOLVED, str(exc), None, time.monotonic() - start)
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(max(0.01, timeout - (time.monotonic() - start)))
    try:
        s.connect((addr, port))
    except OSError as exc:
        s.close()
        outcome = classify_error(exc)
        detail = f"no answer within {timeout:.2g} s" if outcome == TIMEOUT else (exc.strerror or str(exc))
        return None, Reach(host, port, outcome, detail, addr, time.monotonic() - start)
    return s, Reach(host, port, OPEN, "", addr, time.monotonic() - start)


def probe_tcp(host: str, port: int, timeout: float) -> Reach:
    """Connect and close at once (is anything listening and reachable there?)."""
    s, r = connect(host, port, timeout)
    if s is not None:
        s.close()
    return r


def wait_open(host: str, port: int, deadline_s: float, connect_timeout: float, interval: float = 0.25,
              progress=None) -> Reach:
    """Retry until ``host:port`` is open or ``deadline_s`` passed; returns the last outcome.

    Agents start at different times, so "refused" at first is normal (the store is not up
    yet); only what remains at the end counts. DNS failures are not retried. A failed end
    result says how long and how often it was tried (the last try alone may have been short).
    ``progress(reach, tries, waited_s)`` is called after every failed try (to tell the user).
    """
    start = time.monotonic()
    end = start + deadline_s
    tries = 0
    while True:
        left = end - time.monotonic()
        r = probe_tcp(host, port, max(0.05, min(connect_timeout, left)))
        tries += 1
        waited = time.monotonic() - start
        if r.ok or r.outcome == UNRESOLVED:
            return r
        if time.monotonic() + interval >= end:
            each = f"each {r.detail}" if r.outcome == TIMEOUT else r.detail
            return dataclasses.replace(r, detail=f"tried {tries} times over {waited:.0f} s ({each})",
                                       elapsed_s=waited)
        if progress is not None:
            progress(r, tries, waited)
        time.sleep(interval)
