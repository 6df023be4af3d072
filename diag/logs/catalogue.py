"""The signature catalogue: every failure kind ``analyze-log`` reports, as plain data.

Each :class:`Entry` holds what a reader of the report needs: severity, what the kind means,
the usual causes (most likely first), the fix, the runbook id (``runbooks/<id>.md``) and real
example lines (wordings from PyTorch 1.x–2.9, NCCL 2.7–2.27, the kernel and the launchers,
with hosts and numbers changed). Entries with ``patterns`` are recognised by those regexes
alone (``signatures`` compiles them into rules; named groups become facts); the other kinds
need a parser with more logic and live in ``signatures.RULES``. The tables below the entries
map numbers to meanings: NCCL return codes, InfiniBand work-completion statuses, CUDA errors,
NVIDIA Xids and signals. ``tests/unit/logs/test_catalogue.py`` checks that every example line
is recognised as exactly its own kind.
"""

from __future__ import annotations

import dataclasses

ERROR, WARNING = "error", "warning"


@dataclasses.dataclass(frozen=True)
class Entry:
    kind: str
    severity: str
    runbook: str
    meaning: str
    causes: tuple[str, ...]
    fix: str
    examples: tuple[str, ...] = ()
    #: regexes that recognise the kind on their own (named groups become facts)
    patterns: tuple[str, ...] = ()
    #: literals of which every line of the kind contains one (the bulk prefilter's words); with patterns only
    keywords: tuple[str, ...] = ()
    #: the kind means the job (or one of its processes) died: the run fails
    fatal: bool = True
    #: facts every match of ``patterns`` has (e.g. the signal of a crash)
    facts: tuple[tuple[str, object], ...] = ()


