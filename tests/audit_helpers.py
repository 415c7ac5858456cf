"""Shared helpers for the audit tests."""

from __future__ import annotations

from pathlib import Path

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
