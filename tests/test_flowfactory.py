"""Flow-Factory knowledge: checklist, the flagship plan, and the emitted files
checked against the fact sheet's declared fields."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from kbsolve import api
from plans import shipped_kb, solved
from shared_data import shared_dir

SECTIONS = {"data": "1.2", "model": "1.3", "scheduler": "1.4", "train": "1.5", "eval": "1.7",
            "rewards": "1.9"}
# Keys the fact sheet documents as pass-through, by section (§0, §1.4, §1.7).
PASS_THROUGH = {"scheduler": {"flow_shift"}, "train": {"num_frames"}, "eval": {"num_frames"}}


@pytest.fixture(scope="module")
def kb():
    return shipped_kb()


@pytest.fixture
def flagship():
    return solved({"gpus": "8xA100", "model": "wan14b"})


def _fact_sheet_fields() -> dict[str, set[str]]:
    """Declared keys per section, read from the fact sheet's tables and lists."""
    text = shared_dir("reference", "flowfactory.md").read_text(encoding="utf-8")
    parts = re.split(r"^### (\d\.\d+) ", text, flags=re.M)
    by_number = {parts[i]: parts[i + 1].split("\n## ")[0] for i in range(1, len(parts) - 1, 2)}
    fields: dict[str, set[str]] = {}
    for section, number in {"top": "1.1", **SECTIONS}.items():
        body = by_number[number]
        names = set()
        for row in re.findall(r"^\| ([^|]+) \|", body, flags=re.M):
            names |= set(re.findall(r"[a-z_][a-z0-9_]*", row))
        names |= set(re.findall(r"`([a-z_]+)`", body))
        if number in ("1.6", "1.7"):
            names |= set(re.findall(r"([a-z_]+)\s*[(\d]", body))
        fields[section] = names
    per_trainer = by_number["1.6"]
    fields["train"] |= set(re.findall(r"([a-z_]+)\(", per_trainer))
    fields["eval"] |= set(re.findall(r"([a-z_]+) (?:\(|\d|None)", by_number["1.7"]))
    fields["eval"] |= {name for pair in re.findall(r"([a-z_]+)/([a-z_]+),", by_number["1.7"])
                       for name in pair}  # "height/width": both keys
    return fields


def test_checklist_has_the_seeds_65_items_and_49_points(kb):
    checks = api.listing(kb, "checks", "flow-factory")
    assert len(checks) == 65
    per_category = {}
    for check in checks:
        per_category.setdefault(check["category"], []).append(check)
    assert [len(per_category[c]) for c in "ABCDEFGHIJ"] == [5, 5, 5, 8, 6, 6, 7, 6, 7, 10]
    categories = {c.id: c for c in kb.categories.values() if c.framework == "flow-factory"}
    assert sum(c.points for c in categories.values()) == 49
    for cid, members in per_category.items():
        groups: dict[str, int] = {}
        loose = 0
        for check in members:
            if check.get("group"):
                groups[check["group"]] = max(groups.get(check["group"], 0), check["points"])
            else:
                loose += check["points"]
        assert loose + sum(groups.values()) == categories[cid].points, cid


def test_diffusion_models_choose_flow_factory(kb):
    plan = api.solve({"gpus": "4xA100", "model": "flux-dev"}, kb)
    assert plan.framework == "flow-factory"
    assert plan.status == "optimal"


def test_flagship_is_an_explained_lora_plan(flagship):
    assert flagship.status == "optimal"
    assert flagship.framework == "flow-factory"
    chosen = {c.option: c for c in flagship.explanation}
    assert chosen["finetune_type"].value == "lora"
    assert chosen["finetune_type"].kind != "pinned"
    assert chosen["lora_rank"].value == 64 and chosen["target_modules"].value == "default"
    assert flagship.memory.fits
    terms = {item.term for item in flagship.memory.breakdown}
    assert {"denoiser_weights", "activations", "rollout_buffer", "ema_copy",
            "reward_model_weights", "vae"} <= terms
    assert flagship.speed.samples_per_s > 0
    assert flagship.launch == "ff-train train.yaml"


