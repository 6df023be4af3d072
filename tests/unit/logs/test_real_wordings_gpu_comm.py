"""Real wordings of GPU and communication failures, collected from public failure reports, through the
real ``analyze-log`` command: labels exactly, the exit code, and the key facts.

Each excerpt keeps the wording and line format of the report it names (repository and issue or pull
request number); host names, addresses, user names and paths were changed. Labels use the vocabulary of
``shared/logs/README.md`` and ``shared/logs-real/README.md``; facts are read from the JSON document's
``facts`` the way ``test_manifest.py`` reads the manifests (numbers compare rounded to the precision given).
Two judgement calls: an NCCL "unhandled cuda error" (a return code 1, a ``retcode 1``) caused by a
``Cuda failure 'out of memory'`` is labelled both ``cuda_oom`` and ``nccl_unhandled_cuda_error``; an NCCL 2.0
``WARN`` line without the word ``NCCL`` is not counted as ``nccl_warn``.
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
    text: str
    labels: list[str]
    exit_code: int
    facts: dict


CASES = [
    # hiyouga/LlamaFactory#7396
    Case('wd_2.4_viewer_prefix', r"""
[80746] [rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=466119168, NumelOut=466119168, Timeout(ms)=600000) ran for 600060 milliseconds before timing out.
[80747] [rank4]:[E321 02:07:08.414640780 ProcessGroupNCCL.cpp:607] [Rank 4] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=466119168, NumelOut=466119168, Timeout(ms)=600000) ran for 600067 milliseconds before timing out.
[80748] [rank0]:[E321 02:07:08.465150152 ProcessGroupNCCL.cpp:1664] [PG 1 Rank 0] Exception (either an error or timeout) detected by watchdog at work: 1580, last enqueued NCCL work: 1582, last completed NCCL work: 1579.
[80749] [rank3]:[E321 02:07:08.465224069 ProcessGroupNCCL.cpp:1664] [PG 1 Rank 3] Exception (either an error or timeout) detected by watchdog at work: 1580, last enqueued NCCL work: 1582, last completed NCCL work: 1579.
""",
         ['nccl_timeout'], 1, {'seq_num': 1580, 'op_type': 'ALLREDUCE', 'timeout_ms': 600000}),
    # hiyouga/LlamaFactory#6269
    Case('wd_2.4_reduce_scatter', r"""
[rank0]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7753, OpType=_REDUCE_SCATTER_BASE, NumelIn=544997376, NumelOut=68124672, Timeout(ms)=600000) ran for 600061 milliseconds before timing out.
[rank0]:[E1206 18:44:12.715588844 ProcessGroupNCCL.cpp:1664] [PG 1 Rank 0] Exception (either an error or timeout) detected by watchdog at work: 7753, last enqueued NCCL work: 7755, last completed NCCL work: 7752.
[rank4]:[E1206 18:44:12.755262105 ProcessGroupNCCL.cpp:607] [Rank 4] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7753, OpType=_REDUCE_SCATTER_BASE, NumelIn=544997376, NumelOut=68124672, Timeout(ms)=600000) ran for 600099 milliseconds before timing out.
[rank4]:[E1206 18:44:12.755468433 ProcessGroupNCCL.cpp:1664] [PG 1 Rank 4] Exception (either an error or timeout) detected by watchdog at work: 7753, last enqueued NCCL work: 7755, last completed NCCL work: 7752.
""",
         ['nccl_timeout'], 1, {'seq_num': 7753, 'op_type': '_REDUCE_SCATTER_BASE', 'numel_in': 544997376, 'numel_out': 68124672, 'last_completed_work': 7752, 'first_reporting_rank': 0}),
    # XPixelGroup/BasicSR#737
    Case('wd_2.5_pg_guid', r"""
[rank1]:[E626 06:24:44.903881913 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=808, OpType=ALLREDUCE, NumelIn=9801523, NumelOut=9801523, Timeout(ms)=600000) ran for 600020 milliseconds before timing out.
[rank1]:[E626 06:24:44.906457629 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) Rank 1] Exception (either an error or timeout) detected by watchdog at work: 808, last enqueued NCCL work: 811, last completed NCCL work: 807.
[rank0]:[E626 06:24:44.159932949 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=808, OpType=ALLREDUCE, NumelIn=9801523, NumelOut=9801523, Timeout(ms)=600000) ran for 600030 milliseconds before timing out.
[rank0]:[E626 06:24:44.160366013 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) Rank 0] Exception (either an error or timeout) detected by watchdog at work: 808, last enqueued NCCL work: 811, last completed NCCL work: 807.
""",
         ['nccl_timeout'], 1, {'seq_num': 808, 'op_type': 'ALLREDUCE', 'numel_in': 9801523, 'first_reporting_rank': 1}),
    # OFA-Sys/OFA#271
    Case('wd_1.x_no_numel', r"""
[E ProcessGroupNCCL.cpp:737] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=469508, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1802212 milliseconds before timing out.
[E ProcessGroupNCCL.cpp:737] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=469508, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1802211 milliseconds before timing out.
[E ProcessGroupNCCL.cpp:737] [Rank 2] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=469508, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1802212 milliseconds before timing out.
[E ProcessGroupNCCL.cpp:737] [Rank 6] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=469508, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1802210 milliseconds before timing out.
""",
         ['nccl_timeout'], 1, {'seq_num': 469508, 'op_type': 'ALLREDUCE', 'timeout_ms': 1800000, 'has_numel': False, 'first_reporting_rank': 1}),
    # pytorch/pytorch#118369
    Case('wd_glued_to_progress_bar', r"""
Epoch 0:   6%|██                               | 32040/500150 [6:28:43<94:39:17,  1.37it/s, loss=2.6, v_num=95nc, reduced_train_loss=2.590, global_step=3.2e+4, consumed_samples=2.56e+7][E ProcessGroupNCCL.cpp:458] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=96120, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 25624887 milliseconds before timing out.
[E ProcessGroupNCCL.cpp:458] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=96117, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 25625613 milliseconds before timing out.
[E ProcessGroupNCCL.cpp:458] [Rank 7] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=64088, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 25625251 milliseconds before timing out.
""",
         ['nccl_timeout'], 1, {'timeout_ms': 1800000, 'op_type': 'ALLREDUCE', 'first_reporting_rank': 0}),
    # sgl-project/sglang#1693
    Case('wd_terminate_what', r"""
terminate called after throwing an instance of 'c10::DistBackendError'
  what():  [PG 3 Rank 5] Process group watchdog thread terminated with exception: [Rank 5] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9141, OpType=_ALLGATHER_BASE, NumelIn=19008, NumelOut=152064, Timeout(ms)=600000) ran for 600020 milliseconds before timing out.
Exception raised from checkTimeout at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:609 (most recent call first):
frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x7f3b6d41df86 in /usr/local/lib/python3.10/dist-packages/torch/lib/libc10.so)
frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<std::chrono::duration<long, std::ratio<1l, 1000l> > >) + 0x1d2 (0x7f3b6e71a8d2 in /usr/local/lib/python3.10/dist-packages/torch/lib/libtorch_cuda.so)
""",
         ['nccl_timeout'], 1, {'seq_num': 9141, 'op_type': '_ALLGATHER_BASE', 'numel_out': 152064}),
    # NVIDIA/nccl#975
    Case('rc2_bootstrap_ipv6', r"""
n122-246-085:12253:12399 [7] NCCL INFO bootstrap.cc:270 -> 2
n122-246-085:12250:12403 [4] NCCL INFO init.cc:1350 -> 2
n122-246-085:12250:12403 [4] NCCL INFO group.cc:65 -> 2 [Async thread]
n122-246-085:12250:12250 [4] NCCL INFO group.cc:406 -> 2
n122-246-085:12246:12397 [0] NCCL INFO misc/socket.cc:504 -> 2 (Operation now in progress)
n122-246-085:12246:12397 [0] NCCL INFO misc/socket.cc:567 -> 2

n122-246-085:12251:12400 [5] misc/socket.cc:483 NCCL WARN socketStartConnect: Connect to fe80::966d:ae03:a2:8cf0%ib1<17943> failed : Software caused connection abort
n122-246-085:12251:12400 [5] NCCL INFO misc/socket.cc:564 -> 2
n122-246-085:12251:12400 [5] NCCL INFO bootstrap.cc:270 -> 2
""",
         ['nccl_system_error', 'nccl_warn'], 1, {'nccl_return_code': 2}),
    # NVIDIA/nccl-tests#166
    Case('nccltests_mixed_chain', r"""
node-a:39964:40075 [0] misc/socket.cc:483 NCCL WARN socketStartConnect: Connect to 10.9.0.2<45763> failed : Software caused connection abort
node-a:39964:40075 [0] NCCL INFO misc/socket.cc:564 -> 2
node-a:39964:40075 [0] NCCL INFO transport/net_socket.cc:336 -> 2
node-a:39964:40075 [0] NCCL INFO proxy.cc:1377 -> 2

node-a:39964:40075 [0] proxy.cc:1519 NCCL WARN [Proxy Service 0] Failed to execute operation Connect from rank 0, retcode 2
node-a:39964:40049 [5] NCCL INFO Channel 20 : 5[5] -> 4[4] via SHM/direct/direct

node-a:39964:40044 [0] misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote peer node-b<57557>
node-a:39964:40044 [0] NCCL INFO misc/socket.cc:749 -> 6

node-a:39964:40044 [0] proxy.cc:1143 NCCL WARN Socket recv failed while polling for opId=0x7f6f18cb7f40
node-a:39964:40044 [0] NCCL INFO transport/net.cc:288 -> 3
node-a:39964:40044 [0] NCCL INFO transport.cc:148 -> 3
node-a:39964:40044 [0] NCCL INFO init.cc:1358 -> 3
node-a:39964:40044 [0] NCCL INFO group.cc:65 -> 3 [Async thread]
""",
         ['nccl_internal_error', 'nccl_remote_error', 'nccl_system_error', 'nccl_warn'], 1, {}),
    # NVIDIA/nccl#875
    Case('rte_system_error_2.10', r"""