E = Entry
ENTRIES: tuple[Entry, ...] = (
    E("nccl_timeout", ERROR, "nccl-timeout",
      "a collective ran past its timeout: a rank stopped joining collectives and the others waited",
      ("one rank is stuck or slow (a hang in its own code, data loading, a dead GPU)",
       "the ranks took different code paths and wait in different collectives",
       "a network link between the nodes dropped"),
      "find the suspect rank below and check its node, GPU and links; rerun with TORCH_NCCL_TRACE_BUFFER_SIZE=2000 "
      "to get Flight Recorder dumps",
      ("[rank3]:[E1107 10:50:18.780482185 ProcessGroupNCCL.cpp:607] [Rank 3] Watchdog caught collective operation "
       "timeout: WorkNCCL(SeqNum=25980, OpType=ALLREDUCE, NumelIn=4194304, NumelOut=4194304, Timeout(ms)=600000) "
       "ran for 600027 milliseconds before timing out.",
       "[E ProcessGroupNCCL.cpp:475] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=14, "
       "OpType=BROADCAST, Timeout(ms)=1800000) ran for 1800546 milliseconds before timing out.",
       "[rank5]:[E723 01:58:45.667329643 ProcessGroupNCCL.cpp:1743] [PG ID 0 PG GUID 0(default_pg) Rank 5] Received a "
       "dump signal due to a collective timeout from  rank 2 and we will try our best to dump the debug info. Last "
       "enqueued NCCL work: 136, last completed NCCL work: 136.")),
    E("nccl_heartbeat_stuck", ERROR, "nccl-heartbeat-stuck",
      "the NCCL watchdog thread itself hung (a CUDA or NCCL call blocked)",
      ("a CUDA call blocked on a faulty GPU", "a deadlock inside NCCL after a peer died"),
      "collect py-spy/gdb stacks of the stuck rank; check GPU health (dmesg Xid)",
      ("[rank0]:[F1107 10:50:18.780482185 ProcessGroupNCCL.cpp:1224] [PG 0 (default_pg) Rank 0] Heartbeat monitor "
       "timed out! Process will be terminated after dumping debug info. workMetaList_.size()=1",)),
    E("nccl_communicator_aborted", ERROR, "nccl-communicator-aborted",
      "the communicator was aborted after an earlier error on this or another rank",
      ("an earlier error (timeout, remote error) on some rank",), "look for the first error before it",
      ("RuntimeError: NCCL communicator was aborted on rank 3.",)),
    E("nccl_internal_error", ERROR, "nccl-internal-error",
      "NCCL hit an internal error (ncclInternalError, return code 3)",
      ("a peer went away during bootstrap or a connection", "network plugin or version trouble",
       "a mismatch of NCCL versions between nodes"),
      "rerun with NCCL_DEBUG=INFO and read the first NCCL WARN line",
      ("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, "
       "internal error - please report this issue to the NCCL developers, NCCL version 2.19.3",
       "node-1:1234:1290 [0] NCCL INFO init.cc:1358 -> 3")),
    E("nccl_system_error", ERROR, "nccl-system-error",
      "a system call inside NCCL failed (ncclSystemError, return code 2): socket, shared memory or interface",
      ("the socket interface is wrong or blocked (NCCL_SOCKET_IFNAME, firewall)",
       "/dev/shm is too small for NCCL's shared-memory transport", "a peer host is unreachable"),
      "check NCCL_SOCKET_IFNAME, connectivity between the nodes and the size of /dev/shm",
      ("RuntimeError: NCCL error in: /pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:784, unhandled system error, "
       "NCCL version 2.7.8",
       "ubuntu:9621:9688 [3] NCCL INFO transport/shm.cc:114 -> 2")),
    E("nccl_unhandled_cuda_error", ERROR, "nccl-unhandled-cuda-error",
      "a CUDA call made by NCCL failed (ncclUnhandledCudaError, return code 1)",
      ("a GPU fault (check Xid)", "peer access between GPUs not possible (IOMMU, ACS, container)",
       "driver and CUDA versions out of step"),
      "check the GPU (nvidia-smi, dmesg Xid) and the driver/CUDA versions",
      ("RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1191, unhandled cuda "
       "error, NCCL version 2.10.3",)),
    E("nccl_invalid_argument", ERROR, "nccl-invalid-usage",
      "NCCL rejected an argument (ncclInvalidArgument, return code 4)",
      ("a tensor on the wrong device or a null buffer", "ranks passed different counts or datatypes"),
      "check the tensors handed to the collective (device, dtype, size) on every rank",
      ("RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:121, invalid argument, "
       "NCCL version 2.14.3",)),
    E("nccl_invalid_usage", ERROR, "nccl-invalid-usage",
      "NCCL was used wrongly (ncclInvalidUsage, return code 5)",
      ("two ranks of one communicator on the same GPU (a device-selection bug: set the device from LOCAL_RANK)",
       "a communicator used after it was destroyed"),
      "call torch.cuda.set_device(LOCAL_RANK) before init_process_group; check the rank-to-GPU mapping",
      ("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, "
       "invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.19.3",)),
    E("nccl_remote_error", ERROR, "nccl-remote-error",
      "NCCL says a peer failed (ncclRemoteError, return code 6): the remote process exited or the network to it broke",
      ("the peer process crashed or was killed (read that rank's own log first)",
       "a network error between the nodes (link, switch, NIC)"),
      "find the rank that died first (its own error) before blaming the network; then check the link to the peer",
      ("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, "
       "remote process exited or there was a network error, NCCL version 2.20.5",
       "gpu-3:271408:271622 [1] misc/socket.cc:518 NCCL WARN Net : Call to recv from 10.2.3.14<58355> failed : "
       "Broken pipe",
       "gpu-3:271408:271583 [1] misc/socket.cc:538 NCCL WARN Net : Connection closed by remote peer "
       "gpu-3.cluster<47861>",
       "node-1:31855:32534 [0] NCCL INFO proxy.cc:698 -> 6",
       # the same failure quoted after "Last error:" of an exception (2.14-2.18 call it an internal error)
       "Net : Connection closed by remote peer node-7<50260>")),
    E("ib_completion_error", ERROR, "ib-completion-error",
      "the InfiniBand/RoCE transport got a failed work completion; the status number says what failed",
      ("status 12 (retry counter exceeded): a link, cable or switch problem, or the peer died",
       "status 4 / 10 / 11 (protection, access, remote operation): GPUDirect RDMA or memory registration trouble",
       "status 5 (flush): an echo of an earlier error on the same queue pair"),
      "check the link to the peer (ibstat, port counters, switch logs) and whether the peer process was still alive",
      ("node-2:29146:29854 [0] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer 10.8.12.1<49189> "
       "with status=12 opcode=1 len=0 vendor err 129 (Send) localGid ::ffff:10.8.12.2 remoteGids::ffff:10.8.12.1",
       "node-2:29146:29854 [0] transport/net_ib.cu:788 NCCL WARN NET/IB : Got completion with error 12, opcode 0, "
       "len 0, vendor err 129",
       # a vendor IB plugin's prefix ("NET/IBP"), without the space before "Got"
       "worker-1:2304:2356 [5] NCCL WARN NET/IBP:Got completion from peer 10.6.13.83<36315> with status=12 "
       "opcode=32698 len=32696 vendor err 129 (Send)"),
      patterns=(r"NET/IB\w* ?: ?Got completion (?:from peer (?P<peer>\S+) )?with (?:error |status=)(?P<ib_status>\d+)"
                r"(?:,? opcode[= ]?(?P<ib_opcode>\d+))?(?:,? len[= ]?\d+)?(?:,? vendor err (?P<vendor_err>\d+))?",),
      keywords=("Got completion",)),
    E("cuda_oom", ERROR, "cuda-oom", "the GPU ran out of memory",
      ("the model, batch or sequence does not fit", "memory fragmentation (reserved but unallocated)",
       "another process on the same GPU (device selection)"),
      "lower the micro batch / sequence length, enable activation checkpointing, or shard more "
      "(llmdiag estimate-memory)",
      ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
       "79.15 GiB of which 1.12 GiB is free.",
       "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 110.33 MiB (GPU 3; 39.59 GiB total "
       "capacity; 37.2 GiB already allocated; 20.19 MiB free; 38.1 GiB reserved in total by PyTorch)",
       "node-1:1234:1290 [0] enqueue.cc:1048 NCCL WARN Cuda failure 2 'out of memory'")),
    E("cuda_error", ERROR, "cuda-error", "a CUDA runtime error; which one says what usually caused it",
      ("a software bug in a kernel (illegal address, misaligned address, device-side assert)",
       "a driver or hardware fault (unknown error, launch failure with Xid in dmesg)"),
      "rerun with CUDA_LAUNCH_BLOCKING=1 to find the failing op; check dmesg for Xid",
      ("RuntimeError: CUDA error: an illegal memory access was encountered",
       "RuntimeError: CUDA error: unspecified launch failure",
       "RuntimeError: CUDA error: misaligned address",
       "RuntimeError: CUDA error: device-side assert triggered",
       "RuntimeError: cuda runtime error (59) : device-side assert triggered at /pytorch/torch/lib/THC/generic/"
       "THCStorage.cu:58",
       "torch.AcceleratorError: HIP error: an illegal memory access was encountered")),
    E("ecc_xid", ERROR, "ecc-xid", "the NVIDIA driver logged a GPU fault (Xid) or an uncorrectable ECC error",
      ("hardware Xids (48, 63, 64, 74, 79, 92, 94, 95, 119, 120...): memory, NVLink, bus or firmware faults",
       "application Xids (13, 31, 43...): a kernel fault in the job's own code"),
      "for hardware Xids drain the node and run the vendor diagnostics; for application Xids fix the software first",
      ("[Tue Mar  5 10:11:12 2024] NVRM: Xid (PCI:0000:b1:00): 79, pid=1234, GPU has fallen off the bus.",
       "RuntimeError: CUDA error: uncorrectable ECC error encountered",
       # the driver's own words, without an Xid line (newer drivers spread it over three NVRM lines)
       "               NVRM: fallen off the bus and is not responding to commands.",
       "[ 1843.308145] NVRM: GPU 0000:b3:00.0: GPU has fallen off the bus.")),
    E("rendezvous_address_in_use", ERROR, "rendezvous-address-in-use",
      "the c10d store could not bind its port (errno 98)",
      ("another job or a leftover process holds the port",), "pick a free MASTER_PORT or end the old process",
      ("RuntimeError: The server socket has failed to listen on any local network address. The server socket has "
       "failed to bind to [::]:29500 (errno: 98 - Address already in use).",)),
    E("rendezvous_timeout", ERROR, "rendezvous-timeout", "a worker could not reach the rendezvous store in time",
      ("MASTER_ADDR/port not reachable (firewall, wrong interface)", "the node with the store did not start"),
      "check MASTER_ADDR/port reachability (llmdiag preflight) and that all nodes started",
      ("[E108 20:04:34.467642512 socket.cpp:957] [c10d] The client socket has timed out after 900s while trying "
       "to connect to (10.7.1.28, 29500).",
       "RuntimeError: Timed out initializing process group in store based barrier on rank: 12, for key: "
       "store_based_barrier_key:1 (world_size=2048, worker_count=1792, timeout=0:30:00)",
       "torch.distributed.DistBackendError: [1] is setting up NCCL communicator and retrieving ncclUniqueId from [0] "
       "via c10d key-value store by key '0', but store->get('0') got error: wait timeout after 600000ms, keys: "
       "/default_pg/0//cuda//0",
       "torch.distributed.DistStoreError: Timed out after 6 seconds waiting for workers. 1/2 workers joined.",
       "torch.distributed.DistStoreError: Socket Timeout")),
    E("connection_reset", ERROR, "connection-reset",
      "the connection to the c10d store broke: the rendezvous host or its process went away",
      ("the process hosting the store (rank 0 / the agent) exited or crashed", "the store host rebooted or lost "
       "its network"),
      "read the log of the node that hosts the store (MASTER_ADDR) for its first error",
      ("RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer "
       "[10.1.2.3]:29500 TCPStore recvValue failed",
       "torch.distributed.DistStoreError: TCPStore recvValue failed: Connection reset by peer",
       "[W socket.cpp:464] [c10d] sendBytes failed on SocketImpl(fd=15, addr=[node-1]:45678, "
       "remote=[node-0]:29500): Broken pipe",
       "torch.distributed.DistNetworkError: Failed to recv, got 0 bytes. Connection was likely closed. Did the "
       "remote server shutdown or crash?",
       "[rank1]:[W618 10:26:54.029068449 TCPStore.cpp:125] [c10d] recvValue failed on SocketImpl(fd=105, "
       "addr=[localhost]:39468, remote=[::ffff:10.0.0.7]:12201): Connection reset by peer",
       "RuntimeError: [3] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value "
       "store by key '0', but store->get('0') got error: Connection reset by peer"),
      # not the benign exit-time warning of a healthy run ("Failed to check the \"should dump\" flag on
      # TCPStore, (maybe TCPStore server has shut down too early)"; 2.3/2.4: "Failed to get exception dump flag
      # from the global store.Connection reset by peer")
      # nor a client's connect retry ("TCP client failed to connect/validate to host ... - retrying")
      patterns=(r"(?i)^(?!.*(?:should dump|dump flag|shut down too early|destroy_process_group|- retrying))"
                r"(?:.*?)(?:TCPStore|recvValue|recvBytes|sendBytes|c10d|DistStoreError|DistNetworkError|store)\b.*?"
                r"(?P<reset>Connection reset by peer|Broken pipe|Connection closed by peer|recvValue failed)",
                r"(?P<reset>Connection was likely closed)\. Did the remote server shutdown or crash"),
      keywords=("Connection reset", "Broken pipe", "closed by peer", "recvValue failed", "Connection was likely")),
    E("host_oom_kill", ERROR, "host-oom-kill",
      "the kernel's OOM killer killed a process: host RAM ran out, not GPU memory",
      ("DataLoader workers or dataset copies per rank filling host RAM",
       "CPU offload (ZeRO-offload, pinned buffers) larger than the host",
       "checkpoint loading on every rank at once"),
      "lower num_workers / prefetch, load checkpoints with mmap or rank by rank, watch `free -g` during the run",
      ("[2059991.491542] Out of memory: Killed process 38127 (python3) total-vm:53312244kB, anon-rss:31451456kB, "
       "file-rss:74816kB, shmem-rss:12296kB, UID:0 pgtables:69068kB oom_score_adj:0",
       "[2059991.491436] oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,"
       "task_memcg=/user.slice,task=python3,pid=38127,uid=0",
       "[Mon Jan  8 10:00:01 2024] python invoked oom-killer: gfp_mask=0x100cca(GFP_HIGHUSER_MOVABLE), order=0",
       "slurmstepd: error: Detected 1 oom_kill event in StepId=4242.0. Some of the step tasks have been OOM Killed.",
       "      Reason:       OOMKilled",
       "slurmstepd: error: Job 42664148 exceeded memory limit (10889240 > 4194304), being killed",
       "srun: error: node-3: task 0: Out Of Memory",
       "Dec 18 19:34:56 gpu-1 systemd-oomd[840]: Killed /user.slice/user-1001.slice/user@1001.service/app.slice/"
       "train.scope due to memory pressure for /user.slice/user-1001.slice/user@1001.service being 51.07% > 50.00% "
       "for > 20s with reclaim activity"),
      patterns=(r"Out of memory: Kill(?:ed)? process (?P<killed_pid>\d+) \((?P<process>[^)]*)\)"
                r"(?:.*?anon-rss:(?P<anon_rss_kb>\d+) ?kB)?",
                r"oom-kill:constraint=(?P<oom_constraint>\w+).*?task=(?P<process>[^,\s]+),pid=(?P<killed_pid>\d+)",
                r"invoked oom-killer",
                r"Memory cgroup out of memory: Kill(?:ed)? process (?P<killed_pid>\d+) \((?P<process>[^)]*)\)",
                r"Detected (?P<oom_kill_events>\d+) oom[-_]kill events?",
                r"\bOOMKilled\b",
                # Slurm's own memory enforcement (jobacct_gather) and srun's report of an OOM-killed task
                r"exceeded memory limit \((?P<mem_used_kb>\d+) > (?P<mem_limit_kb>\d+)\), being killed",
                r"tasks? (?P<tasks>[\d,-]+): Out Of Memory",
                # the userspace OOM killer, systemd-oomd (its syslog prefix may be gone)
                r"Killed (?P<cgroup>/\S+) due to memory pressure"),
      keywords=("Killed process", "Kill process", "oom-kill", "oom_kill", "OOMKilled", "exceeded memory limit",
                "Out Of Memory", "due to memory pressure")),
    E("pod_evicted", ERROR, "pod-evicted",
      "Kubernetes evicted the pod: its node ran short of memory or disk and the kubelet stopped the containers",
      ("the node's memory ran low (MemoryPressure): this pod or a neighbour used more than its request",
       "the node's disk or ephemeral storage filled (DiskPressure): checkpoints, logs or /tmp inside the container"),
      "give training pods memory requests equal to their limits (Guaranteed QoS), keep checkpoints on a volume, "
      "and read the node's conditions (`kubectl describe node`)",
      ("4m11s   Warning   Evicted   pod/trainer-0   The node was low on resource: memory. Container trainer was "
       "using 5053216Ki, which exceeds its request of 0.",
       "Message:        The node was low on resource: ephemeral-storage.",
       "trainer-0   ml   Evicted   node-09   Pod The node had condition: [DiskPressure]."),
      # the kubelet's eviction messages (kubectl get events / describe pod); a scheduler's "node(s) had ..."
      # is a different wording
      patterns=(r"The node was low on resource: \[?(?P<evicted_resource>[\w-]+)",
                r"The node had condition: \[(?P<evicted_resource>\w+)\]"),
      keywords=("low on resource", "had condition")),
    E("sigbus", ERROR, "sigbus",
      "a process died of signal 7 (bus error): almost always shared memory (/dev/shm) ran out",
      ("/dev/shm too small (a container's default is 64 MiB) for NCCL or DataLoader shared memory",
       "a memory-mapped file truncated or on a failing disk"),
      "give the container a larger /dev/shm (docker --shm-size / --ipc=host, a memory-backed emptyDir in "
      "Kubernetes); or NCCL_SHM_DISABLE=1 as a stopgap",
      ("[gpu-1:378934:0:382579] Caught signal 7 (Bus error: nonexistent physical address)",
       "Bus error (core dumped)",
       "Signal 7 (SIGBUS) received by PID 4242"),
      patterns=(r"(?:\[(?P<host>[\w.-]+):(?P<pid>\d+)[^\]]*\] )?Caught signal 7 \(Bus error",
                r"(?:^|\s)Bus error(?: \(core dumped\))?\s*$",
                r"Fatal Python error: Bus error",
                # a DataLoader worker that died of SIGBUS (its shared-memory batch): the worker's death is
                # dataloader_worker_killed, its signal is this kind
                r"DataLoader worker \(pid(?:\(s\))? [\d, ]+\) is killed by signal: Bus error",
                # the worker's own SIGBUS handler, printed before it dies; the main process may then only say
                # "exited unexpectedly" (which of its two checks sees the dead worker first is a race)
                r"Unexpected bus error encountered in worker"),
      keywords=("Bus error", "Unexpected bus error"), facts=(("signal", "SIGBUS"), ("exitcode", -7))),
    E("dataloader_worker_killed", ERROR, "dataloader-worker-killed",
      "a DataLoader worker process died: the batch it was loading never arrives",
      ("host RAM ran out (the OOM killer: signal Killed)", "shared memory (/dev/shm) ran out (Bus error)",
       "a bad sample crashed the decoding code (Segmentation fault)"),
      "read the signal: Killed → lower num_workers / host memory use; Bus error → a larger /dev/shm; "
      "Segmentation fault → find the sample (num_workers=0 reproduces it in the main process)",
      # (the worker's "ERROR: Unexpected bus error encountered in worker" is this kind and sigbus at once)
      ("RuntimeError: DataLoader worker (pid 12345) is killed by signal: Killed.",
       "RuntimeError: DataLoader worker (pid(s) 4021, 4022) exited unexpectedly"),
      patterns=(r"DataLoader worker \(pid(?:\(s\))? (?P<worker_pids>[\d, ]+)\) (?:is killed by signal: "
                r"(?P<worker_signal>[^.]+)|exited unexpectedly)",
                r"Unexpected (?P<worker_signal>bus error|segmentation fault) encountered in worker"),
      keywords=("DataLoader worker", "encountered in worker")),
    E("dataloader_timeout", ERROR, "dataloader-worker-killed",
      "the DataLoader waited longer than its timeout for a batch from its workers",
      ("a worker is stuck: slow or hung storage (a network file system), a deadlock in the dataset code",
       "the workers are too slow for the timeout (heavy decoding, too few workers)"),
      "see what the workers wait on (py-spy dump of a worker's pid), check the storage the dataset reads; "
      "raise timeout= or num_workers only once that is understood",
      ("RuntimeError: DataLoader timed out after 1800 seconds",),
      patterns=(r"DataLoader timed out after (?P<timeout_s>\d+) seconds",), keywords=("DataLoader timed out",)),
    E("disk_full", ERROR, "disk-full",
      "a write failed because the disk (or the user's quota) is full, typically while saving a checkpoint",
      ("checkpoints accumulate without rotation", "the quota of a shared file system is used up",
       "/tmp or the container overlay is small"),
      "free space or move checkpoints to a larger volume; keep only the last N checkpoints",
      ("OSError: [Errno 28] No space left on device",
       "RuntimeError: [enforce fail at inline_container.cc:626] . PytorchStreamWriter failed writing file "
       "data/117: file write failed",
       "RuntimeError: [enforce fail at inline_container.cc:595] . unexpected pos 1234 vs 1200 ... "
       "No space left on device",
       "OSError: [Errno 122] Disk quota exceeded: '/home/user/ckpt/step_1000'",
       "RuntimeError: [enforce fail at inline_container.cc:664] . unexpected pos 704 vs 598",
       "RuntimeError: [enforce fail at inline_container.cc:778] . PytorchStreamWriter failed writing central "
       "directory: file write failed"),
      patterns=(r"(?:\[Errno (?P<errno>28|122)\] )?(?P<disk_error>No space left on device|Disk quota exceeded|ENOSPC|EDQUOT)(?:: '(?P<path>[^']+)'(?: -> '(?P<dest>[^']+)')?)?",
                # torch.save's zip writer hides the errno: a failed write of a checkpoint is almost always space
                r"(?P<disk_error>PytorchStreamWriter failed writing (?:file \S+|central directory): file write failed)",
                # its short write (written less than asked: the disk filled up mid-record or at the end)
                r"inline_container\.cc:\d+\] \. (?P<disk_error>unexpected pos \d+ vs \d+)"),
      keywords=("No space left", "quota exceeded", "ENOSPC", "EDQUOT", "file write failed", "unexpected pos")),
    E("child_failed", ERROR, "child-failed", "a worker process failed and torchrun stopped the job",
      ("see the root-cause rank's own error",), "read the root-cause rank's own log (its first error)",
      ("torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",),
      # the summary block that follows is read by analyzer._ChildFailedBlock; its header names the script or
      # module ("train.py FAILED") when the excerpt starts below the ChildFailedError line
      patterns=(r"ChildFailedError", r"Root Cause \(first observed failure\)", r"^(?:[\w-]+[./])+[\w-]+ FAILED\s*$"),
      keywords=("ChildFailedError", "Root Cause", " FAILED")),
    E("sigkill", ERROR, "worker-sigkill", "a worker was killed with SIGKILL (signal 9)",
      ("the host OOM killer", "the scheduler or an operator killed the job", "a watchdog escalation"),
      "check `dmesg | grep -i oom` and host memory use; the scheduler's log",
      ("Killed",
       "/bin/bash: line 1: 12345 Killed                  python train.py",
       "Signal 9 (SIGKILL) received by PID 4242",
       "[2023-04-14 13:11:27,885] [ERROR] [launch.py:434:sigkill_handler] ['/usr/bin/python3', '-u', 'main.py', "
       "'--local_rank=0'] exits with return code = -9")),
    E("sigabrt", ERROR, "worker-sigabrt", "a worker aborted (signal 6)",
      ("the NCCL watchdog took the process down after an error", "an uncaught C++ exception"),
      "look for the error printed just before the abort",
      ("Fatal Python error: Aborted", "Aborted (core dumped)"),
      patterns=(r"Aborted \(core dumped\)|Fatal Python error: Aborted",), keywords=("Abort",),
      facts=(("signal", "SIGABRT"), ("exitcode", -6))),
    E("segfault", ERROR, "worker-segfault", "a worker crashed with a segmentation fault (signal 11)",
      ("a native extension or library bug", "mismatched library versions"),
      "get a core dump / faulthandler stack; check extension and library versions",
      ("Segmentation fault (core dumped)",),
      # a DataLoader worker's segfault is that worker's death (dataloader_worker_killed), not a rank's
      patterns=(r"^(?!.*DataLoader worker).*(?:Segmentation fault|SIGSEGV|signal 11\b)",),
      keywords=("Segmentation fault",), facts=(("signal", "SIGSEGV"), ("exitcode", -11))),
    E("slurm_time_limit", ERROR, "slurm-time-limit", "Slurm cancelled the job at its time limit",
      ("the job needs more time than requested", "a hang used up the time"),
      "raise --time or resume from the last checkpoint",
      ("slurmstepd: error: *** JOB 123456 ON node-7 CANCELLED AT 2024-03-01T10:00:00 DUE TO TIME LIMIT ***",),
      patterns=(r"\*\*\* (?:JOB|STEP) (?P<slurm_job_id>[\w.]+) (?:ON (?P<node>\S+) )?CANCELLED AT (?P<cancelled_at>\S+) "
                r"DUE TO TIME LIMIT",),
      keywords=("TIME LIMIT",)),
    E("slurm_cancelled", ERROR, "slurm-cancelled",
      "Slurm cancelled the job or step before it finished: it was preempted, requeued or lost a node",
      ("a higher-priority job preempted it (a preemptible partition or QOS)",
       "the job was requeued (by the scheduler after a node failure, or `scontrol requeue`)",
       "a node of the allocation failed (NODE FAIL)"),
      "resume from the last checkpoint; for preemption save on the warning signal (--signal=USR1@120) and use "
      "--requeue; after a node failure drain that node and check its health",
      ("slurmstepd: error: *** JOB 32391783 ON cn119 CANCELLED AT 2021-06-18T13:05:36 DUE TO PREEMPTION ***",
       "slurmstepd: error: *** STEP 608.0 ON node-4 CANCELLED AT 2022-08-12T02:06:12 DUE TO JOB REQUEUE ***",
       "slurmstepd: error: *** JOB 77012 ON gpu-12 CANCELLED AT 2024-02-11T04:10:55 DUE TO NODE FAILURE ***"),
      # without "DUE TO ..." the line is srun ending a step after a task failed: an echo of that failure
      patterns=(r"\*\*\* (?:JOB|STEP) (?P<slurm_job_id>[\w.]+) (?:ON (?P<node>\S+) )?CANCELLED AT "
                r"(?P<cancelled_at>\S+) DUE TO (?P<reason>PREEMPTION|JOB REQUEUE|NODE FAIL(?:URE)?)\b",),
      keywords=("CANCELLED AT",)),
    E("python_exception", ERROR, "python-exception", "the training script raised an exception",
      ("a bug or a bad input in the script",), "read the exception and the last frames of its traceback",
      ("ValueError: too many values to unpack (expected 2)",)),
    E("gloo_timeout", ERROR, "nccl-timeout",
      "a gloo collective timed out waiting for a peer rank",
      ("a rank stopped participating (hang or crash)", "the network between the ranks is blocked"),
      "find the rank that did not reach the collective (its log ends first)",
      ("RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 60000ms for "
       "recv operation to complete",),
      # gloo (CPU) collectives time out in the transport, without a WorkNCCL record
      patterns=(r"gloo/.*Timed out waiting (?P<timeout_ms>\d+)ms for (?P<op>recv|send) operation",),
      keywords=("Timed out waiting",), facts=(("backend", "gloo"),)),
    E("launcher_stopped", ERROR, "launcher-stopped",
      "the launcher was stopped from outside (SIGTERM, SIGINT or SIGHUP): a time limit, a kill or the scheduler "
      "ended the job",
      ("a wrapper's or scheduler's time limit ran out (often after training hung or slowed down)",
       "the job was killed or interrupted by hand, or its terminal closed"),
      "find what stopped it and read the last progress before the stop: a stall or a slow rank is the real cause",
      ("torch.distributed.elastic.multiprocessing.api.SignalException: Process 21189 got signal: 15",),
      # built from the launcher's SignalException (diagnosis.findings_from_events): no line pattern of its own
      patterns=(), keywords=()),
    E("peer_lost", ERROR, "nccl-timeout",
      "a gloo peer closed its connection in the middle of a collective: that rank went away",
      ("the peer rank died (an exception, a signal, the OOM killer): its own log has the cause",
       "the peer's host lost its network"),
      "find the rank that died first (its own error, or the rank whose log ends first); this rank only saw it go",
      ("RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:537] Read error [127.0.0.1]:45453: "
       "Connection reset by peer",
       "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer "
       "[10.0.0.2]:60436"),
      # a rank-to-rank gloo pair, not the c10d store (connection_reset): no store word before the error
      patterns=(r"(?i)^(?!.*(?:TCPStore|recvValue|DistStoreError|store->))(?:.*?)gloo/transport/tcp/pair\.cc:\d+\]"
                r".*?(?P<reset>Connection reset by peer|Connection closed by peer|Broken pipe|Read error)"
                r"(?:.*?\[(?P<peer>[\w.:-]+)\]:(?P<port>\d+))?",),
      keywords=("pair.cc",), facts=(("backend", "gloo"),)),
    E("collective_hang", ERROR, "nccl-timeout",
      "Flight Recorder dumps show ranks blocked in a collective that some rank never entered or never finished",
      ("the named rank was elsewhere (its own hang, data loading, a rank-dependent code path)",
       "the ranks issued different collectives (op, size or dtype differ at the same sequence id)"),
      "look at the named rank's stack (py-spy dump) and code path at that step; make all ranks issue the same "
      "collectives", ()),
    E("nan_loss", ERROR, "nan-loss", "the loss became NaN/Inf",
      ("divergence (learning rate too high)", "fp16 overflow", "a bad batch"),
      "restart from the last good checkpoint with a lower LR / clipping; inspect the batch",
      ("RuntimeError: Rank 5, node node-2, device 5, iteration 1200: Unexpected result nan (message='found NaN in "
       "local forward loss calculation')",
       "Loss is nan, stopping training"),
      # Megatron-core's check of the forward loss (the older wording is an AssertionError "Rank N: found NaN ...")
      patterns=(r"(?:Rank (?P<rank>\d+)\b.*?)?found (?:NaN|Inf) in local forward loss",
                # DETR-style engines print the loss and exit: "Loss is nan, stopping training"
                r"Loss is (?P<loss_value>[-+]?(?:nan|inf|NaN|Inf)), stopping training"),
      keywords=("in local forward loss", "stopping training"), fatal=False),
    E("nan_grad_norm", ERROR, "nan-loss", "the gradient norm became NaN/Inf",
      ("a bad batch or divergence", "fp16 overflow (with fp16)"),
      "enable anomaly detection on the failing steps; inspect the batches",
      ("AssertionError: Rank 11: found NaN in local grad norm in backward pass before data-parallel communication "
       "collective. Device: 3, node: node-7",
       "RuntimeError: Function 'PowBackward1' returned nan values in its 1st output."),
      # Megatron-core checks the local grad norm before the data-parallel reduce and stops the run
      patterns=(r"(?:Rank (?P<rank>\d+)\b.*?)?found (?:NaN|Inf) in local grad norm",
                # autograd's anomaly mode stops at the first backward op that produced a NaN
                r"Function '(?P<grad_fn>\w+)' returned nan values in its (?P<output_index>\d+)(?:st|nd|rd|th) output"),
      keywords=("in local grad norm", "returned nan values"), fatal=False),
    E("zero_loss", ERROR, "zero-loss", "the loss is exactly zero (steps skipped or labels masked out)",
      ("all labels masked", "every step skipped"), "check the labels / loss mask and the skipped-step counters", (),
      fatal=False),
    E("loss_spike", WARNING, "loss-spike", "the loss jumped well above its recent baseline",
      ("a bad batch", "learning rate too high"), "inspect the data around the spike; consider lower LR or tighter "
      "clipping", (), fatal=False),
    E("grad_norm_explosion", ERROR, "grad-norm-explosion", "the gradient norm grew by orders of magnitude",
      ("learning rate too high", "bad batches"), "lower the LR, clip gradients, check for bad batches", (),
      fatal=False),
    E("grad_norm_spike", WARNING, "grad-norm-explosion", "the gradient norm jumped well above its median",
      ("a bad batch",), "watch the loss; inspect the batches at those steps", (), fatal=False),
    E("grad_overflow", WARNING, "grad-overflow", "fp16 gradients overflowed and steps were skipped",
      ("fp16 range exceeded", "learning rate too high"), "prefer bf16, or check the loss scaler's settings and the LR",
      ("[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 64, reducing to 32",), fatal=False),
    E("throughput_drop", WARNING, "throughput-drop", "steps became much slower during steady training",
      ("a straggler node", "thermal throttling", "data loading or checkpoint I/O"),
      "check for a straggler node, thermal throttling, data loading or checkpoint I/O", (), fatal=False),
    E("hang_no_progress", ERROR, "hang-no-progress", "training output stopped without an error",
      ("a hang in a collective", "a deadlock in data loading"),
      "dump the stacks of every rank (py-spy dump); look for the rank that is not in a collective", (),
      fatal=False),
    E("nccl_warn", WARNING, "nccl-warn", "NCCL printed warnings", ("the first sign of the error that follows",),
      "read the first NCCL WARN line", ("node-1:1234:1290 [0] NCCL WARN Bootstrap : no socket interface found",),
      fatal=False),
)

