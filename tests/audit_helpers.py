"""Shared helpers for the audit tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbsolve.cli.main import main

PROJECTS = Path(__file__).parent / "fixtures" / "projects"


def unit(report, suffix: str):
    return next(u for u in report.units if u.path.endswith(suffix))


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def audit_context(kb, config, gpus: str, framework: str = "llamafactory"):
    """The audit's Context for one config file on `gpus`, built as `kbsolve audit`
    builds it (project read, options mapped, model and hardware looked up)."""
    from kbsolve.audit.assess import build_context
    from kbsolve.audit.flags import Flags
    from kbsolve.audit.mapping import read_options
    from kbsolve.audit.model_lookup import model_folders, model_for
    from kbsolve.audit.read_project import read_project
    from kbsolve.audit.run import hardware_for
    from kbsolve.audit.walk import walk
    flags = Flags(gpus=gpus).resolve(kb, gpus)
    tree = walk(str(config))
    [found] = read_project(kb, tree).units
    reading = read_options(kb, framework, found.files)
    main_file = next(iter(found.files.values()))
    model, _ = model_for(kb, main_file.values, model_folders(found, tree.root), None)
    return build_context(kb, framework, reading.values,
                         hardware_for(kb, found, reading, flags.fixed), model)


# ---- one audit or fix of a fixture, shared by the tests that read it ------------------

_DONE: dict[str, object] = {}


def shipped_audit(path: str, gpus: str | None = None):
    """`api.audit(path, gpus)` on the shipped KB, audited once per process for a folder of
    fixtures or shared examples (never written to) and deep-copied for each caller."""
    import copy

    from kbsolve import api
    from plans import shipped_kb
    key = repr(("audit", str(path), gpus))
    if key not in _DONE:
        _DONE[key] = api.audit(str(path), gpus, kb=shipped_kb())
    return copy.deepcopy(_DONE[key])


@pytest.fixture
def audit_once(monkeypatch):
    """`api.audit` and `api.fix` on the shipped KB (no packs, nothing written) run once per
    process for each read-only fixture under PROJECTS and set of arguments, each caller
    getting a deep copy: for tests that check what the command prints for an audit or a
    fix another call in the test (or the file) already made. The first call is the real
    one; a KB given other than the shipped one, packs, --fix or --write go to the real
    function every time."""
    import copy
    import inspect

    from kbsolve import api
    from plans import shipped_kb

    def once(real):
        signature = inspect.signature(real)

        def call(*args, **kwargs):
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            given = dict(bound.arguments)
            kb = given.pop("kb")
            path = Path(next(iter(given.values()))).resolve()
            if ((kb is not None and kb is not shipped_kb()) or given.get("packs")
                    or given.get("fix") or given.get("write")
                    or PROJECTS.resolve() not in path.parents):
                return real(*args, **kwargs)
            given.update(packs=(), allow=tuple(given["allow"] or ()))  # the CLI's lists
            key = repr((real.__name__, sorted(given.items())))
            if key not in _DONE:
                _DONE[key] = real(*args, **kwargs)
            return copy.deepcopy(_DONE[key])
        return call
    monkeypatch.setattr(api, "audit", once(api.audit))
    monkeypatch.setattr(api, "fix", once(api.fix))
