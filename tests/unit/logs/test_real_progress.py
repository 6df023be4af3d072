"""Real progress output of many trainers, read through the real ``llmdiag analyze-log -f json`` command.

Each excerpt keeps the line format of a training log that someone posted publicly (the comment names the
repository and issue); host names and paths were changed. Some short excerpts were lengthened by repeating
their real line format with plausible numbers: the comment says so. The training curve must be read
(step count, last step, the loss values) and judged: the right anomaly at the right step, and no finding at
all on a healthy run (warm-up, eval lines, epoch boundaries, several ranks printing the same step, a
checkpoint save that makes one step slow). The tables are data: an excerpt that fails here is a gap in the
analyzer, not in the test.
"""
# the excerpts keep the trailing blanks of the real lines (tqdm redraws, right-padded HF dicts)
# ruff: noqa: W291, W293

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from llmdiag.cli import cli

BAR = "\u2588"


def _repeat(fmt: str, rows: list[tuple]) -> str:
    """Lines of one real line format filled with the given values (used to lengthen short excerpts)."""
    return "".join(fmt.format(*r) + "\n" for r in rows)


# nanoGPT (karpathy/nanoGPT#178): a healthy start, lengthened to iter 240 with the same format
_NANOGPT_178 = "iter 0: loss 4.2648, time 9371.81ms, mfu -100.00%\n" + _repeat(
    "iter {}: loss {:.4f}, time {:.2f}ms, mfu {:.2f}%",
    [(i, 3.2202 - 0.06 * (i // 10 - 1) + (0.013 if i % 30 == 0 else 0.0), 893.5 + (i % 7) * 1.9, 16.68 - (i % 7) * 0.02)
     for i in range(10, 250, 10)]) + "step 250: train loss 1.5440, val loss 1.7220\nsaving checkpoint to out-shakespeare-char\n"

# Megatron-LLM (epfLLM/Megatron-LLM#11): a healthy slow run, lengthened from 5 to 20 iterations
_MEGATRON_LLM_11 = _repeat(
    " iteration {:8d}/  250000 | consumed samples: {:12d} | elapsed time per iteration (ms): {:.1f} | "
    "learning rate: {:.3E} | global batch size:  1024 | lm loss: {:.6E} | loss scale: 1.0 | grad norm: {:.3f} | "
    "number of skipped iterations:   0 | number of nan iterations:   0 |",
    [(i, i * 1024, 86545.2 + ((i * 37) % 11) * 300.0, 7.5e-08 * i, 2.504220 - 0.004 * (i - 122) + ((i * 13) % 5) * 0.012,
      0.231 + ((i * 7) % 5) * 0.03) for i in range(122, 142)])

# torchtitan (pytorch/torchtitan#2389): 8 ranks print the same step without a rank prefix; lengthened to step 20
_TITAN_2389 = "".join(
    _repeat("[titan] 2026-02-24 19:46:{:02d},508 - root - INFO - step: {:2d}  loss: {:8.5f}  grad_norm: {:7.4f}  "
            "memory: 66.91GiB(37.51%)  tps: {:,}  tflops: 314.69  mfu: 13.99%", [(10 + s, s, loss, gn, tps)] * 8)
    for s, loss, gn, tps in [(4, 7.62585, 26.625, 10050), (5, 7.07623, 46.5, 10007), (6, 6.80211, 31.25, 10041),
                             (7, 6.55102, 18.75, 10032), (8, 6.41877, 12.5, 10046), (9, 6.30458, 9.8125, 10038),
                             (10, 6.19034, 7.65625, 10051), (11, 6.10972, 6.28125, 10044), (12, 6.02315, 5.5, 10037),
                             (13, 5.96408, 4.875, 10049), (14, 5.90066, 4.40625, 10040), (15, 5.85731, 4.0625, 10047)])

#: (source, excerpt, expected labels, expected exit code, key facts)
FAILURES: list[tuple[str, str, list[str], int, dict]] = [
    # karpathy/nanoGPT#215: fp16 on a V100, the loss goes NaN right after the eval + checkpoint at iter 3000
    ("nanoGPT#215", """\
2023-03-22 09:30:39 iter 2920: loss 3.9883, time 1099.34ms, mfu 15.34%
2023-03-22 09:30:50 iter 2930: loss 3.9408, time 1097.30ms, mfu 15.34%
2023-03-22 09:31:01 iter 2940: loss 3.9994, time 1097.68ms, mfu 15.34%
2023-03-22 09:31:12 iter 2950: loss 4.0977, time 1096.94ms, mfu 15.34%
2023-03-22 09:31:23 iter 2960: loss 4.1535, time 1097.23ms, mfu 15.34%
2023-03-22 09:31:34 iter 2970: loss 3.9453, time 1097.65ms, mfu 15.34%
2023-03-22 09:31:45 iter 2980: loss 3.8993, time 1099.18ms, mfu 15.34%
2023-03-22 09:31:56 iter 2990: loss 3.8853, time 1096.65ms, mfu 15.34%
2023-03-22 09:32:32 step 3000: train loss 4.0390, val loss 4.0427
saving checkpoint to out
2023-03-22 09:32:41 iter 3000: loss 4.2490, time 35392.33ms, mfu 13.85%
2023-03-22 09:32:52 iter 3010: loss nan, time 1019.95ms, mfu 14.12%
2023-03-22 09:33:02 iter 3020: loss nan, time 1015.95ms, mfu 14.36%
2023-03-22 09:33:12 iter 3030: loss nan, time 1017.59ms, mfu 14.58%
2023-03-22 09:33:22 iter 3040: loss nan, time 1016.57ms, mfu 14.78%
2023-03-22 09:33:33 iter 3050: loss nan, time 1016.74ms, mfu 14.95%
2023-03-22 09:33:43 iter 3060: loss nan, time 1018.23ms, mfu 15.11%
""", ["nan_loss"], 1, {"nan_first_step": 3010, "last_finite_step": 3000, "last_step": 3060, "first_step": 2920}),
    # SY-Xuan/Pink#6: HF Trainer dicts, every step skipped: loss exactly 0 and a NaN grad norm (right-padded lines)
    ("Pink#6", """\
{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 0.00012142857142857143, 'epoch': 0.0}                    
{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 0.00012857142857142855, 'epoch': 0.0}                    
{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 0.0001357142857142857, 'epoch': 0.0}                     
{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 0.00014285714285714284, 'epoch': 0.0}                    
{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 0.00015, 'epoch': 0.0}                                   
{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 0.00015714285714285713, 'epoch': 0.0}                    
{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 0.00016428571428571428, 'epoch': 0.0}                    
""", ["zero_loss", "nan_grad_norm"], 1, {"num_steps_with_loss": 7}),
    # bigscience-workshop/Megatron-DeepSpeed#396: bf16, 'grad norm: nan' on every iteration, no loss column at all
    ("Megatron-DeepSpeed#396", """\
 iteration     5425/  250000 | consumed samples:        43400 | consumed tokens:     88883200 | elapsed time per iteration (ms): 4243.1 | learning rate: 2.999E-04 | global batch size:     8 | loss scale: 1.0 | grad norm: nan | actual seqlen:  2048 | number of skipped iterations:   0 | number of nan iterations:   0 | samples per second: 1.886 | TFLOPs: 78.46 |
 iteration     5426/  250000 | consumed samples:        43408 | consumed tokens:     88899584 | elapsed time per iteration (ms): 4247.9 | learning rate: 2.999E-04 | global batch size:     8 | loss scale: 1.0 | grad norm: nan | actual seqlen:  2048 | number of skipped iterations:   0 | number of nan iterations:   0 | samples per second: 1.883 | TFLOPs: 78.36 |
 iteration     5427/  250000 | consumed samples:        43416 | consumed tokens:     88915968 | elapsed time per iteration (ms): 4225.8 | learning rate: 2.999E-04 | global batch size:     8 | loss scale: 1.0 | grad norm: nan | actual seqlen:  2048 | number of skipped iterations:   0 | number of nan iterations:   0 | samples per second: 1.893 | TFLOPs: 78.77 |
 iteration     5428/  250000 | consumed samples:        43424 | consumed tokens:     88932352 | elapsed time per iteration (ms): 4229.2 | learning rate: 2.999E-04 | global batch size:     8 | loss scale: 1.0 | grad norm: nan | actual seqlen:  2048 | number of skipped iterations:   0 | number of nan iterations:   0 | samples per second: 1.892 | TFLOPs: 78.71 |
""", ["nan_grad_norm"], 1, {"last_step": 5428, "first_step": 5425}),
    # JiaquanYe/TableMASTER-mmocr#32: mmcv 'Epoch [1][100/62598]' lines, a NaN grad norm under fp16 then a finite one
    ("TableMASTER#32", """\
2021-11-22 01:31:20,110 - mmocr - INFO - Epoch [1][100/62598]\tlr: 1.000e-03, eta: 6 days, 15:22:46, time: 0.539, data_time: 0.051, memory: 7239, loss_ce: 1.2757, horizon_bbox_loss: 0.2828, vertical_bbox_loss: 0.3507, loss: 1.9091, grad_norm: nan
2021-11-22 01:32:34,502 - mmocr - INFO - Epoch [1][200/62598]\tlr: 1.000e-03, eta: 7 days, 15:55:58, time: 0.705, data_time: 0.002, memory: 7239, loss_ce: 0.5921, horizon_bbox_loss: 0.2210, vertical_bbox_loss: 0.1055, loss: 0.9186, grad_norm: 3.9772
""", ["nan_grad_norm"], 1, {"num_steps_with_loss": 2, "last_step": 200}),
    # ymcui/Chinese-LLaMA-Alpaca#534: HF Trainer + DeepSpeed fp16, tqdm redraws share lines with OVERFLOW messages
    ("Chinese-LLaMA-Alpaca#534", f"""\
 14%|{BAR}▍        | 377/2724 [13:55:57<86:19:20, 132.41s/it]
 14%|{BAR}▍        | 378/2724 [13:58:09<86:18:35, 132.44s/it][2023-06-07 22:16:00,018] [INFO] [loss_scaler.py:181:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 64, reducing to 32

 14%|{BAR}▍        | 379/2724 [14:00:21<86:09:52, 132.28s/it][2023-06-07 22:18:11,762] [INFO] [loss_scaler.py:181:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 32, reducing to 16

 14%|{BAR}▍        | 380/2724 [14:02:33<86:01:24, 132.12s/it]
                                                         
{{'loss': 2.0491, 'learning_rate': 0.0001961913563176343, 'epoch': 0.28}}

 14%|{BAR}▍        | 380/2724 [14:02:33<86:01:24, 132.12s/it][2023-06-07 22:20:23,340] [INFO] [loss_scaler.py:181:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 16, reducing to 8

 14%|{BAR}▍        | 381/2724 [14:04:45<85:52:52, 131.96s/it][2023-06-07 22:22:34,914] [INFO] [loss_scaler.py:181:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 8, reducing to 4

 14%|{BAR}▍        | 382/2724 [14:06:56<85:46:12, 131.84s/it][2023-06-07 22:24:46,260] [INFO] [loss_scaler.py:181:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 4, reducing to 2
""", ["grad_overflow"], 0, {"num_steps_with_loss": 1}),
    # huggingface/transformers#14531: ZeRO-2 fp16, the loss scale is already 1 and every step overflows: the scale
    # is pinned at its minimum and nothing trains, an error (exit 1), not a warning (issue 22)
    ("transformers#14531", """\
[2021-11-27 00:36:54,800] [INFO] [stage2.py:1628:step] [deepscale] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 1, reducing to 1
  0%|▋                                                                 | 98/24128 [00:40<2:40:10,  2.50it/s][2021-11-27 00:36:55,194] [INFO] [stage2.py:1628:step] [deepscale] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 1, reducing to 1
  0%|▋                                                                 | 99/24128 [00:40<2:39:27,  2.51it/s][2021-11-27 00:36:55,588] [INFO] [stage2.py:1628:step] [deepscale] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 1, reducing to 1
  0%|▋                                                                | 100/24128 [00:40<2:39:03,  2.52it/s][2021-11-27 00:36:55,985] [INFO] [stage2.py:1628:step] [deepscale] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 1, reducing to 1
""", ["grad_overflow"], 1, {"loss_scale_pinned": True}),
    # CarperAI/trlx#342: trlx PPO bars '[losses/total_loss: ... | ...]' with ZeRO-1/2 OVERFLOW messages on the same line
    ("trlx#342", f"""\
[losses/total_loss: 1.34 | losses/policy_loss: -0.39 | losses/value_loss: 8.65]:  16%|{BAR * 17}▎    | 1044/6400 [1:16:09<1:07:04,  1.33it/s][2023-02-28 20:08:24,113] [INFO] [stage_1_and_2.py:1769:step] [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 128.0, reducing to 64.0
[losses/total_loss: 4.35 | losses/policy_loss: -0.03 | losses/value_loss: 21.92]:  16%|{BAR * 17}▍    | 1045/6400 [1:16:09<53:12,  1.68it/s][2023-02-28 20:08:24,338] [INFO] [stage_1_and_2.py:1769:step] [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 64.0, reducing to 32.0
""", ["grad_overflow"], 0, {}),
    # kohya-ss/sd-scripts#2137: a tqdm bar whose postfix is the running average loss, NaN from the start
    ("sd-scripts#2137", """\
                    INFO     epoch is incremented. current_epoch: 0, epoch: 1                          train_util.py:779
steps:   1%|▋                                                        | 41/3280 [00:50<1:06:54,  1.24s/it, avr_loss=nan]
epoch 2/80

2025-06-29 11:57:32 INFO     epoch is incremented. current_epoch: 1, epoch: 2                          train_util.py:779
steps:   2%|█▍                                                       | 82/3280 [01:40<1:05:00,  1.22s/it, avr_loss=nan]
epoch 3/80

2025-06-29 11:58:21 INFO     epoch is incremented. current_epoch: 2, epoch: 3                          train_util.py:779
steps:   4%|██                                                      | 123/3280 [02:28<1:03:43,  1.21s/it, avr_loss=nan]
""", ["nan_loss"], 1, {"last_step": 123}),
    # ml-explore/mlx-examples#620: mlx-lm LoRA 'Iter N: Train loss X, ...' lines; the loss jumps from 1.4 to 6.4
    ("mlx-examples#620", """\
Starting training..., iters: 2596
Iter 1: Val loss 2.086, Val took 17.177s
Iter 25: Train loss 1.593, Learning Rate 7.000e-05, It/sec 0.999, Tokens/sec 387.697, Trained Tokens 9699, Peak mem 8.104 GB
Iter 50: Train loss 1.406, Learning Rate 7.000e-05, It/sec 0.942, Tokens/sec 369.778, Trained Tokens 19515, Peak mem 8.104 GB
Iter 75: Train loss 3.316, Learning Rate 7.000e-05, It/sec 0.933, Tokens/sec 366.098, Trained Tokens 29327, Peak mem 8.104 GB
Iter 100: Train loss 6.437, Learning Rate 7.000e-05, It/sec 0.921, Tokens/sec 371.347, Trained Tokens 39407, Peak mem 8.626 GB
Iter 100: Saved adapter weights to checkpoints/100_adapters.npz.
Iter 125: Train loss 5.478, Learning Rate 7.000e-05, It/sec 0.952, Tokens/sec 379.485, Trained Tokens 49374, Peak mem 8.626 GB
Iter 150: Train loss 4.857, Learning Rate 7.000e-05, It/sec 0.973, Tokens/sec 367.105, Trained Tokens 58811, Peak mem 8.626 GB
Iter 175: Train loss 4.874, Learning Rate 7.000e-05, It/sec 0.959, Tokens/sec 371.460, Trained Tokens 68497, Peak mem 8.626 GB
Iter 200: Train loss 4.604, Learning Rate 7.000e-05, It/sec 0.943, Tokens/sec 363.135, Trained Tokens 78122, Peak mem 8.626 GB
""", ["loss_spike"], 0, {"max_loss": 6.437, "max_loss_step": 100, "last_step": 200}),
    # facebookresearch/fairseq#311: fairseq 'epoch 001:  430 / 614 loss=..., gnorm=...' ; gnorm jumps ~15x, loss steady
    ("fairseq#311", """\
| epoch 001:    370 / 614 loss=10.093, nll_loss=10.093, ppl=1092.29, wps=1334, ups=3.0, wpb=439, bsz=18, num_updates=371, lr=0.05, gnorm=0.788, clip=100%, oom=0
| epoch 001:    380 / 614 loss=10.071, nll_loss=10.071, ppl=1075.98, wps=1337, ups=3.0, wpb=441, bsz=18, num_updates=381, lr=0.05, gnorm=0.788, clip=100%, oom=0
| epoch 001:    390 / 614 loss=10.053, nll_loss=10.053, ppl=1062.59, wps=1342, ups=3.0, wpb=443, bsz=18, num_updates=391, lr=0.05, gnorm=0.787, clip=100%, oom=0
| epoch 001:    400 / 614 loss=10.034, nll_loss=10.034, ppl=1048.57, wps=1341, ups=3.0, wpb=442, bsz=18, num_updates=401, lr=0.05, gnorm=0.788, clip=100%, oom=0
| epoch 001:    410 / 614 loss=10.027, nll_loss=10.027, ppl=1043.22, wps=1340, ups=3.0, wpb=442, bsz=18, num_updates=411, lr=0.05, gnorm=0.794, clip=100%, oom=0
| epoch 001:    420 / 614 loss=10.012, nll_loss=10.012, ppl=1032.65, wps=1340, ups=3.0, wpb=441, bsz=18, num_updates=421, lr=0.05, gnorm=0.795, clip=100%, oom=0
| epoch 001:    430 / 614 loss=9.997, nll_loss=9.997, ppl=1021.81, wps=1340, ups=3.0, wpb=442, bsz=18, num_updates=431, lr=0.05, gnorm=11.481, clip=100%, oom=0
| epoch 001:    440 / 614 loss=9.979, nll_loss=9.979, ppl=1008.86, wps=1345, ups=3.0, wpb=444, bsz=18, num_updates=441, lr=0.05, gnorm=13.519, clip=100%, oom=0
""", ["grad_norm_spike"], 0, {"last_step": 441, "max_grad_norm": 13.519}),
    # hiyouga/ChatGLM-Efficient-Tuning#49: PPO loss dicts printed right after the tqdm bar, one loss is NaN
    ("ChatGLM-Efficient-Tuning#49", """\
{'loss': 0.3290, 'reward': -2.0304, 'learning_rate': 5e-05}
  0%|                                                                      | 1/13000 [00:10<36:34:36, 10.13s/it]{'loss': nan, 'reward': 5.7646, 'learning_rate': 5e-05}
  0%|                                                                      | 2/13000 [00:28<54:33:11, 15.11s/it{'loss': 0.2527, 'reward': 1.2237, 'learning_rate': 5e-05}
  0%|                                                                      | 3/13000 [00:39<47:01:51, 13.03s/it]{'loss': 0.1512, 'reward': 10.7681, 'learning_rate': 5e-05}
""", ["nan_loss"], 1, {"num_steps_with_loss": 4, "last_loss": 0.1512}),
    # unslothai/unsloth#5207: HF Trainer dicts (loss and grad_norm only, no step, no epoch); the pre-clip grad
    # norm jumps ~1300x on one step while the loss looks normal
    ("unsloth#5207", """\
{'loss': 1.46,  'grad_norm':    14.98}
{'loss': 1.28,  'grad_norm':     9.78}
{'loss': 1.60,  'grad_norm':     7.64}
{'loss': 1.14,  'grad_norm':    92.10}
{'loss': 1.54,  'grad_norm':    29.00}
{'loss': 1.61,  'grad_norm':     5.21}
{'loss': 1.36,  'grad_norm':     7.83}
{'loss': 1.36,  'grad_norm':     7.79}
{'loss': 1.51,  'grad_norm': 11140.00}
""", ["grad_norm_explosion"], 1, {"max_grad_norm": 11140.0, "num_steps_with_loss": 9, "has_step_number": False}),
    # NVIDIA/nccl#743: Megatron BERT under fp16 calibrating its loss scale: 18 of the first 20 iterations skipped
    ("nccl#743", """\
training ...
[before the start of training step] datetime: 2022-10-31 08:35:51 
 iteration       10/ 1000000 | consumed samples:           40 | elapsed time per iteration (ms): 356.2 | learning rate: 0.000E+00 | global batch size:     4 | loss scale: 8388608.0 | number of skipped iterations:  10 | number of nan iterations:   0 |
time (ms) | forward-compute: 193.77 | backward-compute: 73.02 | backward-params-all-reduce: 20.10 | backward-layernorm-all-reduce: 0.02 | backward-embedding-all-reduce: 0.04 | backward-reduce-model-grads: 20.22 | optimizer-copy-to-main-grad: 12.19 | optimizer-unscale-and-check-inf: 50.71 | optimizer: 63.01 | batch-generator: 25.27
 iteration       20/ 1000000 | consumed samples:           80 | elapsed time per iteration (ms): 140.6 | learning rate: 2.020E-08 | global batch size:     4 | lm loss: 1.005022E+01 | sop loss: 8.174902E-01 | loss scale: 32768.0 | grad norm: 217.199 | number of skipped iterations:   8 | number of nan iterations:   0 |
""", ["grad_overflow"], 0, {"skipped_iterations": 18, "last_step": 20, "num_steps_with_loss": 1}),
]

#: (source, excerpt, framework, key facts)
HEALTHY: list[tuple[str, str, str, dict]] = [
    # karpathy/nanoGPT#178 (lengthened, see _NANOGPT_178): compile-time first iteration, mfu -100% sentinel, eval line
    ("nanoGPT#178", _NANOGPT_178, "nanogpt", {"first_step": 0, "last_step": 240, "num_steps_with_loss": 25}),
    # karpathy/nanoGPT#110: iteration lines without mfu
    ("nanoGPT#110", """\
$ torchrun --standalone --nproc_per_node=8 train.py
...
iter 1631: loss 4.0863, time 561.94ms
iter 1632: loss 3.7441, time 563.15ms
iter 1633: loss 3.9848, time 562.11ms
iter 1634: loss 3.8716, time 562.80ms
iter 1635: loss 3.9853, time 561.50ms
iter 1636: loss 3.7735, time 562.73ms
iter 1637: loss 3.8779, time 562.19ms
iter 1638: loss 3.6817, time 562.74ms
iter 1639: loss 3.9185, time 562.66ms
iter 1640: loss 3.6782, time 562.18ms
iter 1641: loss 3.9748, time 567.31ms
""", "nanogpt", {"first_step": 1631, "last_step": 1641, "num_steps_with_loss": 11, "loss_max": 4.0863}),
    # epfLLM/Megatron-LLM#11 (lengthened, see _MEGATRON_LLM_11)
    ("Megatron-LLM#11", _MEGATRON_LLM_11, "megatron", {"first_step": 122, "last_step": 141, "num_steps_with_loss": 20}),
    # NVIDIA-NeMo/Megatron-Bridge#4024: Megatron-core 2026 lines with extra MoE / MTP loss columns; lengthened from 3
    ("Megatron-Bridge#4024", _repeat(
        "[2026-05-28 22:{:02d}:{:02d}] iteration {:8d}/    6069 | consumed samples: {:12d} | elapsed time per iteration (ms): "
        "{:.1f} | learning rate: {:.6E} | global batch size:   512 | lm loss: {:.6E} | seq_load_balancing_loss: 1.25E+00 | "
        "mtp_1 loss: {:.6E} | mtp_2 loss: {:.6E} | loss scale: 1.0 | grad norm: {:.3f} | number of skipped iterations:   0 | "
        "number of nan iterations:   0 |",
        [(26 + (i - 29) // 2, (20 + 30 * (i - 29)) % 60, i, i * 512, 26813.0 + ((i * 31) % 9) * 350.0, 2.0e-06 * i,
          0.8716962 - 0.004 * (i - 29) + ((i * 17) % 5) * 0.006, 1.115410 - 0.003 * (i - 29), 1.180141 - 0.003 * (i - 29),
          0.852 + ((i * 11) % 7) * 0.08) for i in range(29, 45)]), "megatron",
     {"first_step": 29, "last_step": 44, "num_steps_with_loss": 16}),
    # pytorch/torchtitan#3393: '[rank0]:[titan]' lines with grad_norm; the loss wanders 3.0-3.5 early in training
    ("torchtitan#3393", """\
[rank0]:[titan] 2026-05-18 16:04:46,338 - root - INFO - step: 14  loss:  3.24405  grad_norm:  0.8319  memory:  9.46GiB(64.99%)  tps: 7,282  tflops: 0.52  mfu: 0.17%
[rank0]:[titan] 2026-05-18 16:04:47,456 - root - INFO - step: 15  loss:  3.10680  grad_norm:  0.8587  memory:  9.46GiB(64.99%)  tps: 7,334  tflops: 0.53  mfu: 0.17%
[rank0]:[titan] 2026-05-18 16:04:48,577 - root - INFO - step: 16  loss:  3.05047  grad_norm:  0.5443  memory:  9.46GiB(64.99%)  tps: 7,313  tflops: 0.52  mfu: 0.17%
[rank0]:[titan] 2026-05-18 16:04:49,702 - root - INFO - step: 17  loss:  3.14459  grad_norm:  0.5303  memory:  9.46GiB(64.99%)  tps: 7,282  tflops: 0.52  mfu: 0.17%
[rank0]:[titan] 2026-05-18 16:04:50,821 - root - INFO - step: 18  loss:  3.54399  grad_norm:  0.7675  memory:  9.46GiB(64.99%)  tps: 7,322  tflops: 0.52  mfu: 0.17%
[rank0]:[titan] 2026-05-18 16:04:51,942 - root - INFO - step: 19  loss:  3.01032  grad_norm:  0.7197  memory:  9.46GiB(64.99%)  tps: 7,309  tflops: 0.52  mfu: 0.17%
[rank0]:[titan] 2026-05-18 16:04:53,069 - root - INFO - step: 20  loss:  2.89959  grad_norm:  0.9573  memory:  9.46GiB(64.99%)  tps: 7,272  tflops: 0.52  mfu: 0.17%
[rank0]:[titan] 2026-05-18 16:04:54,191 - root - INFO - step: 21  loss:  3.00867  grad_norm:  0.6348  memory:  9.46GiB(64.99%)  tps: 7,304  tflops: 0.52  mfu: 0.17%
""", "torchtitan", {"first_step": 14, "last_step": 21, "num_steps_with_loss": 8, "loss_max": 3.54399}),
    # pytorch/torchtitan#2389 (lengthened, see _TITAN_2389): 8 ranks print each step; the early grad norm is large
    ("torchtitan#2389", _TITAN_2389, "torchtitan", {"first_step": 4, "last_step": 15, "num_steps_with_loss": 12}),
    # hiyouga/LlamaFactory#3529: right-padded HF Trainer dicts, epoch only
    ("LlamaFactory#3529", """\
{'loss': 1.7319, 'grad_norm': 0.547949492931366, 'learning_rate': 2.7037732088676582e-05, 'epoch': 1.42}                                                                                                                   
{'loss': 1.7129, 'grad_norm': 0.7897462844848633, 'learning_rate': 2.533998872403775e-05, 'epoch': 1.49}                                                                                                                   
{'loss': 1.8102, 'grad_norm': 0.8784598112106323, 'learning_rate': 2.3640673864578023e-05, 'epoch': 1.55}                                                                                                                  
{'loss': 1.787, 'grad_norm': 0.6685737371444702, 'learning_rate': 2.1947642078146004e-05, 'epoch': 1.62}                                                                                                                   
{'loss': 1.8175, 'grad_norm': 0.6903296709060669, 'learning_rate': 2.0268718890989753e-05, 'epoch': 1.68}                                                                                                                  
{'loss': 1.7414, 'grad_norm': 0.7967870831489563, 'learning_rate': 1.8611664616633675e-05, 'epoch': 1.74}                                                                                                                  
""", "hf-trainer", {"num_steps_with_loss": 6, "last_epoch": 1.74}),
    # facebookresearch/fairseq#940: fairseq progress lines with a validation line in between
    ("fairseq#940", """\
| epoch 001:    450 / 1891 loss=11.521, nll_loss=10.881, ppl=1886.05, wps=52922, ups=0.5, wpb=104928, bsz=5325, num_updates=445, lr=8.90889e-05, gnorm=1.543, clip=0%, oom=0, loss_scale=2.000, wall=882, train_wall=756
| epoch 001:    500 / 1891 loss=11.346, nll_loss=10.678, ppl=1637.83, wps=53351, ups=0.5, wpb=104872, bsz=5322, num_updates=495, lr=9.90876e-05, gnorm=1.507, clip=0%, oom=0, loss_scale=2.000, wall=973, train_wall=840
| epoch 001:    550 / 1891 loss=11.186, nll_loss=10.492, ppl=1440.01, wps=53627, ups=0.5, wpb=104800, bsz=5311, num_updates=545, lr=0.000109086, gnorm=1.469, clip=0%, oom=0, loss_scale=2.000, wall=1065, train_wall=925
| epoch 001:    600 / 1891 loss=11.039, nll_loss=10.320, ppl=1278.29, wps=53936, ups=0.5, wpb=104812, bsz=5310, num_updates=595, lr=0.000119085, gnorm=1.445, clip=0%, oom=0, loss_scale=2.000, wall=1156, train_wall=1010
| epoch 001 | valid on 'valid' subset | valid_loss 8.11425 | valid_nll_loss 6.8834 | valid_ppl 118.06 | num_updates 600
| epoch 001:    650 / 1891 loss=10.902, nll_loss=10.160, ppl=1144.39, wps=53573, ups=0.5, wpb=104904, bsz=5328, num_updates=645, lr=0.000129084, gnorm=1.419, clip=0%, oom=0, loss_scale=2.000, wall=1263, train_wall=1094
""", "other", {"num_steps_with_loss": 5, "last_step": 645}),
    # facebookresearch/fairseq#514: progress lines, end-of-epoch summaries and validation lines across an epoch boundary
    ("fairseq#514", """\
| epoch 008 | loss 6.326 | nll_loss 5.193 | ppl 36.58 | wps 12876 | ups 4.9 | wpb 2578 | bsz 108 | num_updates 21896 | lr 0.000213706 | gnorm 1.201 | clip 0% | oom 0 | wall 4634 | train_wall 4309
| epoch 008 | valid on 'valid' subset | valid_loss 6.43844 | valid_nll_loss 5.23288 | valid_ppl 37.61 | num_updates 21896 | best 6.43844
| epoch 009:   1000 / 2737 loss=6.220, nll_loss=5.070, ppl=33.60, wps=12800, ups=4.7, wpb=2568, bsz=108, num_updates=22897, lr=0.000208983, gnorm=1.242, clip=0%, oom=0, wall=4847, train_wall=4501
| epoch 009:   2000 / 2737 loss=6.234, nll_loss=5.086, ppl=33.96, wps=12811, ups=4.8, wpb=2571, bsz=108, num_updates=23897, lr=0.000204564, gnorm=1.242, clip=0%, oom=0, wall=5048, train_wall=4693
| epoch 009 | loss 6.233 | nll_loss 5.085 | ppl 33.94 | wps 12857 | ups 4.9 | wpb 2578 | bsz 108 | num_updates 24633 | lr 0.000201484 | gnorm 1.241 | clip 0% | oom 0 | wall 5195 | train_wall 4834
| epoch 009 | valid on 'valid' subset | valid_loss 6.37204 | valid_nll_loss 5.14732 | valid_ppl 35.44 | num_updates 24633 | best 6.37204
| epoch 010:   1000 / 2737 loss=6.144, nll_loss=4.982, ppl=31.61, wps=12673, ups=4.7, wpb=2534, bsz=106, num_updates=25634, lr=0.000197511, gnorm=1.279, clip=0%, oom=0, wall=5408, train_wall=5026
""", "other", {"last_step": 25634}),
    # facebookresearch/fairseq#301: the 2018 fairseq-py format; the batch counter restarts at each epoch
    ("fairseq#301", """\
| epoch 010  5000 / 8223 loss=0.95 (1.47), wps=962, wpb=908, bsz=32, lr=0.001, clip=100%, gnorm=2.1358
| epoch 010  6000 / 8223 loss=1.56 (1.46), wps=961, wpb=905, bsz=32, lr=0.001, clip=100%, gnorm=2.1214
| epoch 010  7000 / 8223 loss=0.86 (1.46), wps=961, wpb=906, bsz=32, lr=0.001, clip=100%, gnorm=2.1233
| epoch 010  8000 / 8223 loss=1.33 (1.45), wps=961, wpb=905, bsz=32, lr=0.001, clip=100%, gnorm=2.1133
| epoch 010 | train loss 1.44 | train ppl 2.72 | s/checkpoint    7747 | words/s    961 | words/batch    906 | bsz    32 | lr 0.001000 | clip 100% | gnorm 2.1113
| epoch 010 | valid on 'valid' subset  1000 / 1311 loss=1.60
| epoch 010 | valid on 'valid' subset | valid loss 1.94 | valid ppl 3.83
| epoch 011  1000 / 8223 loss=1.89 (1.38), wps=963, wpb=918, bsz=32, lr=0.001, clip=100%, gnorm=2.0860
| epoch 011  2000 / 8223 loss=1.37 (1.35), wps=962, wpb=912, bsz=32, lr=0.001, clip=100%, gnorm=2.0606
| epoch 011  3000 / 8223 loss=0.75 (1.35), wps=963, wpb=916, bsz=32, lr=0.001, clip=100%, gnorm=2.0545
""", "other", {}),
    # tdrussell/diffusion-pipe#410: DeepSpeed 'step=N, skipped=0' log_dist lines + the trainer's own 'steps: N loss: X'
    ("diffusion-pipe#410", """\
[2025-09-04 15:18:01,200] [INFO] [logging.py:107:log_dist] [Rank 0] step=1, skipped=0, lr=[1.5968e-07], mom=[0.0]
steps: 1 loss: 0.0614 iter time (s): 531.283 samples/sec: 0.008
[2025-09-04 15:26:58,142] [INFO] [logging.py:107:log_dist] [Rank 0] step=2, skipped=0, lr=[2.3936e-07], mom=[0.0]
steps: 2 loss: 0.0571 iter time (s): 532.811 samples/sec: 0.008
[2025-09-04 15:35:55,125] [INFO] [logging.py:107:log_dist] [Rank 0] step=3, skipped=0, lr=[3.1904000000000003e-07], mom=[0.0]
steps: 3 loss: 0.0359 iter time (s): 533.063 samples/sec: 0.008
[2025-09-04 15:44:52,818] [INFO] [logging.py:107:log_dist] [Rank 0] step=4, skipped=0, lr=[3.9872000000000007e-07], mom=[0.0]
steps: 4 loss: 0.1193 iter time (s): 533.263 samples/sec: 0.008
""", "deepspeed", {"last_step": 4, "num_steps_with_loss": 4}),
    # tensorflow/models#2980: TF-Slim 'global step N: loss = X (S sec/step)', every line printed twice
    ("tf-models#2980", """\
INFO:tensorflow:Recording summary at step 0.
INFO:tensorflow:global step 1: loss = 79.3501 (57.126 sec/step)
INFO:tensorflow:global step 1: loss = 79.3501 (57.126 sec/step)
INFO:tensorflow:global step 2: loss = 72.8609 (17.053 sec/step)
INFO:tensorflow:global step 2: loss = 72.8609 (17.053 sec/step)
INFO:tensorflow:global step 3: loss = 67.3308 (16.534 sec/step)
INFO:tensorflow:global step 3: loss = 67.3308 (16.534 sec/step)
INFO:tensorflow:global step 4: loss = 64.2655 (16.926 sec/step)
INFO:tensorflow:global step 4: loss = 64.2655 (16.926 sec/step)
INFO:tensorflow:Recording summary at step 4.
INFO:tensorflow:global_step/sec: 0.0339311
INFO:tensorflow:global step 5: loss = 62.5264 (20.205 sec/step)
INFO:tensorflow:global step 5: loss = 62.5264 (20.205 sec/step)
INFO:tensorflow:global step 6: loss = 60.8808 (17.060 sec/step)
INFO:tensorflow:global step 6: loss = 60.8808 (17.060 sec/step)
""", "other", {"last_step": 6, "num_steps_with_loss": 6}),
    # kwuking/TimeMixer#88: Time-Series-Library loops, 'iters: N, epoch: E | loss: X'; the counter restarts per epoch
    ("TimeMixer#88", """\
\titers: 500, epoch: 18 | loss: 0.1464421
\tspeed: 1.1179s/iter; left time: 70049.4050s
Epoch: 18 cost time: 813.0010011196136
Epoch: 18, Steps: 569 | Train Loss: 0.1296439 Vali Loss: 0.1200742 Test Loss: 0.1446345
EarlyStopping counter: 4 out of 15
Updating learning rate to 0.008059941323176025
\titers: 100, epoch: 19 | loss: 0.1214533
\tspeed: 3.6898s/iter; left time: 230579.2640s
\titers: 200, epoch: 19 | loss: 0.1245885
\tspeed: 1.1129s/iter; left time: 69436.6002s
\titers: 300, epoch: 19 | loss: 0.1245924
\tspeed: 1.1132s/iter; left time: 69341.4095s
\titers: 400, epoch: 19 | loss: 0.1425354
\tspeed: 1.1173s/iter; left time: 69483.6497s
\titers: 500, epoch: 19 | loss: 0.1240206
\tspeed: 1.1194s/iter; left time: 69502.0105s
Epoch: 19 cost time: 822.0454754829407
Epoch: 19, Steps: 569 | Train Loss: 0.1295379 Vali Loss: 0.1200511 Test Loss: 0.1428440
EarlyStopping counter: 5 out of 15
Updating learning rate to 0.008510351077344748
\titers: 100, epoch: 20 | loss: 0.1263539
\tspeed: 3.7566s/iter; left time: 232613.7427s
\titers: 200, epoch: 20 | loss: 0.1187757
\tspeed: 1.1186s/iter; left time: 69154.3312s
""", "other", {}),
    # yuhuan-wu/P2T#13: DeiT-style JSON lines, one per epoch, one with test metrics
    ("P2T#13", """\
{"train_lr": 0.0007658431187708383, "train_loss": 3.7598581806742413, "epoch": 98, "n_parameters": 11590840}
{"train_lr": 0.0007614233696396924, "train_loss": 3.748048622735875, "epoch": 99, "n_parameters": 11590840}
{"train_lr": 0.000756975500796447, "train_loss": 3.762699702232004, "test_loss": 1.2603078159212155, "test_acc1": 71.27800225585938, "test_acc5": 90.97800259765626, "epoch": 100, "n_parameters": 11590840}
{"train_lr": 0.000752500000000017, "train_loss": 3.7533907828380544, "epoch": 101, "n_parameters": 11590840}
{"train_lr": 0.0007479973580395145, "train_loss": 3.7439935236430757, "epoch": 102, "n_parameters": 11590840}
{"train_lr": 0.0007434680686803327, "train_loss": 3.75046694831406, "epoch": 103, "n_parameters": 11590840}
{"train_lr": 0.0007389126286101685, "train_loss": 3.7478795570435284, "epoch": 104, "n_parameters": 11590840}
{"train_lr": 0.0007343315373843358, "train_loss": 3.7336331602099606, "epoch": 105, "n_parameters": 11590840}
""", "other", {"num_steps_with_loss": 8, "last_epoch": 105}),
    # open-mmlab/OpenPCDet#1229: timm-style 'Train: 1/3 ( 33%) [ 49/323 ( 15%)]  Loss: 36.77 (81.7)'; the warm-up loss falls 20x
    ("OpenPCDet#1229", """\
2023-01-05 16:34:37,748   INFO  Train:    1/3 ( 33%) [   0/323 (  0%)]  Loss: 516.7 (517.)  LR: 1.000e-04  Time cost: 00:04/21:46 [00:04/1:05:18]  Acc_iter 1           Data time: 0.87(0.87)  Forward time: 3.18(3.18)  Batch time: 4.04(4.04)
2023-01-05 16:34:49,377   INFO  Train:    1/3 ( 33%) [  49/323 ( 15%)]  Loss: 36.77 (81.7)  LR: 1.351e-04  Time cost: 00:15/01:25 [00:15/04:48]  Acc_iter 50          Data time: 0.00(0.02)  Forward time: 0.31(0.29)  Batch time: 0.31(0.31)
2023-01-05 16:35:00,786   INFO  Train:    1/3 ( 33%) [  99/323 ( 31%)]  Loss: 23.51 (54.8)  LR: 2.377e-04  Time cost: 00:27/01:00 [00:27/03:55]  Acc_iter 100         Data time: 0.00(0.01)  Forward time: 0.19(0.26)  Batch time: 0.20(0.27)
2023-01-05 16:35:11,175   INFO  Train:    1/3 ( 33%) [ 149/323 ( 46%)]  Loss: 28.79 (45.1)  LR: 3.910e-04  Time cost: 00:37/00:43 [00:37/03:24]  Acc_iter 150         Data time: 0.00(0.01)  Forward time: 0.14(0.24)  Batch time: 0.15(0.25)
""", "other", {"num_steps_with_loss": 4}),
    # noahzn/Lite-Mono#98: 'epoch   0 | lr ... | batch    250 | examples/s:  22.1 | loss: 0.13400 | time elapsed: ...'
    ("Lite-Mono#98", """\
Training
epoch   0 | lr 0.000100 |lr_p 0.000100 | batch      0 | examples/s:   1.6 | loss: 0.15450 | time elapsed: 00h00m26s | time left: 00h00m00s
epoch   0 | lr 0.000100 |lr_p 0.000100 | batch    250 | examples/s:  22.1 | loss: 0.13400 | time elapsed: 00h03m34s | time left: 23h42m04s
epoch   0 | lr 0.000100 |lr_p 0.000100 | batch    500 | examples/s:  16.9 | loss: 0.12268 | time elapsed: 00h06m47s | time left: 22h23m44s
""", "other", {"num_steps_with_loss": 3}),
    # maudzung/RTM3D#4: 'Train - Epoch: [127/300][ 35/464]\tTime ...\tLoss 2.1274e+00 (1.5406e+00)' after a logger header line
    ("RTM3D#4", """\
>>> Epoch: [127/300]
2020-08-17 21:48:47,912: logger.py - info(), at Line 49:INFO:
Train - Epoch: [127/300][ 35/464]\tTime  0.738 ( 0.738)\tData  0.000 ( 0.014)\tLoss 2.1274e+00 (1.5406e+00)
2020-08-17 21:49:24,172: logger.py - info(), at Line 49:INFO:
Train - Epoch: [127/300][ 85/464]\tTime  0.730 ( 0.730)\tData  0.000 ( 0.006)\tLoss 1.2996e+00 (1.5485e+00)
2020-08-17 21:50:00,407: logger.py - info(), at Line 49:INFO:
Train - Epoch: [127/300][135/464]\tTime  0.750 ( 0.728)\tData  0.000 ( 0.004)\tLoss 2.1689e+00 (1.5462e+00)
2020-08-17 21:50:36,613: logger.py - info(), at Line 49:INFO:
Train - Epoch: [127/300][185/464]\tTime  0.727 ( 0.727)\tData  0.000 ( 0.003)\tLoss 1.5142e+00 (1.5394e+00)
""", "other", {}),
    # facebookresearch/unbiased-teacher#23: detectron2 'd2.utils.events' lines after a checkpoint load
    ("unbiased-teacher#23", """\
[05/17 23:19:48 fvcore.common.checkpoint]: [Checkpointer] Loading from output/v1/model_0039999.pth ...
[05/17 23:19:50 fvcore.common.checkpoint]: Loading optimizer from output/v1/model_0039999.pth ...
[05/17 23:20:47 d2.utils.events]:  eta: 6 days, 8:27:02  iter: 19  total_loss: 0.4911  loss_cls: 0.1124  loss_box_reg: 0.2631  loss_rpn_cls: 0.04196  loss_rpn_loc: 0.06917  time: 1.5732  data_time: 1.5957  lr: 0.005  max_mem: 9390M
[05/17 23:21:18 d2.utils.events]:  eta: 6 days, 11:02:18  iter: 39  total_loss: 0.4788  loss_cls: 0.1176  loss_box_reg: 0.2795  loss_rpn_cls: 0.03516  loss_rpn_loc: 0.06627  time: 1.5558  data_time: 0.6720  lr: 0.005  max_mem: 11201M
""", "other", {"first_step": 19, "last_step": 39, "num_steps_with_loss": 2}),
    # Xiaoqi-Zhao-DLUT/GateNet-RGB-Saliency#5: a resumed run whose counter restarts at 1 (not an anomaly)
    ("GateNet#5", """\
[iter 49997], [total loss 0.03742],[loss1 0.01920],[loss1 0.01822],[lr 0.0000002054854] 
[iter 49998], [total loss 0.03780],[loss1 0.01941],[loss1 0.01839],[lr 0.0000001586120] 
[iter 49999], [total loss 0.03794],[loss1 0.01949],[loss1 0.01845],[lr 0.0000001101169] 
[iter 50000], [total loss 0.03843],[loss1 0.01973],[loss1 0.01870],[lr 0.0000000590102] 
{'iter_num': 100000, 'train_batch_size': 4, 'last_iter': 0, 'lr': 0.001, 'lr_decay': 0.9, 'weight_decay': 0.0005, 'momentum': 0.9, 'snapshot': '50000'}

[iter 1], [total loss 0.04253],[loss1 0.02118],[loss1 0.02136],[lr 0.0010000000000] 
""", "other", {"num_steps_with_loss": 5, "first_step": 49997, "loss_max": 0.04253}),
    # jcjohnson/torch-rnn#73: 'Epoch 1.06 / 50, i = 21 / 17800, loss = 3.075188' (spaced '=')
    ("torch-rnn#73", """\
Initializing from \tcv/checkpoint_20.t7
Epoch 1.06 / 50, i = 21 / 17800, loss = 3.075188
Epoch 1.06 / 50, i = 22 / 17800, loss = 3.014080
""", "other", {"num_steps_with_loss": 2, "last_loss": 3.01408, "last_epoch": 1.06}),
    # NVIDIA/Megatron-LM#1570: mcore 0.12 iterations 1-3 as posted (a 21.8 s first iteration, the loss falling fast);
    # lengthened: iterations 4-6 in the same format, then a resume from the iteration-4 checkpoint that logs 5-6 again
    ("Megatron-LM#1570", """\
 [2025-05-09 06:11:17] iteration        1/      10 | consumed samples:           32 | elapsed time per iteration (ms): 21847.9 | throughput per GPU (TFLOP/s/GPU): 4.5 | learning rate: 3.333333E-05 | global batch size:    32 | lm loss: 1.186396E+01 | load_balancing_loss: 1.000977E+00 | loss scale: 1.0 | grad norm: 6.321 | num zeros: 256053424.0 | number of skipped iterations:   0 | number of nan iterations:   0 |
 [2025-05-09 06:11:20] iteration        2/      10 | consumed samples:           64 | elapsed time per iteration (ms): 3286.6 | throughput per GPU (TFLOP/s/GPU): 30.2 | learning rate: 6.666667E-05 | global batch size:    32 | lm loss: 1.186432E+01 | load_balancing_loss: 1.001151E+00 | loss scale: 1.0 | grad norm: 6.350 | num zeros: 256043200.0 | number of skipped iterations:   0 | number of nan iterations:   0 |
 [2025-05-09 06:11:23] iteration        3/      10 | consumed samples:           96 | elapsed time per iteration (ms): 3182.4 | throughput per GPU (TFLOP/s/GPU): 31.2 | learning rate: 1.000000E-04 | global batch size:    32 | lm loss: 8.431922E+00 | load_balancing_loss: 1.002058E+00 | loss scale: 1.0 | grad norm: 5.229 | num zeros: 255912208.0 | number of skipped iterations:   0 | number of nan iterations:   0 |
 [2025-05-09 06:11:27] iteration        4/      10 | consumed samples:          128 | elapsed time per iteration (ms): 3175.1 | throughput per GPU (TFLOP/s/GPU): 31.3 | learning rate: 1.333333E-04 | global batch size:    32 | lm loss: 7.906215E+00 | load_balancing_loss: 1.002913E+00 | loss scale: 1.0 | grad norm: 4.102 | num zeros: 255871544.0 | number of skipped iterations:   0 | number of nan iterations:   0 |
 [2025-05-09 06:11:30] iteration        5/      10 | consumed samples:          160 | elapsed time per iteration (ms): 3190.8 | throughput per GPU (TFLOP/s/GPU): 31.1 | learning rate: 1.666667E-04 | global batch size:    32 | lm loss: 7.512304E+00 | load_balancing_loss: 1.003301E+00 | loss scale: 1.0 | grad norm: 3.877 | num zeros: 255802112.0 | number of skipped iterations:   0 | number of nan iterations:   0 |
 [2025-05-09 06:11:33] iteration        6/      10 | consumed samples:          192 | elapsed time per iteration (ms): 3179.6 | throughput per GPU (TFLOP/s/GPU): 31.2 | learning rate: 2.000000E-04 | global batch size:    32 | lm loss: 7.254117E+00 | load_balancing_loss: 1.003566E+00 | loss scale: 1.0 | grad norm: 3.514 | num zeros: 255788032.0 | number of skipped iterations:   0 | number of nan iterations:   0 |
 [2025-05-09 06:14:02] iteration        5/      10 | consumed samples:          160 | elapsed time per iteration (ms): 20513.2 | throughput per GPU (TFLOP/s/GPU): 4.8 | learning rate: 1.666667E-04 | global batch size:    32 | lm loss: 7.512298E+00 | load_balancing_loss: 1.003301E+00 | loss scale: 1.0 | grad norm: 3.877 | num zeros: 255802112.0 | number of skipped iterations:   0 | number of nan iterations:   0 |
 [2025-05-09 06:14:05] iteration        6/      10 | consumed samples:          192 | elapsed time per iteration (ms): 3201.4 | throughput per GPU (TFLOP/s/GPU): 31.0 | learning rate: 2.000000E-04 | global batch size:    32 | lm loss: 7.254120E+00 | load_balancing_loss: 1.003566E+00 | loss scale: 1.0 | grad norm: 3.514 | num zeros: 255788032.0 | number of skipped iterations:   0 | number of nan iterations:   0 |
""", "megatron", {"first_step": 1, "last_step": 6, "first_loss": 11.86396}),
    # modelscope/ms-swift#6836: Megatron-SWIFT adds 'memory(GiB)', 'elapsed time: 1d 6h 54m 11s' and 'remaining time'
    ("ms-swift#6836", """\
 [2025-12-01 16:59:08] iteration     1530/    1926 | consumed samples:        24480 | elapsed time per iteration (ms): 85938.4 | memory(GiB): 72.89 | elapsed time: 1d 6h 54m 11s | remaining time: 7h 59m 54s | learning rate: 4.001458E-06 | global batch size:    16 | lm loss: 3.515074E-01 | load_balancing_loss: 2.801638E+00 | loss scale: 1.0 | grad norm: 11.293 | number of skipped iterations:   0 | number of nan iterations:   0 |
""", "megatron", {"last_step": 1530, "last_loss": 0.3515074, "iter_time_ms_first": 85938.4}),
]


def _run(tmp_path, text: str) -> tuple[int, dict]:
    log = tmp_path / "excerpt.log"
    log.write_text(text, encoding="utf-8")
    r = CliRunner().invoke(cli, ["analyze-log", str(log), "-f", "json"], catch_exceptions=False)
    return r.exit_code, json.loads(r.output)


def _facts(doc: dict) -> dict:
    """The document's facts, then those of its findings (first one wins)."""
    out = dict(doc["facts"])
    for f in doc["findings"]:
        for k, v in f["facts"].items():
            out.setdefault(k, v)
    return out


def _check_facts(doc: dict, facts: dict) -> None:
    got = _facts(doc)
    for k, v in facts.items():
        assert k in got, f"fact {k} missing"
        assert got[k] == v or (isinstance(v, (int, float)) and isinstance(got[k], (int, float)) and
                               abs(float(got[k]) - float(v)) <= 1e-9 * max(1.0, abs(v))), \
            f"{k}: expected {v!r}, got {got[k]!r}"


@pytest.mark.parametrize("source,text,labels,code,facts", FAILURES, ids=[c[0] for c in FAILURES])
def test_failing_curve(tmp_path, source, text, labels, code, facts):
    exit_code, doc = _run(tmp_path, text)
    assert sorted({f["kind"] for f in doc["findings"]}) == sorted(labels)
    assert exit_code == code
    _check_facts(doc, facts)


@pytest.mark.parametrize("source,text,framework,facts", HEALTHY, ids=[c[0] for c in HEALTHY])
def test_healthy_curve(tmp_path, source, text, framework, facts):
    exit_code, doc = _run(tmp_path, text)
    assert [f["kind"] for f in doc["findings"]] == []
    assert exit_code == 0
    assert doc["facts"].get("num_steps_with_loss", 0) > 0, "no progress line was read"
    _check_facts(doc, facts)


#: the formats this file taught the per-line reader, each as a long run (values generated), so that the bulk
#: path (templates, the C kernel when built) reads them too; it must give exactly what the per-line path gives
LONG_FORMATS = {
    "mmengine": "10/30 22:{m:02d}:{s:02d} - mmengine - INFO - Epoch(train) [1][{i}/90000]  lr: 1.9870e-04  eta: 2:46:39  "
                "time: 2.8906  data_time: 0.0042  memory: 10762  loss: {loss:.4f}  grad_norm: {gn:.4f}",
    "mmcv": "2021-11-22 01:{m:02d}:{s:02d},110 - mmocr - INFO - Epoch [1][{i}/62598]\tlr: 1.000e-03, eta: 6 days, 15:22:46, "
            "time: 0.539, data_time: 0.051, memory: 7239, loss: {loss:.4f}, grad_norm: {gn:.4f}",
    "fairseq": "| epoch 001:    {i} / 91891 loss={loss:.3f}, nll_loss=10.881, ppl=1886.05, wps=52922, ups=0.5, wpb=104928, "
               "bsz=5325, num_updates={i}, lr=8.90889e-05, gnorm={gn:.3f}, clip=0%, oom=0, loss_scale=2.000, wall=882",
    "tqdm-postfix": "steps:  {p:2d}%|▋      | {i}/93280 [00:50<1:06:54,  1.24s/it, avr_loss={loss:.4f}]",
    "tf-slim": "INFO:tensorflow:global step {i}: loss = {loss:.4f} (17.053 sec/step)",
}


@pytest.mark.parametrize("name", sorted(LONG_FORMATS))
def test_bulk_path_reads_these_formats_like_the_per_line_path(tmp_path, monkeypatch, name):
    from llmdiag.logs import bulk
    from llmdiag.logs.engine import analyze_paths

    fmt = LONG_FORMATS[name]
    p = tmp_path / "run.log"
    p.write_text("".join(fmt.format(i=i, m=i // 60 % 60, s=i % 60, p=i * 100 // 93280, loss=2.5 + (i * 7919 % 97) / 400,
                                    gn=1.0 + (i * 104729 % 89) / 300) + "\n" for i in range(1, 20001)))
    fast = analyze_paths([str(p)], chunk=1 << 16, workers=1)
    with monkeypatch.context() as m:
        m.setattr(bulk, "learn", lambda *a, **k: None)
        slow = analyze_paths([str(p)], chunk=1 << 16, workers=1)
    assert slow["metrics"]["num_steps_with_loss"] == 20000 and slow["metrics"]["last_step"] == 20000
    for key in ("findings", "metrics", "steps"):
        assert fast[key] == slow[key]


def test_a_record_without_step_or_epoch_is_placed_by_its_line(tmp_path):
    """HF dicts with only loss and grad_norm (unsloth#5207): the message names the line, never 'epoch None'."""
    text = next(c[1] for c in FAILURES if c[0] == "unsloth#5207")
    _, doc = _run(tmp_path, text)
    (f,) = doc["findings"]
    assert "at line 9 " in f["message"] and "None" not in f["message"]