CATALOGUE: dict[str, Entry] = {e.kind: e for e in ENTRIES}

#: NCCL's ncclResult_t: number -> (name, kind, meaning)
NCCL_RETURN_CODES: dict[int, tuple[str, str | None, str]] = {
    1: ("ncclUnhandledCudaError", "nccl_unhandled_cuda_error", "a CUDA call made by NCCL failed"),
    2: ("ncclSystemError", "nccl_system_error", "a system call failed (socket, shared memory, interface)"),
    3: ("ncclInternalError", "nccl_internal_error", "an internal NCCL error (often after a peer went away)"),
    4: ("ncclInvalidArgument", "nccl_invalid_argument", "an invalid argument (buffer, device, count)"),
    5: ("ncclInvalidUsage", "nccl_invalid_usage", "invalid usage (e.g. two ranks on one GPU)"),
    6: ("ncclRemoteError", "nccl_remote_error", "the remote process exited or the network to it failed"),
    7: ("ncclInProgress", None, "a non-blocking call is still in progress (not an error)"),
}
#: the text NCCL's ncclGetErrorString prints for each code (as it appears in PyTorch's messages)
NCCL_ERROR_TEXT: dict[str, int] = {
    "unhandled cuda error": 1, "unhandled system error": 2, "internal error": 3, "invalid argument": 4,
    "invalid usage": 5, "remote process exited or there was a network error": 6,
    "ncclunhandledcudaerror": 1, "ncclsystemerror": 2, "ncclinternalerror": 3, "ncclinvalidargument": 4,
    "ncclinvalidusage": 5, "ncclremoteerror": 6,
}

