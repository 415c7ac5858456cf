"""Where CoreFinder._run_goes splits a run of consent rules whose whole deletion did not
clash (prove.run_split) changes which Z3 checks run, never the refusal's core: each
part's decision is the one deletion in name order makes."""

from __future__ import annotations

import pytest

import refusals
from kbsolve.solver import prove


def test_a_split_leaves_both_sides_a_part():
    """Every run of two or more parts splits into two shorter runs (the recursion ends)."""
    assert all(1 <= prove.run_split(size) < size for size in range(2, 64))


def _core(fields: dict) -> list[str]:
    """A fresh finder's core with the guess and the consent runs, as minimal_core's
    second pass asks it."""
    problem = refusals.problem(**fields)
    consent = refusals.consent(**fields)
    finder = prove.CoreFinder(prove.Model(problem))
    return finder.clash(likely=prove._likely(consent), grouped=frozenset(consent).__contains__)


SPLITS = {  # other places to split a run: the same core from each
    "smaller half first": lambda size: size // 2,
    "one part first": lambda size: 1,
    "all but one first": lambda size: size - 1,
}


@pytest.mark.ci  # ~10 s of CPU: five cores of one refusal; test_fixes checks the default split
@pytest.mark.parametrize("fields", [
    {"gpus": "2x4090", "model": "mixtral-8x7b", "task": "dpo"},  # two consent rules, run of 13
], ids=lambda f: "-".join(f.values()))
def test_every_split_of_a_consent_run_gives_plain_deletion_s_core(fields, monkeypatch):
    _, plain = refusals.plain_deletion(**fields)
    assert set(plain) & set(refusals.consent(**fields))  # the core keeps a consent rule
    splits: list[int] = []
    default = prove.run_split

    def counted(size: int) -> int:
        splits.append(size)
        return default(size)
    monkeypatch.setattr(prove, "run_split", counted)
    assert _core(fields) == plain and splits  # a run was split (a needed rule was in it)
    for name, split in SPLITS.items():
        monkeypatch.setattr(prove, "run_split", split)
        assert _core(fields) == plain, name
