"""Shared fixtures: every test gets its own KB cache directory, holding a copy of
the shipped KB's entry (built once per run); `--cpu-durations=N` lists the N
tests that cost the most CPU time."""

from __future__ import annotations

import os
import re
import resource
import shutil
import sys
import time

import pytest

CACHE_ENV = "KBSOLVE_CACHE_DIR"


@pytest.fixture(scope="session")
def _shipped_kb_cache_entries(tmp_path_factory) -> list:
    """The shipped KB's cache entry, made once per run in a directory of its own, then
    its stamp (dsl/cache.py `KbCache.stamp`) where the load wrote one: a test's load then
    takes the entry's key from the stamp instead of reading and hashing ~90 sources
    (~6 ms a load), as a user's second command does.

    Empty where the shipped KB does not load: each test then builds it itself and
    reports the error where it belongs."""
    folder = tmp_path_factory.mktemp("kbsolve-cache-seed")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(CACHE_ENV, str(folder))
        patch.delenv("KBSOLVE_PATH", raising=False)
        try:
            from kbsolve.catalog import knowledge
            from kbsolve.dsl.load import kb_roots
            build = _shipped_build(knowledge._build, kb_roots(), _run_s_shipped_kb())
            patch.setattr(knowledge, "_build", build)
            knowledge.load_kb()
        except Exception:  # noqa: BLE001 - the tests that load the KB say what is wrong
            return []
    return sorted(folder.glob("kb-*.pickle")) + sorted(folder.glob("kb-sources-*.marshal"))


def _run_s_shipped_kb():
    """The run's one uncached build of the shipped KB (tests/plans.py `shipped_kb`, which
    test_plan.py's collection and many tests read anyway); None in a copy of this file
    without tests/plans.py."""
    try:
        from plans import shipped_kb
    except ImportError:
        return None
    return shipped_kb()


def _shipped_build(build, shipped_roots, shipped):
    """The KB build that fills the session's entry: `shipped` for the shipped roots, not
    a second build of the same files (~2.5 s of CPU a worker); any other roots, or no
    `shipped`, build as usual."""
    def shipped_once(files, roots, sink):
        if shipped is None or roots != shipped_roots:
            return build(files, roots, sink)
        return shipped
    return shipped_once


@pytest.fixture
def seed_kb_cache(_shipped_kb_cache_entries):
    """`seed_kb_cache(folder)` copies the shipped KB's entry into `folder` (made if need
    be) and returns it: a child process given it as its KB cache reads the KB instead of
    building it (~3 s of CPU), as a user's second command does."""
    def seed(folder):
        folder.mkdir(parents=True, exist_ok=True)
        for entry in _shipped_kb_cache_entries:
            shutil.copyfile(entry, folder / entry.name)
        return folder
    return seed


@pytest.fixture(scope="session", autouse=True)
def _catalog_yaml_composed_once():
    """The catalogs' YAML files (catalog/load.py, catalog/hf.py) composed once per text in
    this process, as dsl/load.py's `parsed_module` does for the rule files: a KB built without
    the cache (golden diagnostics, packs, fuzzed packs: some hundreds of builds a run)
    spent ~40 % of its CPU in PyYAML's pure-Python composer on the same four files.

    The first read of each (text, name, limits) runs the real `load_yaml`; later reads get
    a deep copy of its data (the loaders may change what they read) and its positions
    (immutable spans), and the text is added to the caller's source cache as `load_yaml`
    does. A file that fails to load is never remembered: its error comes from the real
    function every time. Texts given as strings or bytes (the audit's, the tests' own)
    always go to the real function. KBSOLVE_TEST_YAML_UNCACHED=1 turns this off."""
    if os.environ.get("KBSOLVE_TEST_YAML_UNCACHED"):
        yield
        return
    import copy

    from kbsolve.catalog import hf as catalog_hf
    from kbsolve.catalog import load as catalog_load
    from kbsolve.catalog import yamlpos

    real = yamlpos.load_yaml
    composed: dict[tuple, tuple] = {}

    def load_yaml(source, *, file=None, max_bytes=yamlpos.MAX_BYTES,
                  max_nodes=yamlpos.MAX_NODES, sources=None):
        if not isinstance(source, os.PathLike):
            return real(source, file=file, max_bytes=max_bytes, max_nodes=max_nodes,
                        sources=sources)
        file = file or str(source)
        text = yamlpos.read_text(source, file=file, max_bytes=max_bytes)
        key = (text, file, max_bytes, max_nodes)
        if key not in composed:
            composed[key] = real(text, file=file, max_bytes=max_bytes, max_nodes=max_nodes,
                                 sources=sources)
        elif sources is not None:
            sources.add(file, text)
        data, positions = composed[key]
        return copy.deepcopy(data), dict(positions)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(catalog_load, "load_yaml", load_yaml)
        patch.setattr(catalog_hf, "load_yaml", load_yaml)
        yield


