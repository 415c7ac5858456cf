"""The layers hold, every arrow of them, computed from the imports.

The architecture, bottom to top, as the data flows: text -> AST -> checked KB ->
linked program -> search -> plan -> render, with the audit and the linter on the
program, the api over all of it and the front ends (the CLI, the MCP server) over
the api. ARCHITECTURE below is that order written once as the imports each part
of kbsolve may make; an arrow it does not list is a never-arrow. The graph is the
AST of every module of the package (function-level and typing-only imports
included), and it has no cycle. Besides: the renderers read data models and
touch no solver, and `kbsolve --help` imports none of the heavy libraries."""

from __future__ import annotations

import ast
import functools
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("z3", "lark", "pydantic", "yaml")
PACKAGE = "kbsolve"  # the import name every shipped module lives under


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
            if base == PACKAGE:
                found += [(f"kbsolve.{alias.name}", node.lineno, only) for alias in node.names]
            else:
                found.append((base, node.lineno, only))
        elif (isinstance(node, ast.Call) and ast.unparse(node.func).endswith("import_module")
              and node.args and isinstance(node.args[0], ast.Constant)):
            found.append((str(node.args[0].value), node.lineno, only))
    return found


def ours(module: str) -> bool:
    return module == PACKAGE or module.startswith(PACKAGE + ".")


def under(module: str, *roots: str) -> bool:
    return any(module == root or module.startswith(root + ".") for root in roots)


# ---- the architecture: what each part of kbsolve may import ----------------------------
# A part is a package (dsl/, catalog/, ...) or a top-level module (api.py, ...); `kbsolve`
# is the package's own __init__ (the lazy facade over the api). Bottom to top:
ARCHITECTURE: dict[str, set[str]] = {
    # leaves
    "version": set(),
    "diagnostics": set(),
    "diagnostic_codes": set(),  # the registry of codes: data (docs/dsl.md's table)
    "roles": set(),  # the registry of roles Python reads through the KB (docs/dsl.md 5.20)
    "codecache": set(),  # compiled generated code kept across the command's processes
    "collector": set(),  # the garbage collector paused around work that makes no cycles
    # the results as data (plan, estimate, audit report, fix, deep check): pydantic models
    # and dataclasses that every layer above fills or reads; a leaf over the diagnostics
    "results": {"diagnostics"},
    # text -> AST -> checked rules and the vocabulary: the language, which knows nothing of
    # the catalogs, the program, the search or anything above
    "dsl": {"diagnostics", "diagnostic_codes", "roles", "codecache", "collector"},
    # the checked KB: the rules with the catalogs validated against the language's
    # vocabulary (the catalog sits above the language)
    "catalog": {"dsl", "diagnostics", "version"},
    # the linked program: facts, evaluation, tables, a query's problem
    "program": {"catalog", "dsl", "diagnostics", "roles", "codecache"},
    # the search: branch and bound, Z3 proofs, cores, fixes
    "solver": {"results", "program", "dsl", "diagnostics", "collector", "codecache"},
    # the plan built from a search's outcome: orchestration, sections, explanations,
    # alternatives, emission
    "plan": {"solver", "results", "program", "dsl", "diagnostics", "roles", "collector"},
    # the audit and the linter use the program and the plan (best plans, fixes, KB tests;
    # the linter's deep check and KB test runner also the search); neither imports the other
    "audit": {"plan", "results", "program", "catalog", "dsl", "diagnostics", "roles"},
    "lint": {"plan", "results", "solver", "program", "catalog", "dsl", "diagnostics",
             "roles"},
    # every result as text: the results' data models only (test_render_reads_data_models_only)
    "render": {"results", "diagnostics"},
    # the one door
    "api": {"render", "audit", "lint", "plan", "solver", "results", "program", "catalog",
            "dsl", "diagnostics", "diagnostic_codes", "codecache"},
    # the front ends: the CLI imports only the api and render, and starts the other front
    # end (`kbsolve mcp`, `kbsolve skill`); the MCP server reads the api and the data models
    # its tools' schemas name; the CLI enables the code cache (a leaf) before the api loads
    "cli": {"api", "render", "mcp_server", "codecache"},
    "mcp_server": {"api", "render", "results", "diagnostics"},
    "__main__": {"cli"},
    "kbsolve": {"api", "version"},
}
PARTS = sorted(ARCHITECTURE)
# import nothing of ours
LEAVES = ("version", "diagnostics", "diagnostic_codes", "roles", "codecache", "collector")


def part_of(module: str) -> str:
    """The part a module of ours belongs to (`kbsolve.dsl.load` -> dsl, `kbsolve.api`
    -> api); a name the package's __init__ defines (`kbsolve.__version__`) -> kbsolve."""
    name = module.split(".")[1] if module.count(".") else ""
    if name and ((ROOT / name / "__init__.py").is_file() or (ROOT / f"{name}.py").is_file()):
        return name
    return PACKAGE