#: ibv_wc_status: number -> (name, meaning)
IB_WC_STATUS: dict[int, tuple[str, str]] = {
    1: ("IBV_WC_LOC_LEN_ERR", "local length error: a message larger than the receive buffer"),
    2: ("IBV_WC_LOC_QP_OP_ERR", "local queue-pair operation error"),
    3: ("IBV_WC_LOC_EEC_OP_ERR", "local EE context operation error"),
    4: ("IBV_WC_LOC_PROT_ERR", "local protection error: the buffer's memory registration is invalid "
        "(GPUDirect RDMA / nvidia-peermem trouble, IOMMU)"),
    5: ("IBV_WC_WR_FLUSH_ERR", "work request flushed: the queue pair already failed (an echo of an earlier error)"),
    6: ("IBV_WC_MW_BIND_ERR", "memory window bind error"),
    7: ("IBV_WC_BAD_RESP_ERR", "bad response from the peer"),
    8: ("IBV_WC_LOC_ACCESS_ERR", "local access error"),
    9: ("IBV_WC_REM_INV_REQ_ERR", "the peer found the request invalid"),
    10: ("IBV_WC_REM_ACCESS_ERR", "remote access error: the peer's memory registration was invalid or gone "
         "(the peer process may have died)"),
    11: ("IBV_WC_REM_OP_ERR", "the peer could not complete the operation"),
    12: ("IBV_WC_RETRY_EXC_ERR", "transport retry counter exceeded: the peer did not answer "
         "(link, cable, switch or routing problem, or a dead peer)"),
    13: ("IBV_WC_RNR_RETRY_EXC_ERR", "receiver-not-ready retry counter exceeded: the peer stopped posting receives"),
    14: ("IBV_WC_LOC_RDD_VIOL_ERR", "local RDD violation"),
    15: ("IBV_WC_REM_INV_RD_REQ_ERR", "remote invalid RD request"),
    16: ("IBV_WC_REM_ABORT_ERR", "the peer aborted the operation"),
    19: ("IBV_WC_FATAL_ERR", "fatal error of the adapter"),
    20: ("IBV_WC_RESP_TIMEOUT_ERR", "response timeout"),
    21: ("IBV_WC_GENERAL_ERR", "general error"),
}
#: Mellanox vendor error numbers that come with them
IB_VENDOR_ERR: dict[int, str] = {
    0x81: "timeout and transport retry counter exceeded", 0x88: "remote access error (bad rkey)",
    0x32: "local length error", 0x51: "local protection error",
}

