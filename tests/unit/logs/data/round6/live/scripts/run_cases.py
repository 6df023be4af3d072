"""Run every case: writes ../case_NN.log, appends to ../commands.txt, stores meta in ../cases_meta.json"""
import json, os, subprocess, sys, time, shutil
H = "/work/scratch/h12"
V5 = "/work/main/.venv/bin"
V4 = f"{H}/venv4/bin"
S = f"{H}/scripts"
TINY = f"{H}/tiny"
cases = []
def case(fw, env, cmd, capture="redirect", timeout=240, desc="", tiny=False):
    cases.append(dict(fw=fw, env=env, cmd=cmd, capture=capture, timeout=timeout, desc=desc, tiny=tiny))

tr2 = lambda port, extra="": f"{V5}/torchrun --nnodes 1 --nproc-per-node 2 --master-port {port} {extra}"
tr4 = lambda port, extra="": f"{V4}/torchrun --nnodes 1 --nproc-per-node 2 --master-port {port} {extra}"
# ---- HF Trainer, transformers 4.x (venv4)
case("hf-trainer", "FAULT=none STEPS=40", f"{V4}/python {S}/hf_train.py", desc="hf4 healthy")
case("hf-trainer", "FAULT=nan:20 STEPS=40", f"{V4}/python {S}/hf_train.py", capture="tee", desc="hf4 nan@20 (nan filter off)")
case("hf-trainer", "FAULT=spike:25 STEPS=40", f"{V4}/python {S}/hf_train.py", desc="hf4 spike@25")
case("hf-trainer", "FAULT=gradnan:22 STEPS=40", f"{V4}/python {S}/hf_train.py", desc="hf4 gradnan@22")
case("hf-trainer", "FAULT=exc:15:1 STEPS=40", tr4(29701) + f" {S}/hf_train.py", desc="hf4 torchrun exc rank1@15")
case("hf-trainer", "FAULT=dlworker DL_AFTER=60 NW=2 STEPS=40", f"{V4}/python {S}/hf_train.py", desc="hf4 dataloader worker os._exit")
case("hf-trainer", f"FAULT=none STEPS=30 SAVESTEPS=10 OUT={TINY}/hf4", f"{V4}/python {S}/hf_train.py", desc="hf4 checkpoint save on full tmpfs", tiny=True)
# ---- HF Trainer, transformers 5.x (main venv)
case("hf-trainer", "FAULT=none STEPS=60 LOGSTEPS=5", f"{V5}/python {S}/hf_train.py", desc="hf5 healthy logging_steps=5")
case("hf-trainer", "FAULT=nan:20 NANFILTER=1 STEPS=40", f"{V5}/python {S}/hf_train.py", desc="hf5 nan@20 with default nan filter on")
case("hf-trainer", "FAULT=spike:25 STEPS=40", f"{V5}/python {S}/hf_train.py", capture="tee", desc="hf5 spike@25")
case("hf-trainer", "FAULT=kill:18:1 STEPS=40", tr2(29702, "--tee 3") + f" {S}/hf_train.py", desc="hf5 torchrun --tee 3 SIGKILL rank1@18")
case("hf-trainer", f"FAULT=none STEPS=20 SAVESTEPS=10 OUT={TINY}/hf5", f"{V5}/python {S}/hf_train.py", desc="hf5 checkpoint save on full tmpfs", tiny=True)
# ---- accelerate
case("other", "FAULT=none STYLE=accel STEPS=40", f"{V5}/accelerate launch --config_file {S}/accel_fsdp.yaml --mixed_precision no {S}/loop_train.py", desc="accelerate FSDP config (falls back to MULTI_CPU) healthy")
case("other", "FAULT=nan:15 NAN_PERSIST=1 STYLE=accel STEPS=30", f"{V5}/accelerate launch --config_file {S}/accel_ddp.yaml --mixed_precision no {S}/loop_train.py", desc="accelerate ddp nan from 15 on")
case("other", "FAULT=exc:12:1 STYLE=accel STEPS=30", f"{V5}/accelerate launch --config_file {S}/accel_fsdp.yaml --mixed_precision no {S}/loop_train.py", desc="accelerate exc rank1@12")
case("other", "FAULT=kill:10:0 STYLE=accel STEPS=30", f"{V5}/accelerate launch --config_file {S}/accel_ddp.yaml --mixed_precision no {S}/loop_train.py", desc="accelerate SIGKILL rank0@10")
# ---- Lightning
case("lightning", "FAULT=none BAR=rich STEPS=40", f"{V5}/python {S}/pl_train.py", capture="pty", desc="PL rich bar healthy (pty capture)")
case("lightning", "FAULT=nan:18 BAR=rich STEPS=40", f"{V5}/python {S}/pl_train.py", capture="pty", desc="PL rich bar nan@18")
case("lightning", "FAULT=spike:30 BAR=tqdm STEPS=40", f"{V5}/python {S}/pl_train.py", desc="PL tqdm spike@30")
case("lightning", "FAULT=gradnan:20 BAR=tqdm STEPS=40", f"{V5}/python {S}/pl_train.py", desc="PL tqdm gradnan@20")
case("lightning", f"FAULT=none BAR=none CSV={H}/tmp/csv_a STEPS=40", f"{V5}/python {S}/pl_train.py; cat {H}/tmp/csv_a/run/version_0/metrics.csv", desc="PL no bar + CSVLogger healthy (stdout + metrics.csv)")
case("lightning", f"FAULT=spike:25 BAR=none CSV={H}/tmp/csv_b STEPS=40", f"{V5}/python {S}/pl_train.py; cat {H}/tmp/csv_b/run/version_0/metrics.csv", desc="PL no bar + CSVLogger spike@25")
case("lightning", "FAULT=none BAR=tqdm STRAT=ddp DEVICES=2 STEPS=30", f"{V5}/python {S}/pl_train.py", desc="PL ddp devices=2 healthy")
case("lightning", "FAULT=exc:12:1 BAR=tqdm STRAT=ddp DEVICES=2 STEPS=30", f"{V5}/python {S}/pl_train.py", timeout=150, desc="PL ddp exc rank1@12")
case("lightning", "FAULT=dlworker DL_AFTER=50 NW=2 BAR=tqdm STRAT=ddp DEVICES=2 STEPS=40", f"{V5}/python {S}/pl_train.py", timeout=150, desc="PL ddp dataloader worker os._exit")
# ---- torchrun / launch
case("torchrun", "FAULT=exc:5:1 FAULT_FIRST_ATTEMPT_ONLY=1 FRESH_STORE_PORT=29740 STYLE=plain STEPS=20", tr2(29703, "--max-restarts 1") + f" {S}/loop_train.py", desc="elastic restart recovers")
case("torchrun", "FAULT=exc:5:1 FAULT_FIRST_ATTEMPT_ONLY=1 STYLE=plain STEPS=20", tr2(29704, "--max-restarts 1") + f" {S}/loop_train.py", timeout=120, desc="elastic restart, second attempt fails at gloo init (stale store keys)")
case("torchrun", "FAULT=kill:8:1 FRESH_STORE_PORT=29750 STYLE=plain STEPS=20", tr2(29705, "--max-restarts 1") + f" {S}/loop_train.py", desc="SIGKILL rank1 in both attempts")
case("torchrun", "FAULT=kill:8:0 STYLE=plain STEPS=20", f"{V5}/python -m torch.distributed.launch --use-env --nproc-per-node 2 --master-port 29706 {S}/loop_train.py", desc="torch.distributed.launch SIGKILL rank0@8")
case("torchrun", "FAULT=none STYLE=plain STEPS=25", f"{V5}/python -m torch.distributed.launch --use-env --nproc-per-node 2 --master-port 29707 {S}/loop_train.py", capture="tee", desc="torch.distributed.launch healthy")
# ---- JSON logging
case("other", "D=256 BS=32 NOISE=0.5 OMP_NUM_THREADS=1 FAULT=none STYLE=json STEPS=40", f"{V5}/python {S}/loop_train.py", desc="json healthy")
case("other", "D=256 BS=32 NOISE=0.5 OMP_NUM_THREADS=1 FAULT=nan:17 NAN_PERSIST=1 STYLE=json STEPS=30", f"{V5}/python {S}/loop_train.py", desc="json nan from 17")
case("other", "D=256 BS=32 NOISE=0.5 OMP_NUM_THREADS=1 FAULT=spike:28 STYLE=json STEPS=40", f"{V5}/python {S}/loop_train.py", desc="json spike@28")
case("other", f"D=256 BS=32 NOISE=0.5 OMP_NUM_THREADS=1 FAULT=none STYLE=json STEPS=30 SAVE_EVERY=10 SAVE_DIR={TINY}/json", f"{V5}/python {S}/loop_train.py", desc="json torch.save disk full", tiny=True)
case("other", "D=256 BS=32 NOISE=0.5 OMP_NUM_THREADS=1 FAULT=exc:9:1 STYLE=json STEPS=30", tr2(29708) + f" {S}/loop_train.py", desc="json torchrun exc rank1@9")
# ---- table trainer
case("other", "D=256 BS=32 NOISE=0.5 OMP_NUM_THREADS=1 FAULT=none STYLE=table STEPS=45", f"{V5}/python {S}/loop_train.py", desc="table healthy")
case("other", "D=256 BS=32 NOISE=0.5 OMP_NUM_THREADS=1 FAULT=nan:23 STYLE=table STEPS=40", f"{V5}/python {S}/loop_train.py", desc="table nan@23 single step")
case("other", "D=256 BS=32 NOISE=0.5 OMP_NUM_THREADS=1 FAULT=spike:30 STYLE=table STEPS=40 HDR_EVERY=15", f"{V5}/python {S}/loop_train.py", desc="table spike@30")
case("other", "D=256 BS=32 NOISE=0.5 OMP_NUM_THREADS=1 FAULT=gradnan:19 STYLE=table STEPS=35", f"{V5}/python {S}/loop_train.py", desc="table gradnan@19")
case("other", "D=256 BS=32 NOISE=0.5 OMP_NUM_THREADS=1 FAULT=dlworker DL_AFTER=600 NW=2 STYLE=table STEPS=60", f"{V5}/python {S}/loop_train.py", desc="table dataloader worker os._exit")
case("other", f"D=256 BS=32 NOISE=0.5 OMP_NUM_THREADS=1 FAULT=none STYLE=table STEPS=30 SAVE_EVERY=15 SAVE_DIR={TINY}/tab", f"{V5}/python {S}/loop_train.py", desc="table torch.save disk full", tiny=True)

