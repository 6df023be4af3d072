#!/bin/bash
# usage: run_case.sh NN 'command'   (run in /work/scratch/h9; records command + rc + seconds in commands.txt)
cd /work/scratch/h9
NN=$1; CMD=$2
export OMP_NUM_THREADS=1 PATH=/work/main/.venv/bin:$PATH PYTHONUNBUFFERED=1
t0=$(date +%s)
bash -c "$CMD"
rc=$?
t1=$(date +%s)
printf 'case_%s  rc=%s  %ss\n  %s\n' "$NN" "$rc" "$((t1-t0))" "$CMD" >> commands.txt
echo "case_$NN rc=$rc $((t1-t0))s"
