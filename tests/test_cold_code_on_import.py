"""Modules that write functions as text as they load (cli/__init__.py CODE_CACHED_ON_IMPORT)
compile them through the code cache in the command's process (codecache.enable_on_import):
the same functions, their module loaded from its own file as ever; a program importing
kbsolve keeps the builtins."""

from __future__ import annotations

import os
import subprocess
import sys

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