@pytest.fixture(scope="session", autouse=True)
def _children_share_bytecode(tmp_path_factory):
    """Child Pythons (the CLI, cold starts, MCP server, racing loaders) compile kbsolve
    once per run, not once each, where the environment says PYTHONDONTWRITEBYTECODE (as
    some shells and CI do) and the source tree has no __pycache__: their bytecode goes
    to a folder of this run (PYTHONPYCACHEPREFIX, as bench/cold.py does), never into the
    checkout. Each child otherwise recompiled ~0.2 s of kbsolve's modules. Imports,
    output and exit codes are the same; only where compiled code is kept changes.
    KBSOLVE_TEST_BYTECODE_AS_IS=1, or a PYTHONPYCACHEPREFIX of the user's, leaves the
    environment as it is."""
    if (not os.environ.get("PYTHONDONTWRITEBYTECODE") or os.environ.get("PYTHONPYCACHEPREFIX")
            or os.environ.get("KBSOLVE_TEST_BYTECODE_AS_IS")):
        yield
        return
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("PYTHONDONTWRITEBYTECODE")
        patch.setenv("PYTHONPYCACHEPREFIX", str(tmp_path_factory.mktemp("pycache")))
        yield


@pytest.fixture(scope="session")
def _kb_cache_folders(tmp_path_factory):
    """One folder of this run (per worker) that holds every test's KB cache directory:
    pytest's numbered `mktemp` lists the whole base folder on each call, so a directory
    made that way for each of ~1,000 tests a worker cost ~1-2 s of CPU, and the folder it
    filled slowed each test's own `tmp_path` as much."""
    import itertools
    folder = tmp_path_factory.mktemp("kbsolve-cache")
    numbers = itertools.count()

    def make():
        cache = folder / str(next(numbers))
        cache.mkdir()
        return cache
    return make


@pytest.fixture(autouse=True)
def _private_kb_cache(request, _kb_cache_folders, monkeypatch):
    """Point KBSOLVE_CACHE_DIR at a fresh temporary directory for each test.

    Tests must never read or write the user's real cache; `KBSOLVE_PATH` is
    cleared too so that a developer's own packs do not leak into the tests. The
    directory holds a copy (never a link: a test may damage it) of the shipped
    KB's entry, so that a test which loads the KB does not parse it again; tests
    marked `empty_kb_cache` start from an empty directory. The entries go with
    the test (1 MB each, a run's temporary folders would hold hundreds), except
    where the test left the directory exactly as it got it (`_as_seeded`): the
    next test that starts from the entry then gets that directory, not a new copy.
    """
    entries = []
    if _some_test_starts_with_the_entry(request.session):  # made before any test has
        # run, so it pickles the shipped KB as built (`_shipped_build`)
        entries = request.getfixturevalue("_shipped_kb_cache_entries")
    seeded = bool(entries) and request.node.get_closest_marker("empty_kb_cache") is None
    kept = request.session.stash.setdefault(_SEEDED_AS_LEFT, [])
    if seeded and kept:
        cache, state = kept.pop()
    else:
        cache = _kb_cache_folders()
        if seeded:
            for entry in entries:
                shutil.copyfile(entry, cache / entry.name)
                os.utime(cache / entry.name, ns=(SEEDED_NS, SEEDED_NS))
            state = _as_seeded(cache)
    monkeypatch.setenv(CACHE_ENV, str(cache))
    monkeypatch.delenv("KBSOLVE_PATH", raising=False)
    yield cache
    if seeded and state is not None and _as_seeded(cache) == state:
        kept.append((cache, state))
        return
    for entry in [*cache.glob("*kb-*"), *cache.glob("*code-*")]:  # and the command's code
        try:
            entry.unlink()
        except OSError:
            pass