Traceback (most recent call last):
  File "/home/user/test/manual_pp/pipeline2x4_ptip.py", line 178, in <module>
    run_stage()
  File "/home/user/envs/zh/lib/python3.9/site-packages/torch/distributed/distributed_c10d.py", line 2070, in all_gather
    work = group.allgather([tensor_list], [tensor])
RuntimeError: NCCL error in: /home/builder/mc3/envs/pytorch-build/conda-bld/pytorch_1673601922403/work/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1191, unhandled system error, NCCL version 2.10.3
ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error. It can be also caused by unexpected exit of a remote peer, you can check NCCL warnings for failure information.
""",
         ['nccl_system_error'], 1, {'nccl_return_code': 2, 'nccl_version': '2.10.3'}),
    # sgl-project/sglang#3820
    Case('socket_c_no_route', r"""
node5:240:240 [6] misc/socket.cc:533 NCCL WARN socketPollConnect: Connect to 10.9.0.4<56849> returned 113(No route to host) errno 115(Operation now in progress)
node5:240:240 [6] NCCL INFO misc/socket.cc:570 -> 2
node5:240:240 [6] NCCL INFO misc/socket.cc:621 -> 2
node5:240:240 [6] NCCL INFO bootstrap.cc:285 -> 2
node5:240:240 [6] NCCL INFO init.cc:1534 -> 2
node5:240:240 [6] NCCL INFO init.cc:1799 -> 2
""",
         ['nccl_system_error', 'nccl_warn'], 1, {'nccl_return_code': 2}),
    # sgl-project/sglang#5594
    Case('socket_c_plugin_file', r"""
h100-15:139:1092 [7] socket.c:485 NCCL WARN socketStartConnect: Connect to 10.9.0.82<38455> failed : Software caused connection abort
h100-15:139:1092 [7] NCCL INFO transport/net.cc:687 -> 2
h100-15:132:132 [0] NCCL INFO transport/net.cc:405 -> 2
h100-15:132:132 [0] NCCL INFO transport.cc:183 -> 2
h100-15:132:132 [0] NCCL INFO init.cc:1263 -> 2
""",
         ['nccl_system_error', 'nccl_warn'], 1, {'nccl_return_code': 2}),
    # NVIDIA/nccl#111
    Case('nccl2.0_warn_no_nccl_word', r"""
gpu-server [0] include/socket.h:185 WARN Call to connect failed : Connection refused
NCCL failure myprogram.cu:110 'unhandled system error'
""",
         ['nccl_system_error'], 1, {'nccl_return_code': 2}),
    # NVIDIA/nccl-tests#15
    Case('nccltests_old_closed_by_peer', r"""
Connecting to socket 10.9.0.1<46012>

server1:6601:6625 [0] include/socket.h:385 NCCL WARN Net : Connection closed by remote peer
NCCL failure common.cu:921 'unhandled system error'
""",
         ['nccl_remote_error', 'nccl_system_error', 'nccl_warn'], 1, {'nccl_return_code': 2}),
    # NVIDIA/nccl#795
    Case('broken_pipe_proxy_rc6', r"""
a100-st-22:183006:183220 [1] misc/socket.cc:518 NCCL WARN Net : Call to recv from 10.200.8.47<58355> failed : Broken pipe
a100-st-22:183006:183220 [1] NCCL INFO misc/socket.cc:535 -> 6
a100-st-22:183006:183220 [1] NCCL INFO transport/net_socket.cc:368 -> 6
a100-st-22:183006:183220 [1] NCCL INFO include/net.h:26 -> 6
a100-st-22:183006:183220 [1] NCCL INFO proxy.cc:991 -> 6
a100-st-22:183006:183220 [1] proxy.cc:1119 NCCL WARN [Proxy Service 9] Failed to execute operation Connect from rank 9, retcode 6
a100-st-22:183006:183181 [1] misc/socket.cc:538 NCCL WARN Net : Connection closed by remote peer a100-st-22.cluster<47861>
""",
         ['nccl_remote_error', 'nccl_warn'], 1, {'nccl_return_code': 6, 'proxy_retcode': 6}),
    # NVIDIA/nccl#2076
    Case('distbackend_remote_socketprogressopt', r"""
torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.hpp:268, remote process exited or there was a network error, NCCL version 2.21.5
ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.
Last error:
socketProgressOpt: Call to recv from 172.16.5.9<33759> failed : Connection reset by peer
""",
         ['nccl_remote_error'], 1, {'nccl_return_code': 6, 'nccl_version': '2.21.5'}),
    # tatsu-lab/stanford_alpaca#207
    Case('ib_error12_one_line', r"""
[E ProcessGroupNCCL.cpp:455] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data. [E ProcessGroupNCCL.cpp:460] To avoid data inconsistency, we are taking the entire process down. terminate called after throwing an instance of 'std::runtime_error' what(): NCCL error: remote process exited or there was a network error, NCCL version 2.14.3 ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely. Last error: NET/IB : Got completion from peer 10.214.7.12<39138> with error 12, opcode 0, len 0, vendor err 129
""",
         ['ib_completion_error', 'nccl_remote_error'], 1, {'ib_completion_error': 12, 'vendor_err': 129, 'nccl_return_code': 6}),
    # NVIDIA/nccl-tests#252
    Case('ib_plugin_error4', r"""
node-1:27255:27934 [0] NCCL INFO proxy.cc:698 -> 6
node-1:27255:27934 [0] NCCL INFO proxy.cc:878 -> 6 [Progress Thread]

node-2:25146:25854 [0] ib_plugin.c:1105 NCCL WARN NET/IB : Got completion from peer 10.0.35.1<49189> with error 4, opcode 5327, len 5327, vendor err 81 (Send)
node-2:25146:25854 [0] NCCL INFO transport/net.cc:1137 -> 6
node-2:25146:25854 [0] NCCL INFO proxy.cc:698 -> 6
node-2:25146:25854 [0] NCCL INFO proxy.cc:878 -> 6 [Progress Thread]
node-2:25146:25852 [0] NCCL INFO [Service thread] Connection closed by localRank 0
node-2:25172:25848 [1] NCCL INFO [Service thread] Connection closed by localRank 0
""",
         ['ib_completion_error', 'nccl_remote_error', 'nccl_warn'], 1, {'ib_completion_error': 4, 'vendor_err': 81, 'nccl_return_code': 6}),
    # NVIDIA/nccl#1928
    Case('ofi_remote_error_2.28', r"""
[rank3]:     return dist._verify_params_across_processes(process_group, tensors, logger)
[rank3]:            ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
[rank3]: torch.distributed.DistBackendError: NCCL error in: /opt/pytorch/pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3763, remote process exited or there was a network error, NCCL version 2.28.8
[rank3]: ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.
[rank3]: Last error:
[rank3]: NET/OFI Request 0x7f14cc5b60c0 completed with error. RC: 113. Error: 2 (UNDELIVERABLE). Completed length: 0
""",
         ['nccl_remote_error'], 1, {'nccl_return_code': 6, 'nccl_version': '2.28.8'}),
    # deepseek-ai/DeepEP#106
    Case('ib_error5_watchdog_what', r"""
ith exception: NCCL error: remote process exited or there was a network error, NCCL version 2.20.5  ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.                                                       Last error:                                                                                                                                                   NET/IB : Got completion from peer 172.21.17.89<38536> with error 5, opcode 48, len 32710, vendor err 249                                                      Exception raised from checkForNCCLErrorsInternal at /opt/pytorch/pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1736 (most recent call first):      frame #0: c10::Error::Error(c10::SourceLocation, std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >) + 0x99 (0x7fcc0c99ad89 in /usr/local/lib/python3.10/dist-packages/torch/lib/libc10.so)
""",
         ['ib_completion_error', 'nccl_remote_error'], 1, {'ib_completion_error': 5, 'vendor_err': 249}),
    # NVIDIA/nccl#1664
    Case('ibp_status12_no_space', r"""
worker-node1:2304:2356 [5] net_ib.cc:1712 NCCL WARN NET/IBP:Got completion from peer 7.6.13.83<36315> with status=12 opcode=32698 len=32696 vendor err 129 (Send)
""",
         ['ib_completion_error', 'nccl_warn'], 1, {'ib_completion_error': 12, 'vendor_err': 129}),
    # NVIDIA/nccl#214
    Case('ib_error4_net_ib_cu', r"""
node-8x-1:25061:25100 [0] transport/net_ib.cu:788 NCCL WARN NET/IB : Got completion with error 4, opcode 1, len 21938, vendor err 81
""",
         ['ib_completion_error', 'nccl_warn'], 1, {'ib_completion_error': 4, 'vendor_err': 81}),
    # alisson-anjos/diffusion-pipe-ui#10
    Case('unhandled_cuda_999_rank_prefix', r"""
[rank0]: ncclUnhandledCudaError: Call to CUDA function failed.
[rank0]: Last error:
[rank0]: Cuda failure 999 'unknown error'
""",
         ['nccl_unhandled_cuda_error'], 1, {'nccl_return_code': 1}),
    # NVIDIA/nccl#1410
    Case('unhandled_cuda_invalid_arg', r"""
[rank7]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5
[rank7]: ncclUnhandledCudaError: Call to CUDA function failed.
[rank7]: Last error:
[rank7]: Cuda failure 1 'invalid argument'
""",
         ['nccl_unhandled_cuda_error'], 1, {'nccl_return_code': 1, 'nccl_version': '2.20.5'}),
    # llSourcell/Object_Detection_demo_LIVE#9
    Case('unhandled_cuda_terminate_2.7.8', r"""
terminate called after throwing an instance of 'std::runtime_error'
  what():  NCCL error in: /opt/conda/conda-bld/pytorch_1614378063927/work/torch/lib/c10d/../c10d/NCCLUtils.hpp:155, unhandled cuda error, NCCL version 2.7.8
ncclUnhandledCudaError: Call to CUDA function failed.
""",
         ['nccl_unhandled_cuda_error'], 1, {'nccl_return_code': 1, 'nccl_version': '2.7.8'}),
    # PKU-YuanGroup/Open-Sora-Plan#386
    Case('nccl_error1_alloc_oom', r"""
