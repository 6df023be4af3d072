"""Real wordings of host, Python and framework failures, and of healthy runs, from public reports.

Each excerpt keeps the wording and line format of a log that someone posted publicly (the comment names
the repository and issue); host names, user names, paths and addresses were changed. Every excerpt runs
through the real ``llmdiag analyze-log -f json`` command: the labels must come out exactly, the exit
code must say whether the job died (1) or ran fine (0, with no finding at all), and the key facts must
be read. The tables are data: a wording that fails here is a gap in the analyzer, not in the test.
"""
# the excerpts keep the trailing blanks of the real lines (torchrun's "ChildFailedError: ", tqdm redraws)
# ruff: noqa: W291, W293

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from llmdiag.cli import cli

BAR = "\u2588"

#: (source, excerpt, expected labels, expected exit code, key facts)
FAILURES: list[tuple[str, str, list[str], int, dict]] = [
    # pcyin/tranX#41: dmesg after a run that used up the host's RAM (terminal-wrapped lines rejoined)
    ("tranX#41", """\
[2059991.491436] oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,task_memcg=/user.slice,task=python3,pid=25315,uid=0
[2059991.491542] Out of memory: Killed process 25315 (python3) total-vm:53312244kB, anon-rss:31451456kB, file-rss:74816kB, shmem-rss:12296kB, UID:0 pgtables:69068kB oom_score_adj:0
[2059992.056260] oom_reaper: reaped process 25315 (python3), now anon-rss:0kB, file-rss:74732kB, shmem-rss:12296kB
""", ["host_oom_kill"], 1, {"killed_pid": 25315, "process": "python3"}),
    # ShengcaiLiao/QAConv#19: dmesg, the first line without its timestamp, then another process invokes the killer
    ("QAConv#19", """\
oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,task_memcg=/user.slice/user-1000.slice/user@1000.service,task=python,pid=698405,uid=1000
[441280.839852] Out of memory: Killed process 698405 (python) total-vm:49978204kB, anon-rss:12918388kB, file-rss:68668kB, shmem-rss:53352kB, UID:1000 pgtables:49772kB oom_score_adj:0
[441281.626336] oom_reaper: reaped process 698405 (python), now anon-rss:0kB, file-rss:68664kB, shmem-rss:53172kB
[448212.100902] sunloginclient invoked oom-killer: gfp_mask=0x100cca(GFP_HIGHUSER_MOVABLE), order=0, oom_score_adj=0
[448212.100908] CPU: 11 PID: 940 Comm: sunloginclient Tainted: P           OE     5.11.0-43-generic #47~20.04.2-Ubuntu
[448212.100912] Call Trace:
[448212.100914]  dump_stack+0x74/0x92
[448212.100919]  dump_header+0x4f/0x1f6
[448212.100922]  oom_kill_process.cold+0xb/0x10
[448212.100924]  out_of_memory.part.0+0x1ee/0x460
""", ["host_oom_kill"], 1, {"killed_pid": 698405, "process": "python"}),
    # equinor/ert#7797: `dmesg --time-format iso`
    ("ert#7797", """\
2024-04-29T14:55:41,678628+02:00 pool invoked oom-killer: gfp_mask=0x6200ca(GFP_HIGHUSER_MOVABLE), order=0, oom_score_adj=0
2024-04-29T14:55:41,678661+02:00  oom_kill_process.cold.33+0xb/0x10
2024-04-29T14:55:41,678996+02:00 [  pid  ]   uid  tgid total_vm      rss pgtables_bytes swapents oom_score_adj name
2024-04-29T14:55:41,679685+02:00 oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,task_memcg=/user.slice/user-21417.slice/user@21417.service,task=python3,pid=1440763,uid=21417
2024-04-29T14:55:41,679700+02:00 Out of memory: Killed process 1440763 (python3) total-vm:87033376kB, anon-rss:60356340kB, file-rss:0kB, shmem-rss:0kB, UID:21417 pgtables:169956kB oom_score_adj:0
2024-04-29T14:55:46,947445+02:00 oom_reaper: reaped process 1440763 (python3), now anon-rss:0kB, file-rss:0kB, shmem-rss:0kB
""", ["host_oom_kill"], 1, {"killed_pid": 1440763, "anon_rss_kb": 60356340}),
    # chrisknewman/tusas#149: Slurm's cgroup OOM on a step, then srun ends the step
    ("tusas#149", """\
slurmstepd: error: Detected 1 oom_kill event in StepId=440575.0. Some of the step tasks have been OOM Killed.
srun: error: nid001277: tasks 1-3: Out Of Memory
srun: Terminating StepId=440575.0
slurmstepd: error: *** STEP 440575.0 ON nid001277 CANCELLED AT 2023-12-05T07:16:01 ***
""", ["host_oom_kill"], 1, {"oom_kill_events": 1}),
    # hafs-community/HAFS#101 (1): the older Slurm wording, "oom-kill event(s) in step N cgroup"
    ("HAFS#101-oom", """\
slurmstepd: error: Detected 1 oom-kill event(s) in step 3495064.0 cgroup. Some of your processes may have been killed by the cgroup out-of-memory handler.
srun: error: Orion-01-01: task 4: Out Of Memory
srun: Terminating job step 3495064.0
slurmstepd: error: *** STEP 3495064.0 ON orion-01-01 CANCELLED AT 2021-10-27T19:35:36 ***
""", ["host_oom_kill"], 1, {"oom_kill_events": 1}),
    # lanl/PyBNF#118: the batch step's cgroup
    ("PyBNF#118", """\
slurmstepd: error: Detected 2 oom-kill event(s) in step 3756240.batch cgroup.
""", ["host_oom_kill"], 1, {"oom_kill_events": 2}),
    # snakemake/snakemake-executor-plugin-slurm#371: "srun: error: NODE: task 0: Out Of Memory" after the event
    ("snakemake-slurm#371", """\
slurmstepd: error: Detected 2 oom_kill events in StepId=4711.13. Some of the step tasks have been OOM Killed.
srun: error: node-3: task 0: Out Of Memory
""", ["host_oom_kill"], 1, {"oom_kill_events": 2}),
    # hafs-community/HAFS#101 (2): a task of the step died of SIGBUS
    ("HAFS#101-bus", """\
srun: error: Orion-18-69: task 289: Bus error
srun: Terminating job step 3495450.0
slurmstepd: error: *** STEP 3495450.0 ON orion-01-04 CANCELLED AT 2021-10-27T20:22:22 ***
""", ["sigbus"], 1, {"signal": "SIGBUS"}),
    # castorini/hedwig#70: a bare Killed right after a finished tqdm bar
    ("hedwig#70", f"""\
Note: You are using GPU for training
  0%|         | 0/3000001 [00:00<?, ?it/s]Skipping token 3000000 with 1-dimensional vector ['300']; likely a header
100%{BAR * 18}| 3000001/3000001 [03:33<00:00, 14061.26it/s]
Killed
""", ["sigkill"], 1, {"signal": "SIGKILL"}),
    # InternLandMark/LandMark#65: "Killed" glued to the bar
    ("LandMark#65", f"""\
Training with a single process on 1 GPUs.
 31%|{BAR * 52}| 331/1063 [01:06<03:59,  3.06it/s]Killed
""", ["sigkill"], 1, {"signal": "SIGKILL", "progress_step": 331}),
    # divamgupta/deep-clustering-kingdra#2: the shell's job report behind a timestamp
    ("kingdra#2", """\
2020-11-24 20:18:25.069 Epoch 5/5
2020-11-24 20:18:25.069 - 24s - loss: 5.9945
2020-11-24 20:22:28.106 /bin/bash: line 27: 318 Killed sh start.sh
""", ["sigkill"], 1, {"signal": "SIGKILL", "pid": 318}),
    # argoproj/argo-workflows#8981: the shell's report with padded columns
    ("argo#8981", """\
/argo/staging/script: line 10:    93 Killed                  pyenv exec python script/execute.py "${args[@]}"
""", ["sigkill"], 1, {"signal": "SIGKILL", "pid": 93}),
    # lzhxmu/CPPO#6: accelerate's DeepSpeed launcher, a rank SIGKILLed (host OOM), the ChildFailedError table
    ("CPPO#6", """\
  File "/home/user/.pyenv/versions/3.11.2/lib/python3.11/site-packages/accelerate/commands/launch.py", line 861, in deepspeed_launcher
    distrib_run.run(args)
  File "/home/user/.pyenv/versions/3.11.2/lib/python3.11/site-packages/torch/distributed/run.py", line 909, in run
    elastic_launch(
  File "/home/user/.pyenv/versions/3.11.2/lib/python3.11/site-packages/torch/distributed/launcher/api.py", line 138, in __call__
    return launch_agent(self._config, self._entrypoint, list(args))
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/home/user/.pyenv/versions/3.11.2/lib/python3.11/site-packages/torch/distributed/launcher/api.py", line 269, in launch_agent
    raise ChildFailedError(
torch.distributed.elastic.multiprocessing.errors.ChildFailedError: 
============================================================
src/open_r1/grpo_gsm.py FAILED
------------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2025-05-21_15:43:03
  host      : worker-0
  rank      : 0 (local_rank: 0)
  exitcode  : -9 (pid: 14750)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 14750
============================================================
""", ["child_failed", "sigkill"], 1, {"exitcode": -9, "signal": "SIGKILL", "root_cause_pid": 14750}),
    # yangjianxin1/Firefly#171: the old logger format of the agent, siblings SIGTERMed after a rank got -9
    ("Firefly#171", """\
WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 899505 closing signal SIGTERM
WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 899506 closing signal SIGTERM
WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 899507 closing signal SIGTERM
ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 4 (pid: 899509) of binary: /home/user/miniconda3/envs/ft/bin/python
""", ["sigkill"], 1, {"exitcode": -9, "pid": 899509, "failed_local_rank": 4}),
    # lmzpai/roboMamba#10: glog-prefixed agent line, then the launcher's own traceback
    ("roboMamba#10", """\
E0325 20:57:27.620000 2606 site-packages/torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: -9) local_rank: 5 (pid: 2630) of binary: /root/miniconda3/bin/python
Traceback (most recent call last):
  File "/root/miniconda3/bin/torchrun", line 8, in <module>
    sys.exit(main())
             ^^^^^^
  File "/root/miniconda3/lib/python3.12/site-packages/torch/distributed/elastic/multiprocessing/errors/__init__.py", line 355, in wrapper
    return f(*args, **kwargs)
           ^^^^^^^^^^^^^^^^^^
  File "/root/miniconda3/lib/python3.12/site-packages/torch/distributed/run.py", line 919, in main
    run(args)
""", ["sigkill"], 1, {"exitcode": -9, "pid": 2630, "failed_local_rank": 5}),
    # pytorch/pytorch#139028: a rank raised (exit code 1); the table names rank 3
    ("pytorch#139028", """\
torch.distributed.elastic.multiprocessing.errors.ChildFailedError: 
============================================================
pippy_llama.py FAILED
------------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2024-10-27_12:29:04
  host      : 6e61f182b97b
  rank      : 3 (local_rank: 3)
  exitcode  : 1 (pid: 25248)
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
============================================================
""", ["child_failed"], 1, {"first_failing_rank": 3}),
    # hezhangsprinter/DCPDN#58: the worker's own message about shared memory
    ("DCPDN#58", """\
ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).
Traceback (most recent call last):
  File "/home/user/anaconda3/envs/py36/lib/python3.6/site-packages/PIL/ImageFile.py", line 510, in _save
    fh = fp.fileno()
AttributeError: '_idat' object has no attribute 'fileno'
""", ["dataloader_worker_killed", "sigbus"], 1, {}),  # torch's worker prints it from its SIGBUS handler, then dies of it
    # THU-DA-6D-Pose-Group/GDR-Net#16: the chain a shm-starved worker leaves behind
    ("GDR-Net#16", """\
ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).
RuntimeError: DataLoader worker (pid 3216) is killed by signal: Bus error. It is possible that dataloader's workers are out of shared memory. Please try to raise your shared memory limit.
    raise RuntimeError('DataLoader worker (pid(s) {}) exited unexpectedly'.format(pids_str))
RuntimeError: DataLoader worker (pid(s) 3216) exited unexpectedly
""", ["dataloader_worker_killed", "sigbus"], 1, {"pid": 3216}),  # the worker's signal is SIGBUS (issue 22)
    # hezhangsprinter/DCPDN#12: a worker killed by the OOM killer
    ("DCPDN#12", """\
Traceback (most recent call last):
  File "train.py", line 210, in <module>
    val_target_cpu, val_input_cpu = val_target_cpu.float().cuda(), val_input_cpu.float().cuda()
  File "/home/user/anaconda3/envs/pic/lib/python2.7/site-packages/torch/utils/data/dataloader.py", line 175, in handler
    _error_if_any_worker_fails()
RuntimeError: DataLoader worker (pid 19597) is killed by signal: Killed.
""", ["dataloader_worker_killed"], 1, {"pid": 19597}),
    # idiap/ESLAM#20: torch.multiprocessing could not grow its /dev/shm file
    ("ESLAM#20", """\
RuntimeError: unable to write to file </torch_31911_952036340_6686>: No space left on device (28)
""", ["disk_full"], 1, {}),
    # hiyouga/LlamaFactory#5155: safetensors (Rust) error while saving a checkpoint
    ("LlamaFactory#5155", """\
safetensors_rust.SafetensorError: Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: "No space left on device" })
""", ["disk_full"], 1, {}),
    # bghira/SimpleTuner#2353: the newer safetensors wording
    ("SimpleTuner#2353", """\
Error while serializing: I/O error: No space left on device (os error 28)
Traceback (most recent call last):
  File "/app/SimpleTuner/simpletuner/train.py", line 161, in <module>
    trainer.train()
  File "/opt/venv/lib/python3.12/site-packages/safetensors/torch.py", line 307, in save_file
    serialize_file(_flatten(tensors), filename, metadata=metadata)
safetensors_rust.SafetensorError: Error while serializing: I/O error: No space left on device (os error 28)
""", ["disk_full"], 1, {}),
    # zai-org/ChatGLM-6B#1166: DeepSpeed's torch checkpoint engine, the zip writer fails
    ("ChatGLM-6B#1166", """\
[2023-06-02 00:34:14,470] [INFO] [logging.py:96:log_dist] [Rank 0] Saving model checkpoint: ./output/deepspeed/checkpoint-1428/global_step1428/zero_pp_rank_0_mp_rank_00_model_states.pt
[2023-06-02 00:34:14,470] [INFO] [torch_checkpoint_engine.py:21:save] [Torch] Saving ./output/deepspeed/checkpoint-1428/global_step1428/zero_pp_rank_0_mp_rank_00_model_states.pt...
[2023-06-02 00:34:14,493] [INFO] [torch_checkpoint_engine.py:23:save] [Torch] Saved ./output/deepspeed/checkpoint-1428/global_step1428/zero_pp_rank_0_mp_rank_00_model_states.pt.
[2023-06-02 00:34:14,497] [INFO] [torch_checkpoint_engine.py:21:save] [Torch] Saving ./output/deepspeed/checkpoint-1428/global_step1428/bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt...
Traceback (most recent call last):
  File "/environment/miniconda3/envs/py39/lib/python3.9/site-packages/torch/serialization.py", line 441, in save
    _save(obj, opened_zipfile, pickle_module, pickle_protocol)
  File "/environment/miniconda3/envs/py39/lib/python3.9/site-packages/torch/serialization.py", line 668, in _save
    zip_file.write_record(name, storage.data_ptr(), num_bytes)
RuntimeError: [enforce fail at inline_container.cc:471] . PytorchStreamWriter failed writing file data/3: file write failed
""", ["disk_full"], 1, {}),
    # ymcui/Chinese-LLaMA-Alpaca#534: fp16 loss scale falls to its minimum and DeepSpeed ends the run (the issue
    # quotes the OVERFLOW lines and the final Exception; the traceback frames between them are abridged)
    ("Chinese-LLaMA-Alpaca#534", f"""\
 14%|{BAR}\u258d        | 381/2724 [14:04:45<85:52:52, 131.96s/it][2023-06-07 22:22:34,914] [INFO] [loss_scaler.py:181:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 8, reducing to 4

 14%|{BAR}\u258d        | 382/2724 [14:06:56<85:46:12, 131.84s/it][2023-06-07 22:24:46,260] [INFO] [loss_scaler.py:181:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 4, reducing to 2

 14%|{BAR}\u258d        | 383/2724 [14:09:08<85:40:01, 131.70s/it][2023-06-07 22:26:57,601] [INFO] [loss_scaler.py:181:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 2, reducing to 1

Traceback (most recent call last):
  File "/home/user/.local/lib/python3.10/site-packages/deepspeed/runtime/fp16/loss_scaler.py", line 175, in update_scale
    raise Exception(
Exception: Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.
""", ["grad_overflow"], 1, {"loss_scale_min": 1, "loss_scale_at_minimum": True}),
    # zai-org/CogVideo#233: overflow while the loss scale calibrates
    ("CogVideo#233", """\
[2024-09-11 17:52:11,320] [INFO] [checkpointing.py:546:forward] ----Profiling time in checkpointing False
[2024-09-11 17:52:18,030] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 4294967296, reducing to 2147483648
[2024-09-11 17:52:32,563] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 2147483648, reducing to 1073741824
[2024-09-11 17:52:47,082] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 1073741824, reducing to 536870912
""", ["grad_overflow"], 0, {"overflow_messages": 3}),
    # huggingface/transformers#9996: ZeRO-2's older "[deepscale]" wording glued to the tqdm bar
    ("transformers#9996", """\
  1%|\u258a        | 6/1184 [00:21<1:09:10,  3.52s/it][2021-02-04 15:06:19,825] [INFO] [stage2.py:1357:step] [deepscale] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 134217728.0, reducing to 67108864.0
  1%|\u2589        | 7/1184 [00:24<1:07:59,  3.47s/it][2021-02-04 15:06:23,182] [INFO] [stage2.py:1357:step] [deepscale] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 67108864.0, reducing to 33554432.0
  1%|\u2589        | 8/1184 [00:28<1:07:17,  3.43s/it][2021-02-04 15:06:26,854] [INFO] [stage2.py:1357:step] [deepscale] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 33554432.0, reducing to 16777216.0
""", ["grad_overflow"], 0, {"overflow_messages": 3}),
    # deepspeedai/DeepSpeed#931: hysteresis first, then the scale halves; the step line counts the skips
    ("DeepSpeed#931", """\
Beginning of Epoch 1/16, Total Micro Batches 1840
[2023-04-28 06:51:29,903] [INFO] [loss_scaler.py:188:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, but hysteresis is 2. Reducing hysteresis to 1
[2023-04-28 06:51:30,648] [INFO] [loss_scaler.py:181:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768
[2023-04-28 06:51:31,392] [INFO] [loss_scaler.py:181:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 32768, reducing to 16384
""", ["grad_overflow"], 0, {}),
    # ZettaAI/zetta_utils#671: Slurm's time limit, job and step
    ("zetta_utils#671", """\
srun: Job step aborted: Waiting up to 47 seconds for job step to finish.
slurmstepd: error: *** JOB 494583 ON node-12 CANCELLED AT 2024-04-20T09:09:37 DUE TO TIME LIMIT ***
slurmstepd: error: *** STEP 494583.0 ON node-12 CANCELLED AT 2024-04-20T09:09:37 DUE TO TIME LIMIT ***
""", ["slurm_time_limit"], 1, {"slurm_job_id": 494583}),
    # GEMmaker (SystemsGenetics/GEMmaker#242): Slurm preempted the job
    ("GEMmaker#242", """\
slurmstepd: error: *** JOB 32391783 ON cn119 CANCELLED AT 2021-06-18T13:05:36 DUE TO PREEMPTION ***
""", ["slurm_cancelled"], 1, {"slurm_job_id": 32391783, "reason": "PREEMPTION"}),
    # facebookincubator/submitit#1708: preempted and requeued, then the tasks exit
    ("submitit#1708", """\
submitit WARNING (2022-08-12 02:06:11,453) - Caught signal SIGUSR2 on node-4: this job is preempted.
slurmstepd: error: *** JOB 608 ON node-4 CANCELLED AT 2022-08-12T02:06:12 DUE TO JOB REQUEUE ***
slurmstepd: error: *** STEP 608.0 ON node-4 CANCELLED AT 2022-08-12T02:06:12 DUE TO JOB REQUEUE ***
submitit WARNING (2022-08-12 02:06:12,299) - Bypassing signal SIGCONT
submitit WARNING (2022-08-12 02:06:12,301) - Bypassing signal SIGTERM
slurmstepd: error: Failed to send MESSAGE_TASK_EXIT: Connection refused
srun: error: node-4: tasks 2-3: Exited with exit code 1
""", ["slurm_cancelled"], 1, {"slurm_job_id": 608, "reason": "JOB REQUEUE"}),
    # FederatedAI/KubeFATE#64: kubectl events of a pod the kubelet evicted for memory
    ("KubeFATE#64", """\
4m11s       Warning   Evicted               pod/egg-7d9c    The node was low on resource: memory. Container egg was using 5053216Ki, which exceeds its request of 0.
4m11s       Normal    Killing               pod/egg-7d9c    Stopping container egg
4m          Warning   ExceededGracePeriod   pod/egg-7d9c    Container runtime did not kill the pod within specified grace period.
""", ["pod_evicted"], 1, {"evicted_resource": "memory"}),
    # kubeflow/trainer#301: `kubectl describe pod` of an evicted worker
    ("kubeflow-trainer#301", """\
Status:         Failed
Reason:         Evicted
Message:        The node was low on resource: memory.
""", ["pod_evicted"], 1, {"evicted_resource": "memory"}),
    # operate-first/apps#1352: evicted for disk pressure
    ("operate-first#1352", """\
classifier-56b4b9d9cqz7f   ml-workflows   Evicted   node-09   Pod The node had condition: [DiskPressure]. 
""", ["pod_evicted"], 1, {"evicted_resource": "DiskPressure"}),
    # YuanGongND/ast#112: a worker that exited with a code (the message since PyTorch 1.x)
    ("ast#112", """\
RuntimeError: DataLoader worker (pid 39424) exited unexpectedly with exit code 1. Details are lost due to multiprocessing. Rerunning with num_workers=0 may give better error trace.
""", ["dataloader_worker_killed"], 1, {"pid": 39424}),
    # facebookresearch/detectron2#384: the worker of a container with a 64 MiB /dev/shm
    ("detectron2#384", """\
RuntimeError: DataLoader worker (pid(s) 25) exited unexpectedly
""", ["dataloader_worker_killed"], 1, {"pid": 25}),
    # pytorch/pytorch#68643: the DataLoader's own timeout
    ("pytorch#68643", """\
Traceback (most recent call last):
  File "/usr/local/lib/python3.8/site-packages/torch/utils/data/dataloader.py", line 1186, in _next_data
    idx, data = self._get_data()
  File "/usr/local/lib/python3.8/site-packages/torch/utils/data/dataloader.py", line 1139, in _get_data
    raise RuntimeError('DataLoader timed out after {} seconds'.format(self._timeout))
RuntimeError: DataLoader timed out after 5 seconds
""", ["dataloader_timeout"], 1, {"timeout_s": 5}),
    # junyanz/pytorch-CycleGAN-and-pix2pix#1456: the user's quota, while saving images of the run
    ("CycleGAN#1456", """\
Traceback (most recent call last):
  File "train.py", line 57, in <module>
    visualizer.display_current_results(model.get_current_visuals(), epoch, save_result)
  File "/cyclegan/util/util.py", line 66, in save_image
    image_pil.save(image_path)
  File "/anaconda3/envs/lib/python3.7/site-packages/PIL/Image.py", line 2216, in save
    fp.close()
OSError: [Errno 122] Disk quota exceeded
""", ["disk_full"], 1, {"errno": 122}),
    # QwenLM/Qwen3-Coder#174: a platform's timestamp before every line, a rank's OOM, the agent's table (the issue
    # quotes the table from its "time" row; its two header rows are torchrun's, behind the same prefix)
    ("Qwen3-Coder#174", """\
2024-11-20 14:37:16 [rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 132.00 MiB. GPU 3 has a total capacity of 79.10 GiB of which 98.00 MiB is free. Process 387746 has 78.89 GiB memory in use. Of the allocated memory 70.12 GiB is allocated by PyTorch, and 765.81 MiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)
2024-11-20 14:37:16 DEBUG:filelock:Attempting to acquire lock 140341412642880 on /root/.triton/autotune/Fp16Matmul_2d_kernel.pickle.lock
2024-11-20 14:37:16 DEBUG:filelock:Lock 140341412642880 acquired on /root/.triton/autotune/Fp16Matmul_2d_kernel.pickle.lock
2024-11-20 14:38:16 Root Cause (first observed failure):
2024-11-20 14:38:16 [0]:
2024-11-20 14:38:16   time      : 2024-11-20_14:37:28
2024-11-20 14:38:16   host      : job-5971-master-0
2024-11-20 14:38:16   rank      : 3 (local_rank: 3)
2024-11-20 14:38:16   exitcode  : 1 (pid: 96)
2024-11-20 14:38:16   error_file: <N/A>
2024-11-20 14:38:16   traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
""", ["child_failed", "cuda_oom"], 1, {"first_failing_rank": 3, "oom_tried_to_allocate_raw": "132.00 MiB"}),
    # vpetren/gradnorm_tf#17: a plain "epoch: N loss: X" printer, the loss turns nan
    ("gradnorm_tf#17", """\
epoch: 3447 loss: 0.21203952148556715
epoch: 3448 loss: 0.21049741968512542
epoch: 3449 loss: 0.2075416080653667
epoch: 3450 loss: 0.21063452526926987
epoch: 3451 loss: nan
epoch: 3452 loss: nan
epoch: 3453 loss: nan
""", ["nan_loss"], 1, {}),
    # AnswerDotAI/ModernBERT#233: HF Trainer dicts, grad_norm nan and then the loss stuck at 0.0
    ("ModernBERT#233", """\
{'loss': 0.2051, 'grad_norm': nan, 'learning_rate': 9.774074342405685e-06, 'epoch': 0.53}
{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 9.773696745450087e-06, 'epoch': 0.53}
{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 9.773318840518906e-06, 'epoch': 0.53}
""", ["nan_grad_norm", "zero_loss"], 1, {}),
    # InternLM/xtuner#187: mmengine lines, the loss stays finite while grad_norm turns nan
    ("xtuner#187", """\
10/30 22:18:02 - mmengine - INFO - Epoch(train) [1][200/735]  lr: 1.9870e-04  eta: 2:46:39  time: 2.8906  data_time: 0.0042  memory: 10762  loss: 2.7522  grad_norm: 3.0608
10/30 22:18:30 - mmengine - INFO - Epoch(train) [1][210/735]  lr: 1.9857e-04  eta: 2:46:12  time: 2.8865  data_time: 0.0041  memory: 10762  loss: 2.6150  grad_norm: 2.7647
10/30 22:18:59 - mmengine - INFO - Epoch(train) [1][220/735]  lr: 1.9843e-04  eta: 2:45:44  time: 2.8826  data_time: 0.0040  memory: 10762  loss: 2.6687  grad_norm: 2.7647
10/30 22:19:28 - mmengine - INFO - Epoch(train) [1][230/735]  lr: 1.9828e-04  eta: 2:45:16  time: 2.8833  data_time: 0.0040  memory: 10762  loss: 2.7682  grad_norm: 2.5099
10/30 22:19:57 - mmengine - INFO - Epoch(train) [1][240/735]  lr: 1.9813e-04  eta: 2:44:49  time: 2.8874  data_time: 0.0042  memory: 10762  loss: 2.5128  grad_norm: nan
10/30 22:20:26 - mmengine - INFO - Epoch(train) [1][250/735]  lr: 1.9797e-04  eta: 2:44:21  time: 2.8906  data_time: 0.0039  memory: 10762  loss: 2.4566  grad_norm: nan
""", ["nan_grad_norm"], 1, {}),
    # deepspeedai/DeepSpeed#3232: the DeepSpeed launcher reports a rank that died of SIGKILL (host OOM)
    ("DeepSpeed#3232", """\
[2023-04-14 13:11:27,879] [INFO] [launch.py:428:sigkill_handler] Killing subprocess 13266
[2023-04-14 13:11:27,885] [ERROR] [launch.py:434:sigkill_handler] ['/usr/bin/python3', '-u', 'main.py', '--local_rank=0', '--data_path', 'Dahoas/rm-static', '--model_name_or_path', 'facebook/opt-125m', '--zero_stage', '2', '--deepspeed', '--output_dir', '/content/output/actor-models/125m'] exits with return code = -9
""", ["sigkill"], 1, {"exitcode": -9, "signal": "SIGKILL"}),
    # deepspeedai/DeepSpeedExamples#626: the same launcher line for a segfault
    ("DeepSpeedExamples#626", """\
[2023-07-10 04:09:43,963] [INFO] [logging.py:93:log_dist] [Rank 0] DeepSpeed info: version=0.8.3, git-hash=unknown, git-branch=unknown
[2023-07-10 04:26:05,876] [INFO] [launch.py:318:sigkill_handler] Killing subprocess 94984
[2023-07-10 04:26:05,876] [INFO] [launch.py:318:sigkill_handler] Killing subprocess 94985
[2023-07-10 04:26:35,999] [ERROR] [launch.py:324:sigkill_handler] ['/home/user/venv/bin/python3.10', '-u', 'trainCLM.py', '--local_rank=1', '--deepspeed', '/home/user/clm/config/deepspeed_config.json'] exits with return code = -11
""", ["segfault"], 1, {"exitcode": -11, "signal": "SIGSEGV"}),
    # deepspeedai/DeepSpeed#4000: ... and for a bus error (/dev/shm)
    ("DeepSpeed#4000", """\
[2023-07-20 15:45:13,980] [INFO] [launch.py:315:sigkill_handler] Killing subprocess 3966
[2023-07-20 15:45:13,981] [INFO] [launch.py:315:sigkill_handler] Killing subprocess 3967
[2023-07-20 15:45:13,982] [ERROR] [launch.py:321:sigkill_handler] ['/usr/bin/python3', '-u', 'main.py', '--local_rank=1', '--deepspeed', 'deepspeed.json', '--do_train'] exits with return code = -7
""", ["sigbus"], 1, {"exitcode": -7, "signal": "SIGBUS"}),
    # alibaba/Pai-Megatron-Patch#366: Megatron's NaN check in the backward pass ends the run
    ("Pai-Megatron-Patch#366", """\
AssertionError: Rank 11: found NaN in local grad norm in backward pass before data-parallel communication collective. Device: 3
""", ["nan_grad_norm"], 1, {"rank": 11}),
    # NVIDIA-NeMo/Speech#14348: the newer Megatron wording behind NeMo's launcher prefixes
    ("NeMo#14348", """\
i.pretrain/0 [default2]:[rank2]: RuntimeError: Rank 2, node node-01, device 2, iteration -1: Unexpected result nan (message='found NaN in local grad norm for bucket #0 in backward pass before data-parallel communication collective')
""", ["nan_grad_norm"], 1, {"rank": 2}),
    # resistzzz/Prompt4NR#3: mp.spawn reports a SIGKILLed process; Python's semaphore warning follows
    ("Prompt4NR#3", """\
Traceback (most recent call last):
  File "main-multigpu.py", line 422, in <module>
    join=True)
  File "/home/user/miniconda3/envs/torch/lib/python3.7/site-packages/torch/multiprocessing/spawn.py", line 146, in join
    signal_name=name
torch.multiprocessing.spawn.ProcessExitedException: process 0 terminated with signal SIGKILL
/home/user/miniconda3/envs/torch/lib/python3.7/multiprocessing/semaphore_tracker.py:144: UserWarning: semaphore_tracker: There appear to be 15 leaked semaphores to clean up at shutdown
  len(cache))
""", ["sigkill"], 1, {"signal": "SIGKILL", "exitcode": -9}),
    # zhanghang1989/PyTorch-Encoding#324: the PyTorch 1.4 wording of the same, a bare "Exception:"
    ("PyTorch-Encoding#324", """\
  File "/home/user/anaconda3/envs/enc/lib/python3.6/site-packages/torch/multiprocessing/spawn.py", line 107, in join
    (error_index, name)
Exception: process 0 terminated with signal SIGKILL
""", ["sigkill"], 1, {"signal": "SIGKILL"}),
    # davidsandberg/facenet#236: an IDE's report of the process's end
    ("facenet#236", """\
Running training
Process finished with exit code 137 (interrupted by signal 9: SIGKILL)
""", ["sigkill"], 1, {"signal": "SIGKILL"}),
    # jupyter/docker-stacks#736: kubectl exec's report of a container killed with 137
    ("docker-stacks#736", """\
notebook-847ff4564c-gqvn6   1/1       Running   3          3h
command terminated with exit code 137
""", ["sigkill"], 1, {"exitcode": 137}),
    # kserve/kserve#2290: a model server's status after its container was killed with 137 (memory limit)
    ("kserve#2290", """\
bert-v2-predictor-default-00003-deployment-7d97bb994c-mvllp     0/2     CrashLoopBackOff   6          10m
      lastFailureInfo:
        exitCode: 137
        message: |
          ow.cc:1876] TRITONBACKEND_Initialize: tensorflow
""", ["sigkill"], 1, {"exitcode": 137}),
    # ArjunaCluster/ArjunaUsers#48: srun reports the task the cgroup killed
    ("ArjunaUsers#48", """\
srun: error: c002: task 0: Killed
srun: Force Terminated StepId=120.0
""", ["sigkill"], 1, {"signal": "SIGKILL"}),
    # MIC-DKFZ/HD-BET#67: a container's 64 MiB /dev/shm; the process dies after its bar finished
    ("HD-BET#67", f"""\
Predicting hdbet-out_bet.nii.gz:
perform_everything_on_device: False
100%|{BAR * 45}| 12/12 [04:57<00:00, 24.79s/it]
sending off prediction to background worker for resampling and export
done with hdbet-out_bet.nii.gz
Bus error (core dumped)
""", ["sigbus"], 1, {"signal": "SIGBUS"}),
    # Lightning-AI/pytorch-lightning#20434: a job script's shell reports each aborted rank with its pid
    ("lightning#20434", """\
/data/user/pretraining/./pretrain_then_finetune.sh: line 184: 2324239 Aborted                 (core dumped) litgpt pretrain $model_name --resume "${checkpoint_dir}/step${step}/lit_model.pth" --data FineWebDataset --train.micro_batch_size $micro_batch_size
/data/user/pretraining/./pretrain_then_finetune.sh: line 184: 2324238 Aborted                 (core dumped) litgpt pretrain $model_name --resume "${checkpoint_dir}/step${step}/lit_model.pth" --data FineWebDataset --train.micro_batch_size $micro_batch_size
""", ["sigabrt"], 1, {"signal": "SIGABRT", "pid": 2324239}),
    # dxli94/WLASL#15: two workers hit the shm limit while the epoch lines go on, then the loader's traceback
    ("WLASL#15", """\
Epoch 1 train Loc Loss: 0.0019 Cls Loss: 0.0009 Tot Loss: 0.0014 Accu :0.8119
Epoch 1 train Loc Loss: 0.0014 Cls Loss: 0.0006 Tot Loss: 0.0010 Accu :0.8121
ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).
ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).
Traceback (most recent call last):
  File "/usr/local/lib/python3.6/site-packages/torch/utils/data/dataloader.py", line 511, in _try_get_batch
    data = self.data_queue.get(timeout=timeout)
  File "/usr/local/lib/python3.6/site-packages/torch/utils/data/_utils/signal_handling.py", line 63, in handler
    _error_if_any_worker_fails()
RuntimeError: DataLoader worker (pid 325) is killed by signal: Bus error.
""", ["dataloader_worker_killed", "sigbus"], 1, {"pid": 325}),  # killed by signal: Bus error
    # qiskit-community/spank-plugins#17: the job's output after `scancel` (no reason: a person cancelled it)
    ("spank-plugins#17", """\
srun: got SIGCONT
srun: Job step aborted: Waiting up to 32 seconds for job step to finish.
slurmstepd: error: *** STEP 3.0 ON c1 CANCELLED AT 2025-02-13T15:47:35 ***
slurmstepd: error: *** JOB 3 ON c1 CANCELLED AT 2025-02-13T15:47:35 ***
srun: forcing job termination
""", ["slurm_cancelled"], 1, {"slurm_job_id": "3.0", "reason": "cancelled"}),
    # lyulyul/shine-cluster#4: a step cancelled when the login session that ran srun closed
    ("shine-cluster#4", """\
2021-02-13 16:36:02.026301
2021-02-13 16:36:03.027407
slurmstepd-localhost: error: *** STEP 204.0 ON localhost CANCELLED AT 2021-02-13T16:38:01 ***
2021-02-13 16:36:04.028471
""", ["slurm_cancelled"], 1, {"cancelled_at": "2021-02-13T16:38:01"}),
    # dhcode-cpp/X-R1#21: one rank's exception behind its prefix, wandb's goodbye, the agent stops the others and
    # reports the failed local rank (exit code 1); the excerpt ends inside accelerate's own traceback
    ("X-R1#21", """\
[rank2]: RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cpu and cuda:2! (when checking argument for argument tensors in method wrapper_CUDA_cat)
wandb: 
wandb: View run output/X-R1-1.5B at: https://wandb.ai/team/huggingface/runs/89ccwwos
wandb: Find logs at: wandb/run-20250217_111613-89ccwwos/logs
W0217 11:16:21.705000 29355 torch/distributed/elastic/multiprocessing/api.py:897] Sending process 29650 closing signal SIGTERM
W0217 11:16:21.708000 29355 torch/distributed/elastic/multiprocessing/api.py:897] Sending process 29652 closing signal SIGTERM
E0217 11:16:24.683000 29355 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1) local_rank: 1 (pid: 29651) of binary: /usr/bin/python3.11
Traceback (most recent call last):
  File "/usr/local/bin/accelerate", line 8, in <module>
    sys.exit(main())
             ^^^^^^
  File "/usr/local/lib/python3.11/dist-packages/accelerate/commands/launch.py", line 845, in deepspeed_launcher
    distrib_run.run(args)
""", ["python_exception"], 1, {"rank": 2}),
    # NotACracker/COTR#15: torch.distributed.launch's summary names rank 1, which raised (exit code 1)
    ("COTR#15", """\
  File "/opt/conda/envs/cotr/lib/python3.8/site-packages/torch/distributed/launcher/api.py", line 259, in launch_agent
    raise ChildFailedError(
torch.distributed.elastic.multiprocessing.errors.ChildFailedError: 
============================================================
tools/train_occ.py FAILED
------------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2025-07-05_11:44:10
  host      : 841d68780d16
  rank      : 1 (local_rank: 1)
  exitcode  : 1 (pid: 49992)
  error_file: <N/A>
""", ["child_failed"], 1, {"first_failing_rank": 1, "exitcode": 1}),
    # jmonlong/PopSV#7: Slurm's own memory enforcement (before cgroup OOM events were reported)
    ("PopSV#7", """\
slurmstepd: error: Job 42664148 exceeded memory limit (10889240 > 4194304), being killed
slurmstepd: error: Exceeded job memory limit
slurmstepd: error: *** JOB 42664148 ON cn3152 CANCELLED AT 2017-06-06T00:11:58 ***
""", ["host_oom_kill"], 1, {"mem_used_kb": 10889240, "mem_limit_kb": 4194304}),
    # openbabel/openbabel#2658: the same for a step, then srun reports the killed task
    ("openbabel#2658", """\
slurmstepd-falkor7: error: Step 1141810.0 exceeded memory limit (52917772 > 20971520), being killed
srun: Exceeded job memory limit
slurmstepd-falkor7: error: *** STEP 1141810.0 ON falkor7 CANCELLED AT 2023-12-13T08:58:22 ***
srun: Job step aborted: Waiting up to 32 seconds for job step to finish.
srun: error: falkor7: task 0: Killed
""", ["host_oom_kill", "sigkill"], 1, {"mem_limit_kb": 20971520}),
    # pepkit/geofetch#13: srun says the task ran out of memory; the stepd line is its usual companion
    ("geofetch#13", """\
slurmstepd: error: Exceeded job memory limit at some point.
srun: error: udc-ba26-19: task 0: Out Of Memory
srun: Terminating job step 2750598.0
slurmstepd: error: Exceeded job memory limit at some point.
""", ["host_oom_kill"], 1, {}),
    # systemd/systemd#23606: systemd-oomd kills a terminal's scope (and the training in it) under memory pressure
    ("systemd#23606", """\
Dec 18 19:34:56 user-desktop systemd-oomd[840]: Killed /user.slice/user-1001.slice/user@1001.service/app.slice/app-org.gnome.Terminal.slice/vte-spawn-dbb4a75e-031f-480d-924b-5de5af7579d2.scope due to memory pressure for /user.slice/user-1001.slice/user@1001.service being 51.07% > 50.00% for > 20s with reclaim activity
Dec 18 19:34:56 user-desktop systemd[1837]: vte-spawn-dbb4a75e-031f-480d-924b-5de5af7579d2.scope: systemd-oomd killed 12 process(es) in this unit.
""", ["host_oom_kill"], 1, {}),
    # Lvchangze/snn#6: Python's faulthandler output of a native crash, then the shell's line
    ("snn#6", """\
Build rated_dataset...
Fatal Python error: Segmentation fault

Current thread 0x00007fd9b8151600 (most recent call first):
File "/home/user/snn-main/snntorch/spikegen.py", line 362 in rate_conv
File "/home/user/snn-main/snntorch/spikegen.py", line 120 in rate
File "main.py", line 86 in build_rated_dataset
File "main.py", line 343 in train
Segmentation fault (core dumped)
""", ["segfault"], 1, {"signal": "SIGSEGV"}),
    # pytorch/pytorch#72086: the agent itself segfaults in its exit barrier (faulthandler, no shell line)
    ("pytorch#72086", """\
Fatal Python error: Segmentation fault

Current thread 0x00007f4ebf9d3740 (most recent call first):
  File "/home/user/.local/lib/python3.10/site-packages/torch/distributed/elastic/utils/store.py", line 31 in get_all
  File "/home/user/.local/lib/python3.10/site-packages/torch/distributed/elastic/utils/store.py", line 53 in synchronize
  File "/home/user/.local/lib/python3.10/site-packages/torch/distributed/elastic/agent/server/api.py", line 906 in _exit_barrier
""", ["segfault"], 1, {"signal": "SIGSEGV"}),
    # MhLiao/DB#94: a DataLoader worker's segfault is the worker's death, not a rank's
    ("DB#94", """\
RuntimeError: DataLoader worker (pid 25902) is killed by signal: Segmentation fault.
""", ["dataloader_worker_killed"], 1, {"pid": 25902, "signal": "Segmentation fault"}),
    # hmcts/cnp-flux-config#28772: `kubectl get pods` and `kubectl describe pod` of a container the OOM killer ended
    ("cnp-flux-config#28772", """\
NAME                                                 READY   STATUS      RESTARTS      AGE
trainer-application-base-74464f6b98-2kj6g            0/1     OOMKilled   4 (57s ago)   2m40s
    Last State:     Terminated
      Reason:       OOMKilled
""", ["host_oom_kill"], 1, {}),
    # Intellindust-AI-Lab/DEIM#96: a DETR-style engine prints the NaN loss and exits
    ("DEIM#96", """\
Loss is nan, stopping training
""", ["nan_loss"], 1, {"loss_value": "nan"}),
    # Dmmm1997/DenseUAV#7: autograd's anomaly mode names the backward op that produced the NaN
    ("DenseUAV#7", """\
[W python_anomaly_mode.cpp:104] Warning: Error detected in SoftmaxBackward0. Traceback of forward call that caused the error:
  File "train.py", line 370, in <module>
    train_model(model, opt, optimizer_ft, exp_lr_scheduler,
  File "/home/user/denseuav/losses/loss.py", line 128, in calc_kl_loss
    softmax_output2 = F.softmax(outputs2 - max_output2, dim=1)
 (function _print_stack)
Traceback (most recent call last):
  File "train.py", line 165, in train_model
    scaler.scale(loss).backward()
RuntimeError: Function 'SoftmaxBackward0' returned nan values in its 0th output.
""", ["nan_grad_norm"], 1, {"grad_fn": "SoftmaxBackward0"}),
    # open-edge-platform/geti#907: mmdet's log lines once every loss term is nan (printed by two loggers; the first,
    # finite line repeats their format)
    ("geti#907", """\
2022-02-09 20:28:31,962 - mmdet - INFO - Epoch [1][657/742]     lr: 5.000e-05, eta: 2:15:03, time: 0.401, data_time: 0.161, memory: 4127, loss_cls: 0.5812, loss_bbox: 0.4410, loss_centerness: 0.5903, loss: 1.6125
2022-02-09 20:28:32,418 - mmdet - INFO - Epoch [1][658/742]     lr: 5.000e-05, eta: 2:15:01, time: 0.396, data_time: 0.159, memory: 4127, loss_cls: nan, loss_bbox: nan, loss_centerness: nan, loss: nan
[ INFO ] Epoch [1][658/742]     lr: 5.000e-05, eta: 2:15:01, time: 0.396, data_time: 0.159, memory: 4127, loss_cls: nan, loss_bbox: nan, loss_centerness: nan, loss: nan
2022-02-09 20:28:32,811 - mmdet - INFO - Epoch [1][659/742]     lr: 5.000e-05, eta: 2:15:02, time: 0.392, data_time: 0.159, memory: 4127, loss_cls: nan, loss_bbox: nan, loss_centerness: nan, loss: nan
""", ["nan_loss"], 1, {}),
]