_SEEDED_AS_LEFT = pytest.StashKey[list]()
SEEDED_NS = 1_600_000_000 * 10**9  # a seeded file's mtime (2020): any later write differs


def _as_seeded(cache) -> tuple | None:
    """What the file system says of a seeded cache directory and each file in it: a new,
    removed or replaced file, a chmod or a write since changes it (a write sets the
    file's mtime to the clock's time, never SEEDED_NS, even within the clock's tick);
    None where it cannot be read."""
    try:
        folder = os.stat(cache)
        files = sorted((e.name, e.inode(), *_changed(e.stat(follow_symlinks=False)))
                       for e in os.scandir(cache))
    except OSError:
        return None
    return (*_changed(folder), tuple(files))


def _changed(stat) -> tuple:
    return stat.st_mode, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns


_STARTS_WITH_THE_ENTRY = pytest.StashKey[bool]()


def _some_test_starts_with_the_entry(session) -> bool:
    """Whether any collected test starts from the shipped KB's entry (is not marked
    `empty_kb_cache`): a run of only such tests (the child of tests/test_conftest.py)
    builds no entry, ~2.5 s of CPU a worker."""
    if _STARTS_WITH_THE_ENTRY not in session.stash:
        session.stash[_STARTS_WITH_THE_ENTRY] = any(
            item.get_closest_marker("empty_kb_cache") is None for item in session.items)
    return session.stash[_STARTS_WITH_THE_ENTRY]


def pytest_collection_modifyitems(config, items):
    """`slow` tests (long checks) run only with `-m slow` or KBSOLVE_SLOW=1; `ci` tests
    (child processes: racing writers, hash seeds, resource limits; the docs' pack examples
    built whole; generators a cheaper default test backs; .ci/run runs them in a step of
    their own) only with `-m ci` or KBSOLVE_SLOW=1."""
    if os.environ.get("KBSOLVE_SLOW"):
        return
    words = set(re.findall(r"\w+", config.getoption("-m") or ""))
    skips = {"slow": "long check; use -m slow or KBSOLVE_SLOW=1",
             "ci": "CI's own step (.ci/run); use -m ci or KBSOLVE_SLOW=1"}
    for marker, reason in skips.items():
        if marker in words:
            continue
        for item in items:
            if item.get_closest_marker(marker) is not None:  # not keywords: a folder
                # named `ci` (a clone's) is a keyword of every test below it
                item.add_marker(pytest.mark.skip(reason=reason))


# ---- CPU time per test -------------------------------------------------------------

def pytest_addoption(parser):
    parser.addoption("--cpu-durations", type=int, default=None, metavar="N",
                     help="list the N tests that cost the most CPU time (this process and "
                          "its children, setup and teardown included; 0 for all)")


_CPU: dict[str, list[float]] = {}
_STARTED = pytest.StashKey[tuple]()


