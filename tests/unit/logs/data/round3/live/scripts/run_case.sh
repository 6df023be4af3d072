#!/bin/bash
# usage: run_case.sh NN command...   -> case_NN.log, exit code appended to rc.txt
n=$1; shift
export OMP_NUM_THREADS=1
( cd /work/scratch/h4 && timeout 90 bash -c "$*" > case_$n.log 2>&1 ); rc=$?
echo "case_$n rc=$rc :: $*" >> rc.txt
echo "case_$n rc=$rc lines=$(wc -l < case_$n.log)"
