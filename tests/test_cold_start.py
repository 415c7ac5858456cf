"""What a cold `kbsolve` does to start and end fast: one BLAS thread unless the user
chose a count, no garbage collection pass while the KB cache unpickles (and none over
the KB after), and an exit without the interpreter's teardown once the output is
flushed (bench/cold.py measures the cost)."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys

import pytest

from kbsolve.dsl import cache as kb_cache

BLAS = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")
PRINT_THREADS = ("import os, kbsolve, numpy; "
                 "print(os.environ.get('OPENBLAS_NUM_THREADS', '-'))")


def _run(code: str, tmp_path, **env) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in BLAS}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=tmp_path, env={**clean, **env}, timeout=120)


@pytest.mark.parametrize("given, expected", [
    ({}, "1"),                                # kbsolve's choice: one thread
    ({"OPENBLAS_NUM_THREADS": "3"}, "3"),     # the user's count wins
    ({"OMP_NUM_THREADS": "4"}, "-"),          # OpenBLAS reads this one too: left alone
    ({"GOTO_NUM_THREADS": "2"}, "-"),
])
def test_numpy_starts_one_blas_thread_unless_the_user_chose(given, expected, tmp_path):
    done = _run(PRINT_THREADS, tmp_path, **given)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [expected]


def test_numpy_already_imported_is_left_alone(tmp_path):
    done = _run("import numpy, os, kbsolve; print(os.environ.get('OPENBLAS_NUM_THREADS', '-'))",
                tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["-"]


class _Counted:
    """Asks for one collection while it is unpickled; the test's callback sees
    whether automatic collection was on at that moment."""

    def __reduce__(self):
        return (_Counted._built, ())

    @staticmethod
    def _built():
        gc.collect(0)  # a pass that would run anyway past the allocation threshold
        return _Counted()


def test_the_cache_unpickles_without_collection_and_freezes_the_kb(tmp_path, monkeypatch):
    monkeypatch.setattr(kb_cache, "_LOADED", type(kb_cache._LOADED)())
    store = kb_cache.KbCache(tmp_path)
    value = {"objects": [[i, str(i)] for i in range(20_000)], "marker": _Counted()}
    store.put("d" * 64, value)
    monkeypatch.setattr(kb_cache, "_LOADED", type(kb_cache._LOADED)())
    seen = []

    def watch(phase, info):
        if phase == "start":
            seen.append(gc.isenabled())

    frozen = gc.get_freeze_count()
    assert gc.isenabled()
    gc.callbacks.append(watch)
    try:
        loaded = store.get("d" * 64)
    finally:
        gc.callbacks.remove(watch)
    assert loaded["objects"][-1] == [19_999, "19999"]
    assert seen == [False]  # the one pass the payload asked for ran with automatic gc off
    assert gc.isenabled()  # and the collector is back on
    assert gc.get_freeze_count() >= frozen + 20_000  # the KB's objects are out of its way


def test_a_collector_the_caller_turned_off_stays_off(tmp_path, monkeypatch):
    monkeypatch.setattr(kb_cache, "_LOADED", type(kb_cache._LOADED)())
    store = kb_cache.KbCache(tmp_path)
    store.put("e" * 64, [1, 2, 3])
    monkeypatch.setattr(kb_cache, "_LOADED", type(kb_cache._LOADED)())
    gc.disable()
    try:
        assert store.get("e" * 64) == [1, 2, 3]
        assert not gc.isenabled()
    finally:
        gc.enable()


EXIT = """
import atexit, sys
atexit.register(lambda: print("teardown ran"))
sys.argv = [sys.executable, *{argv!r}]  # as `python -m kbsolve ARGS`
from kbsolve.cli.main import main
sys.exit(main())
"""


def test_the_command_ends_without_teardown_after_flushing_everything(tmp_path):
    """The listing is complete JSON on a pipe, the exit code is the command's, and the
    interpreter's teardown (atexit, freeing every object) never ran."""
    done = _run(EXIT.format(argv=["list", "gpus", "--format", "json"]), tmp_path,
                KBSOLVE_CACHE_DIR=os.environ["KBSOLVE_CACHE_DIR"])
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert {"A100-80G-SXM", "V100-32G"} <= {row["name"] for row in rows}
    assert "teardown ran" not in done.stdout


