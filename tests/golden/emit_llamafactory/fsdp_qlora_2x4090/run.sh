#!/usr/bin/env bash
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
accelerate launch --config_file accelerate_config.yaml -m llamafactory.launcher train.yaml
