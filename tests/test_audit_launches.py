"""torchtitan FLUX and diffusers runs are driven by flags: the audit finds the
launch lines (kb/*/file_kinds.yaml `launches`), reads the flags after the module
or script (and torchtitan's TOML under them), and judges rules and fit."""

from __future__ import annotations

import pytest

from kbsolve import api
from plans import shipped_kb

# torchtitan/models/flux/train_configs/flux_dev_model.toml (pytorch/torchtitan@647c51c, BSD-3), cut
TOML = """[job]
dump_folder = "./outputs"
[model]
name = "flux"
flavor = "flux-dev"
[training]
local_batch_size = 32
steps = 30_000
[parallelism]
data_parallel_replicate_degree = 1
data_parallel_shard_degree = -1
"""
# torchtitan/models/flux/run_train.sh (pytorch/torchtitan@2f609cd, BSD-3), its torchrun line
RUN = """NGPU=${NGPU:-"8"}
export LOG_RANK=${LOG_RANK:-0}
CONFIG_FILE=${CONFIG_FILE:-"./torchtitan/models/flux/train_configs/flux_dev_model.toml"}

PYTORCH_ALLOC_CONF="expandable_segments:True" \\
torchrun --nproc_per_node=${NGPU} --rdzv_backend c10d --rdzv_endpoint="localhost:0" \\
--local-ranks-filter ${LOG_RANK} --role rank --tee 3 \\
-m torchtitan.models.flux.train --job.config_file ${CONFIG_FILE} \\
  --training.local_batch_size 4 --dataloader.img_size 256 "$@"
"""
# diffusers examples/dreambooth/README_flux.md's launch (huggingface/diffusers, Apache-2.0)
DIFFUSERS = """```bash
export MODEL_NAME="black-forest-labs/FLUX.1-dev"
```

```bash
accelerate launch train_dreambooth_lora_flux.py \\
  --pretrained_model_name_or_path=$MODEL_NAME \\
  --instance_data_dir="dog" --output_dir="trained-flux-lora" \\
  --mixed_precision="bf16" --instance_prompt="a photo of sks dog" \\
  --resolution=512 --train_batch_size=1 --guidance_scale=1 \\
  --gradient_accumulation_steps=4 --optimizer="prodigy" --learning_rate=1. \\
  --max_train_steps=500 --seed="0"
```
Outside a code block, python train_dreambooth_lora_flux.py is only prose.
"""


@pytest.fixture(scope="module")
def kb():
    return shipped_kb()


def test_torchtitan_flux_launch_is_audited(kb, tmp_path):
    configs = tmp_path / "torchtitan/models/flux/train_configs"
    configs.mkdir(parents=True)
    (configs / "flux_dev_model.toml").write_text(TOML)
    (tmp_path / "run_train.sh").write_text(RUN)
    report = api.audit(str(tmp_path), "8xH100", kb=kb)[0]
    [unit] = report.units
    assert unit.framework == "torchtitan" and unit.kind == "launch"
    assert unit.path == "run_train.sh:5" and unit.basic["launch"] == "run_train.sh"
    assert unit.fit.status == "fits" and unit.fit.device_gib > 1
    assert not [f for f in unit.errors if f.kind == "rule"]  # square 256 crops, as written
    small = unit.fit.device_gib
    (tmp_path / "run_train.sh").write_text(RUN.replace("local_batch_size 4", "local_batch_size 8"))
    bigger = api.audit(str(tmp_path), "8xH100", kb=kb)[0].units[0].fit.device_gib
    assert bigger > small  # the line's flag, over the TOML's 32, is what is judged


def test_diffusers_readme_launch_is_audited_and_never_written(kb, tmp_path):
    (tmp_path / "README.md").write_text(DIFFUSERS)
    report, written = api.audit(str(tmp_path), "1xH100", kb=kb, fix=True)
    [unit] = report.units
    assert unit.framework == "diffusers" and unit.path == "README.md:6"
    assert unit.basic["model"].startswith("flux1-dev")
    assert unit.fit.status == "fits"
    assert not [f for f in unit.errors + unit.silent if f.kind in ("rule", "value_alias")]
    assert written == {} and (tmp_path / "README.md").read_text() == DIFFUSERS
