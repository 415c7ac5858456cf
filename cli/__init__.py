"""The kbsolve command (cli/main.py). `start` tunes the process the command owns; a
program that imports kbsolve keeps its own settings."""

import gc
import importlib
import os
import sys

from kbsolve import codecache

# Collector thresholds of the command's process (tests/conftest.py sets the same for the
# suite): a cold plan allocates a few hundred thousand acyclic objects (modules, the
# search's tuples), and Python's default (700, 10, 10) ran ~130 young and ~10 middle
# passes over them, 60-100 ms of a 600 ms `kbsolve --gpus 8xA100 --model wan14b`
# (issue 25). A pass every 100,000 allocations still frees cycles, in long searches and
# in `kbsolve mcp` alike.
GC_THRESHOLDS = (100_000, 50, 100)
# modules whose exec, eval and compile go through the code cache in the command's process,
# each enabled before the next is imported (collections: namedtuple's __new__, of which
# dataclasses' imports build ~10)
CODE_CACHED = ("collections", "dataclasses", "typing")
# modules that write functions as text as they load (pydantic imports this one): their exec
# through the code cache too, from their first line
CODE_CACHED_ON_IMPORT = ("typing_inspection.typing_objects",)
SHELL_COMPLETION = "_KBSOLVE_COMPLETE"  # set, click answers the shell (cli/main.py's command)


def start() -> None:
    """Before the command's imports: the program's process settings."""
    gc.set_threshold(*GC_THRESHOLDS)
    # the methods dataclasses writes and typing's forward references, compiled once per
    # text and kept beside the KB cache (codecache.py; exit_now saves them as the command
    # ends); first, as kbsolve.api's own imports build dataclasses (diagnostics.py)
    for name in CODE_CACHED:
        codecache.enable(importlib.import_module(name))
    codecache.enable_on_import(*CODE_CACHED_ON_IMPORT)
    from kbsolve import api
    api.without_pydantic_plugins()  # nor importlib.metadata to look for them
    api.without_numpy_docstrings()  # the docs of numpy's C objects: no help is printed
    api.without_numpy_linalg()  # loaded on first use: a plan calls none of it
    api.without_openssl()  # pydantic's `secrets` read on first use
    api.without_platform()  # uuid's platform.system() answered without it


def run() -> int:
    """The `kbsolve` script (pyproject's entry point) and `python -m kbsolve`: the process
    settings first, then the command's imports, so that click's forward references and the
    rest are compiled through the code cache (an entry point at cli/main.py's main ran its
    ~60 compilations before `start`); the command in a roomy frame (api.with_room). A plain
    plan's argv (cli/plain.py) runs without click."""
    start()
    from kbsolve import api
    return api.with_room(_command)


def _command() -> int:
    from kbsolve.cli.plain import plain_params
    params = None if os.environ.get(SHELL_COMPLETION) else plain_params(sys.argv[1:])
    if params is None:  # click's to read
        from kbsolve.cli.main import main
        return main()
    from kbsolve.cli.plain import plan_command
    from kbsolve.cli.run import exit_now, guarded_plain
    code = guarded_plain(lambda: plan_command(**params))
    exit_now(code)
    return code
