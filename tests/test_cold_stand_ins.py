"""What the command's process start (cli/__init__.py start) changes and what it must not:
the `platform` stand-in (api.without_platform) answers as the real module, a cached plan
never loads the real one, a program importing kbsolve keeps its own; the dataclasses
kbsolve.api's imports build are compiled through the code cache."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

# names of `platform` whose answers a process gives the same every call
PLATFORM_NAMES = ("system", "machine", "release", "python_implementation",
                  "python_version", "uname")


def _run(code: str, tmp_path, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=tmp_path, env={**os.environ, **env}, timeout=120)


def _answers(prefix: str) -> str:
    return (f"{prefix}import platform, uuid; "
            f"print(repr([getattr(platform, n)() for n in {PLATFORM_NAMES!r}]))")


def test_the_command_s_platform_answers_as_the_real_module(tmp_path):
    command = _run(_answers("from kbsolve.cli import start; start(); "), tmp_path)
    real = _run(_answers(""), tmp_path)
    assert command.returncode == 0 and real.returncode == 0, command.stderr + real.stderr
    assert command.stdout == real.stdout
    assert "Linux" in real.stdout or sys.platform != "linux"


def test_uuid_reads_platform_system_without_loading_platform(tmp_path):
    done = _run("import sys; from kbsolve.cli import start; start(); import uuid, platform; "
                "from kbsolve import api; "
                "print(uuid._LINUX == (sys.platform == 'linux'), sorted(api.LOADED_ASIDE), "
                "'__file__' in vars(platform)); "
                "platform.python_implementation(); print(sorted(api.LOADED_ASIDE))", tmp_path)
    assert done.returncode == 0, done.stderr
    expected_first = "True [] False" if sys.platform == "linux" else "True ['platform'] False"
    assert done.stdout.splitlines() == [expected_first, "['platform']"]


def test_a_program_importing_kbsolve_keeps_its_platform(tmp_path):
    library = _run("import kbsolve.api, platform; print(platform.__file__.endswith('.py'))",
                   tmp_path)
    late = _run("import sys, platform; from kbsolve import api; api.without_platform(); "
                "print(api._PlatformOnUse in sys.meta_path, "
                "sys.modules['platform'].__file__.endswith('.py'))", tmp_path)
    assert library.returncode == 0 and late.returncode == 0, library.stderr + late.stderr
    assert library.stdout.split() == ["True"]
    assert late.stdout.split() == ["False", "True"]


@pytest.mark.skipif(sys.platform != "linux", reason="the stand-in answers itself on Linux")
def test_a_cached_plan_never_loads_the_real_platform(tmp_path, seed_kb_cache):
    """The command's plan (KB, search, explanation, render) reads nothing of `platform` but
    uuid's system(). The KB's entry is seeded: the child reads it instead of building it."""
    done = _run("import sys\n"
                "from kbsolve.cli import start; start()\n"
                "from kbsolve import api\n"
                "from kbsolve.cli.plain import plain_params, plan_command\n"
                "code = plan_command(**plain_params(['--gpus', '8xA100', '--model', 'wan14b']))\n"
                "print(code, sorted(api.LOADED_ASIDE), file=sys.stderr)",
                tmp_path, KBSOLVE_CACHE_DIR=str(seed_kb_cache(tmp_path / "cache")))
    assert done.returncode == 0, done.stderr
    assert done.stderr.split()[-2:] == ["0", "[]"]
    assert "wan2.1-t2v-14b" in done.stdout


def test_the_api_s_dataclasses_are_compiled_through_the_code_cache(tmp_path):
    """start() enables the code cache before kbsolve.api loads, so the dataclasses its
    imports build (diagnostics.py) take their methods' code from it; importing kbsolve.cli
    loads neither."""
    done = _run("import sys, kbsolve.cli as cli\n"
                "print('kbsolve.api' in sys.modules, 'kbsolve.diagnostics' in sys.modules)\n"
                "cli.start()\n"
                "from kbsolve import codecache\n"
                "from kbsolve.diagnostics import Diagnostic, Span\n"
                "made, todo = [], list(codecache.CACHE.made.values())\n"
                "while todo:\n"
                "    made.append(todo.pop())\n"
                "    todo += [c for c in made[-1].co_consts if isinstance(c, type(made[-1]))]\n"
                "print(Span.__init__.__code__ in made, Diagnostic.__init__.__code__ in made)",
                tmp_path, KBSOLVE_CACHE_DIR=str(tmp_path / "cache"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["False False", "True True"]
