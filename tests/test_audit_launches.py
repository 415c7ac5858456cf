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
    assert unit.path == "run_train.sh" and unit.basic["launch"] == "run_train.sh"
    assert unit.fit.status == "fits" and unit.fit.device_gib > 1
    assert not [f for f in unit.errors if f.kind == "rule"]  # square 256 crops, as written
    small = unit.fit.device_gib
    (tmp_path / "run_train.sh").write_text(RUN.replace("local_batch_size 4", "local_batch_size 8"))
    bigger = api.audit(str(tmp_path), "8xH100", kb=kb)[0].units[0].fit.device_gib
    assert bigger > small  # the line's flag, over the TOML's 32, is what is judged


def test_a_key_the_parser_takes_but_flux_ignores_is_a_no_op_not_an_error(kb, tmp_path):
    """training.seq_len is a torchtitan setting (TrainingConfig) that the FLUX trainer
    overwrites: a silent no-op with no edit, not 'not a torchtitan setting'."""
    configs = tmp_path / "torchtitan/models/flux/train_configs"
    configs.mkdir(parents=True)
    (configs / "flux_dev_model.toml").write_text(TOML.replace("steps = 30_000",
                                                              "steps = 30_000\nseq_len = 256"))
    (tmp_path / "run_train.sh").write_text(RUN)
    [unit] = api.audit(str(tmp_path), "8xH100", kb=kb)[0].units
    assert not [f for f in unit.errors if "seq_len" in f.id]
    [no_op] = [f for f in unit.silent if f.id == "training.seq_len"]
    assert no_op.kind == "no_op" and "accepted" in no_op.message and not no_op.fix
    assert not [c for c in unit.changes if "seq_len" in c.key]


def test_diffusers_readme_launch_is_audited_and_never_written(kb, tmp_path):
    (tmp_path / "README.md").write_text(DIFFUSERS)
    report, written = api.audit(str(tmp_path), "1xH100", kb=kb, fix=True)
    [unit] = report.units
    assert unit.framework == "diffusers" and unit.path == "README.md"
    assert unit.basic["model"].startswith("flux1-dev")
    assert unit.fit.status == "fits"
    assert not [f for f in unit.errors + unit.silent if f.kind in ("rule", "value_alias")]
    assert written == {} and (tmp_path / "README.md").read_text() == DIFFUSERS


def test_a_script_the_kb_does_not_describe_is_one_line(kb, tmp_path):
    """diffusers' full DreamBooth script for SD3 (the KB describes FLUX.1's, not SD3's)."""
    (tmp_path / "train.sh").write_text(
        "accelerate launch train_dreambooth_sd3.py --pretrained_model_name_or_path="
        "stabilityai/stable-diffusion-3.5-medium --resolution=1024 --train_batch_size=1\n")
    report = api.audit(str(tmp_path), "1xA100", kb=kb)[0]
    assert report.units == [] and len(report.not_audited) == 1
    assert report.not_audited[0].startswith("train.sh: not audited: diffusers")


def test_more_processes_than_visible_gpus(kb, tmp_path):
    """accelerate starts num_processes 4 (its config) with CUDA_VISIBLE_DEVICES=5,7."""
    from shared_data import shared_dir
    examples = shared_dir("examples") / "llamafactory" / "examples"
    (tmp_path / "sft.yaml").write_text((examples / "train_full/qwen3_full_sft.yaml").read_text())
    (tmp_path / "fsdp.yaml").write_text(
        (examples / "accelerate/fsdp_config.yaml").read_text().replace(
            "num_processes: 2", "num_processes: 4"))
    (tmp_path / "run.sh").write_text('CUDA_VISIBLE_DEVICES="5,7" accelerate launch '
                                     "--config_file fsdp.yaml src/train.py sft.yaml\n")
    [unit] = api.audit(str(tmp_path), kb=kb)[0].units
    [finding] = [f for f in unit.errors if f.kind == "launch"]
    assert "4 processes" in finding.message and "2 GPU" in finding.message


def test_llamafactory_flags_launch(kb, tmp_path):
    """A LlamaFactory run given as flags (LlamaFactory issue 3259's script, cut): a
    bare --flash_attn is refused, a misspelt DeepSpeed path does not exist."""
    (tmp_path / "train.sh").write_text(
        "deepspeed --num_gpus 8 --master_port=9901 src/train_bash.py \\\n"
        "    --deepspeed examples/deepseed/ds_z3_offload_config.json \\\n"
        "    --stage sft --cutoff_len 32768 --do_train \\\n"
        "    --model_name_or_path Qwen/Qwen2.5-32B --finetuning_type full \\\n"
        "    --per_device_train_batch_size 1 --evaluation_strategy steps \\\n"
        "    --bf16 --flash_attn\n")
    [unit] = api.audit(str(tmp_path), "8xA100", kb=kb)[0].units
    assert unit.framework == "llamafactory" and unit.kind == "launch"
    assert unit.basic["cutoff_len"] == 32768 and "8 (80 GB)" in unit.basic["hardware"]
    errors = {f.kind: f for f in unit.errors}
    assert errors["refused_value"].id == "flash_attn"
    assert errors["refused"].id == "evaluation_strategy"
    assert "examples/deepspeed/ds_z3_offload_config.json" in errors["missing_file"].message
    assert not any("taken as" in n for n in unit.notes)  # the ZeRO stage is not guessed


