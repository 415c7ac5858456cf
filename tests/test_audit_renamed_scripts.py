"""diffusers example scripts under other names (kb/diffusers/file_kinds.yaml
`renamed`): known by the copy's text when the project holds it, else by the flags
the line passes (the script's argparse options); .zsh launchers are read as .sh."""

from __future__ import annotations

import json

from audit_helpers import run_cli

FLAGS = ("--pretrained_model_name_or_path=black-forest-labs/FLUX.1-dev "
         "--instance_data_dir=dog --instance_prompt='a photo of sks dog' --resolution=512 "
         "--train_batch_size=1 --mixed_precision=bf16 --max_train_steps=500")


def audit(capsys, path, *extra):
    code, out, err = run_cli(capsys, "audit", str(path), "--format", "json", *extra)
    assert "Traceback" not in out + err, err
    return code, (json.loads(out) if code == 0 else err)


def test_a_renamed_flux_lora_script_is_known_by_its_flags(capsys, tmp_path):
    """--guidance_scale: the FLUX scripts' option; --rank: the LoRA script's only."""
    (tmp_path / "train.sh").write_text(
        f"accelerate launch my_flux_trainer.py {FLAGS} --guidance_scale=1 --rank=16\n")
    code, report = audit(capsys, tmp_path)
    [unit] = report["units"]
    assert code == 0 and unit["kind"] == "launch"
    assert any("read as train_dreambooth_lora_flux.py" in n for n in unit["notes"])


def test_a_copy_whose_flags_fit_the_full_fine_tune_too_is_not_guessed(capsys, tmp_path):
    """No LoRA-only option and no 'lora' in the name: it may be train_dreambooth_flux.py."""
    (tmp_path / "train.sh").write_text(f"accelerate launch my_flux.py {FLAGS} "
                                       f"--guidance_scale=1\n")
    code, err = audit(capsys, tmp_path)
    assert code == 2 and "no training config or script" in err


def test_a_vendored_copy_is_known_by_its_text_not_its_flags(capsys, tmp_path):
    """The copy's text (SD3Transformer2DModel, LoraConfig) decides, whatever it is named."""
    (tmp_path / "trainer.py").write_text(
        'from diffusers import SD3Transformer2DModel\nfrom peft import LoraConfig\n'
        'parser.add_argument("--instance_prompt", type=str)\n')
    (tmp_path / "run.zsh").write_text(
        "accelerate launch trainer.py --pretrained_model_name_or_path="
        "stabilityai/stable-diffusion-3-medium-diffusers --instance_data_dir=d "
        "--instance_prompt=x --resolution=512 --train_batch_size=1\n")
    code, report = audit(capsys, tmp_path)
    [unit] = [u for u in report["units"] if u["kind"] == "launch"]
    assert unit["path"] == "run.zsh"
    assert any("trainer.py is read as train_dreambooth_lora_sd3.py: its text" in n
               for n in unit["notes"])


def test_a_vendored_full_fine_tune_is_not_read_as_the_lora_script(capsys, tmp_path):
    (tmp_path / "trainer.py").write_text('from diffusers import FluxTransformer2DModel\n'
                                         'parser.add_argument("--instance_prompt")\n')
    (tmp_path / "run.sh").write_text(f"accelerate launch trainer.py {FLAGS} "
                                     f"--guidance_scale=1 --rank=4\n")
    code, err = audit(capsys, tmp_path)
    assert code == 2 and "no training config or script" in err


def test_a_vendored_script_newer_than_the_pinned_diffusers_is_an_error(capsys, tmp_path):
    """check_min_version raises ImportError when the installed diffusers is older
    (diffusers src/diffusers/utils/__init__.py:165-175 @58eb52c0)."""
    (tmp_path / "train_dreambooth_lora_sd3.py").write_text(
        'from diffusers.utils import check_min_version\n\ncheck_min_version("0.33.0.dev0")\n')
    (tmp_path / "run.zsh").write_text(
        "accelerate launch train_dreambooth_lora_sd3.py --pretrained_model_name_or_path="
        "stabilityai/stable-diffusion-3-medium-diffusers --instance_data_dir=d "
        "--instance_prompt=x --resolution=512 --train_batch_size=1\n")
    (tmp_path / "requirements.txt").write_text("torch==2.6.0\ndiffusers==0.32.2\n")
    code, report = audit(capsys, tmp_path)
    [unit] = [u for u in report["units"] if u["kind"] == "launch"]
    [error] = [f for f in unit["errors"] if f["kind"] == "version"]
    assert error["location"] == "run.zsh"
    assert "train_dreambooth_lora_sd3.py:3" in error["message"]
    assert ">= 0.33.0.dev0" in error["message"] and "requirements.txt:2" in error["message"]
    (tmp_path / "requirements.txt").write_text("diffusers==0.33.1\n")
    code, report = audit(capsys, tmp_path)
    [unit] = [u for u in report["units"] if u["kind"] == "launch"]
    assert not [f for f in unit["errors"] if f["kind"] == "version"]