#: CUDA runtime errors: text (lower case, as printed after "CUDA error: ") -> (cudaError name, kind, usual cause)
CUDA_ERRORS: dict[str, tuple[str, str, str]] = {
    "an illegal memory access was encountered": (
        "cudaErrorIllegalAddress", "cuda_error",
        "a kernel read or wrote outside its memory: most often a software bug (an out-of-range index, a custom or "
        "fused kernel, a library version mismatch), rarely a bad GPU"),
    "unspecified launch failure": (
        "cudaErrorLaunchFailure", "cuda_error",
        "a kernel crashed: often a GPU or driver fault on the node (check dmesg for Xid 13/31/43/79), else a kernel "
        "bug"),
    "misaligned address": (
        "cudaErrorMisalignedAddress", "cuda_error",
        "a kernel used a misaligned pointer: a software bug (custom kernels, odd tensor shapes or strides)"),
    "device-side assert triggered": (
        "cudaErrorAssert", "cuda_error",
        "a kernel assertion failed: usually an index out of range (labels >= vocabulary size, negative ids in an "
        "embedding or cross-entropy)"),
    "an illegal instruction was encountered": (
        "cudaErrorIllegalInstruction", "cuda_error",
        "the GPU hit an illegal instruction: a kernel built for another architecture, or a hardware fault"),
    "unknown error": ("cudaErrorUnknown", "cuda_error",
                      "the driver is in a bad state: often a GPU fault (check Xid), a reboot of the node helps"),
    "no kernel image is available for execution on the device": (
        "cudaErrorNoKernelImageForDevice", "cuda_error",
        "the build does not include this GPU's architecture (reinstall a matching torch / extension build)"),
    "cuda-capable device(s) is/are busy or unavailable": (
        "cudaErrorDevicesUnavailable", "cuda_error",
        "the GPU is in exclusive compute mode and another process holds it, or it is not visible"),
    "invalid device ordinal": (
        "cudaErrorInvalidDevice", "cuda_error",
        "a rank selected a GPU index that does not exist (LOCAL_RANK larger than the visible GPUs)"),
    "initialization error": ("cudaErrorInitializationError", "cuda_error",
                             "CUDA could not initialise: a driver problem, or CUDA used in a forked process"),
    "the launch timed out and was terminated": ("cudaErrorLaunchTimeout", "cuda_error",
                                                "a kernel ran past the display watchdog"),
    "uncorrectable ecc error encountered": ("cudaErrorECCUncorrectable", "ecc_xid",
                                            "the GPU memory has an uncorrectable ECC error: a hardware fault"),
    "out of memory": ("cudaErrorMemoryAllocation", "cuda_oom", "the GPU ran out of memory"),
}

