#!/usr/bin/env bash
set -euo pipefail
export FORCE_TORCHRUN=1
llamafactory-cli train train.yaml
