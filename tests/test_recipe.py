"""Recipe defaults and workload defaults from the KB: LlamaFactory's learning rate,
schedule and chat template by stage, method and model; a video or image model's
training shape from its Flow-Factory example; the user's flags and pins win."""

import json

import pytest
import yaml

from kbsolve import api
from kbsolve.program.evaluate import options_read
from kbsolve.program.recipe import follows_options, provenance
from kbsolve.render import render
from kbsolve.plan.emit import file_contents
from kbsolve.program.query import Query, resolve
from plans import shipped_kb, solved
from shared_data import shared_dir


@pytest.fixture(scope="module")
def kb():
    return shipped_kb()


@pytest.fixture(scope="module")
def llama_plan():
    return solved({"gpus": "8xA100", "model": "llama3-8b", "top": 0})


def _choice(plan, name):
    return next(c for c in plan.explanation if c.option == name)


def test_llama3_plan_writes_its_template_and_the_lora_sft_recipe(kb, llama_plan):
    assert llama_plan.status == "optimal"
    assert llama_plan.config["finetuning_type"] == "lora" and llama_plan.config["stage"] == "sft"
    train = file_contents(kb, llama_plan)["main"]
    assert train["template"] == "llama3"
    assert train["learning_rate"] == pytest.approx(1e-4)
    assert train["num_train_epochs"] == 3 and train["lr_scheduler_type"] == "cosine"
    assert train["warmup_ratio"] == pytest.approx(0.1)
    assert (train["logging_steps"], train["save_steps"], train["plot_loss"]) == (10, 500, True)
    assert yaml.safe_load(yaml.safe_dump(train))["learning_rate"] == pytest.approx(1e-4)


def test_recipe_values_are_marked_for_review_with_the_example_they_come_from(llama_plan):
    lr = _choice(llama_plan, "learning_rate")
    assert lr.kind == "recipe"
    assert lr.reasons[0].detail.startswith("default from llamafactory:examples/train_lora/")
    assert lr.reasons[0].detail.endswith("— review") and lr.reasons[0].because
    assert _choice(llama_plan, "lr_scheduler_type").kind == "recipe"
    assert _choice(llama_plan, "template").kind == "fact"  # the catalog's, not a recipe
    text = render(llama_plan, "table")
    assert "[recipe] default from llamafactory:examples/train_lora/qwen3_lora_sft.yaml" in text


@pytest.mark.parametrize("pins, task, rate, example", [
    (["finetuning_type=full"], None, 1e-5, "train_full/qwen3_full_sft.yaml"),
    (["quantization_bit=4"], None, 1e-4, "train_lora/qwen3_lora_sft.yaml"),
    ([], "dpo", 5e-6, "train_lora/qwen3_lora_dpo.yaml"),
])
def test_the_rate_follows_the_method_and_stage(kb, pins, task, rate, example):
    query = {"gpus": "8xA100", "model": "llama3-8b", "set": pins, "task": task}
    estimate = api.estimate(query, kb=kb)
    assert estimate.config["learning_rate"] == pytest.approx(rate)
    resolved = resolve(kb, Query(**query))
    option = kb.options["llamafactory.learning_rate"]
    assignment = {**{o.key: o.default for o in resolved.problem.options},
                  **resolved.problem.fixed, **resolved.problem.pinned}
    cited = provenance(resolved.problem, option, assignment)
    assert [example in let.meta.source for let in cited] == [True]


def test_a_pinned_learning_rate_wins(kb):
    plan = api.solve({"gpus": "8xA100", "model": "llama3-8b", "top": 0,
                      "set": ["learning_rate=2e-5", "finetuning_type=full"]}, kb)
    assert plan.status == "optimal"
    assert plan.config["learning_rate"] == pytest.approx(2e-5)
    assert _choice(plan, "learning_rate").kind == "pinned"
    assert file_contents(kb, plan)["main"]["learning_rate"] == pytest.approx(2e-5)


