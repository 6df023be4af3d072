#!/bin/bash
# Start NPROC ranks directly (no torchrun), like `srun --ntasks=N --label python train.py`:
# each rank's stdout+stderr lines get an "R: " prefix (sed), all into one stream.
# On SIGTERM/SIGINT the ranks get SIGTERM (as srun does on cancel).
# usage: label_launch.sh NPROC PORT script.py
N=$1; PORT=$2; shift 2
export MASTER_ADDR=127.0.0.1 MASTER_PORT=$PORT WORLD_SIZE=$N
pids=()
for ((r=0; r<N; r++)); do
  RANK=$r LOCAL_RANK=$r python "$@" > >(sed -u "s/^/$r: /") 2>&1 &
  pids+=($!)
done
trap 'kill -TERM "${pids[@]}" 2>/dev/null; wait; exit 143' TERM INT
rc=0
for p in "${pids[@]}"; do wait $p; s=$?; [ $s -ne 0 ] && [ $rc -eq 0 ] && rc=$s; done
sleep 0.2
exit $rc