def test_the_command_exit_code_survives_the_fast_exit(tmp_path):
    done = _run(EXIT.format(argv=["--gpus", "8xA100", "--model", "no-such-model"]), tmp_path,
                KBSOLVE_CACHE_DIR=os.environ["KBSOLVE_CACHE_DIR"])
    assert done.returncode == 2
    assert "no-such-model" in done.stderr and "Traceback" not in done.stderr
    assert "teardown ran" not in done.stdout


def test_main_with_arguments_returns_as_a_function(capsys):
    """Called with its arguments (tests, embedding), main returns its code."""
    from kbsolve.cli.main import main
    assert main(["--help"]) == 0
    assert "Usage: kbsolve" in capsys.readouterr().out


def test_a_cached_plan_imports_no_parser_of_files_it_does_not_read(tmp_path, seed_kb_cache):
    """A plan from the warm KB cache reads no YAML file, checks no requirement line, parses
    no rule file and has its cache folder from KBSOLVE_CACHE_DIR: yaml, packaging, the
    rule AST and platformdirs stay unimported (about 60 ms of a cold start). The KB's
    entry is seeded; the first run fills the code cache."""
    env = {**os.environ, "KBSOLVE_CACHE_DIR": str(seed_kb_cache(tmp_path / "cache"))}
    code = ("import sys; from kbsolve import api; "
            "plan = api.solve({'gpus': '8xA100', 'model': 'wan14b', 'top': 0}); "
            "print(plan.status, *sorted(m for m in sys.modules if m.split('.')[0] in "
            "('yaml', 'packaging', 'platformdirs') or m == 'kbsolve.dsl.ast'))")
    for _ in range(2):  # the first fills the code cache
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              cwd=tmp_path, env=env, timeout=120)
        assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["optimal"], done.stdout


THRESHOLDS = """
import gc, os, runpy, sys
sys.argv[1:] = ["--help"]  # argv[0] becomes the module's path (runpy alter_sys)
os._exit = sys.exit  # the command ends the process itself: not here
try:
    runpy.run_module("kbsolve", run_name="__main__", alter_sys=True)
except SystemExit:
    pass
print("thresholds", *gc.get_threshold())
"""


def test_the_command_runs_with_fewer_collector_passes(tmp_path):
    """`python -m kbsolve` (and the `kbsolve` script, through main) raises the young
    generation's threshold for its own process (cli/__init__.py); a program that only
    imports kbsolve keeps its settings."""
    from kbsolve.cli import GC_THRESHOLDS
    done = _run(THRESHOLDS, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-4:] == ["thresholds", *map(str, GC_THRESHOLDS)]
    library = _run("import gc, kbsolve.cli.main, kbsolve.api; gc.set_threshold(1234, 5, 6); "
                   "kbsolve.cli.main.main(['--help']); print(*gc.get_threshold())", tmp_path)
    assert library.returncode == 0, library.stderr
    assert library.stdout.split()[-3:] == ["1234", "5", "6"]


def test_the_cached_kb_unpickles_its_tests_and_checks_on_first_use():
    """Tables no plan reads stay pickled inside the unpickled KB until read; read, they
    equal the built KB's, and a KB pickled again with them unread keeps them."""
    import pickle

    from kbsolve.api import load_kb
    from kbsolve.dsl.kb import LAZY_TABLES

    built = load_kb(use_cache=False)
    loaded = pickle.loads(pickle.dumps(built))
    assert sorted(loaded.__dict__["_pickled"]) == sorted(LAZY_TABLES) == ["checks", "tests"]
    assert not set(LAZY_TABLES) & set(loaded.__dict__)
    again = pickle.loads(pickle.dumps(loaded))  # unread: passed on still pickled
    assert sorted(again.__dict__["_pickled"]) == ["checks", "tests"]
    assert loaded.tests == built.tests and len(loaded.tests) > 100
    assert loaded.__dict__["_pickled"].keys() == {"checks"}
    assert again == built  # every field, the lazy ones read on the way
    assert not again.__dict__.get("_pickled")
    with pytest.raises(AttributeError):
        loaded.no_such_table