#: (source, excerpt, framework): healthy progress; no finding, exit code 0
HEALTHY: list[tuple[str, str, str]] = [
    # epfLLM/Megatron-LLM#11: Megatron iteration lines (slow but healthy)
    ("Megatron-LLM#11", """\
 iteration      122/  250000 | consumed samples:       124928 | elapsed time per iteration (ms): 86545.2 | learning rate: 9.150E-06 | global batch size:  1024 | lm loss: 2.504220E+00 | loss scale: 1.0 | grad norm: 0.231 | number of skipped iterations:   0 | number of nan iterations:   0 |
 iteration      123/  250000 | consumed samples:       125952 | elapsed time per iteration (ms): 87871.6 | learning rate: 9.225E-06 | global batch size:  1024 | lm loss: 2.493043E+00 | loss scale: 1.0 | grad norm: 0.236 | number of skipped iterations:   0 | number of nan iterations:   0 |
 iteration      124/  250000 | consumed samples:       126976 | elapsed time per iteration (ms): 89474.8 | learning rate: 9.300E-06 | global batch size:  1024 | lm loss: 2.559583E+00 | loss scale: 1.0 | grad norm: 0.242 | number of skipped iterations:   0 | number of nan iterations:   0 |
 iteration      125/  250000 | consumed samples:       128000 | elapsed time per iteration (ms): 89075.2 | learning rate: 9.375E-06 | global batch size:  1024 | lm loss: 2.477393E+00 | loss scale: 1.0 | grad norm: 0.356 | number of skipped iterations:   0 | number of nan iterations:   0 |
""", "megatron"),
    # pytorch/torchtitan#2389: every rank prints the same step line, no rank prefix
    ("torchtitan#2389", """\
[titan] 2026-02-24 19:46:17,508 - root - INFO - step:  4  loss:  7.62585  grad_norm: 26.6250  memory: 66.91GiB(37.51%)  tps: 10,050  tflops: 314.71  mfu: 13.99%
[titan] 2026-02-24 19:46:17,508 - root - INFO - step:  4  loss:  7.62585  grad_norm: 26.6250  memory: 66.91GiB(37.51%)  tps: 10,050  tflops: 314.69  mfu: 13.99%
[titan] 2026-02-24 19:46:17,508 - root - INFO - step:  4  loss:  7.62585  grad_norm: 26.6250  memory: 66.91GiB(37.51%)  tps: 10,049  tflops: 314.68  mfu: 13.99%
[titan] 2026-02-24 19:46:19,145 - root - INFO - step:  5  loss:  7.07623  grad_norm: 46.5000  memory: 66.91GiB(37.51%)  tps: 10,007  tflops: 313.36  mfu: 13.93%
[titan] 2026-02-24 19:46:19,145 - root - INFO - step:  5  loss:  7.07623  grad_norm: 46.5000  memory: 66.91GiB(37.51%)  tps: 10,007  tflops: 313.36  mfu: 13.93%
""", "torchtitan"),
    # pytorch/torchtitan#1287: rank-prefixed step lines with GC and profiler lines between them
    ("torchtitan#1287", """\
[rank0]:[titan] 2025-06-16 22:30:48,735 - root - INFO - [GC] Peforming periodical GC collection. 0.06 seconds.
[rank0]:[titan] 2025-06-16 22:30:50,322 - root - INFO - step: 200  loss:  6.1384  memory: 49.66GiB(52.28%)  tps: 5,856  tflops: 339.16  mfu: 34.29%
[rank0]:[titan] 2025-06-16 22:30:50,758 - root - INFO - Dumping profiler traces at step 200
[rank0]:[titan] 2025-06-16 22:30:50,976 - root - INFO - Finished dumping profiler traces in 0.22 seconds
[rank0]:[titan] 2025-06-16 22:31:04,970 - root - INFO - step: 210  loss:  6.0388  memory: 49.66GiB(52.28%)  tps: 5,593  tflops: 323.92  mfu: 32.75%
[rank0]:[titan] 2025-06-16 22:31:18,934 - root - INFO - step: 220  loss:  6.0348  memory: 49.66GiB(52.28%)  tps: 5,868  tflops: 339.82  mfu: 34.36%
[rank0]:[titan] 2025-06-16 22:31:32,895 - root - INFO - step: 230  loss:  5.9670  memory: 49.66GiB(52.28%)  tps: 5,869  tflops: 339.88  mfu: 34.37%
[rank0]:[titan] 2025-06-16 22:31:46,869 - root - INFO - step: 240  loss:  5.8311  memory: 49.66GiB(52.28%)  tps: 5,864  tflops: 339.59  mfu: 34.34%
[rank0]:[titan] 2025-06-16 22:31:59,261 - root - INFO - [GC] Peforming periodical GC collection. 0.06 seconds.
[rank0]:[titan] 2025-06-16 22:32:00,846 - root - INFO - step: 250  loss:  5.8383  memory: 49.66GiB(52.28%)  tps: 5,862  tflops: 339.48  mfu: 34.33%
""", "torchtitan"),
    # Lightning-AI/pytorch-lightning#4225: Lightning bars with loss and v_num, each step printed twice
    ("lightning#4225", f"""\
Training: 0it [00:00, ?it/s]
Training:   0%|          | 0/18 [00:00<?, ?it/s]
Epoch 0:   0%|          | 0/18 [00:00<?, ?it/s] 
Epoch 0:   6%|\u258c         | 1/18 [00:08<02:29,  8.77s/it]
Epoch 0:   6%|\u258c         | 1/18 [00:08<02:29,  8.77s/it, loss=10.473, v_num=193315]
Epoch 0:  11%|{BAR}         | 2/18 [00:11<01:33,  5.82s/it, loss=10.473, v_num=193315]
Epoch 0:  11%|{BAR}         | 2/18 [00:11<01:33,  5.82s/it, loss=10.224, v_num=193315]
Epoch 0:  17%|{BAR}\u258b        | 3/18 [00:14<01:13,  4.87s/it, loss=10.224, v_num=193315]
Epoch 0:  17%|{BAR}\u258b        | 3/18 [00:14<01:13,  4.87s/it, loss=10.047, v_num=193315]
Epoch 0:  22%|{BAR * 2}\u258f       | 4/18 [00:17<01:02,  4.47s/it, loss=10.047, v_num=193315]
Epoch 0:  22%|{BAR * 2}\u258f       | 4/18 [00:17<01:02,  4.47s/it, loss=9.926, v_num=193315] 
Epoch 0:  28%|{BAR * 2}\u258a       | 5/18 [00:20<00:53,  4.14s/it, loss=9.926, v_num=193315]
Epoch 0:  28%|{BAR * 2}\u258a       | 5/18 [00:20<00:53,  4.14s/it, loss=9.847, v_num=193315]
""", "lightning"),
    # Lightning-AI/pytorch-lightning#3866: a bar without the bar (Colab), loss and train_loss
    ("lightning#3866", """\
Epoch 0:  97% 1651/1702 [13:00<00:24,  2.11it/s, loss=0.158, v_num=0, train_loss=0.149]
Epoch 0:  97% 1652/1702 [13:01<00:23,  2.11it/s, loss=0.158, v_num=0, train_loss=0.149]
Epoch 0:  97% 1653/1702 [13:01<00:23,  2.12it/s, loss=0.158, v_num=0, train_loss=0.149]
Epoch 0:  97% 1654/1702 [13:01<00:22,  2.12it/s, loss=0.158, v_num=0, train_loss=0.149]
Epoch 0:  97% 1655/1702 [13:01<00:22,  2.12it/s, loss=0.158, v_num=0, train_loss=0.149]
Epoch 0:  97% 1656/1702 [13:01<00:21,  2.12it/s, loss=0.158, v_num=0, train_loss=0.149]
""", "lightning"),
    # huggingface/transformers#35207: HF Trainer loss dicts, loss falling fast at the start
    ("transformers#35207", """\
{'loss': 10.5949, 'grad_norm': 188.28981018066406, 'learning_rate': 4.5833333333333334e-05, 'epoch': 0.25}
{'loss': 8.2312, 'grad_norm': 87.7468032836914, 'learning_rate': 4.166666666666667e-05, 'epoch': 0.5}
{'loss': 7.8988, 'grad_norm': 74.3565444946289, 'learning_rate': 3.7500000000000003e-05, 'epoch': 0.75}
{'loss': 8.0197, 'grad_norm': 52.91275405883789, 'learning_rate': 3.3333333333333335e-05, 'epoch': 1.0}
{'loss': 6.0704, 'grad_norm': 51.57986068725586, 'learning_rate': 2.916666666666667e-05, 'epoch': 1.25}
{'loss': 5.8247, 'grad_norm': 56.05683898925781, 'learning_rate': 2.5e-05, 'epoch': 1.5}
""", "hf-trainer"),
    # axolotl-ai-cloud/axolotl#3196: HF Trainer dicts with memory keys, loss falling by epochs
    ("axolotl#3196", """\
{'loss': 4.75, 'grad_norm': 98.5, 'learning_rate': 5e-06, 'memory/max_mem_active(gib)': 25.45, 'memory/max_mem_allocated(gib)': 25.45, 'memory/device_mem_reserved(gib)': 30.22, 'epoch': 1.0}
{'loss': 2.0312, 'grad_norm': 59.5, 'learning_rate': 4.956766880907269e-06, 'memory/max_mem_active(gib)': 34.89, 'memory/max_mem_allocated(gib)': 34.89, 'memory/device_mem_reserved(gib)': 41.26, 'epoch': 2.0}
{'loss': 0.8984, 'grad_norm': 45.0, 'learning_rate': 4.828728948150395e-06, 'memory/max_mem_active(gib)': 34.89, 'memory/max_mem_allocated(gib)': 34.89, 'memory/device_mem_reserved(gib)': 41.26, 'epoch': 3.0}
{'loss': 0.4102, 'grad_norm': 19.625, 'learning_rate': 4.620806627680728e-06, 'memory/max_mem_active(gib)': 34.89, 'memory/max_mem_allocated(gib)': 34.89, 'memory/device_mem_reserved(gib)': 41.26, 'epoch': 4.0}
{'loss': 0.2031, 'grad_norm': 11.8125, 'learning_rate': 4.340990257669732e-06, 'memory/max_mem_active(gib)': 34.89, 'memory/max_mem_allocated(gib)': 34.89, 'memory/device_mem_reserved(gib)': 41.26, 'epoch': 5.0}
""", "hf-trainer"),
    # NVIDIA/nccl#1504: NCCL INFO start-up noise, including the plugin loader's "cannot open shared object file"
    ("nccl#1504", """\
node-a:26023:26023 [0] NCCL INFO Bootstrap : Using eth0:172.17.2.7<0>
node-a:26023:26023 [0] NCCL INFO NET/Plugin: No plugin found (libnccl-net.so)
node-a:26023:26023 [0] NCCL INFO NET/Plugin: Plugin load returned 2 : libnccl-net.so: cannot open shared object file: No such file or directory : when loading libnccl-net.so
node-a:26023:26023 [0] NCCL INFO NET/Plugin: Using internal network plugin.
node-a:26023:26023 [0] NCCL INFO cudaDriverVersion 12040
NCCL version 2.21.5+cuda12.4
node-a:26024:26024 [1] NCCL INFO cudaDriverVersion 12040
node-a:26024:26024 [1] NCCL INFO Bootstrap : Using eth0:172.17.2.7<0>
node-a:26024:26024 [1] NCCL INFO NET/Plugin: No plugin found (libnccl-net.so)
node-a:26024:26024 [1] NCCL INFO NET/Plugin: Plugin load returned 2 : libnccl-net.so: cannot open shared object file: No such file or directory : when loading libnccl-net.so
node-a:26024:26024 [1] NCCL INFO NET/Plugin: Using internal network plugin.
""", "other"),
    # NVIDIA/nccl#1267: single-rank init with the plugin-symbol messages, "Init START"
    ("nccl#1267", """\
node-b:2744870:2744870 [0] NCCL INFO Bootstrap : Using ens7:10.128.0.32<0>
node-b:2744870:2744870 [0] NCCL INFO NET/Plugin: Failed to find ncclNetPlugin_v7 symbol.
node-b:2744870:2744870 [0] NCCL INFO NET/Plugin: Failed to find ncclNetPlugin symbol (>= v5). ncclNetPlugin symbols v4 and lower are not supported.
node-b:2744870:2744870 [0] NCCL INFO cudaDriverVersion 12000
NCCL version 2.19.3+cuda12.3
node-b:2744870:2745046 [0] NCCL INFO NET/IB : No device found.
node-b:2744870:2745046 [0] NCCL INFO NET/Socket : Using [0]ens7:10.128.0.32<0>
node-b:2744870:2745046 [0] NCCL INFO Using non-device net plugin version 0
node-b:2744870:2745046 [0] NCCL INFO Using network Socket
node-b:2744870:2745046 [0] NCCL INFO comm 0x55f08a1c83d0 rank 0 nranks 1 cudaDev 0 nvmlDev 0 busId 30 commId 0x438c8edb9fb0064f - Init START
node-b:2744870:2745046 [0] NCCL INFO Setting affinity for GPU 0 to ff,ffff0000,00ffffff
node-b:2744870:2745046 [0] NCCL INFO Channel 00/32 :    0
node-b:2744870:2745046 [0] NCCL INFO Channel 01/32 :    0
""", "other"),
    # bmaltais/kohya_ss#2481 + FartyPants/Training_PRO#14: the use_reentrant UserWarning inside a healthy run
    # (the first dict is from hiyouga/LlamaFactory#1223, the next two repeat its format)
    ("kohya_ss#2481", """\
/home/user/venv/lib/python3.10/site-packages/torch/utils/checkpoint.py:429: UserWarning: torch.utils.checkpoint: please pass in use_reentrant=True or use_reentrant=False explicitly. The default value of use_reentrant will be updated to be False in the future. To maintain current behavior, pass use_reentrant=True. It is recommended that you use use_reentrant=False. Refer to docs for more details on the differences between the two variants.
  warnings.warn(
{'loss': 2.9043, 'learning_rate': 4.999641867738336e-05, 'epoch': 0.02}
{'loss': 2.7710, 'learning_rate': 4.998567568164982e-05, 'epoch': 0.03}
{'loss': 2.6521, 'learning_rate': 4.996777648226463e-05, 'epoch': 0.05}
""", "hf-trainer"),
    # hiyouga/LlamaFactory#1223 (before the failure): a loss dict, the bar, the checkpoint being saved
    ("LlamaFactory#1223", """\
{'loss': 2.9043, 'learning_rate': 4.999641867738336e-05, 'epoch': 0.02}
  1%|\u258d                                                                           | 10/1856 [04:16<13:02:24, 25.43s/it][INFO|trainer.py:2926] 2023-10-19 09:48:54,430 >> Saving model checkpoint to pt_output/chatglm_pt_checkpoint_deepspeed/checkpoint-10
[INFO|configuration_utils.py:458] 2023-10-19 09:48:55,234 >> Configuration saved in pt_output/chatglm_pt_checkpoint_deepspeed/checkpoint-10/config.json
[INFO|configuration_utils.py:364] 2023-10-19 09:48:55,469 >> Configuration saved in pt_output/chatglm_pt_checkpoint_deepspeed/checkpoint-10/generation_config.json
""", "hf-trainer"),
    # ymcui/Chinese-LLaMA-Alpaca#534 (hours before its failure): slow but steady bars and a loss dict
    ("Chinese-LLaMA-Alpaca#534-ok", """\
  5%|\u258c         | 137/2724 [5:04:10<95:29:53, 132.89s/it]
  5%|\u258c         | 138/2724 [5:06:23<95:28:45, 132.92s/it]
  5%|\u258c         | 139/2724 [5:08:36<95:27:48, 132.95s/it]
  5%|\u258c         | 140/2724 [5:10:48<95:22:59, 132.89s/it]
                                                        
{'loss': 1.6747, 'learning_rate': 0.0001956204379562044, 'epoch': 0.1}

  5%|\u258c         | 140/2724 [5:10:48<95:22:59, 132.89s/it]
  5%|\u258c         | 141/2724 [5:13:01<95:19:29, 132.86s/it]
  5%|\u258c         | 142/2724 [5:15:14<95:17:57, 132.87s/it]
""", "hf-trainer"),
    # Lightning-AI/litgpt#1110: litgpt's finetune lines and the end of a finished run
    ("litgpt#1110", """\
Epoch 4 | iter 961 step 961 | loss train: 1.062, val: 1.057 | iter time: 529.46 ms (step)
Epoch 4 | iter 962 step 962 | loss train: 0.937, val: 1.057 | iter time: 503.53 ms (step)
Epoch 4 | iter 963 step 963 | loss train: 0.971, val: 1.057 | iter time: 522.10 ms (step)
Epoch 4 | iter 964 step 964 | loss train: 0.902, val: 1.057 | iter time: 115.27 ms (step)
Epoch 5 | iter 965 step 965 | loss train: 1.182, val: 1.057 | iter time: 743.31 ms (step)
Training time: 583.36s
Memory used: 14.49 GB
Saving LoRA weights to 'out/finetune/lora-tiny-llama-1.1b/final/lit_model.pth.lora'
""", "other"),
    # facebookresearch/demucs#315: a solver's Train/Valid summaries
    ("demucs#315", """\
[04-04 22:52:33][demucs.solver][INFO] - Training...
[04-04 22:54:07][demucs.solver][INFO] - Train | Epoch 35 | 83/332 | 0.89 it/sec | Loss 0.1098 | Reco 0.1098 | Grad 0.0700
[04-04 22:55:40][demucs.solver][INFO] - Train | Epoch 35 | 166/332 | 0.89 it/sec | Loss 0.1094 | Reco 0.1094 | Grad 0.0725
[04-04 22:57:13][demucs.solver][INFO] - Train | Epoch 35 | 249/332 | 0.89 it/sec | Loss 0.1121 | Reco 0.1121 | Grad 0.0744
[04-04 22:58:45][demucs.solver][INFO] - Train Summary | Epoch 35 | Loss=0.1127 | Reco=0.1127 | Grad=0.0732
[04-04 22:58:45][demucs.solver][INFO] - ----------------------------------------------------------------------
[04-04 22:58:45][demucs.solver][INFO] - Cross validation...
[04-04 22:58:46][demucs.solver][INFO] - Valid Summary | Epoch 35 | Loss=0.1552 | Reco=0.1552 | Nsdr=6.484 | Best=0.1501 | Bname=main
""", "other"),
    # zai-org/ChatGLM-6B#1166 (before the failure): DeepSpeed saving a checkpoint, all fine
    ("DeepSpeed-ChatGLM-save", """\
[2023-06-02 00:34:14,470] [INFO] [logging.py:96:log_dist] [Rank 0] Saving model checkpoint: ./output/deepspeed/checkpoint-1428/global_step1428/zero_pp_rank_0_mp_rank_00_model_states.pt
[2023-06-02 00:34:14,470] [INFO] [torch_checkpoint_engine.py:21:save] [Torch] Saving ./output/deepspeed/checkpoint-1428/global_step1428/zero_pp_rank_0_mp_rank_00_model_states.pt...
[2023-06-02 00:34:14,493] [INFO] [torch_checkpoint_engine.py:23:save] [Torch] Saved ./output/deepspeed/checkpoint-1428/global_step1428/zero_pp_rank_0_mp_rank_00_model_states.pt.
""", "deepspeed"),
    # ShuaiLYU/REB#9 + cpphoo/STARTUP#3: Python's "Exception ignored in" from a DataLoader iterator's __del__
    ("REB#9", f"""\
 99%|{BAR * 50}\u258a| 998/1000 [6:35:25<00:42, 21.13s/it]Exception ignored in: <function _MultiProcessingDataLoaderIter.__del__ at 0x7f62eb6ed630>
Traceback (most recent call last):
  File "/home/user/anaconda3/envs/reb/lib/python3.10/site-packages/torch/utils/data/dataloader.py", line 1466, in __del__
    self._shutdown_workers()
  File "/home/user/anaconda3/envs/reb/lib/python3.10/site-packages/torch/utils/data/dataloader.py", line 1449, in _shutdown_workers
    if w.is_alive():
  File "/home/user/anaconda3/envs/reb/lib/python3.10/multiprocessing/process.py", line 160, in is_alive
    assert self._parent_pid == os.getpid(), 'can only test a child process'
AssertionError: can only test a child process
100%|{BAR * 51}| 1000/1000 [6:36:08<00:00, 21.14s/it]
""", "other"),
    # NVIDIA/physicsnemo#568 + mosaicml/composer#3266: a deprecation warning that names ERROR_HANDLING (the
    # Trainer dict lines after it are in their real format, values made up)
    ("physicsnemo#568", """\
[rank0]:[W Utils.hpp:108] Warning: Environment variable NCCL_ASYNC_ERROR_HANDLING is deprecated; use TORCH_NCCL_ASYNC_ERROR_HANDLING instead (function getCvarString)
[rank1]:[W Utils.hpp:108] Warning: Environment variable NCCL_ASYNC_ERROR_HANDLING is deprecated; use TORCH_NCCL_ASYNC_ERROR_HANDLING instead (function getCvarString)
{'loss': 1.9102, 'grad_norm': 0.8125, 'learning_rate': 1.9e-05, 'epoch': 0.04}
{'loss': 1.8517, 'grad_norm': 0.7734, 'learning_rate': 1.8e-05, 'epoch': 0.08}
{'loss': 1.8233, 'grad_norm': 0.6992, 'learning_rate': 1.7e-05, 'epoch': 0.12}
""", "hf-trainer"),
    # JIA-Lab-research/LISA#18: the tokenizer's "indexing errors" warning between healthy training lines (the
    # second Epoch line repeats the first one's format)
    ("LISA#18", """\
Token indices sequence length is longer than the specified maximum sequence length for this model (564 > 512). Running this sequence through the model will result in indexing errors
Token indices sequence length is longer than the specified maximum sequence length for this model (738 > 512). Running this sequence through the model will result in indexing errors
Epoch: [0][  1/500]     Time 112.567 (124.016)  Loss 3.0156 (6.4026)    CeLoss 3.0156 (6.4026)  MaskLoss 1.4305 (1.5772)        MaskBCELoss 0.9352 (1.1417)
Epoch: [0][  2/500]     Time 110.213 (117.114)  Loss 2.8841 (4.6433)    CeLoss 2.8841 (4.6433)  MaskLoss 1.3920 (1.4846)        MaskBCELoss 0.9011 (1.0214)
""", "other"),
    # hiyouga/LlamaFactory#1092: the same warning through transformers' logger, inside a tokenizer's bar
    ("LlamaFactory#1092", f"""\
10/02/2023 06:37:37 - INFO - llmtuner.tuner.core.loader - trainable params: 4194304 || all params: 7510167552 || trainable%: 0.0558
Running tokenizer on dataset:  23%|{BAR * 23}\u258c      | 5036000/22188172 [09:52<46:14, 6182.04 examples/s][WARNING|tokenization_utils_base.py:3635] 2023-10-02 06:47:29,456 >> Token indices sequence length is longer than the specified maximum sequence length for this model (4391 > 4096). Running this sequence through the model will result in indexing errors
""", "hf-trainer"),
    # OpenRLHF/OpenRLHF#841 (start-up before its failure): DeepSpeed's INFO lines while building the engine
    ("OpenRLHF#841-startup", """\
[2025-03-07 23:55:15,357] [INFO] [logging.py:128:log_dist] [Rank 0] DeepSpeed info: version=0.16.3, git-hash=unknown, git-branch=unknown
[2025-03-07 23:55:15,357] [INFO] [comm.py:677:init_distributed] Distributed backend already initialized
[2025-03-07 23:55:15,357] [INFO] [config.py:733:__init__] Config mesh_device None world_size = 1
[2025-03-07 23:55:16,871] [INFO] [logging.py:128:log_dist] [Rank 0] DeepSpeed Flops Profiler Enabled: False
[2025-03-07 23:55:16,874] [INFO] [logging.py:128:log_dist] [Rank 0] Using client Optimizer as basic optimizer
[2025-03-07 23:55:16,874] [INFO] [logging.py:128:log_dist] [Rank 0] Removing param_group that has no 'params' in the basic Optimizer
[2025-03-07 23:55:16,883] [INFO] [logging.py:128:log_dist] [Rank 0] DeepSpeed Basic Optimizer = DeepSpeedCPUAdam
[2025-03-07 23:55:16,883] [INFO] [utils.py:59:is_zero_supported_optimizer] Checking ZeRO support for optimizer=DeepSpeedCPUAdam type=<class 'deepspeed.ops.adam.cpu_adam.DeepSpeedCPUAdam'>
[2025-03-07 23:55:16,883] [INFO] [logging.py:128:log_dist] [Rank 0] Creating torch.bfloat16 ZeRO stage 2 optimizer
[2025-03-07 23:55:16,883] [INFO] [stage_1_and_2.py:149:__init__] Reduce bucket size 500000000
[2025-03-07 23:55:16,883] [INFO] [stage_1_and_2.py:150:__init__] Allgather bucket size 500000000
""", "deepspeed"),
    # unslothai/unsloth#1959 (bar, rank0 line) + anhvth/opensloth#17 (rank1 line), the wording also in
    # hpcaitech/ColossalAI#6202: the warnings of a run that ended without destroying its process group
    ("ColossalAI#6202", f"""\
Processed prompts: 100%|{BAR * 52}| 1/1 [00:00<00:00,  5.91it/s, est. speed input: 218.76 toks/s, output: 88.68 toks/s]
[rank0]:[W219 09:17:03.293812312 ProcessGroupNCCL.cpp:1168] Warning: WARNING: process group has NOT been destroyed before we destruct ProcessGroupNCCL. On normal program exit, the application should call destroy_process_group to ensure that any pending NCCL operations have finished in this process. In rare cases this process can exit before this point and block the progress of another member of the process group. This constraint has always been present,  but this warning has only been added since PyTorch 2.4 (function operator())
[rank1]:[W730 15:32:14.298860965 ProcessGroupNCCL.cpp:1479] Warning: WARNING: destroy_process_group() was not called before program exit, which can leak resources. For more info, please see https://pytorch.org/docs/stable/distributed.html#shutdown (function operator())
""", "other"),
    # microsoft/huggingface-transformers#7: per-step speed dicts and tqdm redraws of the HF Trainer
    ("hf-transformers-ms#7", f"""\
 98%|{BAR * 9}\u258a| 2086/2120 [26:01<00:22,  1.49it/s]
 98%|{BAR * 9}\u258a| 2087/2120 [26:02<00:22,  1.48it/s]
                                                   
{{'train_step_runtime': 0.641, 'train_step_samples_per_second': 56.162, 'epoch': 0.98}}

 98%|{BAR * 9}\u258a| 2087/2120 [26:02<00:22,  1.48it/s]
 98%|{BAR * 9}\u258a| 2088/2120 [26:03<00:21,  1.47it/s]
                                                   
{{'train_step_runtime': 0.6355, 'train_step_samples_per_second': 56.652, 'epoch': 0.98}}
""", "hf-trainer"),
    # pytorch/pytorch#77523: the c10d store's IPv6 warnings on a host without IPv6; the rendezvous completes
    ("pytorch#77523", """\
INFO:torch.distributed.elastic.agent.server.local_elastic_agent:log directory set to: /tmp/torchelastic_xegnwjw8/none_ykcxxa_v
INFO:torch.distributed.elastic.agent.server.api:[default] starting workers for entrypoint: python
INFO:torch.distributed.elastic.agent.server.api:[default] Rendezvous'ing worker group
[W socket.cpp:401] [c10d] The server socket cannot be initialized on [::]:7010 (errno: 97 - Address family not supported by protocol).
[W socket.cpp:558] [c10d] The client socket cannot be initialized to connect to [node-0475]:7010 (errno: 97 - Address family not supported by protocol).
INFO:torch.distributed.launcher.api:Starting elastic_operator with launch configs:
  entrypoint       : distrib.py
  min_nodes        : 2
  max_nodes        : 2
  nproc_per_node   : 4
  run_id           : none
  rdzv_backend     : static
  rdzv_endpoint    : 10.13.27.125:7010
  rdzv_configs     : {'rank': 1, 'timeout': 900}
  max_restarts     : 0
  monitor_interval : 5
  log_dir          : None
  metrics_cfg      : {}

[W socket.cpp:558] [c10d] The client socket cannot be initialized to connect to [node-0475]:7010 (errno: 97 - Address family not supported by protocol).
INFO:torch.distributed.elastic.agent.server.api:[default] Rendezvous complete for workers. Result:
  restart_count=0
""", "torchrun"),
    # pytorch/PiPPy#158: a client's first connect attempt fails with errno 99 and is retried (the CI runs passed)
    ("PiPPy#158", """\
[W socket.cpp:558] [c10d] The client socket has failed to connect to [localhost]:29500 (errno: 99 - Cannot assign requested address).
""", "torchrun"),
    # chaos/slurm#54: Slurm's "at some point" memory note on a job that finished (a warning, not a kill)
    ("chaos-slurm#54", """\
51200+0 records in
51200+0 records out
52428800 bytes (52 MB) copied, 0.459204 s, 114 MB/s
slurmstepd: Exceeded step memory limit at some point.
""", "other"),
    # karpathy/nanoGPT#635: nanoGPT's start-up with a FutureWarning and an inductor warning
    ("nanoGPT#635", """\
train.py:196: FutureWarning: `torch.cuda.amp.GradScaler(args...)` is deprecated. Please use `torch.amp.GradScaler('cuda', args...)` instead.
  scaler = torch.cuda.amp.GradScaler(enabled=(dtype == 'float16'))
num decayed parameter tensors: 26, with 10,755,456 parameters
num non-decayed parameter tensors: 13, with 4,992 parameters
using fused AdamW: True
compiling the model... (takes a ~minute)
W0903 20:13:19.043000 55763 torch/_inductor/utils.py:1436] [0/0] Not enough SMs to use max_autotune_gemm mode
""", "other"),
    # FartyPants/Training_PRO#19 ("Error message when using Training Pro"): a FutureWarning repeated while
    # training continues
    ("Training_PRO#19", """\
N:\\AI_Tools\\oobabooga\\installer_files\\env\\Lib\\site-packages\\torch\\utils\\checkpoint.py:295: FutureWarning: `torch.cpu.amp.autocast(args...)` is deprecated. Please use `torch.amp.autocast('cpu', args...)` instead.
  with torch.enable_grad(), device_autocast_ctx, torch.cpu.amp.autocast(**ctx.cpu_autocast_kwargs):  # type: ignore[attr-defined]
N:\\AI_Tools\\oobabooga\\installer_files\\env\\Lib\\site-packages\\torch\\utils\\checkpoint.py:295: FutureWarning: `torch.cpu.amp.autocast(args...)` is deprecated. Please use `torch.amp.autocast('cpu', args...)` instead.
  with torch.enable_grad(), device_autocast_ctx, torch.cpu.amp.autocast(**ctx.cpu_autocast_kwargs):  # type: ignore[attr-defined]
""", "other"),
    # LLaVA-VL/LLaVA-NeXT#247: the end of ZeRO-3's allocator warning, the user's own print, Trainer dicts and bars
    ("LLaVA-NeXT#247", """\
consider adding get_accelerator().empty_cache() calls in your training loop to ensure that all ranks flush their caches at the same time
Cache cleared 
{'loss': 1.0039, 'grad_norm': 4.742300987243652, 'learning_rate': 2.7891156462585034e-06, 'epoch': 0.01}
  1%|\u258a                                                                                            | 41/4870 [04:27<8:45:34,  6.53s/it]
Cache cleared 
{'loss': 0.966, 'grad_norm': 4.477814197540283, 'learning_rate': 2.8571428571428573e-06, 'epoch': 0.01}
  1%|\u258a                                                                                           | 42/4870 [08:04<18:14:03, 13.60s/it]
""", "hf-trainer"),
    # huggingface/peft#194: start-up warnings of a ZeRO-3 run and its "high memory pressure" allocator warnings
    ("peft#194", """\
/home/user/.conda/envs/peft/lib/python3.8/site-packages/torch/cuda/memory.py:282: FutureWarning: torch.cuda.reset_max_memory_allocated now calls torch.cuda.reset_peak_memory_stats, which resets /all/ peak memory stats.
  warnings.warn(
/home/user/.conda/envs/peft/lib/python3.8/site-packages/torch/distributed/distributed_c10d.py:2387: UserWarning: torch.distributed._all_gather_base is a private function and will be deprecated. Please use torch.distributed.all_gather_into_tensor instead.
  warnings.warn(
[2023-03-20 20:38:19,874] [WARNING] [stage3.py:1939:step] 13 pytorch allocator cache flushes since last step. this happens when there is high memory pressure and is detrimental to performance. if this is happening frequently consider adjusting settings to reduce memory consumption. If you are unable to make the cache flushes go away consider adding torch.cuda.empty_cache() calls in your training loop to ensure that all ranks flush their caches at the same time
""", "deepspeed"),
    # uzh-rpg/RVT#40: Lightning's end of a finished run, with wandb's transient network retries on the bar
    ("RVT#40", """\
Epoch 2: : 17671it [1:05:34,  4.49it/s, loss=2.15, v_num=3hqp]wandb: Network error (TransientError), entering retry loop.
Epoch 2: : 25832it [1:35:47,  4.49it/s, loss=2.23, v_num=3hqp]wandb: Network error (TransientError), entering retry loop.
Epoch 2: : 115816it [7:02:37,  4.57it/s, loss=2.1, v_num=3hqp]Epoch 2, global step 400000: 'val/AP' was not in top 1
`Trainer.fit` stopped: `max_steps=400000` reached.
Epoch 2: : 115816it [7:03:13,  4.56it/s, loss=2.1, v_num=3hqp]
wandb: Waiting for W&B process to finish... (success).
""", "lightning"),
    # bmaltais/kohya_ss#1735: accelerate launch's defaults warning before a run that trains fine
    ("kohya_ss#1735", """\
The following values were not passed to `accelerate launch` and had defaults used instead:
        `--num_processes` was set to a value of `1`
        `--num_machines` was set to a value of `1`
        `--mixed_precision` was set to a value of `'no'`
        `--dynamo_backend` was set to a value of `'no'`
To avoid this warning pass in values for each of the problematic parameters or run `accelerate config`.
""", "other"),
]


