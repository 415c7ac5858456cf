"""No silent input: every option of LlamaFactory and Flow-Factory, set to a second
value through `estimate`, moves memory, speed, an emitted file, a broken rule or a
warning, unless the KB declares it inert. Options bound to a query fact move memory
or speed (a --set of cutoff_len is a --seq-len). The full sweep is slow; the
default suite sweeps a fixed slice and the cases of issue 15."""

from __future__ import annotations

import itertools
from fractions import Fraction
from types import SimpleNamespace

import pytest

from kbsolve.api import KbError, estimate
from kbsolve.dsl import ir
from kbsolve.program.evaluate import Evaluator
from kbsolve.program.problem import fact_binding
from kbsolve.plan.emit import file_contents
from kbsolve.program.query import Query, _shape_option, resolve
from plans import shipped_kb

SITUATIONS = {"llamafactory": {"gpus": "2xA100", "model": "qwen2.5-7b"},
              "flow-factory": {"gpus": "2xH100", "model": "wan14b"}}
ROUTED = {"query.seq_len", "query.frames", "query.height", "query.width"}
SLICE = 9  # the default suite sweeps every SLICE-th option of each framework


@pytest.fixture(scope="module")
def kb():
    return shipped_kb()


def _text(value) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, Fraction):
        return str(int(value)) if value.denominator == 1 else str(float(value))
    return str(value)


def _other(option, current):
    """A second value of an option: another domain value, else a nearby one."""
    if option.domain is not None:
        others = [v for v in option.domain if v != current]
        return others[0] if others else None
    if option.low is not None:
        return option.high if current != option.high else option.low
    if option.type.kind == "num":
        base = Fraction(current or 0)
        return base * 2 if base > 1 else base + 3
    return (current or "") + "x" if option.type.kind == "str" else None


def _signature(kb, query: dict, settings: dict[str, str]):
    result = estimate(query, settings, kb=kb)
    plan = SimpleNamespace(query=result.query, explanation=[], config=result.config)
    files = file_contents(kb, plan)
    memory = tuple((m.term, round(m.gib, 6)) for m in result.memory.breakdown)
    speed = result.speed.model_dump()
    return {"memory": memory, "speed": repr(speed), "files": repr(files),
            "rules": tuple(sorted(r.rule for r in result.broken)),
            "warnings": tuple(sorted(w.id for w in result.warnings))}


def _context(kb, framework: str, option, query: dict) -> dict[str, str] | None:
    """Settings of other options under which the option's `when` holds (one or two
    options changed from the defaults), {} without a `when`, None if none is found."""
    if option.when is None:
        return {}
    problem = resolve(kb, Query(**query), consent=False).problem
    base = {o.key: problem.fixed.get(o.key, o.default) for o in problem.options}
    evaluator = Evaluator(kb, framework, problem.facts)

    def holds(extra) -> bool:
        try:
            return bool(evaluator.run(option.when, {**base, **extra}))
        except KbError:
            return False
    if holds({}):
        return {}
    readers = [kb.options[k] for k in sorted(ir.options_used(option.when))
               if kb.options[k].domain is not None]
    for size in (1, 2):
        for group in itertools.combinations(readers, size):
            for values in itertools.product(*(o.domain for o in group)):
                extra = {o.key: v for o, v in zip(group, values)}
                if holds(extra):
                    return {kb.options[k].name: _text(v) for k, v in extra.items()}
    return None


def _literals(kb, option) -> list:
    """Values formulas compare the option with (`checkpoint_quantization == "gptq"`,
    `adapter_count > 1`): the second values worth trying besides a neighbour."""
    found = []
    for node in kb.formulas():
        for n in ir.walk(node):
            args = getattr(n, "args", ())
            if not any(isinstance(a, ir.OptionRef) and a.option == option.key for a in args):
                continue
            for a in args:
                if isinstance(a, ir.Const) and a.value not in found:
                    found.append(a.value)
            for value in getattr(n, "values", ()) or ():
                if value not in found:
                    found.append(value)
    numbers = [v + 1 for v in found if isinstance(v, Fraction)]
    return (found + numbers)[:6]


def silent(kb, framework: str, option) -> str | None:
    """Why the option is silent in every situation tried, or None."""
    why = None
    for query in (SITUATIONS[framework], {**SITUATIONS[framework], "gpus": "1xA100"}):
        why = _silent_in(kb, framework, option, query)
        if why is None:
            return None
    return why