def test_a_kb_from_the_cache_keeps_its_pickled_tables_as_views_of_the_mapped_entry(
        tmp_path, monkeypatch):
    """The entry's file is mapped, and the KB's still-pickled tables (each scope's
    entries, tests and checks) are views of it, not copies; the KB reads as the
    built one, and pickles again under every protocol (bytes below 5)."""
    import mmap
    import pickle

    from kbsolve.api import load_kb

    built = load_kb(use_cache=False)
    monkeypatch.setattr(kb_cache, "_LOADED", type(kb_cache._LOADED)())
    store = kb_cache.KbCache(tmp_path)
    store.put("cd" * 32, built)
    monkeypatch.setattr(kb_cache, "_LOADED", type(kb_cache._LOADED)())
    loaded = store.get("cd" * 32)
    assert loaded is not built
    held = [*loaded.__dict__["_scoped"].chunks.values(), *loaded.__dict__["_pickled"].values()]
    assert len(held) > 3
    assert all(isinstance(data, memoryview) and isinstance(data.obj, mmap.mmap)
               for data in held)
    for protocol in range(2, pickle.HIGHEST_PROTOCOL + 1):
        assert pickle.loads(pickle.dumps(loaded, protocol=protocol)) == built, protocol
    assert loaded.scoped("flow-factory").rules.keys() <= built.rules.keys()
    assert loaded == built


@pytest.mark.parametrize("payload", [b"", b"12\n\x80\x05", b"3 4\n\x80\x05N.",
                                     b"no line", b"x\n"])
def test_an_entry_whose_parts_do_not_add_up_is_removed_and_rebuilt(tmp_path, payload):
    """A payload whose lengths line does not match its bytes (a cache of another version
    that passes its checksum) is no KB: get removes the entry."""
    from kbsolve.codecache import framed

    store = kb_cache.KbCache(tmp_path)
    store.put("ce" * 32, [1])
    (path,) = tmp_path.glob("kb-*.pickle")
    path.write_bytes(framed(kb_cache._MAGIC, payload))
    assert store.get("ce" * 32) is None
    assert not path.exists()


@pytest.mark.parametrize("payload", [b"1\nx", None])
def test_a_damaged_entry_is_unmapped_before_it_is_removed(tmp_path, monkeypatch, payload):
    """A mapped file cannot be removed everywhere (Windows): get closes its mapping of
    an entry that is no KB (a bad pickle, a failed checksum) before removing it."""
    from kbsolve.codecache import framed

    store = kb_cache.KbCache(tmp_path)
    store.put("cf" * 32, [1])
    (path,) = tmp_path.glob("kb-*.pickle")
    path.write_bytes(framed(kb_cache._MAGIC, payload) if payload else
                     kb_cache._MAGIC + b"00000000\n1\nx")
    maps, real_mapped, real_remove = [], kb_cache.mapped, kb_cache._remove
    monkeypatch.setattr(kb_cache, "mapped", lambda p: maps.append(real_mapped(p)) or maps[-1])
    monkeypatch.setattr(kb_cache, "_remove",
                        lambda p: (maps.append(maps[0].closed), real_remove(p)))
    assert store.get("cf" * 32) is None
    assert maps[1:] == [True] and not path.exists()


def _in_scope(entry, scopes) -> bool:
    from kbsolve.dsl.kb import Let
    return (entry.scope if isinstance(entry, Let) else entry.framework) in scopes


def test_a_framework_s_view_of_the_cached_kb_unpickles_its_entries_and_core_s_only():
    """KnowledgeBase.scoped: from a pickled KB, one framework's view holds that
    framework's and core's entries of every scoped table, in the KB's order, and
    unpickles no other framework's; the KB itself stays unread until read, then whole."""
    import pickle

    from kbsolve.api import load_kb
    from kbsolve.dsl.kb import SCOPED_TABLES

    whole = load_kb()
    loaded = pickle.loads(pickle.dumps(whole))
    assert not set(SCOPED_TABLES) & set(loaded.__dict__)
    view = loaded.scoped("flow-factory")
    assert loaded.scoped("flow-factory") is view  # kept: its evaluator caches too
    assert sorted(loaded.__dict__["_scoped"].loaded) == ["core", "flow-factory"]
    assert not set(SCOPED_TABLES) & set(loaded.__dict__)
    wanted = ("core", "flow-factory")
    for name in SCOPED_TABLES:
        table = getattr(whole, name)
        if isinstance(table, dict):
            assert list(getattr(view, name).items()) == \
                [(k, e) for k, e in table.items() if _in_scope(e, wanted)], name
        else:
            assert getattr(view, name) == tuple(e for e in table if _in_scope(e, wanted))
    assert 0 < len(view.options) < len(whole.options)
    assert view.frameworks is loaded.frameworks and view.catalog is loaded.catalog
    assert view.tests == whole.tests  # still there, unpickled on use
    assert loaded == whole  # read whole on the way, every framework's entries
    assert loaded.scoped("llamafactory") is loaded  # read whole: nothing left to save
    assert whole.scoped("pytorch") is whole