def _run(tmp_path, text: str) -> tuple[int, dict]:
    log = tmp_path / "excerpt.log"
    log.write_text(text, encoding="utf-8")
    r = CliRunner().invoke(cli, ["analyze-log", str(log), "-f", "json"], catch_exceptions=False)
    return r.exit_code, json.loads(r.output)


def _facts(doc: dict) -> dict:
    """Every fact the document states: its own facts, then those of its findings (first one wins); ``rank`` is
    the rank of the top root cause."""
    out: dict = {"rank": doc["root_causes"][0]["rank"]} if doc["root_causes"] else {}
    for f in doc["findings"]:
        for k, v in f["facts"].items():
            out.setdefault(k, v)
    out.update(doc["facts"])
    return out


@pytest.mark.parametrize("source,text,labels,code,facts", FAILURES, ids=[c[0] for c in FAILURES])
def test_failure_wording(tmp_path, source, text, labels, code, facts):
    exit_code, doc = _run(tmp_path, text)
    assert sorted({f["kind"] for f in doc["findings"]}) == sorted(labels)
    assert exit_code == code
    got = _facts(doc)
    for k, v in facts.items():
        assert k in got, f"fact {k} missing"
        assert got[k] == v or (isinstance(v, (int, float)) and isinstance(got[k], (int, float)) and
                               float(got[k]) == float(v)), f"{k}: expected {v!r}, got {got[k]!r}"


@pytest.mark.parametrize("source,text,framework", HEALTHY, ids=[c[0] for c in HEALTHY])
def test_healthy_wording(tmp_path, source, text, framework):
    exit_code, doc = _run(tmp_path, text)
    assert [f["kind"] for f in doc["findings"]] == []
    assert exit_code == 0


def test_an_ignored_exception_does_not_hide_a_later_one(tmp_path):
    """"Exception ignored in" excuses only the exception that ends its own traceback, not one much later."""
    ignored = next(t for s, t, _ in HEALTHY if s == "REB#9")
    later = next(c for c in FAILURES if c[0] == "DCPDN#12")
    bars = "".join(f" 50%|{BAR * 5}     | {i}/1000 [01:00<01:00,  1.00it/s]\n" for i in range(100, 200))
    exit_code, doc = _run(tmp_path, ignored + bars + later[1])
    assert {f["kind"] for f in doc["findings"]} == {"dataloader_worker_killed"} and exit_code == 1
