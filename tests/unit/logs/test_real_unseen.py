# ruff: noqa: W291  (trailing blanks are part of the printed lines: tqdm padding, DLLogger, NCCL messages)
"""A round of unseen real logs: excerpts from public reports that no other test or shared set cites, labelled
before ``analyze-log`` was run on them, then read through the real command.

Each excerpt keeps the printed lines of the report it names (repository and issue or pull request number), only
the lines a label or fact needs; host names, addresses, user names and home paths were changed. Labels use the
vocabulary of ``shared/logs/README.md`` and ``shared/logs-real/README.md``; facts are read from the JSON document's
``facts`` and compared the way ``test_manifest.py`` compares them. Judgement calls, made before the run:
a NaN loss whose grad norm is NaN too was ``nan_loss`` only (revised in the third round, data/round3: the
vocabulary's "NaN while the loss *may* stay finite" names a NaN grad norm whatever the loss, so both are labelled);
a shell's ``Killed`` for the trainer is ``sigkill`` beside the cgroup's OOM kill; an ``Errno 28`` raised while
creating a semaphore in ``/dev/shm`` is ``disk_full`` (the vocabulary's errno 28); ``torch.save``'s
``PytorchStreamWriter failed writing file ...: file write failed`` is ``disk_full`` (its report: the output volume
was full); a log line that cannot be told from an ordinary one (a bare ``Terminated`` task) gets no label.
Two labels were revised after the first run, for reasons of the vocabulary, not of the output: NCCL's return code 5
(``Duplicate GPU detected`` ... ``-> 5``) is this project's ``nccl_invalid_usage`` (a kind beyond the shared
vocabulary, labelled so in ``test_real_wordings_gpu_comm``), and the job it ends is dead (exit 1); a DataLoader
worker's own ``Unexpected bus error encountered in worker`` is printed only by a worker that then dies of SIGBUS, so
it is ``dataloader_worker_killed`` as well as ``sigbus``. In the second batch, NCCL's ``Cuda failure 999 'unknown
error'`` was first labelled ``cuda_error`` too; ``shared/logs/README.md`` maps "a ``Cuda failure`` reported by NCCL"
to ``nccl_unhandled_cuda_error`` (and ``test_real_wordings_gpu_comm`` labels the same wording so), so the label was
the error, not the output.
"""

from __future__ import annotations

import json
from typing import NamedTuple

import pytest
from click.testing import CliRunner

from llmdiag.cli import cli
from tests.unit.logs.test_manifest import same


class Case(NamedTuple):
    id: str
    source: str
    text: str
    labels: list[str]
    exit_code: int
    facts: dict


