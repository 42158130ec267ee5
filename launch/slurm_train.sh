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
# One launcher per node; each spawns GPUS_PER_NODE workers. SLURM_NODEID is this node's rank.
srun --ntasks="$NNODES" --ntasks-per-node=1 bash -c "
  $PYTHON_BIN/accelerate launch --config_file $ACCEL \
    --num_machines $NNODES --num_processes $((NNODES * GPUS_PER_NODE)) \
    --machine_rank \$SLURM_NODEID --main_process_ip $MASTER_ADDR --main_process_port $MASTER_PORT \
    --rdzv_backend static --same_network \
    -m proactive_rl.cli train --config $RECIPE $*
"
