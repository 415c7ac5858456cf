"""A linked Program's option defaults, found once (program/program.py `Program.defaults`;
consent's waivers read them: tests/test_consent.py)."""

from __future__ import annotations

import pytest

from kbsolve import api
from kbsolve.program.program import link


@pytest.fixture(scope="module")
def kb():
    return api.load_kb()


def test_defaults_are_each_options_default_and_read_only(kb):
    for framework in sorted(kb.frameworks):
        program = link(kb, framework)
        assert dict(program.defaults) == {o.key: o.default for o in program.options}
        assert program.defaults is program.defaults
        with pytest.raises(TypeError):
            program.defaults[next(iter(program.defaults), "x")] = None


def test_a_pin_that_makes_an_optins_change_waives_its_consent_rule(kb):
    from kbsolve.program.query import Query, resolve

    def consent(*pins):
        problem = resolve(kb, Query(gpus="1x4090", model="qwen3-8b", set=list(pins))).problem
        return {r.id for r in problem.consent}

    free, pinned = consent(), consent("quantization_bit=4")
    assert "ALLOW_quantization" in free and free - pinned == {"ALLOW_quantization"}