ins-7df6:3018451:3024010 [0] NCCL INFO Channel 01 : 0[1020] -> 2[1040] via SHM/direct/direct
ins-7df6:3018454:3024009 [3] NCCL INFO Channel 00 : 3[1050] -> 2[1040] via SHM/direct/direct

ins-7df6:3018451:3018451 [0] enqueue.cc:1085 NCCL WARN Cuda failure 'out of memory'
RuntimeError: NCCL Error 1: unhandled cuda error (run with NCCL_DEBUG=INFO for details)
""",
         ['cuda_oom', 'nccl_unhandled_cuda_error', 'nccl_warn'], 1, {'oom_tried_to_allocate_gib': None}),
    # NVIDIA/nccl#962
    Case('nccl_calloc_oom_then_internal', r"""
torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1296, internal error - please report this issue to the NCCL developers, NCCL version 2.18.1
NCCL version 2.18.1+cuda12.0
node:2134736:2285781 [0] include/alloc.h:178 NCCL WARN Cuda failure 'out of memory'
node:2134736:2285781 [0] include/alloc.h:185 NCCL WARN Failed to CUDA calloc 6291456 bytes
node:2134736:2285781 [0] proxy.cc:1518 NCCL WARN [Proxy Service 93] Failed to execute operation Setup from rank 93, retcode 1
""",
         ['cuda_oom', 'nccl_internal_error', 'nccl_unhandled_cuda_error', 'nccl_warn'], 1, {'nccl_version': '2.18.1'}),
    # DeepMotionAIResearch/DenseMatchingBenchmark#20
    Case('cublas_alloc_failed_1.6', r"""
RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`
Exception raised from createCublasHandle at /opt/conda/conda-bld/pytorch_1595629403081/work/aten/src/ATen/cuda/CublasHandlePool.cpp:8 (most recent call first):
frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x4d (0x2ba39fce177d in /home/user/.conda/envs/dmb/lib/python3.7/site-packages/torch/lib/libc10.so)
frame #2: at::cuda::getCurrentCUDABlasHandle() + 0xb75 (0x2ba36e74e065 in /home/user/.conda/envs/dmb/lib/python3.7/site-packages/torch/lib/libtorch_cuda.so)
""",
         ['cuda_oom'], 1, {'oom_tried_to_allocate_gib': None}),
    # lllyasviel/ControlNet#382
    Case('tcpstore_client_timeout_1800', r"""
[E socket.cpp:793] [c10d] The client socket has timed out after 1800s while trying to connect to (127.0.0.1, 48391).
    return TCPStore(
TimeoutError: The client socket has timed out after 1800s while trying to connect to (127.0.0.1, 48391).
""",
         ['rendezvous_timeout'], 1, {'store_port': 48391, 'client_timeout_s': 1800}),
    # sgl-project/sglang#1691
    Case('heartbeat_2.5_pg3', r"""
[rank0]:[E1019 01:04:03.356947152 ProcessGroupNCCL.cpp:1413] [PG 3 Rank 0] Heartbeat monitor timed out! Process will be terminated after dumping debug info. workMetaList_.size()=121
[rank1]:[E1019 01:04:03.357037506 ProcessGroupNCCL.cpp:1413] [PG 3 Rank 1] Heartbeat monitor timed out! Process will be terminated after dumping debug info. workMetaList_.size()=121
[rank7]:[E1019 01:04:03.357615073 ProcessGroupNCCL.cpp:1375] [PG 3 Rank 7] First PG on this rank that detected no heartbeat of its watchdog.
[rank2]:[F1019 01:14:03.356851194 ProcessGroupNCCL.cpp:1224] [PG 3 Rank 2] [PG 3 Rank 2] ProcessGroupNCCL's watchdog got stuck for 600 seconds without making progress in monitoring enqueued collectives. This typically indicates a NCCL/CUDA API hang blocking the watchdog, and could be triggered by another thread holding the GIL inside a CUDA api, or other deadlock-prone behaviors.If you suspect the watchdog is not actually stuck and a longer timeout would help, you can either increase the timeout (TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC) to a larger value or disable the heartbeat monitor (TORCH_NCCL_ENABLE_MONITORING=0).If either of aforementioned helps, feel free to file an issue to PyTorch about the short timeout or false positive abort; otherwise, please attempt to debug the hang. workMetaList_.size() = 121
""",
         ['nccl_heartbeat_stuck'], 1, {'stuck_s': 600}),
    # facebookresearch/dinov2#447
    Case('heartbeat_2.3_no_ts', r"""
[rank0]:[E ProcessGroupNCCL.cpp:1316] [PG 0 Rank 0] Heartbeat monitor timed out! Process will be terminated after dumping debug info. workMetaList_.size()=1
[rank0]:[E ProcessGroupNCCL.cpp:1153] [PG 0 Rank 0] ProcessGroupNCCL preparing to dump debug info.
[rank0]:[F ProcessGroupNCCL.cpp:1169] [PG 0 Rank 0] [PG 0 Rank 0] ProcessGroupNCCL's watchdog got stuck for 600 seconds without making progress in monitoring enqueued collectives. This typically indicates a NCCL/CUDA API hang blocking the watchdog, and could be triggered by another thread holding the GIL inside a CUDA api, or other deadlock-prone behaviors.If you suspect the watchdog is not actually stuck and a longer timeout would help, you can either increase the timeout (TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC) to a larger value or disable the heartbeat monitor (TORCH_NCCL_ENABLE_MONITORING=0).If either of aforementioned helps, feel free to file an issue to PyTorch about the short timeout or false positive abort; otherwise, please attempt to debug the hang. workMetaList_.size() = 1
""",
         ['nccl_heartbeat_stuck'], 1, {'stuck_s': 600}),
    # modelscope/ms-swift#7992
    Case('watchdog_stuck_only_timestamped', r"""
18:11:06.680 [rank4]:[E205 18:11:06.375750231 ProcessGroupNCCL.cpp:1870] [PG ID 12 PG GUID 99(EXPERT_MODEL_PARALLEL_GROUP) Rank 4] ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress in monitoring enqueued collectives. This typically indicates a NCCL/CUDA API (e.g., CudaEventDestroy) hang blocking the watchdog, and could be triggered by another thread holding the GIL inside a CUDA api (for example, CudaEventDestroy), or other deadlock-prone behaviors.If you suspect the watchdog is not actually stuck and a longer timeout would help, you can either increase the timeout (TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC) to a larger value or disable the heartbeat monitor (TORCH_NCCL_ENABLE_MONITORING=0).If either of aforementioned helps, feel free to file an issue to PyTorch about the short timeout or false positive abort; otherwise, please attempt to debug the hang.
""",
         ['nccl_heartbeat_stuck'], 1, {'stuck_s': 480}),
    # vllm-project/vllm#4108
    Case('illegal_access_ray_watchdog', r"""
(RayWorkerVllm pid=7046) Fatal Python error: Aborted
(RayWorkerVllm pid=7046)
[E ProcessGroupNCCL.cpp:916] [Rank 0] NCCL watchdog thread terminated with exception: CUDA error: an illegal memory access was encountered
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
For debugging consider passing CUDA_LAUNCH_BLOCKING=1.
""",
         ['cuda_error', 'sigabrt'], 1, {'cuda_error_name': 'cudaErrorIllegalAddress'}),
    # NVIDIA/semantic-segmentation#33
    Case('ecc_cuda_runtime_error_39', r"""
RuntimeError: cuda runtime error (39) : uncorrectable ECC error encountered at /pytorch/aten/src/THC/THCCachingHostAllocator.cpp:265
terminate called without an active exception
""",
         ['ecc_xid'], 1, {}),
    # kohya-ss/sd-scripts#1434
    Case('ecc_watchdog_2.x', r"""
  File "/home/user/kohya_ss/sd-scripts/library/sdxl_original_unet.py", line 257, in get_timestep_embedding
    exponent = exponent / (half_dim - downscale_freq_shift)
RuntimeError: CUDA error: uncorrectable ECC error encountered
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
For debugging consider passing CUDA_LAUNCH_BLOCKING=1.
Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.

[E ProcessGroupNCCL.cpp:916] [Rank 1] NCCL watchdog thread terminated with exception: CUDA error: uncorrectable ECC error encountered
""",
         ['ecc_xid'], 1, {}),
    # NVIDIA/NVSentinel#155
    Case('gpu_fell_off_bus_no_xid', r"""
[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0
               NVRM: (PCI ID: 10de:26b5) installed in this system has
               NVRM: fallen off the bus and is not responding to commands.
[ 1843.439662] NVRM: The NVIDIA probe routine failed for 1 device(s).
""",
         ['ecc_xid'], 1, {}),
    # vllm-project/vllm#39015
    Case('addr_in_use_2.4_code_-98', r"""
  File "/home/user/anaconda3/envs/vlm/lib/python3.11/site-packages/torch/distributed/elastic/rendezvous/static_tcp_rendezvous.py", line 67, in next_rendezvous
    self._store = TCPStore(  # type: ignore[call-arg]
                  ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. port: 29500, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use
""",
         ['rendezvous_address_in_use'], 1, {'port': 29500, 'errno': 98}),
    # hunto/DIST_KD#10
    Case('addr_in_use_socket_cpp_426', r"""
+ torchrun --nproc_per_node=2 --master_port=25641 tools/train.py -c configs/strategies/distill/dist_cifar.yaml --model cifar_resnet20
WARNING:torch.distributed.run:
*****************************************
[W socket.cpp:426] [c10d] The server socket has failed to bind to [::]:25641 (errno: 98 - Address already in use).
[W socket.cpp:426] [c10d] The server socket has failed to bind to 0.0.0.0:25641 (errno: 98 - Address already in use).
[E socket.cpp:462] [c10d] The server socket has failed to listen on any local network address.
""",
         ['rendezvous_address_in_use'], 1, {'port': 25641, 'errno': 98}),
    # meta-pytorch/torchtune#1025
    Case('addr_in_use_unknown_second', r"""
torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use). The server socket has failed to bind to ?UNKNOWN? (errno: 98 - Address already in use).
""",
         ['rendezvous_address_in_use'], 1, {'port': 29500}),
    # pytorch/pytorch#107021
    Case('client_timeout_no_parens', r"""
Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your system being overloaded, please further tune the variable for optimal performance in your application as needed.
*****************************************
[E socket.cpp:860] [c10d] The client socket has timed out after 60s while trying to connect to 192.0.0.1:1234
torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to the C10d store has failed. See inner exception for details.
""",
         ['rendezvous_timeout'], 1, {'client_timeout_s': 60, 'port': 1234}),
    # intel/torch-xpu-ops#2119
    Case('client_timeout_ms_distnetworkerror', r"""
Traceback (most recent call last):
  File "/home/user/envs/x/lib/python3.10/site-packages/torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py", line 156, in _create_tcp_store
    store = TCPStore(
torch.distributed.DistNetworkError: The client socket has timed out after 10000ms while trying to connect to (localhost, 44557).

The above exception was the direct cause of the following exception:
""",
         ['rendezvous_timeout'], 1, {'connect_timeout_ms': 10000, 'port': 44557}),
    # pytorch/pytorch#67581
    Case('rdzv_json_error_handler', r"""
ERROR:torch.distributed.elastic.multiprocessing.errors.error_handler:{
  "message": {
    "message": "RendezvousConnectionError: The connection to the C10d store has failed. See inner exception for details.",
    "extraInfo": {
      "py_callstack": "Traceback (most recent call last):\n  File \"/root/anaconda3/lib/python3.8/site-packages/torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py\", line 155, in _create_tcp_store\n    store = TCPStore(\nRuntimeError: connect() timed out. Original timeout was 60000 ms.\n\nThe above exception was the direct cause of the following exception:\n\nTraceback (most recent call last):\n",
      "timestamp": "1635589201"
    }
  }
}
""",
         ['rendezvous_timeout'], 1, {'connect_timeout_ms': 60000}),
    # antgroup/echomimic_v2#115
    Case('oom_2.5_of_which_free', r"""
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.22 GiB. GPU 0 has a total capacity of 15.69 GiB of which 3.71 GiB is free. Including non-PyTorch memory, this process has 11.14 GiB memory in use. Of the allocated memory 10.14 GiB is allocated by PyTorch, and 771.43 MiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)
""",
         ['cuda_oom'], 1, {'oom_tried_to_allocate_gib': 4.22, 'oom_total_capacity_gib': 15.69, 'oom_free_gib': 3.71}),
    # carolchenyx/MGFN.#35
    Case('oom_2.1_zero_bytes_free', r"""
torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.70 GiB. GPU 0 has a total capacty of 6.00 GiB of which 0 bytes is free. Of the allocated memory 2.93 GiB is allocated by PyTorch, and 2.30 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting max_split_size_mb to avoid fragmentation.  See documentation for Memory Management and PYTORCH_CUDA_ALLOC_CONF
""",
         ['cuda_oom'], 1, {'oom_tried_to_allocate_gib': 1.7, 'oom_total_capacity_gib': 6.0, 'oom_free_gib': 0}),
    # pytorch/pytorch#18853
    Case('oom_1.0_cached', r"""
  File "/private/home/user/.conda/envs/retry/lib/python3.7/site-packages/torch/nn/functional.py", line 840, in threshold
    result = _VF.threshold(input, threshold, value)
RuntimeError: CUDA out of memory. Tried to allocate 1024.00 MiB (GPU 0; 15.90 GiB total capacity; 14.25 GiB already allocated; 991.56 MiB free; 607.00 KiB cached)
""",
         ['cuda_oom'], 1, {'oom_tried_to_allocate_gib': 1.0, 'oom_gpu_index': 0}),
    # Li-Chongyi/Zero-DCE#52
    Case('oom_bare_class_name', r"""
OutOfMemoryError: CUDA out of memory. Tried to allocate 1.71 GiB (GPU 0; 6.00 GiB total capacity; 3.49 GiB already allocated; 1.04 GiB free; 3.50 GiB reserved in total by PyTorch) If reserved memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.  See documentation for Memory Management and PYTORCH_CUDA_ALLOC_CONF
""",
         ['cuda_oom'], 1, {'oom_tried_to_allocate_gib': 1.71}),
    # deepbeepmeep/Wan2GP#1083
    Case('oom_accelerator_error_2.8', r"""
  File "C:\Users\user\Desktop\Wan2GP\wan2gp\python_embeded\lib\site-packages\torch\nn\functional.py", line 2905, in layer_norm
    return torch.layer_norm(
torch.AcceleratorError: CUDA error: out of memory
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
For debugging consider passing CUDA_LAUNCH_BLOCKING=1
Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.
""",
         ['cuda_oom'], 1, {'oom_tried_to_allocate_gib': None}),
    # maybleMyers/H1111#23
    Case('oom_driver_subprocess_prefix', r"""
SUBPROCESS: RuntimeError: CUDA error: out of memory
SUBPROCESS: CUDA kernel errors might be asynchronously reported at some other API call, so
SUBPROCESS: the stacktrace below might be incorrect.
SUBPROCESS: For debugging consider passing CUDA_LAUNCH_BLOCKING=1
""",
         ['cuda_oom'], 1, {'oom_tried_to_allocate_gib': None}),
    # huggingface/picotron_tutorial#6
    Case('childfailed_sigabrt_root_cause', r"""
  exitcode  : -6 (pid: 3437)
  error_file: <N/A>
  traceback : Signal 6 (SIGABRT) received by PID 3437
[7]:
  time      : 2025-05-01_11:12:35
  host      : 472a4389fceb
  rank      : 7 (local_rank: 7)
  exitcode  : -6 (pid: 3438)
  error_file: <N/A>
  traceback : Signal 6 (SIGABRT) received by PID 3438
-----------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2025-05-01_11:12:35
  host      : 472a4389fceb
  rank      : 0 (local_rank: 0)
  exitcode  : -6 (pid: 3431)
  error_file: <N/A>
  traceback : Signal 6 (SIGABRT) received by PID 3431
=====================================================
""",
         ['child_failed', 'sigabrt'], 1, {'exitcode': -6, 'signal': 'SIGABRT', 'first_failing_rank': 0}),
    # ParCIS/Chimera#2
    Case('childfailed_no_other_failures', r"""
  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/launcher/api.py", line 271, in launch_agent
    raise ChildFailedError(
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
======================================================
main_bert.py FAILED
------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2024-02-27_12:42:13
  host      : gpt-dev-ppt
  rank      : 0 (local_rank: 0)
  exitcode  : -6 (pid: 65957)
  error_file: <N/A>
  traceback : Signal 6 (SIGABRT) received by PID 65957
======================================================
""",
         ['child_failed', 'sigabrt'], 1, {'exitcode': -6, 'first_failing_rank': 0}),
    # huggingface/accelerate#3861
    Case('elastic_glog_exitcode_-6', r"""
W1128 21:12:50.210000 3139541 site-packages/torch/distributed/elastic/multiprocessing/api.py:900] Sending process 3139620 closing signal SIGTERM
W1128 21:12:50.212000 3139541 site-packages/torch/distributed/elastic/multiprocessing/api.py:900] Sending process 3139621 closing signal SIGTERM
E1128 21:12:50.390000 3139541 site-packages/torch/distributed/elastic/multiprocessing/api.py:874] failed (exitcode: -6) local_rank: 3 (pid: 3139623) of binary: /data1/user/anaconda3/envs/hd/bin/python3.10
Traceback (most recent call last):
  File "/data1/user/anaconda3/envs/hd/bin/accelerate", line 7, in <module>
    sys.exit(main())
""",
         ['sigabrt'], 1, {'exitcode': -6, 'failed_local_rank': 3}),
    # NVIDIA/open-gpu-kernel-modules#1150
    Case('xid45_journal_previous_xid', r"""
kernel: NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000001 caused by previous Xid 149
kernel: NVRM: Xid (PCI:0000:ed:00): 45, pid=1818992, name=python3, Ch 0000000c caused by previous Xid 145
kernel: NVRM: Xid (PCI:0000:ba:00): 45, pid=1818989, name=python3, Ch 00000002 caused by previous Xid 145
""",
         ['ecc_xid'], 1, {'xid': 45}),
    # leptonai/gpud#46
    Case('xid13_unknown_pid_then_109', r"""
[Fri Aug 30 11:11:22 2024] nvidia-peermem nv_get_p2p_free_callback:127 ERROR detected invalid context, skipping further processing
[Fri Aug 30 11:43:09 2024] NVRM: Xid (PCI:0000:cb:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp Exception on (GPC 7, TPC 7, SM 0): Illegal Instruction Parameter
[Fri Aug 30 11:43:09 2024] NVRM: Xid (PCI:0000:cb:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Global Exception on (GPC 7, TPC 7, SM 0): Multiple Warp Errors
[Fri Aug 30 11:43:14 2024] NVRM: Xid (PCI:0000:cb:00): 109, pid=1797828, name=pt_main_thread, Ch 00000008, errorString CTX SWITCH TIMEOUT, Info 0x58005
""",
         ['ecc_xid'], 1, {'xid': 13}),
    # leptonai/gpud#1174
    Case('xid149_nvlink_pci_domain', r"""
NVRM: Xid (PCI:0019:01:00): 149, NETIR Fatal XC0 i0 Link -1 (0x000fe406 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)
""",
         ['ecc_xid'], 1, {'xid': 149}),
    # horovod/horovod#3929
    Case('invalid_usage_duplicate_gpu_mpirun', r"""
[1,3]<stdout>:smc-gpu-03:29881:30401 [0] NCCL INFO init.cc:903 -> 5
[1,3]<stdout>:smc-gpu-03:29881:30401 [0] NCCL INFO init.cc:916 -> 5
[1,2]<stdout>:
[1,2]<stdout>:smc-gpu-03:29880:30398 [0] init.cc:497 NCCL WARN Duplicate GPU detected : rank 2 and rank 0 both on CUDA device 1000
[1,2]<stdout>:smc-gpu-03:29880:30398 [0] NCCL INFO init.cc:867 -> 5
[1,2]<stdout>:smc-gpu-03:29880:30398 [0] NCCL INFO init.cc:903 -> 5
[1,2]<stdout>:smc-gpu-03:29880:30398 [0] NCCL INFO init.cc:916 -> 5
""",
         ['nccl_invalid_usage', 'nccl_warn'], 1, {'nccl_return_code': 5}),
    # NVIDIA/nccl#1241
    Case('invalid_usage_interleaved_ranks', r"""
  File "/usr/local/lib/python3.8/dist-packages/torch/distributed/distributed_c10d.py", line 3369, in barrier
  File "/usr/local/lib/python3.8/dist-packages/torch/distributed/distributed_c10d.py", line 3369, in barrier
        work = default_pg.barrier(opts=opts)work = default_pg.barrier(opts=opts)

torch.distributedtorch.distributed.DistBackendError.: DistBackendErrorNCCL error in: /opt/pytorch/pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1287, invalid usage, NCCL version 2.17.1
ncclInvalidUsage: This usually reflects invalid usage of NCCL library.
Last error:
Duplicate GPU detected : rank 3 and rank 2 both on CUDA device e2000
""",
         ['nccl_invalid_usage'], 1, {'nccl_return_code': 5, 'nccl_version': '2.17.1'}),
    # NVIDIA/Megatron-LM#661
    Case('invalid_usage_2.19_megatron', r"""
torch.distributed  File "/run/megatron/initialize.py", line 156, in _compile_dependencies
.DistBackendError: NCCL error in: /opt/pytorch/pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1727, invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.19.3
ncclInvalidUsage: This usually reflects invalid usage of NCCL library.
Last error:
Duplicate GPU detected : rank 3 and rank 0 both on CUDA device f000
""",
         ['nccl_invalid_usage'], 1, {'nccl_return_code': 5, 'nccl_version': '2.19.3'}),
    # hiyouga/LlamaFactory#8871
    Case('launch_failure_2.6_host_prefix', r"""
192.168.12.21: {'loss': 0.2411, 'grad_norm': 0.3060550590848015, 'learning_rate': 9.846034296341644e-06, 'epoch': 0.4}
192.168.12.21: {'loss': 0.2286, 'grad_norm': 0.2749779785870359, 'learning_rate': 9.845673262306643e-06, 'epoch': 0.4}
192.168.12.21: {'loss': 0.2329, 'grad_norm': 0.27532953852808206, 'learning_rate': 9.845311812107845e-06, 'epoch': 0.4}
192.168.13.81: [rank19]:[E808 10:31:07.406255799 ProcessGroupNCCL.cpp:1895] [PG ID 1 PG GUID 1 Rank 19] Process group watchdog thread terminated with exception: CUDA error: unspecified launch failure
192.168.13.81: CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
192.168.13.81: For debugging consider passing CUDA_LAUNCH_BLOCKING=1
""",
         ['cuda_error'], 1, {'cuda_error_name': 'cudaErrorLaunchFailure'}),
    # meta-llama/llama-cookbook#290
    Case('launch_failure_terminate_what', r"""
frame #9: clone + 0x43 (0x7fbcde295133 in /lib/x86_64-linux-gnu/libc.so.6)

terminate called after throwing an instance of 'std::runtime_error'
  what():  [Rank 0] NCCL watchdog thread terminated with exception: CUDA error: unspecified launch failure
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
For debugging consider passing CUDA_LAUNCH_BLOCKING=1.
Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.
""",
         ['cuda_error'], 1, {'cuda_error_name': 'cudaErrorLaunchFailure'}),
    # clessig/atmorep#55
    Case('launch_failure_srun_prefix_wrapped', r"""
[rank0]:[E ProcessGroupNCCL.cpp:1414] [PG 0 Rank 0] Process group watchdog thread terminated with exception: CUDA erro
r: unspecified launch failure
0: CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect
.
0: For debugging consider passing CUDA_LAUNCH_BLOCKING=1.
0: Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.
0:
0: Exception raised from c10_cuda_check_implementation at ../c10/cuda/CUDAException.cpp:43 (most recent call first):
""",
         ['cuda_error'], 1, {}),
    # NVIDIA-NeMo/Megatron-Bridge#836
    Case('launch_failure_megatron_tp_group', r"""
 [2025-10-02 12:20:48] iteration       48/      50 | consumed samples:         3072 | elapsed time per iteration (ms): 7138.7 | learning rate: 7.200000E-06 | global batch size:    64 | lm loss: 8.317189E-02 | loss scale: 1.0 | grad norm: 1.721 | number of skipped iterations:   0 | number of nan iterations:   0 |
[rank29]:[E1002 12:20:55.123831168 ProcessGroupNCCL.cpp:1923] [PG ID 5 PG GUID 83(TENSOR_MODEL_PARALLEL_GROUP) Rank 1] Process group watchdog thread terminated with exception: CUDA error: unspecified launch failure
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
For debugging consider passing CUDA_LAUNCH_BLOCKING=1
Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.
""",
         ['cuda_error'], 1, {'cuda_error_name': 'cudaErrorLaunchFailure'}),
    # hao-ai-lab/FastVideo#1008
    Case('launch_failure_after_tqdm', r"""
Steps:  25%|██▌       | 382/1500 [5:29:27<15:48:09, 50.89s/it, loss=0.0841, step_time=50.94s, grad_norm=0.378]
[rank9]:[E113 11:43:02.241131296 ProcessGroupNCCL.cpp:1899] [PG ID 5 PG GUID 55(mesh_replicate) Rank 1] Process group watchdog thread terminated with exception: CUDA error: unspecified launch failure
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
For debugging consider passing CUDA_LAUNCH_BLOCKING=1
""",
         ['cuda_error'], 1, {'cuda_error_name': 'cudaErrorLaunchFailure'}),
    # layumi/Person_reID_baseline_pytorch#372
    Case('device_assert_thcunn_nll', r"""
Epoch 0/59
----------
train Loss: 2.7186 Acc: 0.4082
/pytorch/aten/src/THCUNN/ClassNLLCriterion.cu:108: cunn_ClassNLLCriterion_updateOutput_kernel: block: [0,0,0], thread: [0,0,0] Assertion `t >= 0 && t < n_classes` failed.
/pytorch/aten/src/THCUNN/ClassNLLCriterion.cu:108: cunn_ClassNLLCriterion_updateOutput_kernel: block: [0,0,0], thread: [8,0,0] Assertion `t >= 0 && t < n_classes` failed.
Traceback (most recent call last):
  File "train.py", line 577, in <module>
    num_epochs=opt.total_epoch)
  File "train.py", line 379, in train_model
    running_loss += loss.item() * now_batch_size
RuntimeError: CUDA error: device-side assert triggered
""",
         ['cuda_error'], 1, {'cuda_error_name': 'cudaErrorAssert'}),
    # zhanghang1989/PyTorch-Encoding#23
    Case('device_assert_0.3_thcudacheck', r"""
  THCudaCheck FAIL file=/pytorch/torch/lib/THC/generic/THCStorage.cu line=58 error=59 : device-side assert triggered
Traceback (most recent call last):
  File "main.py", line 171, in <module>
    main()
  File "/usr/local/lib/python3.6/site-packages/torch/autograd/__init__.py", line 99, in backward
    variables, grad_variables, retain_graph)
RuntimeError: cuda runtime error (59) : device-side assert triggered at /pytorch/torch/lib/THC/generic/THCStorage.cu:58
""",
         ['cuda_error'], 1, {'cuda_error_name': 'cudaErrorAssert'}),
    # ssnl/dataset-distillation#58
    Case('device_assert_logging_prefix', r"""
2022-12-28 16:13:02 [ERROR]    File "/home/user/dataset-distillation/basics.py", line 138, in evaluate_models
2022-12-28 16:13:02 [ERROR]      losses[k] += task_loss(state, output, target, reduction='sum').item()  # sum up batch loss
2022-12-28 16:13:02 [ERROR]  RuntimeError: CUDA error: device-side assert triggered
Begin of epoch 0 (1 unknown_init nets):   0%|          | 0/2 [00:01<?, ?it/s]Traceback (most recent call last):
  File "main.py", line 402, in <module>
    main(options.get_state())
""",
         ['cuda_error'], 1, {'cuda_error_name': 'cudaErrorAssert'}),
    # sgl-project/sglang#20859
    Case('store_recvvalue_reset_k8s_host', r"""
[rank8]:[W318 10:00:41.929037914 ProcessGroupNCCL.cpp:1771] [PG ID 0 PG GUID 0 Rank 8] Failed to check the "should dump" flag on TCPStore, (maybe TCPStore server has shut down too early), with error: Connection reset by peer
[rank12]:[W318 10:00:41.915284135 TCPStore.cpp:125] [c10d] recvValue failed on SocketImpl(fd=135, addr=[sglang-0-1.sglang.default.svc.cluster.local]:48750, remote=[sglang-0.default.pod.cluster.local]:20000): Connection reset by peer
Exception raised from recvBytes at /pytorch/torch/csrc/distributed/c10d/Utils.hpp:679 (most recent call first):
""",
         ['connection_reset'], 1, {'port': 20000}),
    # pytorch/pytorch#128680
    Case('store_dump_flag_at_exit_2.4', r"""
[rank1]:[E614 11:14:03.086670611 ProcessGroupNCCL.cpp:1319] [PG 0 Rank 1] Failed to get exception dump flag from the global store.Connection reset by peer
Exception raised from recvBytes at /projs/framework/user/pytorch/torch/csrc/distributed/c10d/Utils.hpp:669 (most recent call first):
frame #0: <unknown function> + 0x121eb6 (0x7f1d54e02eb6 in /projs/framework/user/venv/lib/python3.10/site-packages/torch/lib/libc10.so)
""",
         [], 0, {}),
    # pytorch/pytorch#153586
    Case('store_recv_0_bytes_2.8', r"""
[W514 18:33:36.536327028 TCPStore.cpp:138] [c10d] recvValueWithTimeout failed on SocketImpl(fd=3, addr=[localhost]:34658, remote=[localhost]:1234): Failed to recv, got 0 bytes. Connection was likely closed. Did the remote server shutdown or crash?
""",
         ['connection_reset'], 1, {'port': 1234}),
    # huggingface/open-r1#620
    Case('wd_wrapped_interleaved_terminate', r"""
terminate called after throwing an instance of 'c10::DistBackendErrorterminate called after throwing an instance of ''
terminate called after throwing an instance of 'terminate called after throwing an instance of 'terminate called after throwing an instan
ce of 'c10::DistBackendErrorc10::DistBackendError'
terminate called after throwing an instance of 'c10::DistBackendErrorc10::DistBackendError'
c10::DistBackendError'
'
'
  what():  [PG ID 0 PG GUID 0(default_pg) Rank 3] Process group watchdog thread terminated with exception: [Rank 3] Watchdog caught colle
ctive operation timeout: WorkNCCL(SeqNum=4, OpType=BROADCAST, NumelIn=112, NumelOut=112, Timeout(ms)=1800000) ran for 1800011 millisecond
s before timing out.
Exception raised from checkTimeout at /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:632 (most recent call first):
""",
         ['nccl_timeout'], 1, {'seq_num': 4, 'op_type': 'BROADCAST', 'timeout_ms': 1800000}),
    # NVIDIA/Megatron-LM#935
    Case('wd_reduce_scatter_ngc', r"""
terminate called after throwing an instance of 'c10::DistBackendError'
  what():  [PG 1 Rank 7] Process group watchdog thread terminated with exception: [Rank 7] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=199, OpType=_REDUCE_SCATTER_BASE, NumelIn=7098994688, NumelOut=443687168, Timeout(ms)=600000) ran for 882725 milliseconds before timing out.
Exception raised from checkTimeout at /opt/pytorch/pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:567 (most recent call first):
""",
         ['nccl_timeout'], 1, {'seq_num': 199, 'op_type': '_REDUCE_SCATTER_BASE', 'numel_in': 7098994688}),
    # lsdefine/simple_GRPO#46
    Case('dump_signal_from_other_rank_2.6', r"""
[rank5]:[E723 01:58:45.667329643 ProcessGroupNCCL.cpp:1743] [PG ID 0 PG GUID 0(default_pg) Rank 5] Received a dump signal due to a collective timeout from  rank 2 and we will try our best to dump the debug info. Last enqueued NCCL work: 136, last completed NCCL work: 136.This is most likely caused by incorrect usages of collectives, e.g., wrong sizes used across ranks, the order of collectives is not same for all ranks or the scheduled collective, for some reason, didn't run. Additionally, this can be caused by GIL deadlock or other reasons such as network errors or bugs in the communications library (e.g. NCCL), etc.
[rank0]:[E723 01:58:45.667749122 ProcessGroupNCCL.cpp:1533] [PG ID 0 PG GUID 0(default_pg) Rank 0] ProcessGroupNCCL preparing to dump debug info. Include stack trace: 1
""",
         ['nccl_timeout'], 1, {}),
    # snowflakedb/ArcticTraining#219
    Case('dump_signal_local_deepspeed_kill', r"""
[rank0]:[E626 16:48:26.329225880 ProcessGroupNCCL.cpp:1743] [PG ID 0 PG GUID 0(default_pg) Rank 0] Received a dump signal due to a collective timeout from  rank 4 and we will try our best to dump the debug info. Last enqueued NCCL work: 120055, last completed NCCL work: 120051.This is most likely caused by incorrect usages of collectives, e.g., wrong sizes used across ranks, the order of collectives is not same for all ranks or the scheduled collective, for some reason, didn't run. Additionally, this can be caused by GIL deadlock or other reasons such as network errors or bugs in the communications library (e.g. NCCL), etc.
[rank0]:[E626 16:48:26.329361418 ProcessGroupNCCL.cpp:1533] [PG ID 0 PG GUID 0(default_pg) Rank 0] ProcessGroupNCCL preparing to dump debug info. Include stack trace: 1
[2025-06-26 16:48:28,488] [INFO] [launch.py:319:sigkill_handler] Killing subprocess 174644
""",
         ['nccl_timeout'], 1, {}),
    # meta-pytorch/torchtune#2651
    Case('dump_signal_wrapped_160', r"""
[rank1]:[E430 05:09:48.046336354 ProcessGroupNCCL.cpp:1533] [PG ID 0 PG GUID 0(default_pg) Rank 1] ProcessGroupNCCL preparing to dump debug info. Include stack trace:
 1
[rank7]:[E430 05:09:48.083703086 ProcessGroupNCCL.cpp:1743] [PG ID 0 PG GUID 0(default_pg) Rank 7] Received a dump signal due to a collective timeout from this local
rank and we will try our best to dump the debug info. Last enqueued NCCL work: 9387, last completed NCCL work: 9386.This is most likely caused by incorrect usages of
collectives, e.g., wrong sizes used across ranks, the order of collectives is not same for all ranks or the scheduled collective, for some reason, didn't run. Additio
nally, this can be caused by GIL deadlock or other reasons such as network errors or bugs in the communications library (e.g. NCCL), etc.
""",
         ['nccl_timeout'], 1, {}),
    # NVIDIA-NeMo/Speech#14399
    Case('uniqueid_store_wait_timeout_nemo', r"""
B-nemo-ft3/0 [default1]:[rank1]:   File "/usr/local/lib/python3.12/dist-packages/torch/distributed/distributed_c10d.py", line 2780, in broadcast
B-nemo-ft3/0 [default1]:[rank1]:     work = group.broadcast([tensor], opts)
B-nemo-ft3/0 [default1]:[rank1]:            ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
B-nemo-ft3/0 [default1]:[rank1]: torch.distributed.DistBackendError: [1] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: wait timeout after 600000ms, keys: /default_pg/0//cuda//0
B-nemo-ft3/0 [default1]:[rank1]: Exception raised from doWait at /opt/pytorch/pytorch/torch/csrc/distributed/c10d/TCPStore.cpp:578 (most recent call first):
""",
         ['rendezvous_timeout'], 1, {}),
    # pytorch/pytorch#68597
    Case('uniqueid_store_socket_timeout', r"""
RuntimeError: [3] is setting up NCCL communicator and retreiving ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got exception: Socket Timeout
Exception raised from recvBytes at caffe2/torch/csrc/distributed/c10d/Utils.hpp:595 (most recent call first):
""",
         ['rendezvous_timeout'], 1, {}),
    # deepspeedai/DeepSpeed#3232
    Case('deepspeed_launcher_rc_-9', r"""
[2023-04-14 13:11:27,879] [INFO] [launch.py:428:sigkill_handler] Killing subprocess 13266
[2023-04-14 13:11:27,885] [ERROR] [launch.py:434:sigkill_handler] ['/usr/bin/python3', '-u', 'main.py', '--local_rank=0', '--data_path', 'Dahoas/rm-static', '--model_name_or_path', 'facebook/opt-125m', '--per_device_train_batch_size', '2', '--zero_stage', '2', '--deepspeed', '--output_dir', '/content/output/actor-models/125m'] exits with return code = -9
""",
         ['sigkill'], 1, {'exitcode': -9}),
    # deepspeedai/DeepSpeedExamples#626
    Case('deepspeed_launcher_rc_-11', r"""
[2023-07-10 04:09:43,963] [INFO] [logging.py:93:log_dist] [Rank 0] DeepSpeed info: version=0.8.3, git-hash=unknown, git-branch=unknown
fdsui[2023-07-10 04:26:05,876] [INFO] [launch.py:318:sigkill_handler] Killing subprocess 94984
[2023-07-10 04:26:05,876] [INFO] [launch.py:318:sigkill_handler] Killing subprocess 94985
[2023-07-10 04:26:35,999] [ERROR] [launch.py:324:sigkill_handler] ['/global/homes/user/venv/bin/python3.10', '-u', 'trainCLM.py', '--local_rank=1', '--deepspeed', '/home/user/config/deepspeed_config.json'] exits with return code = -11
""",
         ['segfault'], 1, {'exitcode': -11}),
    # vllm-project/vllm#798
    Case('internal_last_error_refused_ray', r"""
(LLMEngine pid=2347640, ip=10.58.226.15) torch.distributed.DistBackendError: NCCL error in: /opt/conda/conda-bld/pytorch_1682343967769/work/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1275, internal error, NCCL version 2.14.3
(LLMEngine pid=2347640, ip=10.58.226.15) ncclInternalError: Internal check failed.
(LLMEngine pid=2347640, ip=10.58.226.15) Last error:
(LLMEngine pid=2347640, ip=10.58.226.15) Net : Call to recv from 10.58.226.18<38309> failed : Connection refused
(LLMEngine pid=2347640, ip=10.58.226.15) Unhandled error (suppress with 'RAY_IGNORE_UNHANDLED_ERRORS=1'): ray::RayWorker.execute_method() (pid=2347716, ip=10.58.226.15, actor_id=cb7b77d2ed800d791eecf3d810000000, repr=<vllm.engine.ray_utils.RayWorker object at 0x7f13f7f0f520>)
""",
         ['nccl_internal_error', 'nccl_remote_error'], 1, {'nccl_version': '2.14.3'}),
    # NVIDIA/nccl#1514
    Case('internal_last_error_closed_by_peer', r"""
torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1275, internal error, NCCL version 2.14.3
ncclInternalError: Internal check failed.
Last error:
Net : Connection closed by remote peer user<50260>
Traceback (most recent call last):
  File "/data108/user/R2GenGPT/train.py", line 55, in <module>
    main()
""",
         ['nccl_internal_error', 'nccl_remote_error'], 1, {'nccl_version': '2.14.3'}),
    # ray-project/ray_lightning#24
    Case('ipc_handle_peer_access_ray', r"""
(pid=909597) RuntimeError: NCCL error in: /opt/conda/conda-bld/pytorch_1603729062494/work/torch/lib/c10d/ProcessGroupNCCL.cpp:784, unhandled cuda error, NCCL version 2.7.8
(pid=909608) z-pc:909608:910337 [0] NCCL INFO Channel 00 : 0[2d000] -> 1[2e000] via P2P/IPC
(pid=909608)
(pid=909608) z-pc:909608:910337 [0] transport/p2p.cc:238 NCCL WARN failed to open CUDA IPC handle : 217 peer access is not supported between these two devices
(pid=909608) z-pc:909608:910337 [0] NCCL INFO transport.cc:68 -> 1
""",
         ['nccl_unhandled_cuda_error', 'nccl_warn'], 1, {'nccl_return_code': 1, 'nccl_version': '2.7.8'}),
    # horovod/horovod#785
    Case('ipc_handle_nccl2.3_cu_files', r"""
HOSTNAME:2753:2762 [0] transport/p2p.cu:548 NCCL WARN failed to open CUDA IPC handle : 64 peer access is not supported between these two devices
HOSTNAME:2753:2762 [0] NCCL INFO init.cu:568 -> 1
HOSTNAME:2753:2762 [0] NCCL INFO init.cu:642 -> 1
HOSTNAME:4974:4981 [0] NCCL INFO rank 0 nranks 2
HOSTNAME:4974:4981 [0] NCCL INFO Ring 00 : 0[0] -> 1[0] via P2P/IPC

HOSTNAME:4974:4981 [0] transport/p2p.cu:548 NCCL WARN failed to open CUDA IPC handle : 11 invalid argument
HOSTNAME:4974:4981 [0] NCCL INFO init.cu:568 -> 1
HOSTNAME:4974:4981 [0] NCCL INFO init.cu:642 -> 1
""",
         ['nccl_unhandled_cuda_error', 'nccl_warn'], 1, {'nccl_return_code': 1}),
    # aws/aws-ofi-nccl#715
    Case('socket_family_cloudwatch_prefix', r"""
  | 2024-11-28T07:42:14.532Z | algo-1:17773:17846 [0] NCCL INFO Channel 00/0 : 0[0] -> 7[7] via P2P/CUMEM/read
  | 2024-11-28T07:42:14.532Z | algo-1:17777:17849 [4] NCCL INFO Connected all rings
  | 2024-11-28T07:42:14.532Z | algo-1:17774:17862 [1] misc/socket.cc:717 NCCL WARN ncclSocketInit: connecting to address with family 33022 is neither AF_INET(2) nor AF_INET6(10)
  | 2024-11-28T07:42:14.532Z | algo-1:17774:17862 [1] NCCL INFO transport/net_socket.cc:331 -> 3
  | 2024-11-28T07:42:14.532Z | algo-1:17774:17862 [1] NCCL INFO transport/net.cc:687 -> 3
""",
         ['nccl_internal_error', 'nccl_warn'], 1, {'nccl_return_code': 3}),
    # NVIDIA/nccl#562
    Case('ibv_create_qp_tf_bazel_paths', r"""
hai-a100-3:3778851:3779455 [6] NCCL INFO Using network IBext
NCCL version 2.8.3+cudaCUDA_MAJOR.CUDA_MINOR

hai-a100-3:3778851:3779883 [4] ibvwrap.c:130 NCCL WARN Call to ibv_create_qp failed
hai-a100-3:3778851:3779883 [4] NCCL INFO ib_plugin.c:196 -> 2
hai-a100-3:3778851:3779883 [4] NCCL INFO ib_plugin.c:273 -> 2
hai-a100-3:3778851:3779883 [4] NCCL INFO bazel-out/k8-opt/bin/external/nccl_archive/_virtual_includes/include_hdrs/net.h:21 -> 2
hai-a100-3:3778851:3779883 [4] NCCL INFO external/nccl_archive/src/init.cc:310 -> 2
hai-a100-3:3778851:3779883 [4] NCCL INFO external/nccl_archive/src/group.cc:72 -> 2 [Async thread]
""",
         ['nccl_system_error', 'nccl_warn'], 1, {'nccl_return_code': 2}),
    # NVIDIA/nccl#1814
    Case('ib_plugin_recv_status12_then_5', r"""
hostname-test:984:1357 [4] ib_plugin.c:1615 NCCL WARN NET/IB : Got completion from peer 172.36.143.59<44206> with status=12 opcode=129 len=65536 vendor err 129 (Recv) localGid ::ffff:29.87.88.182 remoteGids::ffff:29.87.4.221
hostname-test:984:1357 [4] NCCL INFO transport/net.cc:1298 -> 6
hostname-test:984:1357 [4] NCCL INFO proxy.cc:694 -> 6
hostname-test:984:1357 [4] NCCL INFO proxy.cc:874 -> 6 [Progress Thread]

hostname-test:984:1357 [4] ib_plugin.c:1615 NCCL WARN NET/IB : Got completion from peer 172.36.143.59<44206> with status=5 opcode=32656 len=32659 vendor err 249 (Recv) localGid ::ffff:29.87.88.182 remoteGids::ffff:29.87.4.221
hostname-test:984:1357 [4] NCCL INFO transport/net.cc:1298 -> 6
hostname-test:984:1357 [4] NCCL INFO proxy.cc:694 -> 6
""",
         ['ib_completion_error', 'nccl_remote_error', 'nccl_warn'], 1, {'ib_completion_error': 12, 'vendor_err': 129, 'nccl_return_code': 6}),
    # NVIDIA/nccl#1405
    Case('ib_plugin_ipv6_gids', r"""
kp-ddp-worker-0:3468:3905 [4] ib_plugin.c:1615 NCCL WARN NET/IB : Got completion from peer 10.216.210.236<54862> with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid fd00:1148:9000:5000:4:200:3:ff22 remoteGidsfd00:1148:9000:5000:4:200:3:ff1f
kp-ddp-worker-0:3468:3905 [4] NCCL INFO transport/net.cc:1302 -> 6
kp-ddp-worker-0:3468:3905 [4] NCCL INFO proxy.cc:698 -> 6
kp-ddp-worker-0:3468:3905 [4] NCCL INFO proxy.cc:878 -> 6 [Progress Thread]
""",
         ['ib_completion_error', 'nccl_remote_error', 'nccl_warn'], 1, {'ib_completion_error': 12, 'vendor_err': 129}),
    # mila-iqia/milabench#269
    Case('wd_job_runner_prefix_wrapped', r"""
dinov2-giant-nodes.cn-d003.nolog [stderr] frame #3: c10d::ProcessGroupNCCL::ncclCommWatchdog() + 0x10c (0x7f5ac45796fc in
/tmp/workspace/cuda/results/venv/torch/lib/python3.10/site-packages/torch/lib/libtorch_cuda.so)
dinov2-giant-nodes.cn-d003.nolog [stderr] frame #4: <unknown function> + 0xdbbf4 (0x7f5b11cc7bf4 in /home/user/conda/envs/py310/bin/../lib/libstdc++.so.6)
dinov2-giant-nodes.cn-d003.nolog [stderr]
dinov2-giant-nodes.cn-d003.nolog [stderr] [rank6]:[E909 09:55:35.239719860 ProcessGroupNCCL.cpp:1515] [PG 0 (default_pg) Rank 6] Process group watchdog thread terminated
with exception: [Rank 6] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2070, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600022
milliseconds before timing out.
dinov2-giant-nodes.cn-d003.nolog [stderr] Exception raised from checkTimeout at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:609 (most recent call first):
""",
         ['nccl_timeout'], 1, {'seq_num': 2070, 'op_type': 'ALLREDUCE', 'timeout_ms': 600000}),
    # vllm-project/vllm#2734
    Case('wd_ray_ansi_remnants', r"""
INFO 02-03 13:14:04 llm_engine.py:706] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 0.0 tokens/s, Running: 1 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 0.0%, CPU KV cache usage: 0.0%
 [36m(RayWorkerVllm pid=5085) [0m [E ProcessGroupNCCL.cpp:475] [Rank 4] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=20518, OpType=ALLREDUCE, NumelIn=106496, NumelOut=106496, Timeout(ms)=1800000) ran for 1800270 milliseconds before timing out.
 [36m(RayWorkerVllm pid=5310) [0m [W CUDAGraph.cpp:145] Warning: Waiting for pending NCCL work to finish before starting graph capture. (function operator()) [32m [repeated 6x across cluster] [0m
""",
         ['nccl_timeout'], 1, {'seq_num': 20518, 'op_type': 'ALLREDUCE', 'timeout_ms': 1800000}),
    # vllm-project/vllm#6042
    Case('wd_gather_ray_timeout_at_work', r"""
[36m(RayWorkerWrapper pid=4009) [rank1]:[E ProcessGroupNCCL.cpp:563] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=158046, OpType=GATHER, NumelIn=2867200, NumelOut=0, Timeout(ms)=600000) ran for 600027 milliseconds before timing out.
(RayWorkerWrapper pid=4009) [rank1]:[E ProcessGroupNCCL.cpp:1537] [PG 1 Rank 1] Timeout at NCCL work: 158046, last enqueued NCCL work: 158046, last completed NCCL work: 158045.
(RayWorkerWrapper pid=4009) [rank1]:[E ProcessGroupNCCL.cpp:577] [Rank 1] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.
(RayWorkerWrapper pid=4009) [rank1]:[E ProcessGroupNCCL.cpp:583] [Rank 1] To avoid data inconsistency, we are taking the entire process down.
(RayWorkerWrapper pid=4009) [rank1]:[E ProcessGroupNCCL.cpp:1414] [PG 1 Rank 1] Process group watchdog thread terminated with exception: [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=158046, OpType=GATHER, NumelIn=2867200, NumelOut=0, Timeout(ms)=600000) ran for 600027 milliseconds before timing out.
""",
         ['nccl_timeout'], 1, {'seq_num': 158046, 'op_type': 'GATHER', 'numel_out': 0, 'last_completed_work': 158045}),
    # NVIDIA/nccl-tests#227 + NVIDIA/nccl#1609 + NVIDIA/nccl#1657
    Case('healthy_nccl_init_info_only', r"""
ai-worker01:5771:5771 [0] NCCL INFO Bootstrap : Using eth0:172.16.121.86<0>
ai-worker01:5771:5771 [0] NCCL INFO cudaDriverVersion 12040
NCCL version 2.21.5+cuda12.4
ai-worker01:5771:5783 [0] NCCL INFO Plugin Path : /opt/hpcx/nccl_rdma_sharp_plugin/lib/libnccl-net.so
ai-worker01:5771:5783 [0] NCCL INFO P2P plugin IBext_v8
ai-worker01:5771:5783 [0] NCCL INFO NET/IB : Using [0]irdma0:1/RoCE [1]irdma3:1/RoCE [RO]; OOB eth0:172.16.121.86<0>
ai-worker01:5771:5783 [0] NCCL INFO Using network IBext_v8
ai-worker03:4940:4951 [0] NCCL INFO ncclCommInitRank comm 0x55d9607ee240 rank 1 nranks 2 cudaDev 0 nvmlDev 0 busId 61000 commId 0x6c4ab36b0d2ee98c - Init START
tj5-h800-dev01:534:1763 [3] NCCL INFO NVLS comm 0x7f1928e6e060 headRank 3 nHeads 4 buffSize 4194304 memSize 2097152 nvlsPerRankSize 201326592 nvlsTotalSize 805306368
tj5-h800-dev01:533:1765 [2] NCCL INFO threadThresholds 8/8/64 | 32/8/64 | 512 | 512
tj5-h800-dev01:533:1765 [2] NCCL INFO 16 coll channels, 0 collnet channels, 16 nvls channels, 16 p2p channels, 2 p2p channels per peer
leader-0:88:157 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[0] [send] via NET/IB/0
leader-0:88:159 [0] NCCL INFO transport/net_ib.cc:985 Ib Alloc Size 181568 pointer 0x7f4ff8024000
leader-0:88:159 [0] NCCL INFO NCCL_IB_GID_INDEX set by environment to 0.
node-2:25172:25848 [1] NCCL INFO [Service thread] Connection closed by localRank 0
node-2:25148:25846 [3] NCCL INFO [Service thread] Connection closed by localRank 0
""",
         [], 0, {}),
    # ROCm/legacy-rocm-build#5742
    Case('hip_illegal_address_accelerator_error', r"""
  File "/home/user/COMFY/ComfyUI/comfy/model_management.py", line 1108, in cast_to
    r.copy_(weight, non_blocking=non_blocking)
    ~~~~~~~^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
torch.AcceleratorError: HIP error: an illegal memory access was encountered
Search for `hipErrorIllegalAddress' in https://rocm.docs.amd.com/projects/HIP/en/latest/index.html for more information.
HIP kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
For debugging consider passing AMD_SERIALIZE_KERNEL=3
Compile with `TORCH_USE_HIP_DSA` to enable device-side assertions.
""",
         ['cuda_error'], 1, {'cuda_error_name': 'cudaErrorIllegalAddress'}),
    # ROCm/legacy-rocm-build#6003
    Case('rocm_terminate_accelerator_error', r"""
