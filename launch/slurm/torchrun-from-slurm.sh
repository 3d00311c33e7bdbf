#!/usr/bin/env bash
# torchrun on one node of a Slurm job: what each task started by `srun` in train.sbatch runs.
#
#   srun --ntasks-per-node=1 bash launch/slurm/torchrun-from-slurm.sh lesson.py [args]
#
# Everything comes from the variables Slurm gives the task, read here, inside the task:
#   SLURM_JOB_NODELIST  the nodes; the first one hosts the rendezvous, at its NodeAddr
#   SLURM_NNODES        how many nodes; SLURM_NTASKS must be the same (one task per node)
#   SLURM_PROCID        this task's number, which is the node rank with one task per node
#   SLURM_JOB_ID        the rendezvous id, and the port: 29400 + job id % 1000 unless RDZV_PORT is set
#   SLURM_SUBMIT_DIR    where torchrun's files go unless LOG_DIR is set: $SLURM_SUBMIT_DIR/torchelastic
#                       ($PWD without it). Each job's per-rank error files land there, beside the
#                       job's %x-%j.out, under torchelastic/slurm-<jobid>_*, not in /tmp of each node
# NPROC_PER_NODE, PYTHON and the rest are passed on to launch/torchrun-multinode.sh.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
# shellcheck source=launch/lib.sh
source "$repo/launch/lib.sh"

for var in SLURM_JOB_NODELIST SLURM_NNODES SLURM_PROCID SLURM_JOB_ID; do
    [ -n "${!var:-}" ] || die "labkit: %s is not set: run this under srun, inside a Slurm job" \
        "labkit: %s nu este setată: rulați acest script cu srun, într-un job Slurm" "$var"
done
if [ "${SLURM_NTASKS:-$SLURM_NNODES}" != "$SLURM_NNODES" ]; then
    die "labkit: %s tasks on %s nodes: torchrun wants one task per node (srun --ntasks-per-node=1)" \
        "labkit: %s sarcini pe %s noduri: torchrun vrea o sarcină pe nod (srun --ntasks-per-node=1)" \
        "$SLURM_NTASKS" "$SLURM_NNODES"
fi

# The first node of the allocation. No fallback to localhost: if scontrol is missing, each
# node would meet only itself and the job would hang instead of failing here.
nodes=$(scontrol show hostnames "$SLURM_JOB_NODELIST")
head_node=${nodes%%$'\n'*}
[ -n "$head_node" ] || die "labkit: scontrol lists no node for %s" "labkit: scontrol nu listează niciun nod pentru %s" "$SLURM_JOB_NODELIST"
# Meet at the address Slurm itself uses to reach the head node (its NodeAddr). It is the node's
# name on most clusters, but not where names do not resolve (several nodes on one host, some clouds).
head_addr=$(scontrol show node -o "$head_node" 2>/dev/null | grep -o 'NodeAddr=[^ ]*' || true)
head_addr=${head_addr#NodeAddr=}
port=${RDZV_PORT:-$((29400 + SLURM_JOB_ID % 1000))} # two jobs sharing a head node get two ports
log_dir=${LOG_DIR:-${SLURM_SUBMIT_DIR:-$PWD}/torchelastic} # torchrun makes slurm-<jobid>_<random>/ in it

exec bash "$repo/launch/torchrun-multinode.sh" \
    --nnodes "$SLURM_NNODES" \
    --node-rank "$SLURM_PROCID" \
    --rdzv-endpoint "${head_addr:-$head_node}:$port" \
    --rdzv-id "slurm-$SLURM_JOB_ID" \
    --log-dir "$log_dir" \
    "$@"