def test_llamafactory_flags_take_argparse_prefixes(kb, tmp_path):
    """On the command line argparse reads --max_step as --max_steps (a unique prefix;
    Qwen2-VL-SFT's finetune_viz.sh); in a YAML the same key is refused."""
    (tmp_path / "train.sh").write_text(
        "deepspeed --num_gpus 8 src/train.py --stage sft --do_train \\\n"
        "    --model_name_or_path Qwen/Qwen2-VL-7B-Instruct --finetuning_type full \\\n"
        "    --dataset viz --streaming --max_step 3370 --dispatch_batches False\n")
    [unit] = api.audit(str(tmp_path), "8xA100", kb=kb)[0].units
    refused = {f.id for f in unit.errors if f.kind == "refused"}
    assert refused == {"dispatch_batches"}
    assert not any(f.id == "P8" for f in unit.errors)  # max_steps 3370 with streaming
    assert any("--max_step is read as --max_steps" in n for n in unit.notes)
    (tmp_path / "train.sh").unlink()
    (tmp_path / "sft.yaml").write_text("stage: sft\ndo_train: true\nmodel_name_or_path: m\n"
                                       "finetuning_type: full\ndataset: viz\nmax_step: 3370\n")
    [unit] = api.audit(str(tmp_path), "8xA100", kb=kb)[0].units
    assert {f.id for f in unit.errors if f.kind == "refused"} == {"max_step"}


def test_a_commented_line_ends_a_continued_command(kb, tmp_path):
    """bash: a comment runs to the end of its line, backslash included (ScaleBench's
    Qwen2.5-VL.sh): the flags after it are another command, so LlamaFactory gets no
    dataset and its parser raises (parser.py:477-478; audit.yaml required_keys)."""
    (tmp_path / "run.sh").write_text(
        "llamafactory-cli train \\\n    --stage sft \\\n    --do_train True \\\n"
        "    --model_name_or_path Qwen/Qwen2.5-VL-7B-Instruct \\\n"
        "    #--model_name_or_path Qwen/Qwen2.5-VL-72B-Instruct \\\n"
        "    --dataset mine \\\n    --output_dir out\n")
    [unit] = api.audit(str(tmp_path), kb=kb)[0].units
    [missing] = [f for f in unit.errors if f.kind == "missing_key"]
    assert missing.id == "dataset" and "Please specify dataset" in missing.message
    (tmp_path / "run.sh").write_text((tmp_path / "run.sh").read_text().replace(
        "    #--model_name_or_path Qwen/Qwen2.5-VL-72B-Instruct \\\n", ""))
    [unit] = api.audit(str(tmp_path), kb=kb)[0].units
    assert not [f for f in unit.errors if f.kind == "missing_key"]


def test_the_deepspeed_launcher_without_a_deepspeed_config(kb, tmp_path):
    """LlamaFactory issue 1936: `deepspeed` starts five processes, no --deepspeed
    names a config, so the Trainer runs plain DDP (audit.yaml launcher_needs); a
    path through examples/deepspeed/ is no deepspeed launcher."""
    run = ("deepspeed --include localhost:0,1,2,3,4 src/train_bash.py --stage rm "
           "--do_train --model_name_or_path m --dataset d --finetuning_type lora "
           "--output_dir o --bf16\n")
    (tmp_path / "train.sh").write_text(run)
    [unit] = api.audit(str(tmp_path), kb=kb)[0].units
    [found] = [f for f in unit.errors if f.kind == "launch"]
    assert found.id == "deepspeed" and "plain DDP" in found.message
    (tmp_path / "train.sh").write_text(run.replace("--bf16", "--bf16 --deepspeed ds.json"))
    (tmp_path / "ds.json").write_text('{"zero_optimization": {"stage": 2}}')
    [unit] = api.audit(str(tmp_path), kb=kb)[0].units
    assert not [f for f in unit.errors if f.kind == "launch"]
    (tmp_path / "train.sh").unlink()
    (tmp_path / "examples" / "deepspeed").mkdir(parents=True)
    (tmp_path / "examples" / "deepspeed" / "sft.yaml").write_text(
        "stage: sft\ndo_train: true\nmodel_name_or_path: m\ndataset: d\nfinetuning_type: lora\n")
    (tmp_path / "run.sh").write_text("llamafactory-cli train examples/deepspeed/sft.yaml\n")
    [unit] = api.audit(str(tmp_path), kb=kb)[0].units
    assert not [f for f in unit.errors if f.kind == "launch"]