def _cpu_now() -> float:
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    item.stash[_STARTED] = (_cpu_now(), time.perf_counter())
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A test's CPU and wall time ride on its teardown report: under pytest-xdist the
    worker measures and the controller, which prints the table, reads the report."""
    outcome = yield
    if call.when == "teardown" and item.config.getoption("--cpu-durations") is not None:
        cpu, wall = item.stash[_STARTED]
        outcome.get_result().user_properties.append(
            ("cpu_wall_s", [_cpu_now() - cpu, time.perf_counter() - wall]))


def pytest_runtest_logreport(report):
    for name, value in report.user_properties:
        if name == "cpu_wall_s":
            _CPU[report.nodeid] = list(value)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    _skip_reasons(terminalreporter)
    _cpu_durations(terminalreporter, config)


def _skip_reasons(terminalreporter) -> None:
    """Why tests skipped, one line per reason with its count (pytest's own `-rs` lists
    every slow test apart): a check that did not run says so, and what it needs."""
    reasons: dict[str, int] = {}
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        reason = reason.removeprefix("Skipped: ")
        reasons[reason] = reasons.get(reason, 0) + 1
    if reasons:
        terminalreporter.section(f"skipped: {sum(reasons.values())} tests, and why")
        for reason, count in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])):
            terminalreporter.write_line(f"{count:5d}  {reason}")


def _cpu_durations(terminalreporter, config) -> None:
    count = config.getoption("--cpu-durations")
    if count is None or not _CPU:
        return
    total = sum(cpu for cpu, _ in _CPU.values())
    ranked = sorted(_CPU.items(), key=lambda kv: -kv[1][0])
    shown = ranked if count == 0 else ranked[:count]
    write = terminalreporter.write_line
    terminalreporter.section(f"CPU time per test: {total:.1f} s over {len(_CPU)} tests")
    write("    cpu s   share   wall s  test")
    for nodeid, (cpu, wall) in shown:
        write(f"{cpu:9.2f} {100 * cpu / total:6.1f}% {wall:8.2f}  {nodeid}")
    rest = total - sum(cpu for _, (cpu, _w) in shown)
    write(f"{sum(c for _, (c, _w) in shown):9.2f} {100 * (total - rest) / total:6.1f}%"
          f"           the {len(shown)} above")


def pytest_configure(config):
    """Fewer garbage-collection passes in the test process: the suite builds and drops
    many large KB objects (a checked KB is a few million tracked objects), and each
    young-generation pass scans whatever of the build is alive at that moment. With a
    first threshold of 50,000 (issue 25's second integration) a test that builds a KB
    still paid several generation-0 and -1 passes over the half-built KB: 26 % of the
    golden diagnostics' CPU (10 of 38 s) and 8 of 62 s over packs, fuzzers, side files
    and bad inputs. The count is net of frees, so a test that builds and drops a KB
    leaves it about where it was: at 5,000,000 the passes come only where tracked
    objects really accumulate (the run's memos, cyclic garbage), which also bounds the
    garbage a run can hold (about 5 million objects; the peak RSS of those files went
    from 0.5 to 0.8 GB). Cycles are still collected. KBSOLVE_TEST_GC_DEFAULT=1 keeps
    Python's defaults."""
    import gc
    if not os.environ.get("KBSOLVE_TEST_GC_DEFAULT"):
        gc.set_threshold(5_000_000, 10, 10)
    _one_folder_of_plans_a_run(config)
    _test_files_rewritten_once_a_run(config)


@pytest.hookimpl(tryfirst=True)
def pytest_unconfigure(config):
    """One full garbage collection at the end of the run, then the survivors frozen: pytest
    collects twice more after this (unraisableexception: its end-of-run check for errors in
    finalizers) and the interpreter once at exit, each a pass over every object still alive
    (a worker's KBs, plans and memos: ~2 million objects, ~1 s each). This pass is before
    pytest's and under its unraisable hook, so whatever garbage it frees reports there as
    before; its passes then have only what is made after this one to look at."""
    import gc
    gc.collect()
    gc.freeze()


def _one_folder_of_plans_a_run(config) -> None:
    """A fresh folder where tests/plans.py `solved` keeps the run's plans, made by the
    controller before pytest-xdist starts its workers (they inherit the variable), so that
    a query several workers ask for is solved once a run; removed with the run."""
    if hasattr(config, "workerinput"):  # a worker: the controller's folder
        return
    import tempfile
    name = "KBSOLVE_TEST_PLANS_DIR"  # tests/plans.py PLANS_DIR
    before = os.environ.get(name)
    folder = tempfile.mkdtemp(prefix="kbsolve-test-plans-")
    os.environ[name] = folder

    def restore() -> None:
        shutil.rmtree(folder, ignore_errors=True)
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before
    config.add_cleanup(restore)


# ---- the test files' assertion rewriting, once a run ----------------------------------

REWRITTEN_ENV = "KBSOLVE_TEST_REWRITTEN_DIR"
TESTS = os.path.dirname(os.path.abspath(__file__))


def _test_files_rewritten_once_a_run(config) -> None:
    """Where the environment says PYTHONDONTWRITEBYTECODE (as some shells and CI do),
    pytest rewrites every test file's asserts in every pytest-xdist worker and keeps
    nothing: ~3 s of CPU a worker, a third of its collection. The controller, before it
    starts two or more workers, rewrites the test files the run names once into a folder
    of this run (removed with it, never the checkout); each worker reads them from there
    (`read_rewritten_from`). pytest checks each file's hash before it uses what it reads,
    and rewrites any file it does not find. KBSOLVE_TEST_BYTECODE_AS_IS=1 turns this off."""
    if hasattr(config, "workerinput"):
        folder = os.environ.get(REWRITTEN_ENV)
        if folder and _pytest_internals_as_known():
            config.add_cleanup(read_rewritten_from(folder))
        return
    if (not sys.dont_write_bytecode or os.environ.get("KBSOLVE_TEST_BYTECODE_AS_IS")
            or config.getoption("assertmode") != "rewrite" or config.getoption("collectonly")
            or config.getoption("dist", "no") == "no"
            or len(config.getoption("tx", None) or []) < 2
            or not _pytest_internals_as_known()):
        return
    files = _named_test_files(config)
    if not files:
        return
    import tempfile
    folder = tempfile.mkdtemp(prefix="kbsolve-test-rewritten-")
    rewrite_into(folder, files, config)
    os.environ[REWRITTEN_ENV] = folder

    def remove() -> None:
        shutil.rmtree(folder, ignore_errors=True)
        os.environ.pop(REWRITTEN_ENV, None)
    config.add_cleanup(remove)


def _pytest_internals_as_known() -> bool:
    """pytest's private rewriting functions this relies on are there with the parameters
    read here (pytest 7-9); any other pytest rewrites in each worker as it always does."""
    import inspect
    try:
        from _pytest.assertion import rewrite
        expected = {"_rewrite_test": ["fn", "config"],
                    "_write_pyc": ["state", "co", "source_hash", "pyc"],
                    "get_cache_dir": ["file_path"]}
        return all(list(inspect.signature(getattr(rewrite, name)).parameters) == params
                   for name, params in expected.items()) and hasattr(rewrite, "PYC_TAIL") \
            and hasattr(rewrite, "assertstate_key")
    except (ImportError, AttributeError, TypeError, ValueError):
        return False


def _named_test_files(config) -> list:
    """This folder's test files that the run's arguments name (all of them for `tests`)."""
    from pathlib import Path
    here = Path(TESTS)
    files = set()
    for arg in config.args:
        path = Path(config.invocation_params.dir, arg.split("::")[0]).resolve()
        if path.is_file() and path.parent == here and path.name.startswith("test_"):
            files.add(path)
        elif path.is_dir() and (path == here or path in here.parents):
            files.update(here.glob("test_*.py"))
    return sorted(files)


def rewrite_into(folder, files, config) -> list:
    """Each file rewritten as pytest rewrites it on import, into `folder` under the name
    pytest reads; the files written (one that fails is left to the worker's import)."""
    from pathlib import Path

    from _pytest.assertion import rewrite
    state = config.stash[rewrite.assertstate_key]
    written = []
    for file in files:
        pyc = Path(folder) / (file.name[:-3] + rewrite.PYC_TAIL)
        try:
            source_hash, code = rewrite._rewrite_test(file, config)
        except (OSError, SyntaxError, ValueError):
            continue
        if rewrite._write_pyc(state, code, source_hash, pyc):
            written.append(pyc)
    return written


def read_rewritten_from(folder):
    """pytest reads this folder's rewritten test files from `folder`; returns the undo."""
    from _pytest.assertion import rewrite
    real = rewrite.get_cache_dir

    def get_cache_dir(file_path):
        if str(file_path.parent) == TESTS:
            from pathlib import Path
            return Path(folder)
        return real(file_path)
    rewrite.get_cache_dir = get_cache_dir

    def undo() -> None:
        rewrite.get_cache_dir = real
    return undo
