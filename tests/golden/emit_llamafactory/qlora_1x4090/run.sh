#!/usr/bin/env bash
set -euo pipefail
llamafactory-cli train train.yaml
