#!/usr/bin/env bash
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
export FORCE_TORCHRUN=1
llamafactory-cli train train.yaml
