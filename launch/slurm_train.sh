#!/usr/bin/env bash
# Usage: sbatch --nodes=2 --gpus-per-node=8 launch/slurm_train.sh RECIPE.yaml [ACCELERATE_CONFIG] [extra train args...]
#   e.g. sbatch --nodes=2 --gpus-per-node=8 launch/slurm_train.sh recipes/p3i_assistant/sft_qwen3vl_4b.yaml launch/zero3.yaml
# Maps (recipe, accelerate config, nodes) to one `accelerate launch` per node: SLURM gives the node count, this
# node's rank and the rank-0 host; ACCELERATE_CONFIG defaults to launch/zero3.yaml (launch/multinode.yaml is the
# annotated template of the same fields). Extra arguments override the recipe (e.g. --max_steps 10).
#SBATCH --job-name=proactive-rl-sft
#SBATCH --ntasks-per-node=1
#SBATCH --exclusive
#SBATCH --output=logs/%x-%j.out
# Pre-emption: SLURM signals this script 120 s before the time limit (and SIGTERM on pre-emption or scancel); the
# signal is forwarded to the trainers, which finish their step, save a checkpoint and exit with status 75; the job
# is then requeued and runs the same command again. Give the recipe `resume_from_checkpoint: true` (or pass
# `--resume_from_checkpoint true` as an extra argument) so the requeued run continues from that checkpoint.
#SBATCH --signal=B:USR1@120
#SBATCH --requeue
#SBATCH --open-mode=append
set -euo pipefail

RECIPE=${1:?usage: slurm_train.sh RECIPE.yaml [ACCELERATE_CONFIG] [extra args]}
ACCEL=${2:-launch/zero3.yaml}
shift $(( $# >= 2 ? 2 : 1 ))
GPUS_PER_NODE=${GPUS_PER_NODE:-${SLURM_GPUS_ON_NODE:-8}}
NNODES=${SLURM_NNODES:-1}
MASTER_ADDR=$(scontrol show hostnames "${SLURM_JOB_NODELIST:-localhost}" | head -n 1)
MASTER_PORT=${MASTER_PORT:-29500}
PYTHON_BIN=${PYTHON_BIN:-.venv/bin}

echo "recipe=$RECIPE accelerate=$ACCEL nodes=$NNODES gpus/node=$GPUS_PER_NODE master=$MASTER_ADDR:$MASTER_PORT"
REQUEUE_STATUS=75  # proactive_rl.preemption.REQUEUE_EXIT_CODE: a checkpoint was saved on a signal
# One launcher per node; each spawns GPUS_PER_NODE workers. SLURM_NODEID is this node's rank. srun forwards a
# signal to this task; the trap hands it to the trainers (the launcher's children), not to the launcher itself.
srun --ntasks="$NNODES" --ntasks-per-node=1 bash -c "
  $PYTHON_BIN/accelerate launch --config_file $ACCEL \
    --num_machines $NNODES --num_processes $((NNODES * GPUS_PER_NODE)) \
    --machine_rank \$SLURM_NODEID --main_process_ip $MASTER_ADDR --main_process_port $MASTER_PORT \
    --rdzv_backend static --same_network \
    -m proactive_rl.cli train --config $RECIPE $* &
  launcher=\$!
  trap 'pkill -USR1 -P \$launcher' USR1 TERM
  while true; do
    wait \$launcher && status=0 || status=\$?
    kill -0 \$launcher 2>/dev/null || break  # wait returned for the trapped signal: the launcher still runs
  done
  exit \$status
" &
step=$!
signalled=0
trap 'signalled=1; echo "pre-emption signal: the trainers save a checkpoint and stop"; kill -USR1 $step' USR1 TERM
status=0
while true; do
  wait "$step" && status=0 || status=$?
  kill -0 "$step" 2>/dev/null || break  # wait returned for the trapped signal, not for the end of the step
done
# the launcher reports a worker's 75 as its own failure (1), so a signalled run that stopped is requeued too
if [ "$status" -eq "$REQUEUE_STATUS" ] || { [ "$signalled" -eq 1 ] && [ "$status" -ne 0 ]; }; then
  echo "requeueing job ${SLURM_JOB_ID:-?} (status $status); it resumes from its newest complete checkpoint"
  scontrol requeue "${SLURM_JOB_ID:?}"
  exit 0
fi
exit "$status"
