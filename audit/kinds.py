"""What a project file is, by its name."""

from __future__ import annotations

import re

_DEPS = re.compile(r"(^|/)(requirements[^/]*\.(txt|in)|pyproject\.toml|setup\.(py|cfg)|"
                   r"environment\.ya?ml|Pipfile|poetry\.lock)$", re.I)
_SHELL = re.compile(r"(^|/)(Makefile|makefile|GNUmakefile|[^/]+\.(sh|bash|mk|slurm|sbatch))$")
_README = re.compile(r"(^|/)README[^/]*$", re.I)


def is_yaml(rel: str) -> bool:
    return rel.endswith((".yaml", ".yml"))


def is_json(rel: str) -> bool:
    return rel.endswith(".json")


def is_python(rel: str) -> bool:
    return rel.endswith(".py")


def is_shell(rel: str) -> bool:
    return bool(_SHELL.search(rel))


def is_readme(rel: str) -> bool:
    return bool(_README.search(rel))


def is_dependency_file(rel: str) -> bool:
    return bool(_DEPS.search(rel))