CASES = [
    Case('wd_terminated_pg_guid', 'deepspeedai/DeepSpeed#7533', r"""
[rank3]:[E901 05:20:03.614679108 ProcessGroupNCCL.cpp:684] [Rank 3] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.
[rank3]:[E901 05:20:03.614723891 ProcessGroupNCCL.cpp:698] [Rank 3] To avoid data inconsistency, we are taking the entire process down.
[rank3]:[E901 05:20:03.616086576 ProcessGroupNCCL.cpp:1899] [PG ID 0 PG GUID 0(default_pg) Rank 3] Process group watchdog thread terminated with exception: [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=460631, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600004 milliseconds before timing out.
Exception raised from checkTimeout at /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:635 (most recent call first):
frame #0: c10::Error::Error(c10::SourceLocation, std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >) + 0x98 (0x7fbd9cf785e8 in /usr/local/lib/python3.11/dist-packages/torch/lib/libc10.so)
frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<std::chrono::duration<long, std::ratio<1l, 1000l> > >) + 0x23d (0x7fbd47dcba6d in /usr/local/lib/python3.11/dist-packages/torch/lib/libtorch_cuda.so)
""", ['nccl_timeout'], 1, {'seq_num': 460631, 'op_type': 'ALLREDUCE', 'numel_in': 1, 'timeout_ms': 600000,
                          'first_reporting_rank': 3}),
    Case('wd_after_tqdm_pdsh_prefix', 'deepspeedai/DeepSpeed#6705', r"""
 99%|█████████▉| 23054/23316 [2:22:47<01:34,  2.79it/s][rank1]:[E1101 17:03:05.823968890 ProcessGroupNCCL.cpp:607] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=395, OpType=ALLREDUCE, NumelIn=336234306, NumelOut=336234306, Timeout(ms)=600000) ran for 600083 milliseconds before timing out.
10.0.0.170: [rank1]:[E1101 17:03:05.825934647 ProcessGroupNCCL.cpp:1664] [PG 1 Rank 1] Exception (either an error or timeout) detected by watchdog at work: 395, last enqueued NCCL work: 395, last completed NCCL work: 394.
10.0.0.170: [rank1]:[E1101 17:03:05.825965173 ProcessGroupNCCL.cpp:1709] [PG 1 Rank 1] Timeout at NCCL work: 395, last enqueued NCCL work: 395, last completed NCCL work: 394.
10.0.0.170: [rank1]:[E1101 17:03:05.825984408 ProcessGroupNCCL.cpp:621] [Rank 1] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.
10.0.0.170: [rank1]:[E1101 17:03:05.826126608 ProcessGroupNCCL.cpp:627] [Rank 1] To avoid data inconsistency, we are taking the entire process down.
""", ['nccl_timeout'], 1, {'seq_num': 395, 'numel_in': 336234306, 'last_completed_work': 394,
                          'first_reporting_rank': 1}),
    Case('wd_what_quoted_reply', 'huggingface/trl#1584', r"""
>   what():  [Rank 3] NCCL watchdog thread terminated with exception: [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=98947, OpType=_ALLGATHER_BASE, NumelIn=16384000, NumelOut=131072000, Timeout(ms)=1800000) ran for 1800437 milliseconds before timing out.
> Exception raised from checkTimeout at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:525 (most recent call first):
> frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x57 (0x7f5049fafd87 in /home/user/anaconda3/envs/mp/lib/python3.10/site-packages/torch/lib/libc10.so)
> frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<std::chrono::duration<long, std::ratio<1l, 1000l> > >) + 0x1e6 (0x7f504b1576e6 in /home/user/anaconda3/envs/mp/lib/python3.10/site-packages/torch/lib/libtorch_cuda.so)
> frame #2: c10d::ProcessGroupNCCL::workCleanupLoop() + 0x19d (0x7f504b15ac3d in /home/user/anaconda3/envs/mp/lib/python3.10/site-packages/torch/lib/libtorch_cuda.so)
> frame #3: c10d::ProcessGroupNCCL::ncclCommWatchdog() + 0x119 (0x7f504b15b839 in /home/user/anaconda3/envs/mp/lib/python3.10/site-packages/torch/lib/libtorch_cuda.so)
""", ['nccl_timeout'], 1, {'seq_num': 98947, 'op_type': '_ALLGATHER_BASE', 'numel_out': 131072000,
                          'timeout_ms': 1800000}),
    Case('wd_heartbeat_fatal_pg0', 'Intellindust-AI-Lab/DEIM#105', r"""
[rank1]:[E ProcessGroupNCCL.cpp:1316] [PG 0 Rank 1] Heartbeat monitor timed out! Process will be terminated after dumping debug info. workMetaList_.size()=103
[rank1]:[E ProcessGroupNCCL.cpp:1153] [PG 0 Rank 1] ProcessGroupNCCL preparing to dump debug info.
[rank1]:[F ProcessGroupNCCL.cpp:1169] [PG 0 Rank 1] [PG 0 Rank 1] ProcessGroupNCCL's watchdog got stuck for 600 seconds without making progress in monitoring enqueued collectives. This typically indicates a NCCL/CUDA API hang blocking the watchdog, and could be triggered by another thread holding the GIL inside a CUDA api, or other deadlock-prone behaviors.If you suspect the watchdog is not actually stuck and a longer timeout would help, you can either increase the timeout (TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC) to a larger value or disable the heartbeat monitor (TORCH_NCCL_ENABLE_MONITORING=0).If either of aforementioned helps, feel free to file an issue to PyTorch about the short timeout or false positive abort; otherwise, please attempt to debug the hang. workMetaList_.size() = 103
[rank0]:[E ProcessGroupNCCL.cpp:1316] [PG 0 Rank 0] Heartbeat monitor timed out! Process will be terminated after dumping debug info. workMetaList_.size()=84
""", ['nccl_heartbeat_stuck'], 1, {'stuck_s': 600}),
    Case('wd_heartbeat_480_pg_guid', 'hiyouga/LlamaFactory#8549', r"""
[rank2]:[E704 13:48:58.260494728 ProcessGroupNCCL.cpp:1746] [PG ID 0 PG GUID 0(default_pg) Rank 2] ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress in monitoring enqueued collectives. This typically indicates a NCCL/CUDA API (e.g., CudaEventDestroy) hang blocking the watchdog, and could be triggered by another thread holding the GIL inside a CUDA api (for example, CudaEventDestroy), or other deadlock-prone behaviors.If you suspect the watchdog is not actually stuck and a longer timeout would help, you can either increase the timeout (TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC) to a larger value or disable the heartbeat monitor (TORCH_NCCL_ENABLE_MONITORING=0).If either of aforementioned helps, feel free to file an issue to PyTorch about the short timeout or false positive abort; otherwise, please attempt to debug the hang. 
[rank1]:[E704 13:48:58.260509461 ProcessGroupNCCL.cpp:1746] [PG ID 0 PG GUID 0(default_pg) Rank 1] ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress in monitoring enqueued collectives. This typically indicates a NCCL/CUDA API (e.g., CudaEventDestroy) hang blocking the watchdog, and could be triggered by another thread holding the GIL inside a CUDA api (for example, CudaEventDestroy), or other deadlock-prone behaviors.If you suspect the watchdog is not actually stuck and a longer timeout would help, you can either increase the timeout (TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC) to a larger value or disable the heartbeat monitor (TORCH_NCCL_ENABLE_MONITORING=0).If either of aforementioned helps, feel free to file an issue to PyTorch about the short timeout or false positive abort; otherwise, please attempt to debug the hang. 
""", ['nccl_heartbeat_stuck'], 1, {'stuck_s': 480}),
    Case('wd_heartbeat_sub_pg', 'xdit-project/xDiT#147', r"""
[rank0]:[E ProcessGroupNCCL.cpp:1316] [PG 5 Rank 0] Heartbeat monitor timed out! Process will be terminated after dumping debug info. workMetaList_.size()=3
[rank4]:[E ProcessGroupNCCL.cpp:1316] [PG 5 Rank 0] Heartbeat monitor timed out! Process will be terminated after dumping debug info. workMetaList_.size()=2
[rank0]:[E ProcessGroupNCCL.cpp:1153] [PG 5 Rank 0] ProcessGroupNCCL preparing to dump debug info.
[rank4]:[E ProcessGroupNCCL.cpp:1153] [PG 5 Rank 0] ProcessGroupNCCL preparing to dump debug info.
[rank0]:[F ProcessGroupNCCL.cpp:1169] [PG 5 Rank 0] [PG 5 Rank 0] ProcessGroupNCCL's watchdog got stuck for 600 seconds without making progress in monitoring enqueued collectives. This typically indicates a NCCL/CUDA API hang blocking the watchdog, and could be triggered by another thread holding the GIL inside a CUDA api, or other deadlock-prone behaviors.If you suspect the watchdog is not actually stuck and a longer timeout would help, you can either increase the timeout (TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC) to a larger value or disable the heartbeat monitor (TORCH_NCCL_ENABLE_MONITORING=0).If either of aforementioned helps, feel free
""", ['nccl_heartbeat_stuck'], 1, {'stuck_s': 600}),
    Case('slurm_step_time_limit_terminated_tasks', 'desihub/desitarget#628', r"""
srun: Force Terminated job 32233190
srun: Job step aborted: Waiting up to 32 seconds for job step to finish.
slurmstepd: error: *** STEP 32233190.0 ON nid01934 CANCELLED AT 2020-07-03T02:59:56 DUE TO TIME LIMIT ***
srun: error: nid01934: tasks 2,4-5,7: Terminated
srun: Terminating job step 32233190.0
srun: error: nid01935: tasks 8-15: Terminated
srun: error: nid01934: tasks 0-1,3,6: Terminated
""", ['slurm_time_limit'], 1, {}),
    Case('slurm_cgroup_oom_shell_killed', 'ArjunaCluster/ArjunaUsers#52', r"""
/var/spool/slurmd/job00191/slurm_script: line 28:  8156 Killed                  python3 main.py --prop hform --epochs 400 --lr_milestones 50 100 200 --gamma 0.25 --normalizing_const_AO 10000.0 --lr_generator 0.001 --lr_conv 0.001
slurmstepd: error: Detected 1 oom-kill event(s) in StepId=191.batch cgroup. Some of your processes may have been killed by the cgroup out-of-memory handler.
""", ['host_oom_kill', 'sigkill'], 1, {}),
    Case('dmesg_oom_kill_grouped_digits', '0jc1/py-autovod#7', r"""
[Sun Mar 30 08:24:00 2025] [   7899]     0  7899  6546210  3842522 39899136  1039052
 0 python
[Sun Mar 30 08:24:00 2025] [  11794]  1000 11794      619      468    45056        0
 0 init
[Sun Mar 30 08:24:00 2025] oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,task_memcg=/init.scope,task=python,pid=7899,uid=0
[Sun Mar 30 08:24:00 2025] Out of memory: Killed process 7899 (python) total-vm:26,184,840kB, anon-rss:153,700,88kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:38964kB oom_score_adj:0
""", ['host_oom_kill'], 1, {'killed_pid': 7899, 'process': 'python'}),
    Case('xid48_dbe_then_page_retirement', 'NVIDIA/nvidia-docker#849', r"""
[Mon Oct 29 12:07:39 2018] NVRM: Xid (PCI:0000:8a:00): 48, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 4, subpartition 1.
[Mon Oct 29 12:07:40 2018] NVRM: Xid (PCI:0000:8a:00): 63, Dynamic Page Retirement: New page retired, reboot to activate (0x00000000002ce8ac).
""", ['ecc_xid'], 1, {'xid': 48}),
    Case('xid_43_31_94_pt_main_thread', 'akash-network/support#244', r"""
[Wed Jul 31 23:14:18 2024] NVRM: GPU at PCI:0000:00:05: GPU-efbdfde9-5798-a6e7-4c46-12518fa15375
[Wed Jul 31 23:14:18 2024] NVRM: GPU Board Serial Number: 1650423013443
[Wed Jul 31 23:14:18 2024] NVRM: Xid (PCI:0000:00:05): 43, pid=1045242, name=pt_main_thread, Ch 00000008
[Wed Jul 31 23:15:26 2024] NVRM: Xid (PCI:0000:00:05): 43, pid=1084984, name=pt_main_thread, Ch 00000008
[Mon Aug  5 03:54:13 2024] NVRM: GPU at PCI:0000:00:07: GPU-3b6ec030-5adc-1847-e155-79f635584b4e
[Mon Aug  5 03:54:13 2024] NVRM: Xid (PCI:0000:00:07): 31, pid=2512125, name=python3.10, Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_8 faulted @ 0x73ac_1c000000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_WRITE
[Fri Aug  9 13:32:56 2024] NVRM: Xid (PCI:0000:00:08): 94, pid='<unknown>', name=<unknown>, Contained: SM (0x1). RST: No, D-RST: No
""", ['ecc_xid'], 1, {}),
    Case('xid79_gsp_rc', 'NVIDIA/open-gpu-kernel-modules#1151', r"""
NVRM: GPU at PCI:0000:06:00: GPU-0b6b7808-c002-f593-ac86-cd8e57757b94
NVRM: GPU Board Serial Number: 0
NVRM: Xid (PCI:0000:06:00): 79, GPU has fallen off the bus.
NVRM: GPU 0000:06:00.0: GPU has fallen off the bus.
NVRM: GPU 0000:06:00.0: GPU serial number is 0.
NVRM: kgspRcAndNotifyAllChannels_IMPL: RC all channels for critical error 79.
NVRM: _threadNodeCheckTimeout: API_GPU_ATTACHED_SANITY_CHECK failed!
""", ['ecc_xid'], 1, {'xid': 79}),
    Case('tcpstore_recv_reset_rank6', 'tdrussell/diffusion-pipe#333', r"""
[rank6]:[W729 10:15:17.529361055 TCPStore.cpp:125] [c10d] recvValue failed on SocketImpl(fd=76, addr=[localhost]:60950, remote=[localhost]:29500): Connection reset by peer
Exception raised from recvBytes at /pytorch/torch/csrc/distributed/c10d/Utils.hpp:675 (most recent call first):
frame #0: c10::Error::Error(c10::SourceLocation, std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >) + 0x98 (0x7faded9785e8 in /opt/envs/wan/lib/python3.12/site-packages/torch/lib/libc10.so)
frame #1: <unknown function> + 0x5ba8bfe (0x7fadd1edcbfe in /opt/envs/wan/lib/python3.12/site-packages/torch/lib/libtorch_cpu.so)
""", ['connection_reset'], 1, {}),
    Case('addr_in_use_one_line', 'meta-pytorch/torchtune#392', r"""
torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use). The server socket has failed to bind to 0.0.0.0:29500 (errno: 98 - Address already in use).
""", ['rendezvous_address_in_use'], 1, {'port': 29500, 'errno': 98}),
    Case('addr_in_use_init_process_group', 'intelligent-machine-learning/dlrover#443', r"""
Traceback (most recent call last):
  File "model_zoo/pytorch/mnist_cnn.py", line 311, in <module>
    train(args)
  File "model_zoo/pytorch/mnist_cnn.py", line 92, in train
    setup()
  File "model_zoo/pytorch/mnist_cnn.py", line 74, in setup
    dist.init_process_group("nccl")
  File "/usr/local/lib/python3.8/site-packages/torch/distributed/distributed_c10d.py", line 754, in init_process_group
    store, rank, world_size = next(rendezvous_iterator)
  File "/usr/local/lib/python3.8/site-packages/torch/distributed/rendezvous.py", line 246, in _env_rendezvous_handler
    store = _create_c10d_store(master_addr, master_port, rank, world_size, timeout)
  File "/usr/local/lib/python3.8/site-packages/torch/distributed/rendezvous.py", line 177, in _create_c10d_store
    return TCPStore(
RuntimeError: The server socket has failed to listen on any local network address. The server socket has failed to bind to [::]:44796 (errno: 98 - Address already in use). The server socket has failed to bind to 0.0.0.0:44796 (errno: 98 - Address already in use).
""", ['rendezvous_address_in_use'], 1, {'port': 44796}),
    Case('addr_in_use_socket_cpp_agent', 'hao-ai-lab/FastVideo#575', r"""
[W socket.cpp:464] [c10d] The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use).
[W socket.cpp:464] [c10d] The server socket has failed to bind to 0.0.0.0:29500 (errno: 98 - Address already in use).
[E socket.cpp:500] [c10d] The server socket has failed to listen on any local network address.
Traceback (most recent call last):
  File "/usr/local/bin/torchrun", line 8, in <module>
    sys.exit(main())
             ^^^^^^
  File "/usr/local/lib/python3.11/dist-packages/torch/distributed/elastic/multiprocessing/errors/__init__.py", line 347, in wrapper
    return f(*args, **kwargs)
           ^^^^^^^^^^^^^^^^^^
""", ['rendezvous_address_in_use'], 1, {'port': 29500}),
    Case('ib_completion_err4_three_hosts', 'NVIDIA/nccl#928', r"""
H100-2:19989:20082 [1] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer fe80::966d:ae03:8b:df78%ib0<53249> with error 4, opcode 32564, len 32564, vendor err 81 (Send)
H100-2:19989:20082 [1] NCCL INFO transport/net.cc:1008 -> 6
H100-2:19989:20082 [1] NCCL INFO proxy.cc:679 -> 6
H100-2:19989:20082 [1] NCCL INFO proxy.cc:858 -> 6 [Proxy Thread]

H100-1:9821:9920 [1] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer fe80::966d:ae03:8b:df50%ib0<44413> with error 4, opcode 32613, len 32613, vendor err 81 (Send)
H100-1:9821:9920 [1] NCCL INFO transport/net.cc:1008 -> 6
H100-1:9821:9920 [1] NCCL INFO proxy.cc:679 -> 6
H100-1:9821:9920 [1] NCCL INFO proxy.cc:858 -> 6 [Proxy Thread]

H100-5:68738:69060 [3] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer fe80::966d:ae03:9c:f5f8%ib0<39391> with error 4, opcode 32639, len 32639, vendor err 81 (Send)
""", ['ib_completion_error', 'nccl_remote_error', 'nccl_warn'], 1,
         {'ib_completion_error': 4, 'vendor_err': 81, 'nccl_return_code': 6, 'nccl_warn_lines': 3}),
    Case('nccl_duplicate_gpu_invalid_usage', 'Azure/azureml-examples#675', r"""
8dbe9e7102e4446db27ef6fb1a2533e9000001:176:176 [0] NCCL INFO Bootstrap : Using [0]eth0:10.0.0.5<0>
8dbe9e7102e4446db27ef6fb1a2533e9000001:176:176 [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so), using internal implementation
8dbe9e7102e4446db27ef6fb1a2533e9000001:176:176 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1.
8dbe9e7102e4446db27ef6fb1a2533e9000001:176:176 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.5<0>
8dbe9e7102e4446db27ef6fb1a2533e9000001:176:176 [0] NCCL INFO Using network Socket
NCCL version 2.7.8+cuda11.0

8dbe9e7102e4446db27ef6fb1a2533e9000001:176:194 [0] init.cc:573 NCCL WARN Duplicate GPU detected : rank 0 and rank 1 both on CUDA device 1cb00000
8dbe9e7102e4446db27ef6fb1a2533e9000001:176:194 [0] NCCL INFO init.cc:840 -> 5
8dbe9e7102e4446db27ef6fb1a2533e9000001:176:194 [0] NCCL INFO group.cc:73 -> 5 [Async thread]
""", ['nccl_invalid_usage', 'nccl_warn'], 1, {'nccl_warn_lines': 1, 'nccl_version': '2.7.8'}),
    Case('errno28_collector_prefix', 'databrickslabs/dolly#139', r"""
2023-04-29 06:01:12.977 [177/train/578 (pid 28936)] [09c561ee-a44c-4795-967c-7183a83b3160] 2023-04-29 06:01:12 ERROR [__main__] main failed
2023-04-29 06:01:12.977 [177/train/578 (pid 28936)] [09c561ee-a44c-4795-967c-7183a83b3160] Traceback (most recent call last):
2023-04-29 06:01:12.977 [177/train/578 (pid 28936)] [09c561ee-a44c-4795-967c-7183a83b3160]   File "/opt/conda/lib/python3.7/site-packages/torch/serialization.py", line 379, in save
2023-04-29 06:01:12.977 [177/train/578 (pid 28936)] [09c561ee-a44c-4795-967c-7183a83b3160]     _save(obj, opened_zipfile, pickle_module, pickle_protocol)
2023-04-29 06:01:12.977 [177/train/578 (pid 28936)] [09c561ee-a44c-4795-967c-7183a83b3160]   File "/opt/conda/lib/python3.7/site-packages/torch/serialization.py", line 604, in _save
2023-04-29 06:01:12.977 [177/train/578 (pid 28936)] [09c561ee-a44c-4795-967c-7183a83b3160]     zip_file.write_record(name, storage.data_ptr(), num_bytes)
2023-04-29 06:01:12.977 [177/train/578 (pid 28936)] [09c561ee-a44c-4795-967c-7183a83b3160] OSError: [Errno 28] No space left on device
""", ['disk_full'], 1, {}),
    Case('torch_save_file_write_failed', 'h2oai/h2o-llmstudio#214', r"""
2023-07-01 16:41:05,669 - ERROR: Exception occurred during H2O LLM Studio run:
Traceback (most recent call last):
File "/root/.local/share/virtualenvs/workspace-dqq3IVyd/lib/python3.10/site-packages/torch/serialization.py", line 441, in save
_save(obj, opened_zipfile, pickle_module, pickle_protocol)
File "/root/.local/share/virtualenvs/workspace-dqq3IVyd/lib/python3.10/site-packages/torch/serialization.py", line 668, in _save
zip_file.write_record(name, storage.data_ptr(), num_bytes)
RuntimeError: [enforce fail at inline_container.cc:471] . PytorchStreamWriter failed writing file data/228: file write failed
""", ['disk_full'], 1, {}),
    Case('shm_semaphore_errno28_interleaved', 'NVIDIA/Megatron-LM#878', r"""
  File "/usr/lib/python3.10/multiprocessing/context.py", line 68, in Lock
  File "/usr/lib/python3.10/multiprocessing/context.py", line 68, in Lock
    return Lock(ctx=self.get_context())
      File "/usr/lib/python3.10/multiprocessing/synchronize.py", line 162, in __init__
return Lock(ctx=self.get_context())
  File "/usr/lib/python3.10/multiprocessing/synchronize.py", line 162, in __init__
    SemLock.__init__(self, SEMAPHORE, 1, 1, ctx=ctx)
  File "/usr/lib/python3.10/multiprocessing/synchronize.py", line 57, in __init__
    SemLock.__init__(self, SEMAPHORE, 1, 1, ctx=ctx)
  File "/usr/lib/python3.10/multiprocessing/synchronize.py", line 57, in __init__
    sl = self._semlock = _multiprocessing.SemLock(
    sl = self._semlock = _multiprocessing.SemLock(
OSError: [Errno 28] No space left on device
    return iter(dataloader)OSError
[Errno 28] No space left on device
""", ['disk_full'], 1, {}),
    Case('worker_bus_error_mmf', 'facebookresearch/mmf#441', r"""
2020-08-03T10:20:25 | mmf.utils.general: Total Parameters: 54731884. Trained Parameters: 54731884
2020-08-03T10:20:25 | mmf.trainers.core.training_loop: Starting training...
ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).
""", ['dataloader_worker_killed', 'sigbus'], 1, {}),
    Case('dataloader_bus_error_one_line', 'hkchengrex/STCN#132', r"""
RuntimeError: DataLoader worker (pid 46794) is killed by signal: Bus error. It is possible that dataloader's workers are out of shared memory. Please try to raise your shared memory limit.
""", ['dataloader_worker_killed', 'sigbus'], 1, {'pid': 46794}),
    Case('illegal_address_terminate_after_bar', 'RVC-Boss/GPT-SoVITS#1341', r"""
INFO:short_trian:Train Epoch: 1 [0%]
INFO:short_trian:[2.9181134700775146, 4.161535739898682, 17.82921028137207, 25.843229293823242, 0.0, 2.7403459548950195, 0, 9.99875e-05]
  5%|█████████▍                                                                                                                                                                                   | 5/100 [00:09<03:02,  1.92s/it]
terminate called after throwing an instance of 'c10::Error'
  what():  CUDA error: an illegal memory access was encountered
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
For debugging consider passing CUDA_LAUNCH_BLOCKING=1.
Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.
""", ['cuda_error'], 1, {}),
    Case('illegal_address_in_adam_step', 'NVlabs/STEP#8', r"""
Traceback (most recent call last):
  File "train.py", line 602, in <module>
    main()
  File "train.py", line 235, in main
    train(args, nets, optimizer, scheduler, train_dataloader, val_dataloader, log_file)
  File "train.py", line 362, in train
    optimizer.step()
  File "/usr/local/lib/python3.6/dist-packages/torch/optim/lr_scheduler.py", line 51, in wrapper
    return wrapped(*args, **kwargs)
  File "/usr/local/lib/python3.6/dist-packages/torch/optim/adam.py", line 103, in step
    denom = (exp_avg_sq.sqrt() / math.sqrt(bias_correction2)).add_(group['eps'])
RuntimeError: CUDA error: an illegal memory access was encountered
""", ['cuda_error'], 1, {}),
    Case('oom_wrapped_by_terminal', '152334H/DL-Art-School#56', r"""
OutOfMemoryError: CUDA out of memory. Tried to allocate 1.55 GiB (GPU 0; 23.99 GiB total capacity; 20.44 GiB already
allocated; 0 bytes free; 22.59 GiB reserved in total by PyTorch) If reserved memory is >> allocated memory try setting
max_split_size_mb to avoid fragmentation.  See documentation for Memory Management and PYTORCH_CUDA_ALLOC_CONF
Drücken Sie eine beliebige Taste . . .
""", ['cuda_oom'], 1, {'oom_tried_to_allocate_gib': 1.55, 'oom_total_capacity_gib': 23.99}),
    Case('oom_mib_this_process', 'pytorch/pytorch#16417', r"""
torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 22.00 MiB. GPU 0 has a total capacity of 23.65 GiB of which 11.06 MiB is free. Including non-PyTorch memory, this process has 23.60 GiB memory in use. Of the allocated memory 22.90 GiB is allocated by PyTorch, and 194.87 MiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)
""", ['cuda_oom'], 1, {'oom_tried_to_allocate_gib': 0.0215, 'oom_total_capacity_gib': 23.65,
                      'oom_process_in_use_gib': 23.6}),
    Case('ds_stage3_overflow_after_bar', 'dredwardhyde/gpt-neo-fine-tuning-example#7', r"""
  0%|                                      | 9/63645 [00:19<37:53:00,  2.14s/it][2021-06-08 12:02:45,001] [INFO] [stage3.py:2323:_overflow_clean_up] [deepscale] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 16777216.0, reducing to 8388608.0
[2021-06-08 12:02:45,002] [INFO] [timer.py:157:stop] 0/10, SamplesPerSec=1.8825260836384787
  0%|                                     | 10/63645 [00:21<37:46:42,  2.14s/it][2021-06-08 12:02:47,123] [INFO] [stage3.py:2323:_overflow_clean_up] [deepscale] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 8388608.0, reducing to 4194304.0
  0%|                                     | 11/63645 [00:24<37:41:45,  2.13s/it][2021-06-08 12:02:49,251] [INFO] [stage3.py:2323:_overflow_clean_up] [deepscale] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 4194304.0, reducing to 2097152.0
  0%|                                     | 12/63645 [00:26<37:40:18,  2.13s/it][2021-06-08 12:02:51,371] [INFO] [stage3.py:2323:_overflow_clean_up] [deepscale] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 2097152.0, reducing to 1048576.0
  0%|                                     | 13/63645 [00:28<37:36:38,  2.13s/it][2021-06-08 12:02:53,504] [INFO] [stage3.py:2323:_overflow_clean_up] [deepscale] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 1048576.0, reducing to 524288.0
""", ['grad_overflow'], 0, {'loss_scale_first': 16777216, 'loss_scale_last': 524288}),
    Case('ds_hysteresis_then_halvings', 'deepspeedai/DeepSpeed#5779', r"""
[2024-07-17 19:44:06,829] [INFO] [loss_scaler.py:190:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, but hysteresis is 2. Reducing hysteresis to 1
[2024-07-17 19:44:06,945] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768
[2024-07-17 19:44:07,064] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 32768, reducing to 16384
[2024-07-17 19:44:07,184] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 16384, reducing to 8192
[2024-07-17 19:44:07,303] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 8192, reducing to 4096
[2024-07-17 19:44:07,540] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 4096, reducing to 2048
[2024-07-17 19:44:09,300] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 2048, reducing to 1024
[2024-07-17 19:44:19,048] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 1024, reducing to 512
""", ['grad_overflow'], 0, {'loss_scale_first': 65536, 'loss_scale_last': 512}),
    Case('nan_pipe_columns_and_eval', 'datawhalechina/tiny-universe#31', r"""
step 100000: train loss nan, val loss nan
100000 | loss nan | lr 0.000000e+00 | 2006.12ms | mfu 1.68%
""", ['nan_loss'], 1, {}),
    Case('nan_tf_step_total_loss', 'thodan/epos#9', r"""
step: 0 total_loss: 9.5576973 obj_cls: 2.77258897 frag_cls: 4.15888262 frag_loc: 2.37503433
step: 100 total_loss: nan obj_cls: nan frag_cls: nan frag_loc: nan
INFO:tensorflow:global_step/sec: 2.1272
step: 200 total_loss: nan obj_cls: nan frag_cls: nan frag_loc: nan
INFO:tensorflow:global_step/sec: 2.22972
step: 300 total_loss: nan obj_cls: nan frag_cls: nan frag_loc: nan
""", ['nan_loss'], 1, {'nan_first_step': 100}),
    Case('nan_with_falling_loss_scale', 'christianpayer/MedicalDataAugmentationTool-VerSe#31', r"""
02:29:53: train iter: 0 loss_net: 0.9443 loss_scale: 32768.0000 norm: 21.8862 norm_average: 1.0100 seconds: 445.463
02:31:56: train iter: 100 loss_net: nan loss_scale: 785.4200 norm: nan norm_average: 0.8729 seconds: 122.871
02:33:59: train iter: 200 loss_net: nan loss_scale: 1.0000 norm: nan norm_average: 0.5793 seconds: 123.053
""", ['grad_overflow', 'nan_grad_norm', 'nan_loss'], 1, {'nan_first_step': 100}),
    Case('nan_mmdet_iter_and_grad_norm', 'liyih/RCTrans#6', r"""
2025-04-18 21:58:31,047 - mmdet - INFO - Iter [10100/316440]	lr: 3.990e-04, eta: 7 days, 4:23:57, time: 2.125, data_time: 0.014, memory: 15378, frame_0_loss_cls: 0.0000, frame_0_loss_bbox: 0.0000, frame_0_d0.loss_cls: 0.0000, frame_0_d0.loss_bbox: 0.0000, frame_0_d1.loss_cls: 0.0000, frame_0_d1.loss_bbox: 0.0000, frame_0_d2.loss_cls: 0.0000, frame_0_d2.loss_bbox: 0.0000, frame_0_d3.loss_cls: 0.0000, frame_0_d3.loss_bbox: 0.0000, frame_0_d4.loss_cls: 0.0000, frame_0_d4.loss_bbox: 0.0000, frame_0_dn_loss_cls: 0.0000, frame_0_dn_loss_bbox: 0.0000, frame_0_d0.dn_loss_cls: 0.0000, frame_0_d0.dn_loss_bbox: 0.0000, frame_0_d1.dn_loss_cls: 0.0000, frame_0_d1.dn_loss_bbox: 0.0000, frame_0_d2.dn_loss_cls: 0.0000, frame_0_d2.dn_loss_bbox: 0.0000, frame_0_d3.dn_loss_cls: 0.0000, frame_0_d3.dn_loss_bbox: 0.0000, frame_0_d4.dn_loss_cls: 0.0000, frame_0_d4.dn_loss_bbox: 0.0000, frame_0_enc_loss_cls: nan, frame_0_enc_loss_bbox: nan, frame_0_enc_loss_iou: nan, frame_0_centers2d_losses: nan, frame_0_centerness_losses: nan, loss: nan, grad_norm: nan
""", ['nan_grad_norm', 'nan_loss'], 1, {}),
    # second batch, collected and labelled after the first round's fixes, before running them
    Case('heartbeat_hard_wrapped_116', 'om-ai-lab/VLM-R1#257', r"""
[rank6]:[E429 13:55:49.384372190 ProcessGroupNCCL.cpp:1743] [PG ID 0 PG GUID 0(default_pg) Rank 6] ProcessGroupNCCL'
s watchdog got stuck for 480 seconds without making progress in monitoring enqueued collectives. This typically indi
cates a NCCL/CUDA API (e.g., CudaEventDestroy) hang blocking the watchdog, and could be triggered by another thread 
holding the GIL inside a CUDA api (for example, CudaEventDestroy), or other deadlock-prone behaviors.If you suspect 
the watchdog is not actually stuck and a longer timeout would help, you can either increase the timeout (TORCH_NCCL_
HEARTBEAT_TIMEOUT_SEC) to a larger value or disable the heartbeat monitor (TORCH_NCCL_ENABLE_MONITORING=0).If either
 of aforementioned helps, feel free to file an issue to PyTorch about the short timeout or false positive abort; oth
erwise, please attempt to debug the hang.                                                                           
[rank6]:[E429 13:55:49.384620373 ProcessGroupNCCL.cpp:1533] [PG ID 0 PG GUID 0(default_pg) Rank 6] ProcessGroupNCCL 
preparing to dump debug info. Include stack trace: 1                                                                
""", ['nccl_heartbeat_stuck'], 1, {'stuck_s': 480}),
    Case('wd_glued_to_faulthandler_number_wrapped', 'sgl-project/sglang#3836', r"""
deepseek-yanfa:193:3196 [5] NCCL INFO Channel 11/0 : 5[5] -> 6[6] via P2P/IPC
deepseek-yanfa:193:3196 [5] NCCL INFO Channel 13/0 : 5[5] -> 6[6] via P2P/IPC
Extension modules: charset_normalizer.md, requests.packages.charset_normalizer.md, requests.packages.chardet.md, uvloop.loop, numpy.core._multiarray_umath, numpy.core._multiarray_tests, numpy.linalg._umath_linalg, numpy.fft._pocketfft_internal, numpy.random._common, numpy.random.bit_generator, numpy.random._bounded_integers, numpy.random._mt19937, numpy.random.mtrand, numpy.random._philox, numpy.random._pcg64, numpy.random._sfc64, numpy.random._generator, torch._C, torch._C._dynamo.autograd_compiler, torch._C._dynamo.eval_frame, torch._C._dynamo.guards, torch._C._dynamo.utils, torch._C._fft, torch._C._linalg, torch._C._nested, torch._C._nn, torch._C._sparse, torch._C._special, psutil._psutil_linux, psutil._psutil_posix, setproctitle, zmq.backend.cython._zmq, yaml._yaml, markupsafe._speedups, PIL._imaging[rank5]:[E226 11:16:37.121617583 ProcessGroupNCCL.cpp:616] [Rank 5] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5653, OpType=ALLREDUCE, NumelIn=58720256, NumelOut=5872
0256, Timeout(ms)=600000) ran for 600028 milliseconds before timing out.
""", ['nccl_timeout'], 1, {'seq_num': 5653, 'op_type': 'ALLREDUCE', 'numel_in': 58720256, 'numel_out': 58720256,
                          'timeout_ms': 600000}),
    Case('child_failed_after_rich_traceback', 'bmaltais/kohya_ss#897', r"""
│ launch_agent                                                                                     │
│                                                                                                  │
│   242 │   │   │   # if the error files for the failed children exist                             │
│   243 │   │   │   # @record will copy the first error (root cause)                               │
│   244 │   │   │   # to the error file of the launcher process.                                   │
│ ❱ 245 │   │   │   raise ChildFailedError(                                                        │
│   246 │   │   │   │   name=entrypoint_name,                                                      │
│   247 │   │   │   │   failures=result.failures,                                                  │
│   248 │   │   │   )                                                                              │
╰──────────────────────────────────────────────────────────────────────────────────────────────────╯
ChildFailedError:
============================================================
train_network.py FAILED
------------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2023-06-04_02:11:04
  host      : desktop-1.lan
  rank      : 0 (local_rank: 0
""", ['child_failed'], 1, {'first_failing_rank': 0}),
    Case('watchdog_cuda_launch_failure', 'deepseek-ai/DeepSeek-MoE#47', r"""
[rank1]:[E410 01:50:33.889423318 ProcessGroupNCCL.cpp:1895] [PG ID 0 PG GUID 0(default_pg) Rank 1] Process group watchdog thread terminated with exception: CUDA error: unspecified launch failure
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
For debugging consider passing CUDA_LAUNCH_BLOCKING=1
Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.

Exception raised from c10_cuda_check_implementation at /pytorch/c10/cuda/CUDAException.cpp:43 (most recent call first):
""", ['cuda_error'], 1, {}),
    Case('launch_failure_after_empty_bar', 'huggingface/accelerate#157', r"""
  0%|                                                 | 0/100 [2:19:26<?, ?it/s]
Traceback (most recent call last):
  File "train.py", line 116, in <module>
    args.bucket, args.batch_size, args.max_len, args.epochs)
  File "train.py", line 81, in main
    accelerator, step, batch_size * max_len)
  File "train.py", line 28, in train
    optimizer.step()
  File "/opt/conda/lib/python3.7/site-packages/accelerate/optimizer.py", line 119, in step
    self.optimizer.step(closure)
  File "/opt/conda/lib/python3.7/site-packages/torch/optim/optimizer.py", line 88, in wrapper
    return func(*args, **kwargs)
  File "/home/user/stress_model/DemonRangerOptimizer/optimizers.py", line 471, in step
    torch.ones_like(p.data) - group['dropout'])
RuntimeError: CUDA error: unspecified launch failure
CUDA kernel errors might be asynchronously reported at some other API call,so the stacktrace below might be incorrect.
For debugging consider passing CUDA_LAUNCH_BLOCKING=1.
""", ['cuda_error'], 1, {}),
    Case('nccl_cuda_failure_999_finetrainers', 'NVIDIA/nccl#1653', r"""
DESKTOP-1CE5APL:1689:2800 [0] include/alloc.h:112 NCCL WARN Cuda failure 999 'unknown error'
DESKTOP-1CE5APL:1689:2800 [0] NCCL INFO include/alloc.h:199 -> 1
DESKTOP-1CE5APL:1689:2800 [0] NCCL INFO channel.cc:41 -> 1
DESKTOP-1CE5APL:1689:2800 [0] NCCL INFO init.cc:526 -> 1
DESKTOP-1CE5APL:1689:2800 [0] NCCL INFO group.cc:64 -> 1 [Async thread]
DESKTOP-1CE5APL:1689:1689 [0] NCCL INFO group.cc:418 -> 1
2025-03-21 17:08:31,569 - finetrainers - ERROR - Error during training: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.hpp:268, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5
ncclUnhandledCudaError: Call to CUDA function failed.
Last error:
Cuda failure 999 'unknown error'
""", ['nccl_unhandled_cuda_error', 'nccl_warn'], 1,
         {'nccl_return_code': 1, 'nccl_version': '2.21.5', 'nccl_warn_lines': 1}),
    # third batch (Hugging Face Trainer / ms-swift dict records), labelled before running
    Case('hf_dicts_zero_loss_nan_norm_lr_zero', 'huggingface/transformers#32382', r"""
{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 0.0, 'epoch': 5.33}                                                                                                                                    
{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 0.0, 'epoch': 5.34}                                                                                                                                    
{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 0.0, 'epoch': 5.35}                                                                                                                                    
""", ['nan_grad_norm', 'zero_loss'], 1, {}),
    Case('hf_dicts_intermittent_nan_norm', 'Time-MoE/Time-MoE#71', r"""
100%|█████████████████████████████████████████████████████████████████████████████████████████████████| 7/7 [00:00<00:00, 1809.34it/s]
{'loss': 0.1474, 'grad_norm': nan, 'learning_rate': 0.0001, 'epoch': 0.04}                                                            
{'loss': 0.1549, 'grad_norm': 0.1899697184562683, 'learning_rate': 0.0001, 'epoch': 0.08}                                             
{'loss': 0.1864, 'grad_norm': 1.0229653120040894, 'learning_rate': 0.0001, 'epoch': 0.12}                                             
{'loss': 0.1819, 'grad_norm': nan, 'learning_rate': 0.0001, 'epoch': 0.15}                                                            
{'loss': 0.1558, 'grad_norm': 0.7023305296897888, 'learning_rate': 0.0001, 'epoch': 0.19}                                             
{'loss': 0.1568, 'grad_norm': 1.4903326034545898, 'learning_rate': 0.0001, 'epoch': 0.23}                                             
{'loss': 0.1471, 'grad_norm': 0.27313581109046936, 'learning_rate': 0.0001, 'epoch': 0.27}                                            
{'loss': 0.1558, 'grad_norm': 0.44472262263298035, 'learning_rate': 0.0001, 'epoch': 0.31}                                            
{'loss': 0.173, 'grad_norm': 0.5097578763961792, 'learning_rate': 0.0001, 'epoch': 0.35}                                              
""", ['nan_grad_norm'], 1, {'num_steps_with_loss': 9}),
    Case('swift_dicts_nan_norm_after_bar', 'modelscope/ms-swift#2280', r"""
{'loss': 2.0916357, 'token_acc': 0.47775947, 'grad_norm': 6.08488035, 'learning_rate': 1e-05, 'memory(GiB)': 65.89, 'train_speed(iter/s)': 0.014105, 'epoch': 0.0, 'global_step/max_steps': '1/2046', 'percentage': '0.05%', 'elapsed_time': '14s', 'remaining_time': '8h 17m 1s'}
Train:   0%|                                                                                                                                                     | 1/2046 [00:14<8:16:53, 14.58s/it][h264 @ 0x7fc648030400] mmco: unref short failure
{'loss': 2.0832541, 'token_acc': 0.52479339, 'grad_norm': nan, 'learning_rate': 1e-05, 'memory(GiB)': 65.89, 'train_speed(iter/s)': 0.025912, 'epoch': 0.0, 'global_st
""", ['nan_grad_norm'], 1, {}),
    Case('wd_after_frames_in_slurm_output', 'ShinoharaHare/LLM-Training#7', r"""
frame #5: <unknown function> + 0x7ea5 (0x2b9d107f7ea5 in /lib64/libpthread.so.0)
frame #6: clone + 0x6d (0x2b9d112138dd in /lib64/libc.so.6)

[rank2]:[E ProcessGroupNCCL.cpp:563] [Rank 2] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7487, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800096 milliseconds before timing out.
[rank2]:[E ProcessGroupNCCL.cpp:1537] [PG 0 Rank 2] Timeout at NCCL work: 7487, last enqueued NCCL work: 7487, last completed NCCL work: 7486.
""", ['nccl_timeout'], 1, {'seq_num': 7487, 'timeout_ms': 1800000, 'last_completed_work': 7486,
                          'first_reporting_rank': 2}),
    # healthy progress logs: no finding, exit 0
    Case('healthy_litgpt_iter_time', 'Lightning-AI/litgpt#140', r"""
Number of trainable parameters: 2125248
iter 0: loss 3.5421, time: 174.07ms
iter 1: loss 3.0288, time: 95.89ms
iter 2: loss 3.5571, time: 60.14ms
iter 3: loss 2.8494, time: 88.95ms
iter 4: loss 3.2140, time: 64.26ms
iter 5: loss 2.7726, time: 67.84ms
iter 6: loss 2.7332, time: 66.63ms
""", [], 0, {'num_steps_with_loss': 7}),
    Case('healthy_nanochat_step_of_total', 'karpathy/nanochat#147', r"""
step 00004/21400 (0.02%) | loss: 8.893647 | lrm: 1.00 | dt: 989.44ms | tok/sec: 529,882 | mfu: 74.13 | total time: 0.00m
step 00005/21400 (0.02%) | loss: 8.530593 | lrm: 1.00 | dt: 991.09ms | tok/sec: 529,000 | mfu: 74.00 | total time: 0.00m
step 00006/21400 (0.03%) | loss: 8.227555 | lrm: 1.00 | dt: 992.91ms | tok/sec: 528,029 | mfu: 73.87 | total time: 0.00m
step 00007/21400 (0.03%) | loss: 7.976802 | lrm: 1.00 | dt: 992.59ms | tok/sec: 528,202 | mfu: 73.89 | total time: 0.00m
step 00008/21400 (0.04%) | loss: 7.794100 | lrm: 1.00 | dt: 994.14ms | tok/sec: 527,379 | mfu: 73.78 | total time: 0.00m
step 00009/21400 (0.04%) | loss: 7.617299 | lrm: 1.00 | dt: 995.47ms | tok/sec: 526,671 | mfu: 73.68 | total time: 0.00m
step 00010/21400 (0.05%) | loss: 7.473279 | lrm: 1.00 | dt: 996.81ms | tok/sec: 525,967 | mfu: 73.58 | total time: 0.00m
""", [], 0, {'num_steps_with_loss': 7}),
    Case('healthy_dllogger_iteration', 'NVIDIA/DeepLearningExamples#543', r"""
DLL 2020-06-03 15:24:13.924122 - PARAMETER checkpoint_step : 1685 
DLL 2020-06-03 16:09:11.353998 - Training Epoch: 0 Training Iteration: 1785  average_loss : 1.4877019596099854  step_loss : 1.6357421875  learning_rate : 0.003569364653091749 
DLL 2020-06-03 16:09:11.354213 - PARAMETER checkpoint_step : 1785 
DLL 2020-06-03 16:54:10.161597 - Training Epoch: 0 Training Iteration: 1885  average_loss : 1.4771718406677246  step_loss : 1.169921875  learning_rate : 0.0037693290594274214 
DLL 2020-06-03 16:54:10.161824 - PARAMETER checkpoint_step : 1885 
DLL 2020-06-03 17:38:55.862498 - Training Epoch: 0 Training Iteration: 1985  average_loss : 1.4736672782897948  step_loss : 1.2822265625  learning_rate : 0.0039692934657630935 
DLL 2020-06-03 17:38:55.862718 - PARAMETER checkpoint_step : 1985 
DLL 2020-06-03 18:23:54.185891 - Training Epoch: 0 Training Iteration: 2085  average_loss : 1.4547618675231933  step_loss : 1.4453125  learning_rate : 0.0034254949051587486 
DLL 2020-06-03 18:23:54.186106 - PARAMETER checkpoint_step : 2085 
DLL 2020-06-03 19:09:16.151911 - Training Epoch: 0 Training Iteration: 2185  average_loss : 1.487750015258789  step_loss : 1.8232421875  learning_rate : 0.003395498750508662 
DLL 2020-06-03 19:09:16.152193 - PARAMETER checkpoint_step : 2185 
""", [], 0, {'num_steps_with_loss': 5}),
    Case('healthy_bracket_epoch_step_table', 'OctoberChang/X-Transformer#17', r"""
08/07/2021 02:16:27 - INFO - __main__ -   ***** Running training *****
08/07/2021 02:16:27 - INFO - __main__ -     Num examples = 15449
08/07/2021 02:16:27 - INFO - __main__ -     Total optimization steps = 1000
08/07/2021 02:18:56 - INFO - __main__ -   | [   1/   3][   100/  1000] |  399/1932 batches | ms/batch 4.5376 | train_loss 5.790506e-01 | lr 5.000000e-05
08/07/2021 02:21:27 - INFO - __main__ -   | [   1/   3][   200/  1000] |  799/1932 batches | ms/batch 4.6409 | train_loss 2.755803e-01 | lr 4.444444e-05
08/07/2021 02:23:57 - INFO - __main__ -   | [   1/   3][   300/  1000] | 1199/1932 batches | ms/batch 4.5217 | train_loss 2.105729e-01 | lr 3.888889e-05
08/07/2021 02:26:27 - INFO - __main__ -   | [   1/   3][   400/  1000] | 1599/1932 batches | ms/batch 4.5165 | train_loss 1.729266e-01 | lr 3.333333e-05
08/07/2021 02:28:58 - INFO - __main__ -   | [   2/   3][   500/  1000] |   67/1932 batches | ms/batch 4.5452 | train_loss 1.577764e-01 | lr 2.777778e-05
""", [], 0, {'num_steps_with_loss': 5}),
    Case('healthy_epoch_meter_noisy_loss', 'SeanNaren/deepspeech.pytorch#485', r"""
Epoch: [21][1390/1930]  Time 0.690 (0.986)      Data 0.004 (0.009)      Loss 2.5681 (10.9521)
Epoch: [21][1391/1930]  Time 0.782 (0.986)      Data 0.004 (0.009)      Loss 4.3603 (10.9519)
Epoch: [21][1392/1930]  Time 0.758 (0.986)      Data 0.004 (0.009)      Loss 3.0738 (10.9517)
Epoch: [21][1393/1930]  Time 0.699 (0.986)      Data 0.004 (0.009)      Loss 3.9250 (10.9515)
Epoch: [21][1394/1930]  Time 0.776 (0.986)      Data 0.004 (0.009)      Loss 2.5246 (10.9513)
Epoch: [21][1395/1930]  Time 0.882 (0.986)      Data 0.004 (0.009)      Loss 4.2818 (10.9511)
Epoch: [21][1396/1930]  Time 0.722 (0.986)      Data 0.005 (0.009)      Loss 3.6416 (10.9510)
Epoch: [21][1397/1930]  Time 0.780 (0.986)      Data 0.003 (0.009)      Loss 5.0185 (10.9508)
Epoch: [21][1398/1930]  Time 0.765 (0.986)      Data 0.004 (0.009)      Loss 2.9142 (10.9506)
Epoch: [21][1399/1930]  Time 0.863 (0.986)      Data 0.005 (0.009)      Loss 4.4609 (10.9505)
""", [], 0, {'num_steps_with_loss': 10}),
    Case('healthy_hf4_dicts_padded', 'deepspeedai/DeepSpeed#4781', r"""
{'loss': 0.9225, 'learning_rate': 6.5000000000000004e-06, 'epoch': 0.03}                                                                                                     
{'loss': 1.0654, 'learning_rate': 7e-06, 'epoch': 0.04}                                                                                                                      
{'loss': 0.7203, 'learning_rate': 7.500000000000001e-06, 'epoch': 0.04}                                                                                                      
{'loss': 0.6427, 'learning_rate': 8.000000000000001e-06, 'epoch': 0.04}                                                                                                      
{'loss': 1.0184, 'learning_rate': 8.5e-06, 'epoch': 0.04}                                                                                                                    
{'loss': 1.0611, 'learning_rate': 9e-06, 'epoch': 0.04}                                                                                                                      
{'loss': 1.3879, 'learning_rate': 9.5e-06, 'epoch': 0.05}                                                                                                                    
{'loss': 0.9321, 'learning_rate': 1e-05, 'epoch': 0.05}
""", [], 0, {'num_steps_with_loss': 8}),
    Case('healthy_pipe_records_step_tps_dips', 'NVIDIA-NeMo/Automodel#3473', r"""
2026-08-10 16:00:44 | INFO | root | step 8 | epoch 0 | loss 0.7839 | grad_norm 1.7024 | lr 1.00e-05 | mem 24.06 GiB | tps 31346.32(3918.29/gpu) | num_label_tokens 45579
2026-08-10 16:00:46 | INFO | root | step 9 | epoch 0 | loss 0.7100 | grad_norm 1.5766 | lr 1.00e-05 | mem 24.69 GiB | tps 31686.41(3960.80/gpu) | num_label_tokens 43985
2026-08-10 16:00:48 | INFO | root | step 10 | epoch 0 | loss 0.7062 | grad_norm 1.4435 | lr 1.00e-05 | mem 25.12 GiB | tps 27366.28(3420.78/gpu) | num_label_tokens 45011
2026-08-10 16:00:50 | INFO | root | step 11 | epoch 0 | loss 0.7017 | grad_norm 1.2795 | lr 1.00e-05 | mem 25.21 GiB | tps 24130.95(3016.37/gpu) | num_label_tokens 48375
2026-08-10 16:00:52 | INFO | root | step 12 | epoch 0 | loss 0.6629 | grad_norm 1.2442 | lr 1.00e-05 | mem 24.92 GiB | tps 31969.91(3996.24/gpu) | num_label_tokens 47193
2026-08-10 16:00:54 | INFO | root | step 13 | epoch 0 | loss 0.7271 | grad_norm 2.3566 | lr 1.00e-05 | mem 26.33 GiB | tps 32831.60(4103.95/gpu) | num_label_tokens 49957
2026-08-10 16:00:56 | INFO | root | step 14 | epoch 0 | loss 0.6742 | grad_norm 1.1909 | lr 1.00e-05 | mem 25.57 GiB | tps 32772.58(4096.57/gpu) | num_label_tokens 47365
""", [], 0, {'num_steps_with_loss': 7}),
    Case('healthy_bionemo_iteration_of_total', 'NVIDIA-BioNeMo/bionemo-recipes#740', r"""
Training epoch 0, iteration 120/149 | lr: 3e-05 | consumed_samples: 121 | global_batch_size: 1 | global_step: 120 | reduced_train_loss: 1.233 | train_step_timing in s: 0.03146 | val_loss: 4.106
Training epoch 0, iteration 121/149 | lr: 3e-05 | consumed_samples: 122 | global_batch_size: 1 | global_step: 121 | reduced_train_loss: 1.288 | train_step_timing in s: 0.03163 | val_loss: 4.106
Training epoch 0, iteration 122/149 | lr: 3e-05 | consumed_samples: 123 | global_batch_size: 1 | global_step: 122 | reduced_train_loss: 1.333 | train_step_timing in s: 0.03215 | val_loss: 4.106
Training epoch 0, iteration 123/149 | lr: 3e-05 | consumed_samples: 124 | global_batch_size: 1 | global_step: 123 | reduced_train_loss: 1.245 | train_step_timing in s: 0.03157 | val_loss: 4.106
Training epoch 0, iteration 124/149 | lr: 3e-05 | consumed_samples: 125 | global_batch_size: 1 | global_step: 124 | reduced_train_loss: 1.375 | train_step_timing in s: 0.0317 | val_loss: 4.106
Training epoch 0, iteration 125/149 | lr: 3e-05 | consumed_samples: 126 | global_batch_size: 1 | global_step: 125 | reduced_train_loss: 1.34 | train_step_timing in s: 0.03147 | val_loss: 4.106
""", [], 0, {'num_steps_with_loss': 6}),
    Case('healthy_nemo_bar_one_line', 'NVIDIA/NeMo-Framework-Launcher#55', r"""
Epoch 0:   1%|          | 795/77225 [9:07:58<878:01:48, 41.36s/it, loss=3.1, v_num=, reduced_train_loss=3.090, global_step=794.0, consumed_samples=1.63e+6]
""", [], 0, {}),
    Case('healthy_lightning_bar_many_norms_wrapped', 'Lightning-AI/pytorch-lightning#11471', r"""
Epoch 80:  67% 10/15 [02:53<01:18, 15.76s/it, loss=0.429, v_num=l1_0, grad_2.0_norm_model.base_model.conv1.weight_step=2.510, grad_2.0_norm_model.base_model.bn1.weight_step=0.598, grad_2.0_norm_model.base_model.bn1.bias_step=0.519, grad_2.0_norm_model.base_model.layer1.0.conv1.net.weight_step=3.070, grad_2.0_norm_model.base_model.layer1.0.bn1.weight_step=0.484, grad_2.0_norm_model.base_model.layer1.0.bn1.bias_step=0.390, grad_2.0_norm_model.base_model.layer1.0.conv2.weight_step=1.740, grad_2.0_norm_model.base_model.layer1.0.bn2.weight_step=0.266, grad_2.0_norm_model.base_model.layer1.0.bn2.bias_step=0.164, grad_2.0_norm_model.base_model.layer1.1.conv1.net.weight_step=2.170, grad_2.0_norm_model.base_model.layer1.1.bn1.weight_step=0.378, grad_2.0_norm_model.base_model.layer1.1.bn1.bias_step=0.223, grad_2.0_norm_model.base_model.layer1.1.conv2.weight_step=1.450, grad_2.0_norm_model.base_model.layer1.1.bn2.weight_step=0.230, grad_2.0_norm_model.base_model.layer1.1.bn2.bias_step=0.1
12, grad_2.0_norm_model.base_model.layer2.0.conv1.net.weight_step=2.030, grad_2.0_norm_model.base_model.layer2.0.bn1.weight_step=0.297, grad_2.0_norm_model.base_model.layer2.0.bn1.bias_step=0.211, grad_2.0_norm_model.base_model.layer2.0.conv2.weight_step=1.630
""", [], 0, {}),
    Case('healthy_hf_dicts_falling_early_norms', 'DAMO-NLP-SG/VideoLLaMA2#157', r"""
{'loss': 1.5214, 'grad_norm': 82.93941089686794, 'learning_rate': 1.4285714285714286e-06, 'epoch': 0.01}
{'loss': 1.5197, 'grad_norm': 91.43226300518772, 'learning_rate': 2.8571428571428573e-06, 'epoch': 0.01}
{'loss': 1.3843, 'grad_norm': 117.94924912080238, 'learning_rate': 4.2857142857142855e-06, 'epoch': 0.02}
{'loss': 0.5067, 'grad_norm': 31.150019053226128, 'learning_rate': 5.7142857142857145e-06, 'epoch': 0.03}
{'loss': 0.4281, 'grad_norm': 38.64170903808288, 'learning_rate': 7.1428571428571436e-06, 'epoch': 0.03}
{'loss': 0.3751, 'grad_norm': 19.90264880071217, 'learning_rate': 8.571428571428571e-06, 'epoch': 0.04}
{'loss': 0.6321, 'grad_norm': 37.228204250367746, 'learning_rate': 1e-05, 'epoch': 0.05}
{'loss': 0.3688, 'grad_norm': 20.387932031811747, 'learning_rate': 1.1428571428571429e-05, 'epoch': 0.05}
{'loss': 0.3486, 'grad_norm': 14.012076077393262, 'learning_rate': 1.2857142857142859e-05, 'epoch': 0.06}
{'loss': 0.3496, 'grad_norm': 22.349105568435977, 'learning_rate': 1.4285714285714287e-05, 'epoch': 0.07}
{'loss': 0.291, 'grad_norm': 9.85790174114647, 'learning_rate': 1.5714285714285715e-05, 'epoch': 0.08}
{'loss': 0.3098, 'grad_norm': 13.538180247193864, 'learning_rate': 1.7142857142857142e-05, 'epoch': 0.08}
{'loss': 0.271, 'grad_norm': 6.623439021748574, 'learning_rate': 1.8571428571428575e-05, 'epoch': 0.09}
""", [], 0, {'num_steps_with_loss': 13}),
    Case('healthy_swift_dpo_dicts', 'modelscope/ms-swift#4146', r"""
{'loss': 0.21932983, 'grad_norm': 0.57172734, 'learning_rate': 6.8e-07, 'memory(GiB)': 63.16, 'train_speed(iter/s)': 0.011239, 'rewards/chosen': 4.8125, 'rewards/rejected': -5.25, 'rewards/accuracies': 1.0, 'rewards/margins': 10.0625, 'logps/chosen': -182.0, 'logps/rejected': -239.0, 'logits/chosen': 0.78125, 'logits/rejected': 0.8125, 'nll_loss': 0.875, 'epoch': 0.89, 'global_step/max_steps': '78/176', 'percentage': '44.32%', 'elapsed_time': '1h 54m 53s', 'remaining_time': '2h 24m 21s'}
{'loss': 0.21930949, 'grad_norm': 0.54369718, 'learning_rate': 6.8e-07, 'memory(GiB)': 73.75, 'train_speed(iter/s)': 0.011243, 'rewards/chosen': 4.90625, 'rewards/rejected': -5.34375, 'rewards/accuracies': 1.0, 'rewards/margins': 10.25, 'logps/chosen': -191.0, 'logps/rejected': -230.0, 'logits/chosen': 0.82421875, 'logits/rejected': 0.81640625, 'nll_loss': 0.875, 'epoch': 0.9, 'global_step/max_steps': '79/176', 'percentage': '44.89%', 'elapsed_time': '1h 56m 20s', 'remaining_time': '2h 22m 50s'}
""", [], 0, {'num_steps_with_loss': 2}),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_unseen_real_excerpt(tmp_path, case):
    log = tmp_path / "excerpt.log"
    log.write_text(case.text.lstrip("\n"), encoding="utf-8")
    r = CliRunner().invoke(cli, ["analyze-log", str(log), "-f", "json"], catch_exceptions=False)
    doc = json.loads(r.output)
    assert sorted({f["kind"] for f in doc["findings"]}) == sorted(case.labels)
    assert r.exit_code == case.exit_code
    for key, want in case.facts.items():
        assert key in doc["facts"], f"fact {key} missing"
        assert same(want, doc["facts"][key]), f"{key}: expected {want!r}, got {doc['facts'][key]!r}"


def test_the_round_is_real():
    """Every excerpt names its own public source once; none is cited by another test (a reused source is not unseen)."""
    import pathlib
    import re

    assert len({c.source for c in CASES}) == len(CASES) >= 30
    assert all(re.fullmatch(r"[\w.-]+/[\w.-]+#\d+", c.source) for c in CASES)
    here = pathlib.Path(__file__)
    others = "".join(p.read_text(encoding="utf-8") for p in here.parent.glob("test_*.py") if p != here)
    assert [c.source for c in CASES if c.source in others] == []
