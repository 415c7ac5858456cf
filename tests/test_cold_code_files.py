"""The KB cache's key reads the front end's code files (catalog/knowledge.py _code_files):
listed by name without a glob, they are the files, in the order, sorted(glob("*.py")) gave."""

from __future__ import annotations

from pathlib import Path

from kbsolve.catalog import knowledge


def test_the_code_files_are_those_a_glob_lists(tmp_path, monkeypatch):
    package = Path(knowledge.__file__).resolve().parent.parent
    globbed = [path for folder in ("dsl", "catalog")
               for path in sorted((package / folder).glob("*.py"))]
    listed = knowledge._code_files()
    assert listed[:len(globbed)] == globbed
    assert listed[len(globbed):] == [package / "diagnostic_codes.py", package / "roles.py"]
    assert package / "dsl" / "kb.py" in listed and package / "catalog" / "knowledge.py" in listed


def test_only_python_files_are_listed(tmp_path, monkeypatch):
    for folder in ("dsl", "catalog"):
        (tmp_path / folder).mkdir()
        for name in ("b.py", "a.py", "notes.txt", "c.pyc", "d.py.orig"):
            (tmp_path / folder / name).write_text("")
    fake = tmp_path / "catalog" / "knowledge.py"
    monkeypatch.setattr(knowledge, "__file__", str(fake))
    names = [path.relative_to(tmp_path).as_posix() for path in knowledge._code_files()]
    assert names == ["dsl/a.py", "dsl/b.py", "catalog/a.py", "catalog/b.py",
                     "diagnostic_codes.py", "roles.py"]