def _silent_in(kb, framework: str, option, query: dict) -> str | None:
    """Why the option is silent in this situation, or None when a second value moves
    something."""
    context = _context(kb, framework, option, query)
    if context is None:
        return None  # its `when` needs a fact this situation lacks (another model kind)
    problem = resolve(kb, Query(**query), consent=False).problem
    current = problem.fixed.get(option.key, option.default)
    fact = fact_binding(kb, option)
    if fact is not None and fact in problem.facts:
        current = problem.facts[fact]
    if fact is not None and fact not in ROUTED:
        return None  # follows --gpus: a --set that disagrees is refused (tested below)
    routed = fact is not None and _shape_option(kb, framework, fact, option)
    candidates = [v for v in [_other(option, current)] + _literals(kb, option)
                  if v is not None and v != current and (option.domain is None
                                                         or v in option.domain)]
    if not candidates:
        return None
    if option.inert and not option.passthrough:
        return None
    for settings in [context] + _partners(kb, option, context):
        if option.passthrough:
            first = _signature(kb, query, settings)
        else:
            first = _signature(kb, query, {**settings, option.name: _text(current)})
        for other in candidates[:4]:
            try:
                second = _signature(kb, query, {**settings, option.name: _text(other)})
            except KbError as error:
                return f"{option.name}={_text(other)} is refused: {error}"
            moved = [k for k in first if first[k] != second[k]]
            if routed and not {"memory", "speed"} & set(moved):
                return f"{option.name} is bound to {fact} but moves only {moved or 'nothing'}"
            if moved:
                return None
    return f"{option.name}: {_text(current)} -> {', '.join(_text(c) for c in candidates[:4])} " \
           f"moves nothing (context {context or 'defaults'}, and its rules' partners)"


def _partners(kb, option, context: dict) -> list[dict]:
    """Contexts that change one other option of a rule or warning reading this one
    (adapter_count matters only with quantization_bit > 0): at most 8."""
    found = []
    for item in list(kb.of(kb.rules, option.framework)) + list(kb.of(kb.warnings,
                                                                      option.framework)):
        reads = ir.options_used(item.expr)
        if option.key not in reads:
            continue
        for key in sorted(reads - {option.key}):
            other = kb.options[key]
            for value in (other.domain or ())[1:3] if other.domain else ():
                extra = {**context, other.name: _text(value)}
                if extra not in found:
                    found.append(extra)
    return found[:8]


def _options(kb, framework: str, every: int):
    options = sorted(kb.options_of(framework), key=lambda o: o.name)
    return options[::every]


@pytest.mark.parametrize("framework", sorted(SITUATIONS))
def test_a_slice_of_options_is_never_silent(kb, framework):
    found = [why for o in _options(kb, framework, SLICE) if (why := silent(kb, framework, o))]
    assert not found, "\n".join(found)


@pytest.mark.slow
@pytest.mark.parametrize("framework", sorted(SITUATIONS))
def test_no_option_is_silent(kb, framework):
    found = [why for o in _options(kb, framework, 1) if (why := silent(kb, framework, o))]
    assert not found, "\n".join(found)


@pytest.mark.parametrize("name", ["cutoff_len", "additional_target", "packing",
                                  "freeze_extra_modules", "eval_steps"])
def test_issue_15_llamafactory_inputs_move_something(kb, name):
    assert silent(kb, "llamafactory", kb.options[f"llamafactory.{name}"]) is None


@pytest.mark.parametrize("name", ["height", "width", "num_frames", "adam_betas"])
def test_issue_15_flowfactory_inputs_move_something(kb, name):
    assert silent(kb, "flow-factory", kb.options[f"flow-factory.{name}"]) is None


def test_a_set_of_cutoff_len_is_the_sequence_length(kb):
    base = {"gpus": "1xA100", "model": "qwen3-8b"}
    by_flag = estimate({**base, "seq_len": 8192}, {}, kb=kb)
    by_set = estimate(base, {"cutoff_len": "8192"}, kb=kb)
    assert by_set.memory.per_gpu_gib.device == by_flag.memory.per_gpu_gib.device
    assert by_set.memory.per_gpu_gib.device > estimate(base, {}, kb=kb).memory.per_gpu_gib.device


