#!/usr/bin/env bash
# One node's share of a multi-node torchrun job. Run it on every node with the same arguments.
#
#   # fixed membership: each node says which it is; node 0 hosts the rendezvous
#   bash launch/torchrun-multinode.sh --nnodes 2 --node-rank 0 --rdzv-endpoint node0:29400 lesson.py   # on node0
#   bash launch/torchrun-multinode.sh --nnodes 2 --node-rank 1 --rdzv-endpoint node0:29400 lesson.py   # on node1
#
#   # elastic: 1 to 4 nodes join in any order under one job id; the job starts with those present
#   bash launch/torchrun-multinode.sh --nnodes 1:4 --rdzv-id job42 --rdzv-endpoint node0:29400 lesson.py
#
# Options, each also read from the environment variable in brackets:
#   --nnodes N | MIN:MAX   [NNODES]          nodes in the job (default 1)
#   --node-rank R          [NODE_RANK]       this node, 0..N-1 (fixed membership; node 0 hosts the store)
#   --rdzv-endpoint H[:P]  [RDZV_ENDPOINT]   where the nodes meet (port default 29400); needed for N > 1
#   --rdzv-id ID           [RDZV_ID]         the job's name, the same on every node (default: labkit)
#   --nproc-per-node K     [NPROC_PER_NODE]  ranks on this node (default: its GPUs given in
#                                            CUDA_VISIBLE_DEVICES, one rank each; 2 without GPUs)
#   --max-restarts M       [MAX_RESTARTS]    restarts after a failure (default 0; 3 when elastic)
#   --rdzv-timeout S       [RDZV_TIMEOUT]    seconds to wait for all nodes to join (torchrun's
#                                            join_timeout, default 600); then the job fails
#   --log-dir DIR          [LOG_DIR]         torchrun's folder for its files (each rank's error
#                                            file): it makes <rdzv-id>_<random>/attempt_N/<rank>/
#                                            in DIR, so the nodes may share one DIR on a shared
#                                            filesystem. Default: torchrun's own, as plain torchrun:
#                                            a new /tmp/torchelastic_* folder per agent, which
#                                            nothing removes
#   --dry-run              [LABKIT_DRY_RUN=1] print the torchrun command and stop
# Then the script and its arguments (or -m MODULE and its arguments). The ranks get
# PYTHONFAULTHANDLER=1 unless it is set: a rank that crashes natively prints its Python stack.
#
# The rendezvous is torchrun's c10d: a store on one node that every agent joins. With
# --node-rank, node 0 hosts it (rdzv-conf is_host), so a host name that does not match what
# the node calls itself (an IP address, a high-speed interface's name) still works. Ranks are
# then numbered by the rendezvous, not by --node-rank: torchrun ignores --node-rank under c10d.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
# shellcheck source=launch/lib.sh
source "$repo/launch/lib.sh"

nnodes=${NNODES:-1}
node_rank=${NODE_RANK:-}
endpoint=${RDZV_ENDPOINT:-}
rdzv_id=${RDZV_ID:-labkit}
nproc=${NPROC_PER_NODE:-}
restarts=${MAX_RESTARTS:-}
rdzv_timeout=${RDZV_TIMEOUT:-}
log_dir=${LOG_DIR:-}
dry=${LABKIT_DRY_RUN:-0}
needs_value() { [ $# -ge 2 ] || die "labkit: %s needs a value" "labkit: %s are nevoie de o valoare" "$1"; }
while [ $# -gt 0 ]; do
    case $1 in
    --nnodes) needs_value "$@" && nnodes=$2 && shift 2 ;;
    --node-rank | --node_rank) needs_value "$@" && node_rank=$2 && shift 2 ;;
    --rdzv-endpoint | --rdzv_endpoint) needs_value "$@" && endpoint=$2 && shift 2 ;;
    --rdzv-id | --rdzv_id) needs_value "$@" && rdzv_id=$2 && shift 2 ;;
    --nproc-per-node | --nproc_per_node) needs_value "$@" && nproc=$2 && shift 2 ;;
    --max-restarts | --max_restarts) needs_value "$@" && restarts=$2 && shift 2 ;;
    --rdzv-timeout | --rdzv_timeout) needs_value "$@" && rdzv_timeout=$2 && shift 2 ;;
    --log-dir | --log_dir) needs_value "$@" && log_dir=$2 && shift 2 ;;
    --dry-run) dry=1 && shift ;;
    --) shift && break ;;
    -m) break ;;
    -*) die "labkit: unknown option %s (see the top of %s)" "labkit: opțiune necunoscută %s (vedeți începutul lui %s)" "$1" "$0" ;;
    *) break ;;
    esac