pytorch version: 2.11.0+rocm7.2
AMD arch: gfx1100
terminate called after throwing an instance of 'c10::AcceleratorError'
  what():  CUDA error: an illegal memory access was encountered
Search for `hipErrorIllegalAddress' in https://rocm.docs.amd.com/projects/HIP/en/latest/index.html for more information.
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
For debugging consider passing AMD_SERIALIZE_KERNEL=3
Device-side assertion tracking was not enabled by user.
Exception raised from SetDevice at /pytorch/c10/hip/HIPFunctions.cpp:334 (most recent call first):
""",
         ['cuda_error'], 1, {'cuda_error_name': 'cudaErrorIllegalAddress'}),
    # antgroup/animate-x#15
    Case('healthy_ipv6_gai_warning', r"""
[W socket.cpp:601] [c10d] The IPv6 network addresses of (localhost, 51595) cannot be retrieved (gai error: -2 - Name or service not known).
[W socket.cpp:601] [c10d] The IPv6 network addresses of (localhost, 51595) cannot be retrieved (gai error: -2 - Name or service not known).
[W socket.cpp:601] [c10d] The IPv6 network addresses of (localhost, 51595) cannot be retrieved (gai error: -2 - Name or service not known).
""",
         [], 0, {}),
    # OpenRLHF/OpenRLHF#1040
    Case('store_clients_joined_1801', r"""
torch.distributed.DistStoreError: Timed out after 1801 seconds waiting for clients. 1/3 clients joined.
""",
         ['rendezvous_timeout'], 1, {'worker_count': 1, 'world_size': 3}),
    # pytorch/pytorch#111805
    Case('store_workers_joined_2.2', r"""
creating store
torch.distributed.DistStoreError: Timed out after 6 seconds waiting for workers. 1/2 workers joined.
""",
         ['rendezvous_timeout'], 1, {'worker_count': 1, 'world_size': 2}),
    # alibaba/Pai-Megatron-Patch#468
    Case('store_socket_timeout_torchrun_agent', r"""
W0219 12:09:28.313000 140145133409408 torch/distributed/run.py:757] Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your system being overloaded, please further tune the variable for optimal performance in your application as needed.
  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/launcher/api.py", line 254, in launch_agent
    result = agent.run()
  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/elastic/metrics/api.py", line 123, in wrapper
    result = f(*args, **kwargs)
torch.distributed.DistStoreError: Socket Timeout
""",
         ['rendezvous_timeout'], 1, {}),
    # pytorch/pytorch#131755
    Case('nccl_warn_cuda_failure_700', r"""
n122-164-108:7400:7642 [1] include/alloc.h:125 NCCL WARN Cuda failure 700 'an illegal memory access was encountered'
n122-164-108:7400:7642 [1] NCCL INFO include/alloc.h:246 -> 1

n122-164-108:7400:7642 [1] include/alloc.h:125 NCCL WARN Cuda failure 700 'an illegal memory access was encountered'
n122-164-108:7400:7642 [1] NCCL INFO include/alloc.h:246 -> 1
""",
         ['nccl_unhandled_cuda_error', 'nccl_warn'], 1, {'cuda_failure_code': 700}),
    # NVIDIA/nccl#629
    Case('nccltests_reset_then_illegal_access', r"""
A03-R28-2:104934:105018 [0] NCCL INFO include/net.h:28 -> 2
A03-R28-2:104934:105018 [0] NCCL INFO transport/net.cc:389 -> 2
A03-R28-2:104934:105018 [0] NCCL INFO proxy.cc:452 -> 2 [Proxy Thread]

A03-R28-3:46841:46987 [0] include/socket.h:428 NCCL WARN Net : Call to recv from 11.127.49.2<36048> failed : Connection reset by peer
A03-R28-3:46841:46987 [0] NCCL INFO transport/net_ib.cc:619 -> 2
A03-R28-3:46841:46987 [0] NCCL INFO proxy.cc:452 -> 2 [Proxy Thread]

A03-R28-2:104934:104934 [1] init.cc:204 NCCL WARN Cuda failure 'an illegal memory access was encountered'
A03-R28-2:104934:104934 [1] NCCL INFO init.cc:990 -> 1
A03-R28-2: Test NCCL failure common.cu:497 'unhandled cuda error'
 .. A03-R28-2 pid 104934: Test failure common.cu:587
 .. A03-R28-2 pid 104934: Test failure common.cu:766
""",
         ['nccl_remote_error', 'nccl_system_error', 'nccl_unhandled_cuda_error', 'nccl_warn'], 1, {}),
    # ofsoundof/GRL-Image-Restoration#27
    Case('client_connect_errno110_any_address', r"""
trainer/0 [1]:[W socket.cpp:558] [c10d] The client socket has failed to connect to [::ffff:0.0.0.5]:40323 (errno: 110 - Connection timed out).
trainer/0 [0]:[W socket.cpp:558] [c10d] The client socket has failed to connect to [::ffff:0.0.0.5]:40323 (errno: 110 - Connection timed out).

trainer/0 [1]:[W socket.cpp:558] [c10d] The client socket has failed to connect to 0.0.0.5:40323 (errno: 110 - Connection timed out).
trainer/0 [1]:[E socket.cpp:610] [c10d] The client socket has failed to connect to any network address of (05, 40323).
trainer/0 [0]:[W socket.cpp:558] [c10d] The client socket has failed to connect to 0.0.0.5:40323 (errno: 110 - Connection timed out).
trainer/0 [0]:[E socket.cpp:610] [c10d] The client socket has failed to connect to any network address of (05, 40323).
""",
         ['rendezvous_timeout'], 1, {'port': 40323}),
    # hpcaitech/Open-Sora#667
    Case('client_connect_errno110_socket_cpp_697', r"""
[W socket.cpp:697] [c10d] The client socket has failed to connect to [::ffff:0.104.99.143]:47389 (errno: 110 - Connection timed out).
[W socket.cpp:697] [c10d] The client socket has failed to connect to 0.104.99.143:47389 (errno: 110 - Connection timed out).
[E socket.cpp:753] [c10d] The client socket has failed to connect to any network address of (6841231, 47389).
""",
         ['rendezvous_timeout'], 1, {'port': 47389}),
    # sgl-project/sglang#2561
    Case('healthy_ipv6_family_not_supported', r"""
[W1226 15:35:11.626067741 socket.cpp:752] [c10d] The client socket cannot be initialized to connect to [sws-h100-05.example.org]:8000 (errno: 97 - Address family not supported by protocol).
[W1226 15:35:12.800892117 socket.cpp:752] [c10d] The client socket cannot be initialized to connect to [sws-h100-05.example.org]:8000 (errno: 97 - Address family not supported by protocol).
""",
         [], 0, {}),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_real_wording(tmp_path, case):
    log = tmp_path / "excerpt.log"
    log.write_text(case.text.lstrip("\n"), encoding="utf-8")
    r = CliRunner().invoke(cli, ["analyze-log", str(log), "-f", "json"], catch_exceptions=False)
    doc = json.loads(r.output)
    assert sorted({f["kind"] for f in doc["findings"]}) == sorted(case.labels)
    assert r.exit_code == case.exit_code
    for key, want in case.facts.items():
        assert key in doc["facts"], f"fact {key} missing"
        assert same(want, doc["facts"][key]), f"{key}: expected {want!r}, got {doc['facts'][key]!r}"


def test_the_table_is_real():
    """Every excerpt names its source, and no two are the same (a copied row would hide a lost case)."""
    assert len({c.text for c in CASES}) == len(CASES) >= 25
    assert len({c.id for c in CASES}) == len(CASES)