def package_files() -> dict[str, list[tuple[Path, str]]]:
    """part -> [(file, its package for relative imports)]: every module kbsolve ships."""
    parts: dict[str, list[tuple[Path, str]]] = {}
    for path in sorted(ROOT.glob("*.py")):
        part = PACKAGE if path.stem == "__init__" else path.stem
        parts.setdefault(part, []).append((path, PACKAGE))
    for init in sorted(ROOT.glob("*/__init__.py")):
        folder = init.parent
        if folder.name in ("tests", "bench"):  # not shipped (pyproject's packages)
            continue
        for path in sorted(folder.rglob("*.py")):
            package = ".".join((PACKAGE, *path.parent.relative_to(ROOT).parts))
            parts.setdefault(folder.name, []).append((path, package))
    return parts


@functools.lru_cache(maxsize=1)
def import_graph() -> dict[tuple[str, str], tuple[str, ...]]:
    """(part, part it imports) -> where, `file:line`, for every import between parts."""
    arrows: dict[tuple[str, str], list[str]] = {}
    for part, files in package_files().items():
        for path, package in files:
            for module, line, _ in imports(path, package):
                if ours(module) and part_of(module) != part:
                    where = f"{path.relative_to(ROOT)}:{line}: {module}"
                    arrows.setdefault((part, part_of(module)), []).append(where)
    return {arrow: tuple(found) for arrow, found in arrows.items()}


def cycles(arrows) -> list[list[str]]:
    """The strongly connected parts (Tarjan) of more than one part."""
    succ: dict[str, list[str]] = {}
    for src, dst in arrows:
        succ.setdefault(src, []).append(dst)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in succ.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted({n for arrow in arrows for n in arrow}):
        if node not in index:
            visit(node)
    return found


def test_the_architecture_names_every_part_kbsolve_ships():
    """A new package or top-level module takes its place in ARCHITECTURE first."""
    shipped = set(package_files())
    assert shipped == set(ARCHITECTURE), (sorted(shipped - set(ARCHITECTURE)),
                                          sorted(set(ARCHITECTURE) - shipped))
    listed = {name.split(".", 1)[1] for name in re.findall(
        r'"(kbsolve\.[a-z_]+)"', (ROOT / "pyproject.toml").read_text(encoding="utf-8"))}
    assert listed == {part for part, files in package_files().items()
                      if (ROOT / part / "__init__.py").is_file()}


def test_the_architecture_is_a_layer_order():
    """The table itself has no cycle, and no part imports itself through it."""
    arrows = [(src, dst) for src, dsts in ARCHITECTURE.items() for dst in dsts]
    assert all(dst in ARCHITECTURE for _, dst in arrows)
    assert all(src != dst for src, dst in arrows)
    assert cycles(arrows) == []


@pytest.mark.parametrize("src", PARTS)
def test_every_arrow_is_in_the_architecture(src):
    """Each import of `src` goes to a part the architecture lets it read; any other
    arrow is a never-arrow (the parameter names the importing part)."""
    graph = import_graph()
    assert any(s == src for s, _ in graph) or src in LEAVES, \
        f"{src} imports nothing of kbsolve: is it still a part?"
    bad = [where for (s, dst), found in sorted(graph.items()) if s == src
           and dst not in ARCHITECTURE[src] for where in found]
    assert not bad, (f"{src} may import only {sorted(ARCHITECTURE[src]) or 'nothing'} "
                     f"of kbsolve (tests/test_layers.py ARCHITECTURE):\n" + "\n".join(bad))


def test_there_is_no_import_cycle_between_parts():
    assert cycles(import_graph()) == []


def test_the_graph_sees_what_it_checks():
    """The walk finds a function-level import (api -> dsl), a typing-only one (render ->
    results); a forbidden arrow, once made, closes a cycle it reports."""
    graph = import_graph()
    assert ("api", "dsl") in graph and ("cli", "api") in graph
    assert ("render", "results") in graph
    made = {**graph, ("dsl", "solver"): ("dsl/x.py:1: kbsolve.solver",)}
    assert any({"dsl", "catalog", "program", "solver"} <= set(c) for c in cycles(made))
    assert cycles({("a", "b"): (), ("b", "c"): (), ("c", "a"): (), ("c", "d"): ()}) == \
        [["a", "b", "c"]]


# what a renderer may import when it runs: itself, diagnostics, the data models
RENDER_MAY_IMPORT = ("kbsolve.render", "kbsolve.diagnostics", "kbsolve.results")


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
import os, runpy, sys
sys.argv[0] = "kbsolve"  # the program name click prints; the module runs from this checkout
os._exit = sys.exit  # the command ends the process itself (cli/run.py exit_now): not here
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
    # nor the layers that pull them in: the DSL, the search, the plan, the audit, the linter
    assert not [m for m in loaded if under(m, "kbsolve.dsl", "kbsolve.solver", "kbsolve.plan",
                                           "kbsolve.audit", "kbsolve.lint",
                                           "kbsolve.catalog")], loaded


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
    env = dict(os.environ)  # the test's own cache dir (conftest), seeded with the shipped KB
    warm = any(Path(env["KBSOLVE_CACHE_DIR"]).glob("kb-*.pickle"))
    code = ("import sys; from kbsolve import api; "
            "api.solve({'gpus': '1xA100', 'model': 'sd3.5-medium', 'top': 0}); "
            "print(*sorted(m for m in sys.modules if m.split('.')[0] in ('networkx', 'lark') "
            "or m == 'kbsolve.dsl.check'))")
    for _ in range(1 if warm else 2):  # else the first fills the cache
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              cwd=tmp_path, env=env, timeout=120)
        assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [], done.stdout