def test_the_api_plans_from_its_framework_s_view_as_from_the_whole_kb(monkeypatch):
    """api.solve and api.estimate without a KB read the query's framework's view of the
    cached KB; the plan and the estimate are the whole KB's, byte for byte."""
    import pickle

    from kbsolve import api

    monkeypatch.setattr(kb_cache, "_LOADED", type(kb_cache._LOADED)())
    query = {"gpus": "8xA100", "model": "wan14b", "top": 1}
    plan = api.solve(query)
    estimate = api.estimate(query, {"lora_rank": "16"})
    [loaded] = kb_cache._LOADED.values()
    assert list(loaded.__dict__["_scoped"].views) == ["flow-factory"]
    whole = pickle.loads(pickle.dumps(loaded))
    assert whole.options  # read whole
    assert plan.status == "optimal" and plan.framework == "flow-factory"
    assert plan.model_dump_json() == api.solve(query, kb=whole).model_dump_json()
    assert estimate.model_dump_json() == \
        api.estimate(query, {"lora_rank": "16"}, kb=whole).model_dump_json()


COMMAND_MODULES = """
import os, runpy, sys
sys.argv[1:] = {argv!r}
os._exit = sys.exit  # the command ends the process itself: not here
try:
    runpy.run_module("kbsolve", run_name="__main__", alter_sys=True)
except SystemExit as done:
    code = done.code
sys.stdout.flush()
from pydantic.plugin._loader import get_plugins
print("modules", code, len(tuple(get_plugins())),
      *sorted(m for m in sys.modules if m in {names!r}), file=sys.stderr)
"""
UNNEEDED = ("importlib.metadata", "importlib.resources", "tempfile", "shutil", "email",
            "zipfile", "csv", "socket", "hashlib", "_hashlib", "hmac")


def test_a_cached_plan_in_the_command_imports_no_metadata_scanner_nor_resources(
        tmp_path, seed_kb_cache):
    """`kbsolve --gpus 8xA100 --model wan14b` from the warm KB cache: pydantic looks for no
    plugins, so importlib.metadata (and email, zipfile, csv, socket with it) stays
    unimported, nothing loads OpenSSL (hashlib, hmac: the caches check by CRC-32, pydantic's
    `secrets` is read on first use), and the shipped KB and grammar are found without importlib.resources
    (tempfile, shutil); the plan's bytes are the library's. The KB's entry is seeded; the
    first run fills the code cache."""
    from kbsolve import api
    env = {**os.environ, "KBSOLVE_CACHE_DIR": str(seed_kb_cache(tmp_path / "cache"))}
    argv = ["--gpus", "8xA100", "--model", "wan14b", "--format", "json"]
    code = COMMAND_MODULES.format(argv=argv, names=UNNEEDED)
    for _ in range(2):  # the first fills the code cache
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              cwd=tmp_path, env=env, timeout=120)
        assert "modules" in done.stderr, done.stderr
    assert done.stderr.split("modules", 1)[1].split() == ["0", "0"], done.stderr
    from kbsolve.render import render
    plan = api.solve({"gpus": "8xA100", "model": "wan14b"})
    assert plan.status == "optimal" and done.stdout == render(plan, "json") + "\n"