def test_flagship_emits_train_yaml_and_its_accelerate_file(kb, flagship, tmp_path):
    written = {Path(p).name for p in api.emit(flagship, str(tmp_path), kb)}
    assert written == {"train.yaml", "accelerate_config.yaml", "run.sh", "requirements.txt"}
    train = yaml.safe_load((tmp_path / "train.yaml").read_text())
    assert set(train) <= {"launcher", "config_file", "num_processes", "main_process_port",
                          "mixed_precision", *SECTIONS}
    assert (tmp_path / train["config_file"]).exists()
    accelerate = yaml.safe_load((tmp_path / train["config_file"]).read_text())
    assert accelerate["distributed_type"] in ("DEEPSPEED", "FSDP", "MULTI_GPU")
    assert accelerate["num_processes"] == train["num_processes"] == 8
    assert train["train"]["group_size"] * train["train"]["unique_sample_num_per_epoch"] % 8 == 0
    assert "sample_group_size" not in train["train"] and "num_epochs" not in train["train"]
    assert "infer_dtype" not in train["model"]
    assert "ff-train train.yaml" in (tmp_path / "run.sh").read_text()


@pytest.mark.parametrize("query", [
    {"gpus": "8xA100", "model": "wan14b"},
    {"gpus": "8xH100", "model": "wan2.2-t2v-a14b", "set": ["target_components=both"]},
    {"gpus": "8xA100", "model": "sd3.5-medium", "task": "dgpo"},
    {"gpus": "8xH100", "model": "ltx-2", "resolution": "512x768", "frames": 33, "task": "nft"},
])
def test_every_emitted_key_is_a_declared_field(kb, query, tmp_path):
    fields = _fact_sheet_fields()
    plan = solved(query)
    assert plan.status in ("optimal", "feasible")
    api.emit(plan, str(tmp_path), kb)
    train = yaml.safe_load((tmp_path / "train.yaml").read_text())
    for key, value in train.items():
        if key in SECTIONS:
            allowed = fields[key] | PASS_THROUGH.get(key, set())
            unknown = set(value) - allowed
            assert not unknown, f"{key}: {sorted(unknown)} are not fields of {key}:"
        else:
            assert key in fields["top"], key


def test_two_wan22_experts_are_written_as_a_list(kb, tmp_path):
    plan = solved({"gpus": "8xH100", "model": "wan2.2-t2v-a14b",
                   "set": ["target_components=both"]})
    api.emit(plan, str(tmp_path), kb)
    train = yaml.safe_load((tmp_path / "train.yaml").read_text())
    assert train["model"]["target_components"] == ["transformer", "transformer_2"]
    accelerate = yaml.safe_load((tmp_path / "accelerate_config.yaml").read_text())
    assert accelerate["distributed_type"] in ("FSDP", "MULTI_GPU")
    assert accelerate.get("fsdp_config", {}).get("fsdp_version", 1) == 1


def test_invented_seed_names_are_aliases_or_nokeys(kb):
    aliases = {a.old for o in kb.options.values() if o.framework == "flow-factory"
               for a in o.aliases}
    assert {"sample_group_size", "num_epochs", "sampler", "advantage_type"} <= aliases
    nokeys = {n.key for n in kb.nokeys.values() if n.framework == "flow-factory"}
    assert {"infer_dtype", "applicable_datasets"} <= nokeys
    trainers = kb.options["flow-factory.trainer_type"].domain
    assert "diffusion-opd" not in trainers
    assert set(trainers) == {"grpo", "grpo-guard", "nft", "awm", "dgpo", "dpo", "crd"}


def test_every_rule_and_warning_has_a_dsl_test(kb):
    missing = api.test_coverage()
    assert not [r for r in missing["rules"] if r.startswith("flow-factory.")]
    assert not [w for w in missing["warnings"] if w.startswith("flow-factory.")]