#: NVIDIA Xid: number -> (name, origin, what to do); origin "application" means the job's own code is the
#: usual cause, "hardware" the GPU, its memory, NVLink or the bus, "driver" the driver or firmware
XIDS: dict[int, tuple[str, str, str]] = {
    8: ("GPU stopped processing", "driver", "check the driver; a repeat points at the GPU"),
    13: ("Graphics Engine Exception", "application", "usually an illegal address in a kernel: fix the software; "
         "drain only if it repeats across jobs"),
    31: ("GPU memory page fault", "application", "a kernel accessed an invalid address: usually the application"),
    32: ("Invalid or corrupted push buffer stream", "driver", "driver or PCIe problem"),
    38: ("Driver firmware error", "driver", "update the driver; reset the GPU"),
    43: ("GPU stopped processing", "application", "the job's kernel faulted and its channel was reset: the "
         "application, not the GPU"),
    45: ("Preemptive cleanup, due to previous errors", "application", "an echo of the process being killed or "
         "an earlier Xid"),
    48: ("Double Bit ECC Error", "hardware", "drain the node; the GPU needs a reset or replacement"),
    56: ("Display engine error", "driver", "driver problem"),
    61: ("Internal micro-controller breakpoint/warning", "hardware", "reset the GPU; report if it repeats"),
    62: ("Internal micro-controller halt", "hardware", "reset the GPU; drain if it repeats"),
    63: ("ECC page retirement or row remapping recording event", "hardware",
         "a memory row was remapped: reset the GPU to apply it"),
    64: ("ECC page retirement or row remapper recording failure", "hardware", "drain the node; replace the GPU"),
    68: ("NVDEC0 Exception", "driver", "video decoder fault"),
    69: ("Graphics Engine class error", "application", "usually the application"),
    74: ("NVLink Error", "hardware", "an NVLink fault: drain the node, check NVLink/NVSwitch"),
    79: ("GPU has fallen off the bus", "hardware", "the GPU vanished from PCIe: drain the node (power, thermal, "
         "riser or GPU failure)"),
    92: ("High single-bit ECC error rate", "hardware", "the memory is degrading: schedule a replacement"),
    94: ("Contained ECC error", "hardware", "the affected application was stopped; reset the GPU"),
    95: ("Uncontained ECC error", "hardware", "every process on the GPU is affected: drain the node and reset it"),
    109: ("Context Switch Timeout Error", "driver", "a context switch hung: a GPU, driver or application fault; "
          "check the Xids next to it"),
    119: ("GSP RPC timeout", "hardware", "the GPU's firmware stopped answering: reset the GPU or reboot"),
    120: ("GSP error", "hardware", "a GPU firmware error: reset the GPU or reboot"),
    121: ("C2C link error", "hardware", "a chip-to-chip link fault: drain the node"),
    140: ("Unrecovered ECC error", "hardware", "drain the node and reset the GPU"),
    149: ("NVLink/C2C fault", "hardware", "an interconnect fault: drain the node"),
    154: ("GPU recovery action changed", "hardware", "follow the recovery action the driver names (reset/reboot)"),
}

