"""Modules that write functions as text as they load (cli/__init__.py CODE_CACHED_ON_IMPORT)
compile them through the code cache in the command's process (codecache.enable_on_import):
the same functions, their module loaded from its own file as ever; a program importing
kbsolve keeps the builtins."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

CHECKS = ("import typing, inspect\n"
          "from typing_inspection import typing_objects as t\n"
          "print(t.is_union(typing.Union), t.is_literal(typing.Literal), t.is_any(int), "
          "t.is_typevar(typing.TypeVar('T')), t.is_typevar(int), "
          "t.is_union.__code__.co_filename, len(inspect.getsource(t)) > 1000, "
          "t.__file__ == t.__spec__.origin)\n")
FROM_CACHE = ("from kbsolve import codecache\n"
              "made, todo = [], list(codecache.CACHE.made.values())\n"
              "while todo:\n"
              "    made.append(todo.pop())\n"
              "    todo += [c for c in made[-1].co_consts if isinstance(c, type(made[-1]))]\n"
              "print(t.is_union.__code__ in made, t.is_typevar.__code__ in made, "
              "'exec' in vars(t))\n")


def _run(code: str, tmp_path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=tmp_path, env={**os.environ, "KBSOLVE_CACHE_DIR": str(tmp_path)},
                          timeout=120)


def test_the_command_compiles_typing_inspection_s_functions_through_the_cache(tmp_path):
    start = "from kbsolve.cli import start; start()\n"
    first = _run(start + CHECKS + FROM_CACHE + "codecache.save()\n", tmp_path)
    again = _run(start + CHECKS + FROM_CACHE, tmp_path)  # now read from the saved file
    plain = _run(CHECKS, tmp_path)
    assert first.returncode == again.returncode == plain.returncode == 0, (
        first.stderr + again.stderr + plain.stderr)
    assert first.stdout.splitlines()[0] == plain.stdout.strip() == again.stdout.splitlines()[0]
    assert plain.stdout.split()[:5] == ["True", "True", "False", "True", "False"]
    assert first.stdout.splitlines()[1] == again.stdout.splitlines()[1] == "True True True"


def test_a_program_importing_kbsolve_keeps_the_builtins(tmp_path):
    library = _run("import kbsolve.api, kbsolve.cli, pydantic\n" + CHECKS
                   + "print('exec' in vars(t))\n", tmp_path)
    late = _run("import pydantic\nfrom kbsolve.cli import start; start()\n" + CHECKS
                + "print('exec' in vars(t))\n", tmp_path)
    assert library.returncode == late.returncode == 0, library.stderr + late.stderr
    assert library.stdout.splitlines()[1] == late.stdout.splitlines()[1] == "False"



def test_the_command_s_namedtuples_are_compiled_through_the_cache(tmp_path):
    """collections is enabled before dataclasses is imported: the namedtuples of its imports
    (inspect's) and later ones take their __new__ from the cache, and build as ever."""
    made = FROM_CACHE.split("print(")[0]
    build = ("import inspect, collections\n"
             "Point = collections.namedtuple('Point', 'x y', defaults=(2,))\n")
    show = "print(Point(1), Point(1, y=3), Point._fields, inspect.ArgInfo(1, 2, 3, 4))\n"
    command = _run("from kbsolve.cli import start; start()\n" + build + made +
                   "print(inspect.ArgInfo.__new__.__code__ in made, "
                   "Point.__new__.__code__ in made)\n" + show, tmp_path)
    library = _run(build + show, tmp_path)
    assert command.returncode == library.returncode == 0, command.stderr + library.stderr
    assert command.stdout == "True True\n" + library.stdout


def test_cached_eval_evaluates_as_the_builtin(tmp_path, monkeypatch):
    import builtins

    from kbsolve import codecache
    monkeypatch.setattr(codecache, "CACHE", codecache.CodeCache(tmp_path / "code.marshal"))
    x = 5
    for source in ("x + 1", "  \tx * 2", "lambda a, b=2: (a, b)", "[i for i in range(x)]"):
        ours, theirs = codecache.cached_eval(source), builtins.eval(source)
        assert ours == theirs or (callable(ours) and ours(1) == theirs(1)), source
        assert codecache.cached_eval(source, {"x": 1}) == builtins.eval(source, {"x": 1}) \
            or callable(ours)
    assert codecache.cached_eval(compile("x", "<s>", "eval")) == x
    [key] = [key for key in codecache.CACHE.made if key[0] == "x * 2"]  # spaces stripped
    assert key[1:3] == ("<string>", "eval")
    assert codecache.CACHE.made[key] == compile("x * 2", "<string>", "eval", key[3], True)
    for bad in ("x +", "\0"):
        with pytest.raises(type(_raised(builtins.eval, bad))):
            codecache.cached_eval(bad)


def _raised(function, *args):
    try:
        function(*args)
    except Exception as error:  # noqa: BLE001 - the builtin's error, to compare with
        return error
    raise AssertionError("no error")
