"""Failure signatures: one line (or a short block) of a log → an event with extracted facts.

Each :class:`Rule` names the keyword that must be in the line (a cheap substring test that
also feeds the bulk prefilter), a regex, and a handler that returns facts. Wordings covered:
every PyTorch generation of the NCCL watchdog (1.x ``Caught collective operation timeout``
to 2.7 ``failure detected by watchdog at work sequence id``), the heartbeat monitor, aborted
communicators, NCCL WARN lines and return-code chains (``-> 3``), nccl-tests failures, c10d
rendezvous errors, every CUDA OOM wording, other CUDA errors, Xid / ECC, torchrun
``ChildFailedError`` blocks, fatal signals, Slurm time limits, Python tracebacks, fp16
overflow messages.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable

from llmdiag.logs import catalogue
from llmdiag.logs.unwrap import needs_continuation

_GIB = {"b": 1 / 2**30, "bytes": 1 / 2**30, "kib": 1 / 2**20, "mib": 1 / 1024, "gib": 1.0, "tib": 1024.0,
        "kb": 1 / 2**20, "mb": 1 / 1024, "gb": 1.0}
SIGNALS = {n: v[0] for n, v in catalogue.SIGNALS.items()}
SIGNAL_KIND = {n: v[1] for n, v in catalogue.SIGNALS.items() if v[1]}
NCCL_RC_KIND = {n: v[1] for n, v in catalogue.NCCL_RETURN_CODES.items() if v[1]}


def gib(number: str, unit: str) -> float | None:
    try:
        return float(number.replace(",", "")) * _GIB[unit.lower()]
    except (KeyError, ValueError):
        return None


@dataclasses.dataclass
class Event:
    kind: str
    file: str
    line: int
    message: str
    rank: int | None = None
    host: str | None = None
    ts: float | None = None
    facts: dict = dataclasses.field(default_factory=dict)
    #: an echo repeats or follows a root event (e.g. "taking the entire process down")
    echo: bool = False
    #: a year-less time of day from a glog header (``E1204 10:20:10.123``): orders events that have no ``ts``
    clock: float | None = None


@dataclasses.dataclass(frozen=True)
class Rule:
    keyword: str
    regex: re.Pattern[str]
    handler: Callable[[re.Match[str], str], tuple[str, dict] | None]
    #: other literals that may stand in for ``keyword`` (a catalogue entry's keywords)
    also: tuple[str, ...] = ()


_RANK_IN_MSG = re.compile(r"\[(?:PG (?:ID )?\S+ (?:PG GUID \S+ )?)?Rank (\d+)\]")
_PG = re.compile(r"\[PG (?:ID )?(\S+)(?: PG GUID (\S+?))?(?:\(([\w-]+)\))? Rank \d+\]")
_WORK_FIELD = re.compile(r"(SeqNum|OpType|NumelIn|NumelOut|Timeout\(ms\))=([^,)\s]+)")


_WORK_NAMES = {"SeqNum": "seq_num", "OpType": "op_type", "NumelIn": "numel_in", "NumelOut": "numel_out",
               "Timeout(ms)": "timeout_ms"}
#: a work printed by ProcessGroupNCCL: in a watchdog timeout, and in "Collective WorkNCCL(...) raised the
#: following async exception: ..." (the error itself is read by the rule for its own wording)
_WORK = re.compile(r"WorkNCCL\((?P<body>(?:[^()]|\([^()]*\))*)\)")


def work_fields(body: str) -> dict:
    """The fields of a ``WorkNCCL(SeqNum=.., OpType=.., NumelIn=.., NumelOut=.., Timeout(ms)=..)``."""
    return {_WORK_NAMES[k]: v if k == "OpType" else _int(v) for k, v in _WORK_FIELD.findall(body)}


def _timeout(m: re.Match[str], msg: str):
    f = work_fields(m["body"])
    f["has_numel"] = "numel_in" in f
    if m["ran"]:
        f["ran_for_ms"] = int(m["ran"])
    return "nccl_timeout", f



def _int(v: str) -> int | str:
    try:
        return int(v)
    except ValueError:
        return v


def _work_status(m: re.Match[str], msg: str):
    f = {k: int(v) for k, v in m.groupdict().items() if v is not None}
    return "nccl_timeout_status", f


def _dump_signal(m: re.Match[str], msg: str):
    """2.3+: a rank learns of a collective timeout (its own or another rank's) and dumps its debug info."""
    f: dict = {}
    if m["src"]:
        f["timeout_detected_by_rank"] = int(m["src"])
    w = re.search(r"[Ll]ast enqueued NCCL work: (\d+), last completed NCCL work: (\d+)", msg)
    if w:
        f["last_enqueued_work"], f["last_completed_work"] = int(w[1]), int(w[2])
    return "nccl_timeout_status", f


def _heartbeat(m: re.Match[str], msg: str):
    f: dict = {}
    s = re.search(r"stuck for (\d+) seconds", msg)
    if s:
        f["stuck_s"] = int(s[1])
    return "nccl_heartbeat_stuck", f


def _aborted(m: re.Match[str], msg: str):
    return "nccl_communicator_aborted", {"aborted_rank": int(m[1])}


_NCCL_TEXTS = sorted(catalogue.NCCL_ERROR_TEXT, key=len, reverse=True)


def _nccl_error_text(m: re.Match[str], msg: str):
    low = msg.lower()
    f: dict = {}
    v = re.search(r"NCCL version ([\d.]+\S*)", msg)
    if v:
        f["nccl_version"] = v[1].rstrip(",")
    for text in _NCCL_TEXTS:
        if text in low:
            code = catalogue.NCCL_ERROR_TEXT[text]
            f["nccl_return_code"] = code
            return NCCL_RC_KIND[code], f
    if "system error" in low:  # "unhandled system error" spelled differently in old releases
        f["nccl_return_code"] = 2
        return "nccl_system_error", f
    return None


def _nccl_rc(m: re.Match[str], msg: str):
    rc = int(m[1])
    if rc in NCCL_RC_KIND:
        return "nccl_rc", {"nccl_return_code": rc, "site": m[0].split()[-3] if len(m[0].split()) >= 3 else ""}
    return None


def _nccl_retcode(m: re.Match[str], msg: str):
    """The proxy's "Failed to execute operation Connect from rank 9, retcode 6"."""
    rc = int(m["rc"])
    if rc not in NCCL_RC_KIND:
        return None
    return "nccl_rc", {"nccl_return_code": rc, "proxy_retcode": rc, "proxy_op": m["op"], "from_rank": int(m["rank"])}


_NCCL_NET_ERROR = re.compile(r"(?:Call to (?:recv|send) (?:from|to) (?P<peer>\S+) failed ?: ?(?P<err>[^\n]+)"
                             r"|Connection closed by remote peer ?(?P<peer2>\S+)?"
                             r"|(?:recv|send|socketProgress)\S* .*?(?P<err2>Connection reset by peer|Broken pipe))")


def _nccl_net_error(m: re.Match[str], msg: str):
    """A socket to a peer failed inside NCCL: the remote side went away (ncclRemoteError)."""
    f: dict = {"net_error": (m["err"] or m["err2"] or "Connection closed by remote peer").strip()[:120]}
    peer = m["peer"] or m["peer2"]
    if peer:
        f["peer"] = peer.rstrip(".,")
    return "nccl_remote_error", f


def _nccl_last_error(m: re.Match[str], msg: str):
    """The same socket failure quoted after "Last error:" of an NCCL exception (no WARN prefix): NCCL 2.14-2.18
    report a peer that went away as ncclInternalError, the quoted line says what happened."""
    if "NCCL WARN" in msg:
        return None  # the WARN line's own rule reads it
    return _nccl_net_error(m, msg)


#: an endpoint as NCCL prints it: ``10.0.0.12<44231>``, ``node-7<50260>``, ``[fe80::1]<5000>``
_ENDPOINT = re.compile(r"(?:\[[0-9A-Fa-f:.]+\]|[\w.-]+)<\d+>")


def _last_error(m: re.Match[str], msg: str):
    """NCCL's "Last error:" of an exception: the failure in the rank's own words (empty here when
    the text is on the next line; the analyzer then reads that line as its continuation)."""
    text = m["text"].strip()
    f: dict = {"last_error": text[:200]}
    ep = _ENDPOINT.search(text)
    if ep:
        f["peer"] = ep[0]
    return "nccl_last_error", f


def _nccl_warn(m: re.Match[str], msg: str):
    f: dict = {}
    text = msg[m.end():].strip()
    cf = re.search(r"Cuda failure (\d+)? ?'([^']*)'", text)
    if cf:
        if cf[1]:
            f["cuda_failure_code"] = int(cf[1])
        f["cuda_failure"] = cf[2]
    peer = (re.search(r"[Cc]onnect(?:ing)? to (\S+?)(?: failed|,|$)", text)
            or re.search(r"(?:from|to) peer (\S+)", text) or re.search(r"Call to \w+ (?:from|to) (\S+)", text))
    if peer:
        f["peer"] = peer[1]
    f["warn_text"] = text[:300]
    return "nccl_warn", f


def _test_failure(m: re.Match[str], msg: str):
    f = {"test_failure_site": m["site"], "nccl_error_text": m["text"].strip(" /")}
    t = m["text"].lower()
    code = next((catalogue.NCCL_ERROR_TEXT[x] for x in _NCCL_TEXTS if x in t), None)
    if code is None:
        code = 3 if "internal" in t else 2 if "system" in t else 1 if "cuda" in t else None
    if code is None:
        return "nccl_test_failure", f
    f["nccl_return_code"] = code
    return NCCL_RC_KIND[code], f


def _test_failure_pid(m: re.Match[str], msg: str):
    return "nccl_test_pid", {"host": m["host"], "pid": int(m["pid"]), "site": m["site"]}


def _oom(m: re.Match[str], msg: str):
    f: dict = {"oom_tried_to_allocate_gib": None}
    t = re.search(r"Tried to allocate ([\d.,]+) ?([KMGT]i?B|B)", msg)
    if t:
        f["oom_tried_to_allocate_gib"] = gib(t[1], t[2])
        f["oom_tried_to_allocate_raw"] = f"{t[1]} {t[2]}"
        f["tried_to_allocate_bytes"] = int(round(gib(t[1], t[2]) * 2**30))
    g = re.search(r"GPU (\d+)", msg)
    if g:
        f["oom_gpu_index"] = int(g[1])
    for name, rx in (
        ("oom_total_capacity_gib", r"([\d.]+) ([KMGT]iB|bytes) total capacity|total capac\w* of ([\d.]+) ([KMGT]iB|bytes)"),
        ("oom_free_gib", r"([\d.]+) ([KMGT]iB|bytes) free|of which ([\d.]+) ([KMGT]iB|bytes) is free"),
        ("oom_process_in_use_gib", r"this process has ([\d.]+) ([KMGT]iB|bytes) memory in use"),
        ("oom_allocated_by_pytorch_gib", r"([\d.]+) ([KMGT]iB|bytes) (?:is )?allocated by PyTorch|([\d.]+) ([KMGT]iB|bytes) already allocated"),
        ("oom_reserved_by_pytorch_gib", r"([\d.]+) ([KMGT]iB|bytes) reserved in total by PyTorch"),
        ("oom_reserved_unallocated_gib", r"([\d.]+) ([KMGT]iB|bytes) is reserved by PyTorch but unallocated"),
    ):
        x = re.search(rx, msg)
        if x:
            num, unit = (x[1], x[2]) if x[1] else (x[3], x[4])
            f[name] = gib(num, unit)
    others = [{"pid": int(p), "gib": gib(n, u)} for p, n, u in
              re.findall(r"Process (\d+) has ([\d.]+) ([KMGT]iB) memory in use", msg)]
    if others:
        f["oom_other_processes"] = others
        f["oom_processes_on_gpu"] = len(others) + 1
    if "oom_process_in_use_gib" not in f and not others:
        x = re.search(r"has ([\d.]+) ([KMGT]iB) memory in use", msg)
        if x:
            f["oom_process_in_use_gib"] = gib(x[1], x[2])
    ru = f.get("oom_reserved_unallocated_gib")
    if ru is not None and ru >= max(1.0, 0.2 * (f.get("oom_tried_to_allocate_gib") or 0)):
        f["fragmentation"] = True
    return "cuda_oom", f


def _cuda_failure(m: re.Match[str], msg: str):
    """NCCL's "Cuda failure 'out of memory'" outside a WARN line (the "Last error:" of a DistBackendError)."""
    if "NCCL WARN" in msg:
        return None  # the WARN line's own handler reads it
    f = {"cuda_failure": m[2]}
    if m[1]:
        f["cuda_failure_code"] = int(m[1])
    if "out of memory" in m[2].lower():
        return "cuda_oom", {"oom_tried_to_allocate_gib": None, "oom_wording": m[0], **f}
    return "nccl_unhandled_cuda_error", f


def _oom_other(m: re.Match[str], msg: str):
    return "cuda_oom", {"oom_tried_to_allocate_gib": None, "oom_wording": m[0]}


def _cuda_error(m: re.Match[str], msg: str):
    text = m["text"].strip().rstrip(".")
    low = text.lower()
    if "out of memory" in low or "alloc_failed" in low:
        return "cuda_oom", {"oom_tried_to_allocate_gib": None, "oom_wording": text[:120]}
    f: dict = {"cuda_error": text[:200]}
    known = next((v for k, v in catalogue.CUDA_ERRORS.items() if low.startswith(k)), None)
    if known:
        f["cuda_error_name"], f["cuda_error_cause"] = known[0], known[2]
    if "watchdog thread terminated" in msg:
        f["failing_thread"] = "ProcessGroupNCCL watchdog"
    if "ecc" in low:
        return "ecc_xid", f
    return "cuda_error", f


def _cuda_error_named(text: str, msg: str):
    """A CUDA error known by what printed it, not by a "CUDA error: <text>" sentence."""
    return _cuda_error(re.match(r"(?P<text>.*)", text), msg)


def _xid(m: re.Match[str], msg: str):
    rest = m["rest"].strip()
    rest = re.sub(r"^pid=[^,]*,\s*(?:name=[^,]*,\s*)?", "", rest).strip().rstrip(".")
    f = {"xid": int(m["xid"]), "pci": m["pci"], "xid_message": rest}
    known = catalogue.XIDS.get(f["xid"])
    if known:
        f["xid_name"], f["xid_origin"], f["xid_action"] = known
    return "ecc_xid", f


def _fallen_off_bus(m: re.Match[str], msg: str):
    """The driver's own "GPU ... has fallen off the bus" without an Xid line (it may span three NVRM lines)."""
    name, origin, action = catalogue.XIDS[79]
    f = {"xid_message": "GPU has fallen off the bus", "xid_name": name, "xid_origin": origin, "xid_action": action}
    pci = re.search(r"GPU (?:at PCI:)?([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.?\d?)", msg)
    if pci:
        f["pci"] = pci[1]
    return "ecc_xid", f


def _ecc(m: re.Match[str], msg: str):
    return "ecc_xid", {"ecc_message": msg.strip()[:200]}


#: NCCL's own sockets (bootstrap, proxy, net): its ``NCCL WARN``/``INFO`` lines and socket source files
_NCCL_SOCKET = re.compile(r"NCCL (?:WARN|INFO)|\bsocket\.(?:h|cc):\d+|bootstrap\.cc")


def _addr_in_use(m: re.Match[str], msg: str):
    if _NCCL_SOCKET.search(msg):
        return None  # NCCL could not bind one of its own sockets: an NCCL error, not the c10d store's port
    f: dict = {"errno": 98}
    p = re.search(r"(?:\]|\d):(\d{2,5})\b[^\n]*?(?:errno|Address)|port:? (\d{2,5})", msg)
    if p:
        f["port"] = int(p[1] or p[2])
    return "rendezvous_address_in_use", f


_STORE_CONTEXT = re.compile(r"(?i)c10d|TCPStore|socket|rendezvous|rdzv|store|MASTER_ADDR|init_process_group")


def _rdzv_timeout(m: re.Match[str], msg: str):
    if not m[0].startswith(("connect()", "client socket", "Rendezvous", "Timed out after", "DistStoreError")) and \
            not _STORE_CONTEXT.search(msg):
        return None  # an HTTP download or a metrics uploader timing out is not a rendezvous failure
    f: dict = {}
    t = re.search(r"Original timeout was (\d+) ?ms", msg)
    if t:
        f["connect_timeout_ms"] = int(t[1])
    t = re.search(r"timed out after (\d+)(ms|s)\b", msg)
    if t:
        f["connect_timeout_ms"] = int(t[1]) * (1 if t[2] == "ms" else 1000)
        f["client_timeout_s"] = f["connect_timeout_ms"] / 1000
    e = re.search(r"errno:? (\d+)", msg)
    if e:
        f["errno"] = int(e[1])
    # "(host, port)" (1.11+) or "host:port" (2.0/2.1: "... while trying to connect to 10.0.0.1:1234")
    a = (re.search(r"connect to \(?\[?([\w.:-]+?)\]?, (\d+)\)?", msg)
         or re.search(r"connect to \[?([\w.-]+?)\]?:(\d{1,5})\b", msg))
    if a:
        f["store_host"], f["store_port"] = a[1], int(a[2])
        f["endpoint"], f["port"] = f"{a[1]}:{a[2]}", int(a[2])
    if "refused" in msg.lower():
        f["reason"] = "connection refused"
    j = re.search(r"(\d+)/(\d+) (?:clients|workers) joined", msg)
    if j:
        f["worker_count"], f["world_size"] = int(j[1]), int(j[2])
        f["ranks_not_joined"] = f["world_size"] - f["worker_count"]
    return "rendezvous_timeout", f


def _store_barrier(m: re.Match[str], msg: str):
    """The old init barrier: ``worker_count`` of ``world_size`` ranks joined before the timeout."""
    f: dict = {"reason": "store based barrier"}
    for k in ("world_size", "worker_count"):
        x = re.search(k + r"=(\d+)", msg)
        if x:
            f[k] = int(x[1])
    if "world_size" in f and "worker_count" in f:
        f["ranks_not_joined"] = f["world_size"] - f["worker_count"]
    t = re.search(r"timeout=(\d+):(\d+):(\d+)", msg)
    if t:
        f["barrier_timeout_s"] = int(t[1]) * 3600 + int(t[2]) * 60 + int(t[3])
    return "rendezvous_timeout", f


def _unique_id_timeout(m: re.Match[str], msg: str):
    """A rank waited in the store for rank 0's ncclUniqueId and it never came (rank 0 never got there)."""
    f: dict = {"reason": "ncclUniqueId not published in the store", "unique_id_from_rank": int(m["src"]),
               "store_error": m["err"].strip()[:200]}
    t = re.search(r"after (\d+) ?ms", m["err"])
    if t:
        f["store_timeout_ms"] = int(t[1])
    return "rendezvous_timeout", f


def _spawn_signal(m: re.Match[str], msg: str):
    """torch.multiprocessing: "process 1 terminated with signal SIGKILL"."""
    num = next((n for n, v in catalogue.SIGNALS.items() if v[0] == m["name"]), None)
    kind = SIGNAL_KIND.get(num) if num else None
    if not kind:
        return None
    return kind, {"signal": m["name"], "exitcode": -num, "local_rank": int(m["proc"])}


def _rdzv_context(m: re.Match[str], msg: str):
    return "rdzv_context", {"rdzv_backend": m[1]}


def _launcher(m: re.Match[str], msg: str):
    cmd = m[0].strip()
    words = cmd.split()
    head = " ".join(words[:3] if words[0] == "python" else words[:2] if words[0] == "accelerate" else words[:1])
    if "--standalone" in words:
        head += " --standalone"
    return "launcher", {"launcher_cmd": head, "launcher_cmdline": cmd[:300]}



def _signal(m: re.Match[str], msg: str):
    num = m["num"]
    name = m["name"]
    if num is None and name:
        num = {v: k for k, v in SIGNALS.items()}.get(name.upper())
    f = {"signal": SIGNALS.get(int(num), name) if num else name}
    if num:
        f["exitcode"] = -int(num)
    if m["pid"]:
        f["pid"] = int(m["pid"])
    kind = SIGNAL_KIND.get(int(num)) if num else None
    return (kind, f) if kind else None


def _exitcode(m: re.Match[str], msg: str):
    code = int(m["code"])
    kind = SIGNAL_KIND.get(-code)
    if kind:
        f: dict = {"exitcode": code, "signal": SIGNALS[-code]}
    elif code != 0:
        # the agent saw a worker exit with an error code and stops the others: a worker failed (its own error
        # is usually above; diagnosis reports this line only when nothing else explains the failure)
        kind, f = "worker_failed", {"exitcode": code}
    else:
        return None
    if m["pid"]:
        f["pid"] = int(m["pid"])
    if m["lr"]:
        f["local_rank"] = f["failed_local_rank"] = int(m["lr"])
    return kind, f




def _launcher_exit(m: re.Match[str], msg: str):
    """A launcher's report of a worker that died of a signal: DeepSpeed's "... exits with return code = -9",
    subprocess's "died with <Signals.SIGKILL: 9>"."""
    g = m.groupdict()
    num = -int(g["code"]) if g.get("code") else int(g["num"])
    kind = SIGNAL_KIND.get(num)
    if not kind:
        return None
    f: dict = {"exitcode": -num, "signal": SIGNALS[num]}
    lr = re.search(r"--local_rank[= ](\d+)", msg)
    if lr:
        f["local_rank"] = f["failed_local_rank"] = int(lr[1])
    rk = re.search(r"process rank (\d+)", msg)  # mpirun names the rank
    if rk:
        f["rank"] = int(rk[1])
    return kind, f


def _exit_status_signal(m: re.Match[str], msg: str):
    """A shell-style exit status of 128+N: the process died of signal N ("exit code 137" is SIGKILL)."""
    code = int(m["code"])
    kind = SIGNAL_KIND.get(code - 128)
    return (kind, {"exitcode": code, "signal": SIGNALS[code - 128]}) if kind else None


_SHELL_SIGNAL = {"Aborted": 6, "Bus error": 7, "Segmentation fault": 11}


def _shell_signal(m: re.Match[str], msg: str):
    """A shell's job report: "script.sh: line 184: 2324239 Aborted    (core dumped) litgpt pretrain ..."."""
    num = _SHELL_SIGNAL[m["what"]]
    return SIGNAL_KIND[num], {"signal": SIGNALS[num], "exitcode": -num, "pid": int(m["pid"])}


def _slurm_cancel(m: re.Match[str], msg: str):
    """``*** JOB N ON node CANCELLED AT ts ***`` without a reason: scancel, or srun ending a step after a task
    failed (then an echo; the diagnosis decides)."""
    f: dict = {"slurm_job_id": _int(m["job"]), "cancelled_at": m["at"], "reason": "cancelled"}
    if m["node"]:
        f["node"] = m["node"]
    return "slurm_cancel_plain", f


def _killed(m: re.Match[str], msg: str):
    """A shell's bare ``Killed`` (the process got SIGKILL), alone or glued to a progress bar."""
    f: dict = {"signal": "SIGKILL", "exitcode": -9}
    if m["pid"]:
        f["pid"] = int(m["pid"])
    if m["tasks"]:  # srun's report of the step's task(s) that got it
        f["tasks"] = m["tasks"]
    bar = re.search(r"(\d+)/(\d+) \[[\d:<]+", msg)
    if bar:
        f["progress_step"], f["progress_total"] = int(bar[1]), int(bar[2])
    return "sigkill", f


def _catalogue_rule(entry: catalogue.Entry, pattern: str) -> Rule:
    def handler(m: re.Match[str], msg: str, kind: str = entry.kind):
        f: dict = {}
        for k, v in m.groupdict().items():
            if v is not None:
                v = v.strip()
                f[k] = int(v) if v.isdigit() else v
        if kind == "ib_completion_error" and "ib_status" in f:
            f["ib_completion_error"] = f["ib_status"]
            name, meaning = catalogue.IB_WC_STATUS.get(f["ib_status"], ("?", "unknown status"))
            f["ib_status_name"], f["ib_status_meaning"] = name, meaning
            if "vendor_err" in f and f["vendor_err"] in catalogue.IB_VENDOR_ERR:
                f["vendor_err_meaning"] = catalogue.IB_VENDOR_ERR[f["vendor_err"]]
        if kind == "dataloader_worker_killed":
            if "worker_signal" in f:
                # as Python's strsignal prints it in "killed by signal: Bus error" (the worker's own line is lower case)
                f["worker_signal"] = f["signal"] = f["worker_signal"][:1].upper() + f["worker_signal"][1:]
            pids = [int(x) for x in re.findall(r"\d+", str(f.get("worker_pids", "")))]
            if pids:
                f["pid"], f["pids"] = pids[0], pids
        if kind == "disk_full" and "dest" in f:
            f["source_path"] = f["path"]  # os.replace/shutil.move's "src -> dst": the full file system is the target's
            f["path"] = f.pop("dest")
        if kind == "connection_reset":
            peer = re.search(r"remote=\[?([\w.:-]+?)\]?:(\d+)\)|peer \[?([\w.:-]+?)\]?:(\d+)", msg)
            if peer:
                host, port = (peer[1], peer[2]) if peer[1] else (peer[3], peer[4])
                f["peer"], f["port"] = f"{host}:{port}", int(port)
        f.update(entry.facts)
        if kind == "sigbus" and ("DataLoader worker" in msg or "encountered in worker" in msg):
            f["signal"] = "Bus error"  # a DataLoader worker's: the signal as the DataLoader's message prints it
        return kind, f

    keys = entry.keywords
    return Rule(keys[0], re.compile(pattern), handler, keys[1:])



def _overflow(m: re.Match[str], msg: str):
    f: dict = {}
    a = re.search(r"Attempted loss scale: (\d+(?:\.\d+)?(?:e\+?\d+)?)", msg)
    if a:
        f["attempted_loss_scale"] = float(a[1])
    r = re.search(r"reducing (?:loss scale )?to:? (\d+(?:\.\d+)?(?:e\+?\d+)?)|"
                  r"setting loss scale to:? (\d+(?:\.\d+)?(?:e\+?\d+)?)", msg)
    if r:
        f["new_loss_scale"] = float(r[1] or r[2])
    # the scale's transition in the scaler's other sentence: "reducing dynamic loss scale from 8.0 to 4.0"
    t = re.search(r"(?i)loss[ _]scale from (\d+(?:\.\d+)?(?:e[+-]?\d+)?) to (\d+(?:\.\d+)?(?:e[+-]?\d+)?)", msg)
    if t:
        f.setdefault("attempted_loss_scale", float(t[1]))
        f.setdefault("new_loss_scale", float(t[2]))
    if "hysteresis" in msg:
        f["hysteresis"] = True
    if "already at minimum" in msg:  # the scaler gave up: DeepSpeed / apex end the run with this exception
        f["loss_scale_at_minimum"] = True
    if re.search(r"(?i)in a row|exiting", msg):  # GPT-NeoX: "Skipped 50 iterations in a row due to Overflow - Exiting"
        f["overflow_ended_run"] = True
    rk = re.search(r"Rank (\d+)", msg)
    if rk:
        f["rank"] = int(rk[1])
    return "overflow", f


def _traceback(m: re.Match[str], msg: str):
    return "traceback", {}


def _exception(m: re.Match[str], msg: str):
    return "exception", {"exception_type": m["type"], "exception_message": (m["text"] or "").strip()[:300]}


def _torch_version(m: re.Match[str], msg: str):
    return "torch_version", {"torch_version": m["v"]}


def _nccl_version(m: re.Match[str], msg: str):
    # "2.7.8+cuda11.0": the version is NCCL's own; the "+cuda..." tag is the CUDA it was built against
    version, _, build = m[1].partition("+")
    return "nccl_version", {"nccl_version": version, **({"nccl_build": build} if build else {})}


def _world_size(m: re.Match[str], msg: str):
    return "world_size", {"world_size": int(m["n"])}


def _dtype(m: re.Match[str], msg: str):
    return "dtype", {"dtype": {"fp16": "float16", "bf16": "bfloat16", "half": "float16"}.get(m[1].lower(),
                                                                                          m[1].lower())}


R = re.compile
RULES: list[Rule] = [
    Rule("WorkNCCL", R(r"[Cc]aught collective operation timeout: WorkNCCL\((?P<body>(?:[^()]|\([^()]*\))*)\)"
                       r"(?: ran for (?P<ran>\d+) milliseconds)?"), _timeout),
    # "failure detected by watchdog at work sequence id: N PG status: ..." (2.5+), "Exception (either an
    # error or timeout) detected by watchdog at work: N, last enqueued NCCL work: ..." (2.3/2.4), and
    # "Exception detected by watchdog at work: N"
    Rule("watchdog at work", R(r"detected by watchdog at work(?: sequence id)?: (?P<seq_num>\d+)"
                               r"(?:.*?last enqueued (?:NCCL )?work: (?P<last_enqueued_work>\d+))?"
                               r"(?:.*?last completed (?:NCCL )?work: (?P<last_completed_work>\d+))?"), _work_status),
    Rule("last enqueued", R(r"Timeout at NCCL work: (?P<seq_num>\d+), last enqueued NCCL work: "
                            r"(?P<last_enqueued_work>\d+), last completed NCCL work: (?P<last_completed_work>\d+)"),
         _work_status),
    # "Received a dump signal due to a collective timeout from  rank 2 and ..." (2.5+), "... from this local rank"
    # (also cut there by a terminal), "Received a timeout signal from this local rank and will start to dump" (2.3)
    Rule("Received a", R(r"Received a (?:timeout signal|dump signal due to a collective timeout) from\s+"
                         r"(?:this local|rank (?P<src>\d+))"), _dump_signal),
    Rule("watchdog", R(r"[Ww]atchdog got stuck|[Hh]eartbeat monitor timed out|watchdog thread .*hang"), _heartbeat,
         ("eartbeat monitor",)),
    Rule("communicator was aborted", R(r"NCCL communicator was aborted on rank (\d+)"), _aborted),
    Rule("nccl", R(r"(?i)NCCL error|ncclInternalError|ncclSystemError|ncclUnhandledCudaError|ncclRemoteError|"
                   r"ncclInvalidUsage|ncclInvalidArgument|DistBackendError.*NCCL"),
         _nccl_error_text),
    Rule("NCCL INFO", R(r"NCCL INFO \S+:\d+ -> (\d+)"), _nccl_rc),
    Rule("retcode", R(r"Failed to execute operation (?P<op>\w+) from rank (?P<rank>\d+), retcode (?P<rc>\d+)"),
         _nccl_retcode),
    Rule("NCCL WARN", _NCCL_NET_ERROR, _nccl_net_error),
    Rule("Connection closed by remote peer", _NCCL_NET_ERROR, _nccl_last_error, ("Call to recv ", "Call to send ")),
    Rule("NCCL WARN", R(r"NCCL WARN"), _nccl_warn),
    Rule("Last error:", R(r"Last error:(?P<text>.*)$"), _last_error),
    # nccl-tests "Test NCCL failure common.cu:958 '...'", and "NCCL failure common.cu:921 '...'" of older
    # nccl-tests and of programs that copied its NCCLCHECK macro
    Rule("NCCL failure", R(r"(?:Test )?NCCL failure (?P<site>\S+:\d+) '(?P<text>[^']*)'"), _test_failure),
    Rule("Test failure", R(r"(?P<host>[\w.-]+) pid (?P<pid>\d+): Test failure (?P<site>\S+:\d+)"), _test_failure_pid),
    Rule("out of memory", R(r"CUDA out of memory|OutOfMemoryError"), _oom),
    Rule("ALLOC_FAILED", R(r"CUBLAS_STATUS_ALLOC_FAILED|CUDNN_STATUS_ALLOC_FAILED|cudaErrorMemoryAllocation"),
         _oom_other),
    Rule("Cuda failure", R(r"Cuda failure (?:(\d+) )?'([^']*)'"), _cuda_failure),
    # PyTorch <= 1.0 (THC): "RuntimeError: cuda runtime error (59) : device-side assert triggered at /pytorch/...";
    # ROCm builds: "torch.AcceleratorError: HIP error: an illegal memory access was encountered"
    Rule("CUDA error", R(r"(?:CUDA error|HIP error|cuda runtime error \(\d+\) ?): (?P<text>[^\n]*?)(?:$|\n"
                         r"| CUDA kernel errors| HIP kernel errors| Compile with| at /\S+:\d+$)"), _cuda_error,
         ("cuda runtime error", "HIP error")),
    # the CUDA libraries' own status names, where no "CUDA error:" sentence carries them (Caffe/glog "Check failed:
    # status == CUBLAS_STATUS_SUCCESS (13 vs. 0)  CUBLAS_STATUS_EXECUTION_FAILED"); ALLOC_FAILED is read above
    # (not in a warning: cuDNN v8's "Warning: ... cudnn_status: CUDNN_STATUS_NOT_SUPPORTED" is printed by healthy runs
    # while it tries plans)
    Rule("_STATUS_", R(r"^(?!.*(?:[Ww]arning|\[W\d| W\d{4} ))(?!.*CUDA error: ).*?(?P<text>(?:CUBLAS|CUDNN|CUSOLVER|"
                       r"CUSPARSE|CUFFT)_STATUS_(?!SUCCESS\b|ALLOC_FAILED\b)[A-Z_]+)"), _cuda_error),
    # THC's "THCudaCheck FAIL file=.../THCCachingHostAllocator.cpp line=271 error=4 : unspecified launch failure"
    Rule("THCudaCheck FAIL", R(r"THCudaCheck FAIL file=\S+ line=\d+ error=\d+ : (?P<text>.+?)\s*(?:\s[x|│])?\s*$"),
         _cuda_error),
    # a CUDA kernel's failed assertion ("Indexing.cu:1422: indexSelectLargeIndex: block: [31,0,0], thread: [0,0,0]
    # Assertion `srcIndex < srcSelectDimSize` failed."): the device-side assert that "CUDA error:" reports later
    Rule("Assertion `", R(r"\.(?:cu|cuh|hip):\d+: \w+: block: \[[\d,]+\], thread: \[[\d,]+\] (?P<text>Assertion `)"),
         lambda m, msg: _cuda_error_named("device-side assert triggered", msg)),
    # not an Xid 79 line, which says the same and is read above
    Rule("fallen off the bus", R(r"^(?!.*Xid).*NVRM: .*fallen off the bus"), _fallen_off_bus),
    Rule("Xid", R(r"NVRM: Xid \((?:PCI:)?(?P<pci>[0-9a-fA-F:.]+)\): (?P<xid>\d+),(?P<rest>.*)"), _xid),
    # not "ECC Errors": that is a section header of every healthy `nvidia-smi -q`
    Rule("rror", R(r"(?i)uncorrectable ECC error|double[- ]bit (?:ECC )?error|DBE \(double bit error\)"), _ecc),
    Rule("in use", R(r"(?i)errno:? ?98\b|EADDRINUSE|Address already in use"), _addr_in_use),
    # "imed out": also the store's "Timed out after 901 seconds waiting for clients. 1/2 clients joined." (2.2:
    # "... waiting for workers. 1/2 workers joined.")
    Rule("imed out", R(r"connect\(\) timed out|client socket has timed out|errno:? ?110\b|Connection timed out"
                       r"|Timed out after \d+ seconds waiting for (?:clients|workers)"), _rdzv_timeout),
    # a store operation that timed out: "torch.distributed.DistStoreError: Socket Timeout" (older: RuntimeError)
    Rule("Socket Timeout", R(r"(?:DistStoreError|RuntimeError): Socket Timeout"), _rdzv_timeout),
    Rule("RendezvousTimeoutError", R(r"RendezvousTimeoutError"), _rdzv_timeout),
    Rule("store based barrier", R(r"Timed out initializing process group in store based barrier"), _store_barrier),
    # "[3] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value store by key
    # '0', but store->get('0') got error: wait timeout after 600000ms" (also "Timeout waiting for key", "Socket
    # Timeout"); a reset connection there is connection_reset
    Rule("ncclUniqueId", R(r"ncclUniqueId from \[(?P<src>\d+)\] via c10d key-value store.*? got (?:error|exception): "
                           r"(?P<err>(?i:wait timeout|timeout waiting for key|socket timeout).*)"), _unique_id_timeout),
    Rule("terminated with signal", R(r"process (?P<proc>\d+) terminated with signal (?P<name>SIG\w+)"), _spawn_signal),
    # the client retries a refused store connection until its timeout: the same failure class
    Rule("onnect", R(r"RendezvousConnectionError|client socket has failed to connect to .*(?:errno:? ?111|"
                         r"Connection refused)"), _rdzv_timeout),
    Rule("rendezvous", R(r"(\w+)_rendezvous_backend|rdzv[_-]backend[= ](\w+)"), _rdzv_context),
    Rule("run", R(r"^(?:torchrun|python3? -m torch\.distributed\.(?:run|launch)|deepspeed|accelerate launch)\b.*"),
         _launcher),
    Rule("Signal", R(r"Signal (?P<num>\d+) \((?P<name>SIG\w+)\) received by PID (?P<pid>\d+)"), _signal),
    # ProcessGroupNCCL's own notice before it aborts the process (every PyTorch since 1.8): a collective failed
    # or timed out; the line that says which usually precedes it
    Rule("failed or timed out", R(r"Some NCCL operations have failed or timed out|we are taking the entire process "
                                  r"down"), lambda m, msg: ("nccl_async_abort", {}), ("entire process down",)),
    # the agent tearing the workers down: one failed (or the agent itself was told to stop)
    Rule("closing signal", R(r"Sending process (?P<pid>\d+) closing signal (?P<name>SIG\w+)"),
         lambda m, msg: ("worker_stop", {"stopped_pid": int(m["pid"]), "stop_signal": m["name"]})),
    Rule("exitcode", R(r"failed \(exitcode: (?P<code>-?\d+)\) local_rank: (?P<lr>\d+)(?: \(pid: (?P<pid>\d+)\))?"), _exitcode),
    Rule("exits with return code", R(r"exits with return code = (?P<code>-\d+)"), _launcher_exit),
    # "exit code 137" (an IDE, kubectl exec), "exitCode: 137" / "Exit Code:    137" (a pod's state), "exited
    # with code 139" (docker): 128 + the signal
    Rule("exit code", R(r"(?i:exit(?:ed with)? ?(?:code|status))[:=]?\s*(?P<code>13[4579])\b"), _exit_status_signal,
         ("exit status", "exitCode", "Exit Code", "exited with code")),
    Rule("died with <Signals", R(r"died with <Signals\.SIG\w+: (?P<num>\d+)>"), _launcher_exit),
    # Open MPI's "mpirun noticed that process rank 7 with PID 0 on node n1 exited on signal 9 (Killed).", and
    # the same shape from other launchers (terminated / killed on signal N); UCX's "Caught signal 11 (...)"
    Rule("on signal", R(r"(?:exited|terminated|killed|died) on signal (?P<num>\d+)\b"), _launcher_exit),
    Rule("Caught signal", R(r"Caught signal (?P<num>\d+) \("), _launcher_exit),
    Rule("CANCELLED AT", R(r"\*\*\* (?:JOB|STEP) (?P<job>[\w.]+) (?:ON (?P<node>\S+) )?CANCELLED AT (?P<at>\S+) \*\*\*"),
         _slurm_cancel),
    Rule("Aborted", R(r"line \d+:\s+(?P<pid>\d+) (?P<what>Aborted|Bus error|Segmentation fault)\b"), _shell_signal,
         ("Bus error", "Segmentation fault")),
    Rule("Killed", R(r"^\s*Killed\s*$|[\]|]Killed\s*$|line \d+:\s+(?P<pid>\d+) Killed\s|tasks? (?P<tasks>[\d,-]+): Killed\b"), _killed),
    # srun: a task of the step exited with an error code (the step is then cancelled and the other tasks killed)
    Rule("Exited with exit code", R(r"tasks? (?P<tasks>[\d,-]+): Exited with exit code (?P<code>\d+)"),
         lambda m, msg: ("srun_task_exit", {"tasks": m["tasks"], "exitcode": int(m["code"])})
         if m["code"] != "0" else None),
    Rule("OVERFLOW", R(r"OVERFLOW!|[Gg]radient overflow|gradient overflow detected"), _overflow),
    # a skipped step in other words: ColossalAI's "found inf during ShardedOptimV2 step", "inf found in gradients"
    Rule("found inf", R(r"[Ff]ound inf(?:s|/nan)? (?:in|during) [\w .]{0,40}step"), _overflow),
    # steps skipped because of overflows, in that order of words ("Skipped 50 iterations in a row due to Overflow")
    Rule("due to", R(r"(?i)\bskipp\w*\b[^.]{0,60}\bdue to (?:fp16 |gradient |grad )?overflow"), _overflow),
    Rule("verflow", R(r"[Gg]radient overflow\.\s+Skipping step|overflow! Skipping step|[Gg]rad overflow on iteration"
                      # the loss scaler's own sentence, in any trainer's words (fairseq: "overflow detected,
                      # setting loss scale to: 0.0625")
                      r"|[Oo]verflow[\w ]{0,30}, (?:setting|reducing|decreasing) (?:the )?loss[ _]scale to"
                      # DeepSpeed's "[Rank 0] Overflow detected. Skipping step. Attempted loss scale: 8.0, reducing to 4.0"
                      r"|[Oo]verflow detected[.,]? Skipping step"),
         _overflow),
    # "Exception: Current loss scale already at minimum - cannot decrease scale anymore. Exiting run."
    Rule("already at minimum", R(r"loss scale already at minimum"), _overflow),
    Rule("Exception ignored in", R(r"Exception ignored in\b"), lambda m, msg: ("exception_ignored", {})),
    Rule("Traceback", R(r"^Traceback \(most recent call last\):"), _traceback),
    Rule("rror", R(r"^(?P<type>(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Interrupt|Failure))(?::\s*(?P<text>.*))?$"),
         _exception),
    Rule("xception", R(r"^(?P<type>(?:[A-Za-z_]\w*\.)*(?:[A-Z]\w*(?:Error|Exception)|Exception))(?::\s*(?P<text>.*))?$"),
         _exception),
    Rule("torch", R(r"(?:torch==|[Tt]orch(?:\.__)?[ _]?version(?:__)?[:=]? ?|PyTorch version:? )"
                    r"['\"]?(?P<v>\d+\.\d+(?:\.\d+)?(?:[a-z]+\d*)?(?:\+[\w.]+)?)"), _torch_version),
    Rule("NCCL version", R(r"NCCL version:? (\d+\.\d+\.\d+(?:\+\S+?)?)(?:[,\s]|$)"), _nccl_version),
    Rule("orld", R(r"(?:world[_ ]size|WORLD_SIZE)\s*[=:]?\s*(?P<n>\d+)\b"), _world_size),
    # Lightning, printed by each rank as it joins: "Initializing distributed: GLOBAL_RANK: 1, MEMBER: 2/2"
    Rule("GLOBAL_RANK", R(r"GLOBAL_RANK: (?P<r>\d+), MEMBER: \d+/(?P<n>\d+)"),
         lambda m, msg: ("world_size", {"world_size": int(m["n"]), "own_rank": int(m["r"])})),
    Rule("dtype", R(r"(?:dtype|precision)['\"]?\s*[=:]\s*['\"]?(float16|bfloat16|float32|fp16|bf16)"), _dtype,
         ("precision",)),
    # a precision switch that is on: "--bf16", "bf16=True", "'fp16': True", "fp16: enabled"
    Rule("bf16", R(r"(?<![\w-])-{0,2}['\"]?(bf16|fp16)['\"]?(?:\s*[=:]\s*['\"]?(?:True|true|1|enabled)\b|(?=\s|$))"
                   r"(?!\s*[=:])"), _dtype, ("fp16",)),
] + [_catalogue_rule(e, p) for e in catalogue.ENTRIES for p in e.patterns]

#: Literal words whose presence makes a line worth parsing (the bulk prefilter, also grep's list).
KEYWORDS: tuple[str, ...] = tuple(dict.fromkeys(
    [k for r in RULES for k in (r.keyword, *r.also)
     if k not in ("nccl", "rror", "xception", "run", "in use", "NCCL INFO", "onnect", "torch", "orld")]
    # "onnect" would make every "NCCL INFO Connected all rings" line a candidate; the rule's
    # regex needs one of these two
    + ["RendezvousConnectionError", "failed to connect", "torch==", "orch version", "orch_version", "operation timeout", "Watchdog",
       "world_size", "world size", "WORLD_SIZE",
       # a ChildFailedError entry's rank row: an excerpt cut inside the summary still lists these ranks
       "(local_rank:"]
    + ["NCCL error", "ncclInternalError", "ncclSystemError", "ncclUnhandledCudaError", "DistBackendError",
       "ncclRemoteError", "ncclInvalidUsage", "ncclInvalidArgument",
       "Error", "Exception", "torchrun", "deepspeed", "accelerate launch",
       "ECC", "double bit", "double-bit", "Killed", "Out of memory", "Connection refused", "errno: 111", "Address already in use", "EADDRINUSE", "errno", "Root Cause",
       "loss", "Loss", "LOSS", "iteration",
       # a loss printed by another name: cross-entropy (OpenNMT-py "xent:"), perplexity (its exp)
       "xent", "cross_entropy", "ppl:", "ppl=", "ppl ", "perplexity",
       # a record's counter alone on a line, its fields below it (Composer's "[batch=12/100]:", OLMo's "[step=10/..]")
       "[batch=", "[step=", "[iter=", "[global_step=", "=== Step ", "=== step "]))
#: Prefilter patterns that are not literals: NCCL return-code chains after a source line ("socket.cc:47
#: -> 3"), not a ring or channel of NCCL INFO ("-> 1[1] via", NCCL 2.4's "Ring 00 : 43 -> 44 [receive]":
#: every such line a candidate cost ~50 us in Python, 0.003x grep on a log of them)
PATTERNS: tuple[str, ...] = (r":\d+ -> \d+(?:\s|$)",)


def find_rank(msg: str) -> int | None:
    m = _RANK_IN_MSG.search(msg)
    return int(m[1]) if m else None


def pg_of(msg: str) -> str | None:
    m = _PG.search(msg)
    if not m:
        return None
    return m[3] or m[1]


_NCCL_PREFIX = re.compile(r"^(?P<host>[\w.-]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] ")


def nccl_prefix(msg: str) -> re.Match[str] | None:
    return _NCCL_PREFIX.match(msg)


def match_line(msg: str) -> list[tuple[str, dict, re.Match[str]]]:
    """Every rule that fires on ``msg`` (a message with its prefixes removed)."""
    out = []
    for rule in RULES:
        if rule.keyword.lower() not in msg.lower() if rule.keyword == "nccl" else (
                rule.keyword not in msg and not any(k in msg for k in rule.also)):
            continue
        m = rule.regex.search(msg)
        if not m:
            continue
        r = rule.handler(m, msg)
        if r is not None:
            out.append((r[0], r[1], m))
    if out and "WorkNCCL(" in msg:
        # the work's fields belong to every event of its line (an async exception names its error in
        # another rule's wording)
        w = _WORK.search(msg)
        if w:
            fields = work_fields(w["body"])
            for _kind, facts, _m in out:
                for k, v in fields.items():
                    facts.setdefault(k, v)
    return out


def wants_continuation(msg: str) -> int:
    """How many following lines a wrapped signature needs (terminal wrap of WorkNCCL(...))."""
    return 2 if needs_continuation(msg) else 0