def test_a_config_json_without_a_catalog_template_keeps_the_frameworks_default(kb, tmp_path):
    config = {"model_type": "llama", "hidden_size": 512, "num_hidden_layers": 2,
              "num_attention_heads": 8, "intermediate_size": 1024, "vocab_size": 1000,
              "max_position_embeddings": 2048}
    (tmp_path / "config.json").write_text(json.dumps(config))
    resolved = resolve(kb, Query(gpus="1xA100", model=str(tmp_path / "config.json")))
    assert resolved.problem.fixed["llamafactory.template"] == "default"


def test_every_llm_in_the_catalog_names_its_template(kb):
    missing = [m.name for m in kb.catalog.models.values()
               if m.kind == "llm" and not getattr(m, "template", None)]
    assert missing == []


def test_wan14b_plans_the_catalog_shape_and_says_so():
    plan = solved({"gpus": "8xA100", "model": "wan14b"})
    assert plan.status == "optimal"
    assert (plan.config["train.num_frames"], plan.config["train.height"],
            plan.config["train.width"]) == (5, 256, 256)
    note = next(n for n in plan.notes if "training shape" in n)
    assert note.startswith("frames 5 and resolution 256x256: wan2.1-t2v-14b's training shape")
    assert "flow-factory:examples/grpo/lora/wan21/t2v.yaml" in note
    assert "--frames/--resolution override" in note


def test_the_flags_override_the_catalog_shape(kb):
    resolved = resolve(kb, Query(gpus="8xA100", model="wan14b", frames=1))
    facts = resolved.problem.facts
    assert (facts["query.frames"], facts["query.height"], facts["query.width"]) == (1, 256, 256)
    assert [n for n in resolved.notes if "training shape" in n] == [
        "resolution 256x256: wan2.1-t2v-14b's training shape from the catalog "
        "(flow-factory:examples/grpo/lora/wan21/t2v.yaml#L52-L53); --resolution overrides"]
    both = resolve(kb, Query(gpus="8xA100", model="wan14b", frames=1, resolution="480x832"))
    assert (both.problem.facts["query.frames"], both.problem.facts["query.width"]) == (1, 832)
    assert not [n for n in both.notes if "training shape" in n]


def test_an_llm_keeps_the_vocabularys_sequence_length(kb):
    resolved = resolve(kb, Query(gpus="8xA100", model="llama3-8b"))
    assert resolved.problem.facts["query.seq_len"] == kb.vocabulary.default("query.seq_len")
    assert not [n for n in resolved.notes if "training shape" in n]


def test_the_catalog_shapes_are_those_of_the_examples_they_cite(kb):
    examples = shared_dir("examples") / "flow-factory"
    checked = 0
    for model in kb.catalog.models.values():
        source = getattr(model, "train_source", None)
        if source is None:
            continue
        path = source.split(":", 1)[1].split("#")[0]
        data = yaml.safe_load((examples / path).read_text(encoding="utf-8"))
        train = data["train"]
        assert data["model"]["model_name_or_path"] in (model.hf_id, *model.aliases)
        resolution = train["resolution"]
        height, width = (resolution, resolution) if isinstance(resolution, int) else resolution
        assert (model.train_height, model.train_width) == (height, width), model.name
        assert getattr(model, "train_frames", None) == train.get("num_frames"), model.name
        checked += 1
    assert checked >= 20


def test_nothing_the_search_weighs_reads_an_option_set_after_it(kb):
    """An option whose `from` reads options is settled after the search, so a rule,
    warning, preference, term or `when` that read it would see a placeholder."""
    late = {k for k, o in kb.options.items() if follows_options(kb, o)}
    assert "llamafactory.learning_rate" in late
    roots = [r.constraint for r in kb.rules.values()] + \
        [w.expr for w in kb.warnings.values()] + \
        [p.expr for p in kb.preferences.values()] + \
        [t.expr for table in (kb.memory, kb.speed, kb.work) for t in table.values()] + \
        [o.when for o in kb.options.values() if o.when is not None] + \
        [o.source_expr for o in kb.options.values() if o.source_expr is not None]
    read = set().union(*(options_read(kb, root) for root in roots))
    assert read & late == set()