#: signal number -> (name, kind when a worker dies of it, usual cause)
SIGNALS: dict[int, tuple[str, str | None, str]] = {
    1: ("SIGHUP", None, "the terminal or session closed"),
    2: ("SIGINT", None, "interrupted (Ctrl-C)"),
    4: ("SIGILL", None, "an illegal CPU instruction (a binary built for another CPU)"),
    6: ("SIGABRT", "sigabrt", "the process aborted itself (NCCL watchdog, C++ exception)"),
    7: ("SIGBUS", "sigbus", "a bus error: shared memory (/dev/shm) ran out"),
    8: ("SIGFPE", None, "an arithmetic fault"),
    9: ("SIGKILL", "sigkill", "killed from outside (host OOM killer, scheduler)"),
    11: ("SIGSEGV", "segfault", "a segmentation fault in native code"),
    15: ("SIGTERM", None, "asked to stop (scheduler, torchrun after another worker failed)"),
}


def kinds() -> dict[str, tuple[str, str, str, str]]:
    """kind -> (severity, runbook, meaning, fix): the table the findings are built from."""
    return {e.kind: (e.severity, e.runbook, e.meaning, e.fix) for e in ENTRIES}


def runbook_ids() -> set[str]:
    return {e.runbook for e in ENTRIES}
