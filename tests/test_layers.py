"""The layers hold: the CLI reaches kbsolve only through kbsolve.api and
kbsolve.render; the renderers read data models and touch no solver; and
`kbsolve --help` imports none of the heavy libraries."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("z3", "lark", "pydantic", "yaml")


def imports(path: Path, package: str) -> list[tuple[str, int, bool]]:
    """(module, line, typing_only) for each import in a file; `from kbsolve
    import api` counts as kbsolve.api, relative imports resolve in `package`."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    typing_only = {id(node) for block in ast.walk(tree) if isinstance(block, ast.If)
                   and ast.unparse(block.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")
                   for stmt in block.body for node in ast.walk(stmt)}
    found = []
    for node in ast.walk(tree):
        only = id(node) in typing_only
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno, only) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            if base == "kbsolve":
                found += [(f"kbsolve.{alias.name}", node.lineno, only) for alias in node.names]
            else:
                found.append((base, node.lineno, only))
        elif (isinstance(node, ast.Call) and ast.unparse(node.func).endswith("import_module")
              and node.args and isinstance(node.args[0], ast.Constant)):
            found.append((str(node.args[0].value), node.lineno, only))
    return found


def ours(module: str) -> bool:
    return module == "kbsolve" or module.startswith("kbsolve.")


def under(module: str, *roots: str) -> bool:
    return any(module == root or module.startswith(root + ".") for root in roots)


def test_the_cli_imports_only_api_and_render():
    files = sorted((ROOT / "cli").glob("*.py"))
    assert files
    bad = [f"cli/{path.name}:{line}: {module}"
           for path in files for module, line, _ in imports(path, "kbsolve.cli")
           if ours(module) and module not in ("kbsolve.api", "kbsolve.render")
           and not under(module, "kbsolve.cli")]
    assert not bad, "the CLI must go through kbsolve.api and kbsolve.render:\n" + "\n".join(bad)


# what a renderer may import when it runs: itself, diagnostics, the data models
RENDER_MAY_IMPORT = ("kbsolve.render", "kbsolve.diagnostics", "kbsolve.audit.model",
                     "kbsolve.solver.plan")


def test_render_reads_data_models_only():
    files = sorted((ROOT / "render").glob("*.py"))
    assert files
    bad = []
    for path in files:
        for module, line, typing_only in imports(path, "kbsolve.render"):
            where = f"render/{path.name}:{line}: {module}"
            if under(module, "kbsolve.api", "kbsolve.cli", "click"):
                bad.append(where)  # renderers return text; they neither call the api nor print
            elif ours(module) and not typing_only and not under(module, *RENDER_MAY_IMPORT):
                bad.append(where)
    assert not bad, "render/ may read data models, nothing else of kbsolve:\n" + "\n".join(bad)


def test_every_registered_renderer_exists():
    import importlib

    from kbsolve.render import RENDERERS
    for (kind, fmt), renderer in RENDERERS.items():
        module, name = renderer.__name__.split(".")
        assert callable(getattr(importlib.import_module(f"kbsolve.render.{module}"), name)), \
            (kind, fmt)


def test_render_refuses_an_unknown_kind_or_format():
    from kbsolve.render import render
    with pytest.raises(TypeError):
        render(object(), "table")
    with pytest.raises(ValueError, match="known: table, json"):
        render([], "yaml", kind="listing")


LOADED = """
import runpy, sys
sys.argv[0] = "kbsolve"  # the program name click prints; the module runs from this checkout
try:
    runpy.run_module("kbsolve", run_name="__main__", alter_sys=True)
except SystemExit as done:
    code = done.code
print("\\nexit", code, "loaded", *sorted(m for m in sys.modules
      if m.split(".")[0] in {heavy!r} or m.startswith("kbsolve.")))
"""


@pytest.mark.parametrize("argv", [["--help"], ["list", "gpus", "--help"], ["kb", "--help"],
                                  ["audit", "--help"]])
def test_help_imports_no_heavy_library(argv, tmp_path):
    done = subprocess.run([sys.executable, "-c", LOADED.format(heavy=set(HEAVY)), *argv],
                          capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "Usage: kbsolve" in done.stdout
    last = done.stdout.rstrip().splitlines()[-1].split()
    assert last[:3] == ["exit", "0", "loaded"], done.stdout
    loaded = last[3:]
    assert not [m for m in loaded if m.split(".")[0] in HEAVY], loaded
    # nor the layers that pull them in: the DSL, the solver, the audit, the linter
    assert not [m for m in loaded if under(m, "kbsolve.dsl", "kbsolve.solver", "kbsolve.audit",
                                           "kbsolve.lint", "kbsolve.catalog")], loaded


def test_python_dash_m_kbsolve_runs(tmp_path):
    done = subprocess.run([sys.executable, "-m", "kbsolve", "--help"], capture_output=True,
                          text=True, cwd=tmp_path, timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("Usage: kbsolve"), done.stderr


def test_importing_the_api_is_cheap(tmp_path):
    code = ("import sys, kbsolve.api, kbsolve.render; print(*sorted(m for m in sys.modules "
            f"if m.split('.')[0] in {set(HEAVY)!r} or m.startswith('kbsolve.dsl')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=tmp_path, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [], done.stdout


def test_a_cached_plan_loads_neither_the_checker_nor_networkx(tmp_path):
    """A plan from a warm KB cache needs the program and the search, not the
    checker (lark, networkx): the cold CLI's cost."""
    env = {**os.environ, "KBSOLVE_CACHE_DIR": str(tmp_path / "cache")}
    code = ("import sys; from kbsolve import api; "
            "api.solve({'gpus': '1xA100', 'model': 'sd3.5-medium', 'top': 0}); "
            "print(*sorted(m for m in sys.modules if m.split('.')[0] in ('networkx', 'lark') "
            "or m == 'kbsolve.dsl.check'))")
    for _ in range(2):  # the first fills the cache
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              cwd=tmp_path, env=env, timeout=120)
        assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [], done.stdout
