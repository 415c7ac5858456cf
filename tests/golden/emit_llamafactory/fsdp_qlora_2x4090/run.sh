#!/usr/bin/env bash
# Written by kbsolve; runs from any folder. Set its parameters in the environment:
#   [NPROC_PER_NODE=2] bash run.sh
#   NPROC_PER_NODE  processes per node, one per GPU of the plan (CUDA_VISIBLE_DEVICES chooses which) (default 2)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
usage='usage: [NPROC_PER_NODE=2] bash run.sh'
fail() { echo "run.sh: $1" >&2; echo "$usage" >&2; exit 2; }
NPROC_PER_NODE="${NPROC_PER_NODE:-2}"
case "$NPROC_PER_NODE" in ""|*[!0-9]*) fail "NPROC_PER_NODE must be a whole number, not '$NPROC_PER_NODE'";; esac
export NPROC_PER_NODE
accelerate launch --config_file accelerate_config.yaml -m llamafactory.launcher train.yaml
