#!/usr/bin/env bash
set -euo pipefail
accelerate launch --config_file accelerate_config.yaml -m llamafactory.launcher train.yaml
