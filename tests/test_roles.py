"""Roles (roles.py, docs/dsl.md 5.20): the KB names Python relies on are declared in the
KB and read through the role, never spelled in the package."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from kbsolve import roles
from kbsolve.diagnostics import KbError
from kbsolve.catalog import load_kb
from package_sources import package_sources

PACKAGE = Path(roles.__file__).resolve().parent

# (file, name): why the package may still spell this KB name. Each is a name Python
# owns itself, not a lookup of the KB entity.
ALLOWED = {
    ("bench/fit.py", "error_band"): "reads the stored breakdown of bench/data rows, keyed by "
                                    "the term names the rows were written with",
    ("catalog/hf.py", "params"): "hf_configs.yaml's own count term (a side file's key), not the "
                                 "KB's let",
}
TABLES = {"lets", "memory", "options", "speed", "work", "rules", "warnings", "optins", "facts"}


@pytest.fixture(scope="module")
def kb():
    return load_kb()


def _entity_names(kb) -> set[str]:
    return {r.target.rsplit(".", 1)[-1] for r in kb.roles.values() if r.target}


def _spellings(tree: ast.AST, names: set[str]):
    """(line, name) of every place the code spells a KB name: a module constant holding
    it, an f-string ending in `.NAME`, or a lookup `<kb table>.get("...NAME")`/`[...]`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            for part in node.values:
                if isinstance(part, ast.Constant) and isinstance(part.value, str):
                    tail = part.value.rsplit(".", 1)[-1]
                    if part.value.startswith(".") and tail in names:
                        yield node.lineno, tail
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and \
                node.value.value in names and any(isinstance(t, ast.Name) and t.id.isupper()
                                                  for t in node.targets):
            yield node.lineno, node.value.value
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            tail = node.value.rsplit(".", 1)[-1]
            if "." in node.value and tail in names and node.value.split(".")[0] != "query":
                yield node.lineno, tail


def _table_lookups(tree: ast.AST, names: set[str]):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr == "get" and isinstance(node.func.value, ast.Attribute) and \
                node.func.value.attr in TABLES and node.args and \
                isinstance(node.args[0], ast.Constant) and node.args[0].value in names:
            yield node.lineno, node.args[0].value


def test_no_kb_name_spelled_in_the_package(kb):
    names = _entity_names(kb)
    assert {"batch_geometry", "global_batch", "default_global_batch", "error_band"} <= names
    found = []
    for path, rel in package_sources(PACKAGE):
        if rel == "roles.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for line, name in sorted({*_spellings(tree, names), *_table_lookups(tree, names)}):
            if (rel, name) not in ALLOWED:
                found.append(f"{rel}:{line}: {name}")
        text = path.read_text(encoding="utf-8")
        for name in names:
            if (rel, name) in ALLOWED:
                assert f'"{name}"' in text, f"stale exception {rel} {name}"
    assert found == [], "KB names spelled in Python instead of read through a role: " + \
        ", ".join(found)


def test_the_grep_catches_the_old_spellings():
    old = ('GEOMETRY_LET = "batch_geometry"\n'
           'x = kb.lets.get(f"{fw}.global_batch")\n'
           'y = kb.memory.get("error_band")\n')
    names = {"batch_geometry", "global_batch", "error_band"}
    tree = ast.parse(old)
    assert sorted({*_spellings(tree, names), *_table_lookups(tree, names)}) == \
        [(1, "batch_geometry"), (2, "global_batch"), (3, "error_band")]


def test_every_role_is_declared_where_python_reads_it(kb):
    for role in roles.ROLES:
        if role.core:
            assert roles.declared(kb, None, role.name) is not None, role.name
        for file in role.used_in:
            text = (PACKAGE / file).read_text(encoding="utf-8")
            assert f'"{role.name}"' in text or f"'{role.name}'" in text or \
                role.name.startswith(roles.PROBE_PREFIX), (role.name, file)
    for fw in ("llamafactory", "flow-factory", "torchtitan", "diffusers"):
        assert roles.let(kb, fw, "batch_geometry").key == f"{fw}.batch_geometry"
    for fw in kb.frameworks:
        term = roles.term(kb, fw, "error_band")
        assert term is not None and term.location == "gpu", fw
    assert roles.let(kb, "pytorch", "batch_geometry") is None
    assert roles.enum(kb, "optin_groups").values == ("numerics", "recipe", "library")
    assert roles.value(kb, "recipe_group") == "recipe"


def test_shapes_come_from_the_kb(kb):
    assert roles.probes(kb)["nodes"] == (1, 2, 16)
    assert roles.values(kb, "hardware_fix_multiples") == (2, 4, 8, 16, 32, 64)


def _pack(tmp_path, text):
    (tmp_path / "a.kb").write_text(text, encoding="utf-8")
    with pytest.raises(KbError) as info:
        load_kb([tmp_path], use_cache=False)
    return [(d.code, d.span.line) for d in info.value.diagnostics]


def test_a_pack_that_redeclares_a_core_role_is_a_duplicate(tmp_path):
    text = 'module pack.a\n\nrole probe_nodes = [4] {\n  because "x"\n  source "seed:1"\n}\n'
    assert _pack(tmp_path, text) == [("duplicate", 3)]


def test_a_role_needs_a_reason(tmp_path):
    text = 'module pack.a for pytorch\n\nrole global_batch = let data_parallel\n'
    codes = {c for c, _ in _pack(tmp_path, text)}
    assert {"no-because", "missing-role"} <= codes