def test_a_set_that_disagrees_with_its_flag_names_the_flag(kb):
    with pytest.raises(KbError, match="--seq-len"):
        estimate({"gpus": "1xA100", "model": "qwen3-8b", "seq_len": 4096},
                 {"cutoff_len": "8192"}, kb=kb)
    with pytest.raises(KbError, match="--gpus"):
        estimate({"gpus": "1xA100", "model": "qwen3-8b"}, {"ray_num_workers": "4"}, kb=kb)


def test_trainable_embeddings_and_head_count(kb):
    """Qwen2.5-7B, 152k vocabulary x 3584 hidden, untied: two 0.545 B matrices trained
    in fp32 with Adam (4 + 4 + 8 bytes each) are about 16 GiB of states. With one
    micro-batch per step their 4 GiB of gradients exist only after the forward/backward
    peak (phase_overlap), so the peak grows by the weights and moments, about 12 GiB."""
    base = {"gpus": "1xA100", "model": "qwen2.5-7b"}
    states = ("trainable_params", "gradients", "optimizer_states")

    def figures(settings):
        memory = estimate(base, settings, kb=kb).memory
        terms = {t.term: t.gib for t in memory.breakdown if t.location == "gpu"}
        return memory.per_gpu_gib.allocated, sum(terms.get(t, 0.0) for t in states)

    plain, plain_states = figures({"gradient_accumulation_steps": "1"})
    saved, saved_states = figures({"gradient_accumulation_steps": "1",
                                   "additional_target": "embed_tokens,lm_head"})
    assert 15 < saved_states - plain_states < 19
    assert 11 < saved - plain < 13.5
    accumulated, _ = figures({"gradient_accumulation_steps": "8",
                              "additional_target": "embed_tokens,lm_head"})
    plain_accumulated, _ = figures({"gradient_accumulation_steps": "8"})
    assert 15 < accumulated - plain_accumulated < 19  # gradients live through the next micro-batches


def test_pass_through_keys_are_written_and_typed(kb):
    query = {"gpus": "1xA100", "model": "qwen3-8b"}
    result = estimate(query, {"eval_strategy": "steps", "save_total_limit": "3"}, kb=kb)
    files = file_contents(kb, SimpleNamespace(query=result.query, explanation=[],
                                              config=result.config))
    assert files["main"]["eval_strategy"] == "steps" and files["main"]["save_total_limit"] == 3
    assert "seed" not in files["main"]  # not given, not written
    with pytest.raises(KbError, match="whole number"):
        estimate(query, {"save_total_limit": "2.5"}, kb=kb)
    with pytest.raises(KbError, match="did you mean"):
        estimate(query, {"save_total_limitt": "2"}, kb=kb)


def test_emitted_key_and_bool_spellings_are_accepted(kb):
    query = {"gpus": "2xA100", "model": "qwen3-8b"}
    assert estimate(query, {"distributed_type": "fsdp2"}, kb=kb).config[
        "distributed_type"] == "fsdp2"
    assert estimate(query, {"packing": "true"}, kb=kb).config["packing"] == "true"
    assert estimate(query, {"lora_rank": "256"}, kb=kb).config["lora_rank"] == 256


def test_kb_check_deep_refuses_a_silent_option_and_a_passthrough_read(tmp_path):
    from kbsolve.api import load_kb
    from kbsolve.lint.static import silent_options
    pack = tmp_path / "pack.kb"
    folder = str(tmp_path)
    pack.write_text('module mypack.silent for llamafactory\n'
                    'option my_knob: int = 1 { source "reference:llamafactory.md#1a" }\n'
                    'option my_quiet: int = 1 { inert "only a label" '
                    'source "reference:llamafactory.md#1a" }\n', encoding="utf-8")
    found = {d.code: d.message for d in silent_options(load_kb([folder], use_cache=False))}
    assert list(found) == ["silent-option"] and "my_knob" in found["silent-option"]
    pack.write_text('module mypack.read for llamafactory\n'
                    'option my_key: int { passthrough "not modelled" emit main "my_key" '
                    'source "reference:llamafactory.md#1d" }\n'
                    'warn W_MY: my_key > 2 { because "b" source "reference:llamafactory.md#1d" }\n',
                    encoding="utf-8")
    with pytest.raises(KbError, match="passthrough, but a formula reads it"):
        load_kb([folder], use_cache=False)