case("lightning", "FAULT=exc:12:1 BAR=tqdm STRAT=ddp DEVICES=2 STEPS=30", f"{V5}/python {S}/pl_train.py", timeout=150, desc="PL ddp exc rank1@12 (rank from LOCAL_RANK)")
case("lightning", "FAULT=kill:15:1 BAR=rich STRAT=ddp DEVICES=2 STEPS=30", f"{V5}/python {S}/pl_train.py", timeout=150, capture="tee", desc="PL ddp rich bar SIGKILL rank1@15")

case("other", "D=256 BS=1024 NOISE=0.5 OMP_NUM_THREADS=1 FAULT=none STYLE=table STEPS=20 NW=2", f"unshare -m bash -c \"mount -t tmpfs -o size=256k none /dev/shm && {V5}/python {S}/loop_train.py\"", timeout=120, desc="table, num_workers=2, /dev/shm of 256 KiB in a private mount namespace")

only = set(sys.argv[1:])
meta = json.load(open(f"{H}/cases_meta.json")) if os.path.exists(f"{H}/cases_meta.json") else {}
cmdf = open(f"{H}/commands.txt", "a")
os.makedirs(TINY, exist_ok=True)
for i, c in enumerate(cases, 1):
    nn = f"{i:02d}"
    if only and nn not in only: continue
    log = f"{H}/case_{nn}.log"
    shutil.rmtree(f"{H}/tmp/csv_a", ignore_errors=True); shutil.rmtree(f"{H}/tmp/csv_b", ignore_errors=True)
    mounted = False
    if c["tiny"]:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "none", TINY], check=True); mounted = True
    inner = f"cd {H} && env {c['env']} timeout {c['timeout']} bash -c '{c['cmd']}'"
    if c["capture"] == "redirect":
        full = f"{inner} > {log} 2>&1"
    elif c["capture"] == "tee":
        full = f"set -o pipefail; {inner} 2>&1 | tee {log} >/dev/null"
    elif c["capture"] == "pty":
        full = f"script -q -e -c \"{inner}\" {log} >/dev/null"
    t0 = time.time()
    rc = subprocess.run(["bash", "-c", full]).returncode
    dt = time.time() - t0
    if mounted:
        subprocess.run(["umount", TINY], check=True)
    cmdf.write(f"case_{nn}.log  exit={rc}  ({dt:.0f}s)  {c['desc']}\n    {full}\n"); cmdf.flush()
    meta[nn] = dict(c, rc=rc, full=full)
    json.dump(meta, open(f"{H}/cases_meta.json", "w"), indent=1)
    print(nn, rc, f"{dt:.0f}s", c["desc"], flush=True)
