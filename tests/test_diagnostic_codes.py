"""The registry of diagnostic codes (diagnostic_codes.py) is the whole truth: every
code raised anywhere in the package is registered, at the severity it is raised
and with the files that raise it, every registered code is raised, and docs/dsl.md's
table is generated from it."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

from kbsolve.cli.main import main
from kbsolve.diagnostic_codes import BY_NAME, CODES, ERROR, GROUPS, WARNING, silenceable
from package_sources import package_sources

ROOT = Path(__file__).resolve().parents[1]
DOC_START = "<!-- codes: `kbsolve kb codes` writes this part -->\n"
DOC_END = "<!-- end of codes -->"


def _severity(call: ast.Call, callee: str) -> str:
    if callee.endswith(".warning"):
        return WARNING
    if callee.endswith(".error"):
        return ERROR
    given = [k.value for k in call.keywords if k.arg == "severity"]
    if len(call.args) >= 3:
        given.append(call.args[2])
    if not given:
        return ERROR  # Diagnostic's default
    assert isinstance(given[0], ast.Constant), ast.unparse(call)
    return given[0].value


def raised() -> dict[str, dict[str, set[str]]]:
    """code -> {"files": ..., "severities": ...}, read from the package's syntax: the
    `code=` of every Diagnostic(...) and every sink's .error(...) / .warning(...)."""
    found: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for path, rel in package_sources(ROOT):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), rel)):
            if not isinstance(node, ast.Call):
                continue
            callee = ast.unparse(node.func)
            if not (callee == "Diagnostic" or callee.endswith((".error", ".warning"))):
                continue
            for keyword in node.keywords:
                if keyword.arg != "code":
                    continue
                names = [n.value for n in ast.walk(keyword.value)
                         if isinstance(n, ast.Constant) and isinstance(n.value, str)]
                assert names, f"{rel}:{node.lineno}: a code must be written as a literal"
                for name in names:
                    found[name]["files"].add(rel)
                    found[name]["severities"].add(_severity(node, callee))
    return found


def test_the_scan_finds_codes_where_they_are_raised():
    """The scan itself sees both kinds of call (so the checks below can fail)."""
    found = raised()
    assert "program/evaluate.py" in found["missing-fact"]["files"]  # Diagnostic(...)
    assert "dsl/resolve.py" in found["arity"]["files"]  # self.sink.error(...)
    assert found["unused"]["severities"] == {WARNING}
    assert len(found) >= 60


def test_every_code_raised_is_registered_as_raised():
    found = raised()
    unregistered = sorted(set(found) - set(BY_NAME))
    assert not unregistered, f"add to diagnostic_codes.py: {unregistered}"
    wrong = {name: (sorted(found[name]["severities"]), BY_NAME[name].severity)
             for name in found if found[name]["severities"] != {BY_NAME[name].severity}}
    assert not wrong, f"raised at another severity than registered (one code, one " \
                      f"severity): {wrong}"
    places = {name: (sorted(found[name]["files"]), sorted(BY_NAME[name].raised_in))
              for name in found if found[name]["files"] != set(BY_NAME[name].raised_in)}
    assert not places, f"raised_in differs from where the code is raised: {places}"


def test_every_registered_code_is_raised():
    never = sorted(set(BY_NAME) - set(raised()))
    assert not never, f"registered but raised nowhere: {never}"


def test_the_registry_is_well_formed():
    assert len(BY_NAME) == len(CODES)
    for code in CODES:
        assert re.fullmatch(r"[a-z]+(-[a-z]+)*", code.name), code.name
        assert code.severity in (ERROR, WARNING), code.name
        assert code.meaning and "\n" not in code.meaning and len(code.meaning) <= 120, code.name
        assert code.example.startswith("`"), code.name
        assert all((ROOT / f).is_file() for f in code.raised_in), code.name
    assert [c.group for c in CODES] == sorted((c.group for c in CODES), key=GROUPS.index), \
        "each group's codes sit together"
    assert "unused" in silenceable() and "cycle" not in silenceable()


def test_docs_table_is_generated_from_the_registry(capsys):
    doc = (ROOT / "docs" / "dsl.md").read_text(encoding="utf-8")
    assert DOC_START in doc and DOC_END in doc
    published = doc.split(DOC_START, 1)[1].split(DOC_END, 1)[0]
    capsys.readouterr()
    assert main(["kb", "codes"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n| `") == len(CODES)
    assert published == out, "regenerate docs/dsl.md's table of codes (see the doc)"