def test_a_program_that_imports_kbsolve_keeps_pydantic_s_plugin_loader(tmp_path):
    """Only the command's process replaces the loader: a program importing kbsolve (and the
    command's module) gets pydantic's own, which reads the entry points."""
    done = _run("import sys, kbsolve.cli.main, kbsolve.api, pydantic; "
                "from pydantic.plugin import _loader; "
                "print(_loader.__file__.endswith('_loader.py'), "
                "'importlib.metadata' in sys.modules)", tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True"]


def test_the_replaced_plugin_loader_finds_none_and_defers_other_names(tmp_path):
    """get_plugins() is empty without a scan; any other name the loader has comes from
    pydantic's own module, and names neither has are missing as ever."""
    done = _run("import sys; from kbsolve import api; api.without_pydantic_plugins(); "
                "import pydantic.plugin; from pydantic.plugin import _loader as loader; "
                "print(tuple(loader.get_plugins()), 'importlib.metadata' in sys.modules); "
                "print(loader.PYDANTIC_ENTRY_POINT_GROUP, hasattr(loader, '__path__'), "
                "hasattr(loader, 'no_such_name'), "
                "'importlib.metadata' in sys.modules)", tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["() False", "pydantic False False True"]  # read aside


SCRIPT = """
import sys
import kbsolve.cli as cli
first = cli.start
def start():
    print("click imported before start:", "click" in sys.modules, file=sys.stderr)
    cli.start = first
    first()
cli.start = start
sys.argv[1:] = ["list", "gpus", "--format", "json"]  # argv[0] stays the interpreter's "-c"
sys.exit(cli.run())
"""


def test_the_kbsolve_script_starts_the_process_before_the_command_s_imports(tmp_path):
    """pyproject's `kbsolve` script calls kbsolve.cli.run, which sets the process up (the
    code cache among it) before click and the command's modules are imported, as
    `python -m kbsolve` does, and ends as the command does."""
    import tomllib
    from pathlib import Path
    project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    assert project["project"]["scripts"] == {"kbsolve": "kbsolve.cli:run"}
    done = _run(SCRIPT, tmp_path, KBSOLVE_CACHE_DIR=os.environ["KBSOLVE_CACHE_DIR"])
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[0] == "click imported before start: False"
    assert "A100-80G-SXM" in {row["name"] for row in json.loads(done.stdout)}


@pytest.mark.parametrize("where", ["repo", "root"])
def test_rule_files_are_named_as_pathlib_named_them(where, monkeypatch):
    """dsl/load.py _display compares the paths' texts: the shipped KB's files as kb/...,
    those under the working folder relative to it, any other whole, as pathlib's parents
    test named them (a sibling folder whose name begins with the KB's is not inside it)."""
    from pathlib import Path

    from kbsolve.dsl.load import _display, shipped_root

    def by_pathlib(path: Path) -> str:
        for root, shown in ((shipped_root(), Path("kb")), (Path.cwd(), Path())):
            if path == root or root in path.parents:
                return str(shown / path.relative_to(root))
        return str(path)

    if where == "root":
        monkeypatch.chdir("/")
    kb = shipped_root()
    for path in (kb, kb / "core", kb / "llamafactory" / "batch.kb", Path.cwd(),
                 Path.cwd() / "pack" / "a.kb", Path("/tmp/elsewhere/a.kb"), Path("rel/a.kb"),
                 Path(f"{kb}x") / "a.kb", Path("/")):
        assert _display(path) == by_pathlib(path), path
    assert _display(kb / "llamafactory" / "batch.kb") == os.path.join("kb", "llamafactory",
                                                                      "batch.kb")


def test_the_command_imports_numpy_without_its_doc_modules(tmp_path):
    """start() gives numpy empty doc modules (its C objects keep no docstring, numpy works);
    a program that imports kbsolve keeps numpy's docs."""
    command = _run("from kbsolve.cli import start; start(); import numpy; "
                   "print(numpy.ndarray.__doc__ is None, numpy.arange(4).sum())", tmp_path)
    library = _run("import kbsolve.api, numpy; print(numpy.ndarray.__doc__ is None)", tmp_path)
    assert command.returncode == 0 and library.returncode == 0, command.stderr + library.stderr
    assert command.stdout.split() == ["True", "6"]
    assert library.stdout.split() == ["False"]


def test_an_empty_numpy_doc_module_reads_other_names_from_numpy(tmp_path):
    """A name numpy's doc module has comes from that module, loaded aside; a name neither
    has is missing as ever; numpy imported first is left as it is."""
    done = _run("import sys; from kbsolve import api; api.without_numpy_docstrings(); "
                "from numpy._core import _add_newdocs as docs; "
                "print(docs.add_newdoc.__name__, hasattr(docs, 'no_such_name'), "
                "'__file__' in vars(docs))", tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["add_newdoc", "False", "False"]
    late = _run("import sys, numpy; from kbsolve import api; api.without_numpy_docstrings(); "
                "print(len(sys.meta_path) == len(set(map(id, sys.meta_path))), "
                "api._NoNumpyDocs in sys.meta_path)", tmp_path)
    assert late.returncode == 0, late.stderr
    assert late.stdout.split() == ["True", "False"]


def test_the_command_s_secrets_is_read_from_the_real_module_on_first_use(tmp_path):
    """start() gives pydantic a `secrets` that loads nothing (hmac, OpenSSL) until a name is
    read, then reads every name from the real module; pydantic's secret types compare as
    ever; a program that imports kbsolve keeps its `secrets`."""
    command = _run("import sys; from kbsolve.cli import start; start(); import pydantic, secrets; "
                   "print('hmac' in sys.modules, '_hashlib' in sys.modules); "
                   "from secrets import token_hex; "
                   "print(len(token_hex(4)), secrets.compare_digest(b'a', b'a'), "
                   "pydantic.SecretStr('x') == pydantic.SecretStr('x'), "
                   "pydantic.SecretStr('x') == pydantic.SecretStr('y'), "
                   "hasattr(secrets, 'no_such_name'), 'hmac' in sys.modules)", tmp_path)
    library = _run("import kbsolve.api, secrets; print(secrets.__file__.endswith('secrets.py'))",
                   tmp_path)
    assert command.returncode == 0 and library.returncode == 0, command.stderr + library.stderr
    assert command.stdout.split("\n")[:2] == ["False False", "8 True True False False True"]
    assert library.stdout.split() == ["True"]


def test_the_command_s_numpy_loads_linalg_when_first_used(tmp_path):
    """start() gives numpy a numpy.linalg that loads nothing (numpy._typing neither) until
    used: np.matrix's power and inverse and np.roots (the names numpy imports from it) and
    np.linalg's own functions give what they always did; a program that imports kbsolve
    keeps numpy's own import."""
    command = _run("import sys; from kbsolve.cli import start; start(); import numpy as np; "
                   "print('numpy.linalg._linalg' in sys.modules, 'numpy._typing' in sys.modules); "
                   "m = np.matrix([[2.0, 0.0], [0.0, 4.0]]); "
                   "print((m ** 2).tolist(), m.I.tolist(), np.roots([1, -3, 2]).tolist()); "
                   "print(np.linalg.det(np.eye(3)), 'numpy.linalg._linalg' in sys.modules, "
                   "np.linalg.__file__.endswith('__init__.py'), 'qr' in dir(np.linalg), "
                   "'svd' in np.linalg.__all__, hasattr(np.linalg, 'no_such_name'))", tmp_path)
    assert command.returncode == 0, command.stderr
    assert command.stdout.split("\n")[:3] == [
        "False False", "[[4.0, 0.0], [0.0, 16.0]] [[0.5, 0.0], [0.0, 0.25]] [2.0, 1.0]",
        "1.0 True True True True False"]
    star = _run("from kbsolve.cli import start; start(); from numpy.linalg import *; "
                "import numpy.linalg._umath_linalg; print(inv.__name__, svd.__module__)",
                tmp_path)
    assert star.returncode == 0, star.stderr
    assert star.stdout.split() == ["inv", "numpy.linalg"]
    library = _run("import sys, kbsolve.api, numpy; print('numpy.linalg._linalg' in sys.modules)",
                   tmp_path)
    late = _run("import sys, numpy; from kbsolve import api; api.without_numpy_linalg(); "
                "print(api._LinalgOnUse in sys.meta_path)", tmp_path)
    assert library.stdout.split() == ["True"] and late.stdout.split() == ["False"], (
        library.stderr + late.stderr)


def test_a_cached_plan_loads_no_numpy_linalg(tmp_path, seed_kb_cache):
    """The command's plan (KB, search, explanation, render) reads nothing of numpy.linalg.
    The KB's entry is seeded: the child reads it instead of building the KB."""
    done = _run("import sys, os\n"
                "from kbsolve.cli import start; start()\n"
                "from kbsolve.cli.main import cli\n"
                "from kbsolve.cli.run import guarded\n"
                "code = guarded(cli, ['--gpus', '8xA100', '--model', 'wan14b'])\n"
                "print(code, 'numpy.linalg._linalg' in sys.modules, file=sys.stderr)",
                tmp_path, KBSOLVE_CACHE_DIR=str(seed_kb_cache(tmp_path / "cache")))
    assert done.returncode == 0, done.stderr
    assert done.stderr.split()[-2:] == ["0", "False"]
    assert "wan2.1-t2v-14b" in done.stdout


_PLAN_PATH = ("kbsolve.catalog.hf", "kbsolve.catalog.load", "kbsolve.diagnostics",
              "kbsolve.dsl.ir", "kbsolve.dsl.kb", "kbsolve.dsl.operators",
              "kbsolve.dsl.symbols", "kbsolve.dsl.vocab", "kbsolve.plan.emit_folder",
              "kbsolve.program.metrics", "kbsolve.program.operators",
              "kbsolve.program.problem", "kbsolve.program.query", "kbsolve.roles",
              "kbsolve.solver.optimize", "kbsolve.solver.search")


@pytest.mark.parametrize("name", _PLAN_PATH)
def test_a_plan_s_dataclasses_write_their_docstrings(name):
    # `dataclasses` gives a class without a docstring one built from inspect.signature
    # (~45 us a class; 45 classes in these modules, all on a cold plan's path)
    from module_classes import own_dataclasses
    classes = own_dataclasses(name)
    assert classes
    assert [cls.__qualname__ for cls in classes
            if (cls.__doc__ or "").startswith(cls.__name__ + "(")] == []


def _held(value, found: list, seen: set) -> None:
    """Every str, Fraction and Type held by a field of a dataclass below `value`."""
    from dataclasses import is_dataclass
    from fractions import Fraction

    from kbsolve.dsl.types import Type
    if isinstance(value, (str, Fraction, Type)):
        found.append(value)
        if not isinstance(value, Type):
            return
    if id(value) in seen:
        return
    seen.add(id(value))
    if isinstance(value, (list, tuple)):
        for v in value:
            _held(v, found, seen)
    elif isinstance(value, dict):
        for v in value.values():
            _held(v, found, seen)
    elif is_dataclass(value):
        for v in vars(value).values():
            _held(v, found, seen)


def test_a_scope_s_pickle_holds_each_string_fraction_and_type_once():
    """dsl/kb.py _shared: a scope's entries, unpickled, hold one object per distinct
    str, Fraction and Type (the chunk builds fewer objects), and the KB reads as one
    never pickled."""
    import pickle
    from collections import Counter

    from kbsolve.api import load_kb

    built, untouched = load_kb(use_cache=False), load_kb(use_cache=False)
    loaded = pickle.loads(pickle.dumps(built))
    loaded.scoped("flow-factory")
    chunk = loaded.__dict__["_scoped"].loaded["flow-factory"]
    found: list = []
    _held(chunk, found, set())
    objects = Counter((type(v).__name__, id(v)) for v in found)
    values = Counter((type(v).__name__, v) for v in found)
    for kind in ("str", "Fraction", "Type"):
        held = sum(1 for k, _ in objects if k == kind)
        distinct = sum(1 for k, _ in values if k == kind)
        assert held == distinct > 10, kind
    assert loaded == untouched and built == untouched


@pytest.mark.parametrize("name", ["kbsolve.diagnostics", "kbsolve.dsl.ir", "kbsolve.dsl.kb"])
def test_the_kb_s_dataclasses_hold_evaluated_annotations(name):
    # a string annotation costs dataclasses three regex reads a field (dsl/kb.py, top):
    # these modules' ~240 fields are on every cold plan's path
    import dataclasses

    from module_classes import own_dataclasses
    classes = own_dataclasses(name)
    assert classes
    assert [(cls.__name__, f.name) for cls in classes for f in dataclasses.fields(cls)
            if isinstance(f.type, str)] == []