done
[ $# -gt 0 ] || die "labkit: which script should the ranks run?" "labkit: ce script să ruleze rangurile?"

# --nnodes: N, or MIN:MAX for an elastic job
if [[ $nnodes =~ ^[1-9][0-9]*$ ]]; then
    max_nodes=$nnodes
elif [[ $nnodes =~ ^([1-9][0-9]*):([1-9][0-9]*)$ ]] && [ "${BASH_REMATCH[1]}" -le "${BASH_REMATCH[2]}" ]; then
    max_nodes=${BASH_REMATCH[2]}
else
    die "labkit: --nnodes must be N or MIN:MAX with 1 <= MIN <= MAX, not %s" \
        "labkit: --nnodes trebuie să fie N sau MIN:MAX cu 1 <= MIN <= MAX, nu %s" "$nnodes"
fi
if [ -n "$node_rank" ]; then
    if ! [[ $node_rank =~ ^[0-9]+$ ]] || [ "$node_rank" -ge "$max_nodes" ]; then
        die "labkit: --node-rank must be 0..%s, not %s" "labkit: --node-rank trebuie să fie între 0 și %s, nu %s" "$((max_nodes - 1))" "$node_rank"
    fi
fi

# --rdzv-endpoint: one node alone may pick a free port; several must agree on one
if [ -z "$endpoint" ]; then
    [ "$max_nodes" -eq 1 ] || die "labkit: %s nodes need --rdzv-endpoint HOST:PORT, the same on every node" \
        "labkit: %s noduri au nevoie de --rdzv-endpoint GAZDĂ:PORT, același pe fiecare nod" "$nnodes"
    endpoint=127.0.0.1:0
fi
[[ $endpoint == *:* ]] || endpoint=$endpoint:29400
host=${endpoint%:*}
if [ "$max_nodes" -gt 1 ] && [[ $host == localhost || $host == 127.* || $host == "[::1]" ]]; then
    say "labkit: the rendezvous %s is this machine's loopback: agents on other machines cannot reach it" \
        "labkit: rendezvous-ul %s este loopback-ul acestei mașini: agenții de pe alte mașini nu îl pot atinge" "$endpoint"
fi

export PYTHONFAULTHANDLER=${PYTHONFAULTHANDLER:-1} # a rank that crashes natively (SIGABRT, SIGSEGV) prints its Python stack

py=$(labkit_python "$repo")
if [ -z "$nproc" ]; then
    # labkit's rule: one rank per GPU that is ours (CUDA_VISIBLE_DEVICES), never more; 2 without GPUs
    nproc=$("$py" -c 'from labkit.wire.devices import default_nproc; print(default_nproc())' 2>/dev/null ||
        "$py" -c 'import torch; print(torch.cuda.device_count() or 2)')
fi
[[ -z $rdzv_timeout || $rdzv_timeout =~ ^[1-9][0-9]*$ ]] || die "labkit: --rdzv-timeout must be a number of seconds, not %s" \
    "labkit: --rdzv-timeout trebuie să fie un număr de secunde, nu %s" "$rdzv_timeout"
if [ -n "$log_dir" ] && [ -e "$log_dir" ] && [ ! -d "$log_dir" ]; then
    die "labkit: --log-dir %s is not a folder" "labkit: --log-dir %s nu este un folder" "$log_dir"
fi
[[ $nproc =~ ^[1-9][0-9]*$ ]] || die "labkit: --nproc-per-node must be a positive number, not %s" \
    "labkit: --nproc-per-node trebuie să fie un număr pozitiv, nu %s" "$nproc"

cmd=("$py" -m torch.distributed.run
    --nnodes="$nnodes"
    --nproc-per-node="$nproc"
    --rdzv-backend=c10d
    --rdzv-endpoint="$endpoint"
    --rdzv-id="$rdzv_id")
conf=() # torchrun keeps only the last --rdzv-conf: one, with every key
if [ -n "$node_rank" ]; then
    conf+=("is_host=$([ "$node_rank" -eq 0 ] && echo 1 || echo 0)")
    cmd+=(--max-restarts="${restarts:-0}")
else
    cmd+=(--max-restarts="${restarts:-3}")
fi
[ -z "$log_dir" ] || cmd+=(--log-dir="$log_dir") # without it torchrun makes a /tmp/torchelastic_* folder
[ -z "$rdzv_timeout" ] || conf+=("join_timeout=$rdzv_timeout")
[ ${#conf[@]} -eq 0 ] || cmd+=(--rdzv-conf="$(IFS=, && echo "${conf[*]}")")
cmd+=("$@")

printf '+' >&2 && printf ' %q' "${cmd[@]}" >&2 && echo >&2 # the job log shows what ran
[ "$dry" = 1 ] && exit 0
exec "${cmd[@]}"
