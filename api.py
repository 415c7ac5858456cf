"""The Python API, and the only door the CLI uses (with kbsolve.render).

    load_kb(paths=None) -> KnowledgeBase
    listing(kb, what, framework=None) -> list[dict]

Importing this module is cheap: the DSL, the solver and the audit load when a
function first needs them, so that `kbsolve --help` loads none of them. The
exit codes and the one exception a user sees (KbError, holding Diagnostics)
are re-exported here for the CLI.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from kbsolve.diagnostics import (EXIT_INFEASIBLE, EXIT_OK, EXIT_UNKNOWN, EXIT_USAGE,
                                 Diagnostic, KbError, deep_recursion)

if TYPE_CHECKING:
    from kbsolve.dsl import KnowledgeBase

EMITTABLE = ("optimal", "feasible", "timed_out")  # a plan with a config to write


def __getattr__(name: str):
    if name == "KnowledgeBase":  # lazy: the DSL loads on first use
        from kbsolve.dsl import KnowledgeBase
        return KnowledgeBase
    raise AttributeError(f"module 'kbsolve.api' has no attribute {name!r}")


PYDANTIC_PLUGIN_LOADER = "pydantic.plugin._loader"


def without_pydantic_plugins() -> None:
    """The command's process (cli/__init__.py start) runs pydantic without its plugins, as
    PYDANTIC_DISABLE_PLUGINS=__all__ would, and without looking for them: pydantic's plugin
    loader imports importlib.metadata (email, zipfile, csv, socket, ...) and reads every
    installed distribution's entry points as the first model class is built, 20-30 ms of a
    cold plan on the 2-core machine and more with every package installed (issue 25). When
    pydantic imports its loader it gets a module whose get_plugins() finds none; any other
    name is read from the real loader. kbsolve's models are its own; a plugin (an
    observability hook, say) watches the programs that import pydantic, which a program
    importing kbsolve still is: only the command's process is changed."""
    _first_finder(_NoPlugins, unless_imported=PYDANTIC_PLUGIN_LOADER)


# numpy's modules that only attach docstrings to its C functions and types (add_newdoc,
# each text through inspect.cleandoc): ~49 M instructions, 2.6 % of a cold wan14b plan
NUMPY_DOC_MODULES = ("numpy._core._add_newdocs", "numpy._core._add_newdocs_scalars")


def without_numpy_docstrings() -> None:
    """The command's process (cli/__init__.py start) imports numpy without the docstrings
    of its C objects, as `python -OO` runs it: the command prints no numpy help. Each doc
    module is an empty one whose other names are read from numpy's own module (loaded
    aside, documenting as it loads); a program importing kbsolve keeps numpy's docs."""
    _first_finder(_NoNumpyDocs, unless_imported="numpy")


def without_openssl() -> None:
    """The command's process (cli/__init__.py start) loads no OpenSSL: pydantic.types imports
    `secrets` (for its Secret types' compare_digest), which imports hmac and with it
    hashlib's OpenSSL library: ~3 ms of a cold plan that hashes nothing (the caches check
    their files by CRC-32, codecache.framed). `secrets` is a stand-in whose names are read
    from the real module on first use; a program importing kbsolve keeps its `secrets`."""
    _first_finder(_SecretsOnUse, unless_imported="secrets")


def without_platform() -> None:
    """The command's process (cli/__init__.py start) imports no `platform` (its code and ten
    regular expressions compiled as it loads: ~9 M instructions of a cold plan): pydantic
    imports uuid, which reads only platform.system() as it loads. `platform` is a stand-in
    whose system() is os.uname()'s system name where platform's is that very name (Linux),
    and whose every other name is read from the real module (loaded aside on first use); a
    program importing kbsolve keeps its `platform`."""
    _first_finder(_PlatformOnUse, unless_imported="platform")


def _platform_system() -> str:
    """platform.system(): on Linux, platform.uname() keeps os.uname()'s name as it is."""
    import os
    uname = getattr(os, "uname", None)
    if uname is not None and uname().sysname == "Linux":
        return "Linux"
    import platform  # the stand-in: the real module's answer
    return platform.__getattr__("system")()


# numpy imports numpy.linalg as it loads, for np.matrix and the polynomial helpers
# (numpy._typing with it): ~60 M instructions, 3.5 % of a cold wan14b plan, which calls none
NUMPY_LINALG = "numpy.linalg"
# the names numpy's own modules import from it as numpy loads (2.x: lib._polynomial_impl,
# matrixlib.defmatrix): functions that load it when called
NUMPY_LINALG_IMPORTED = ("eigvals", "inv", "lstsq", "matrix_power")


def without_numpy_linalg() -> None:
    """The command's process (cli/__init__.py start) imports numpy without numpy.linalg:
    numpy gets a package that becomes numpy.linalg itself (its code run in the same module)
    when a name is first read from it or one of NUMPY_LINALG_IMPORTED is called; a program
    importing kbsolve keeps numpy's own import."""
    _first_finder(_LinalgOnUse, unless_imported="numpy")


class _OnFirstUse:
    """The import system's finder and loader of a package loaded when first used: until
    then it holds `imported` (functions that load it, then call its own) and its real
    __path__ (submodules import as ever); reading any other name, __all__ or dir() loads
    it in place."""

    def __init__(self, name: str, imported: tuple[str, ...]):
        self.name = name
        self.imported = imported

    def find_spec(self, name, path=None, target=None):
        if name != self.name:
            return None
        from importlib.machinery import ModuleSpec
        return ModuleSpec(name, self, is_package=True)

    def create_module(self, spec):
        return None  # the default module

    def exec_module(self, module) -> None:
        import os
        import sys
        parent, _, last = self.name.rpartition(".")
        module.__path__ = [os.path.join(folder, last) for folder in sys.modules[parent].__path__]

        def load():
            if "__getattr__" in vars(module):
                _load_in_place(module, self.imported)

        def attribute(attr: str):
            if attr.startswith("__") and attr != "__all__":
                raise AttributeError(attr)
            load()
            return getattr(module, attr)

        def listed():
            load()
            return sorted(vars(module))

        def forward(attr: str):
            def call(*args, **kwargs):
                load()
                return getattr(module, attr)(*args, **kwargs)
            call.__name__ = attr
            return call

        vars(module).update({attr: forward(attr) for attr in self.imported})
        module.__getattr__, module.__dir__ = attribute, listed


def _load_in_place(module, imported: tuple[str, ...]) -> None:
    """The package's own code run in `module` (which stays the one in sys.modules)."""
    spec = _real_spec(module.__name__)
    for attr in ("__getattr__", "__dir__", *imported):
        vars(module).pop(attr, None)
    module.__spec__, module.__loader__, module.__file__ = spec, spec.loader, spec.origin
    module.__path__ = spec.submodule_search_locations
    spec.loader.exec_module(module)


class _StandIns:
    """The import system's finder and loader of the modules it replaces: each holds the
    names given, and any other name is read from the real module (_aside)."""

    def __init__(self, modules: dict[str, dict]):
        self.modules = modules

    def find_spec(self, name, path=None, target=None):
        if name not in self.modules:
            return None
        from importlib.machinery import ModuleSpec
        return ModuleSpec(name, self)

    def create_module(self, spec):
        return None  # the default module

    def exec_module(self, module) -> None:
        vars(module).update(self.modules[module.__name__])
        module.__getattr__ = _aside(module.__name__)


def _no_plugins() -> tuple:
    return ()


_NoPlugins = _StandIns({PYDANTIC_PLUGIN_LOADER: {"get_plugins": _no_plugins}})
_NoNumpyDocs = _StandIns({name: {} for name in NUMPY_DOC_MODULES})
_SecretsOnUse = _StandIns({"secrets": {}})
_PlatformOnUse = _StandIns({"platform": {"system": _platform_system}})
_LinalgOnUse = _OnFirstUse(NUMPY_LINALG, NUMPY_LINALG_IMPORTED)


def _first_finder(finder: _StandIns | _OnFirstUse, unless_imported: str) -> None:
    """`finder` first in the import system, unless `unless_imported` is already imported
    (its modules are then loaded as they are) or it is there."""
    import sys
    if unless_imported not in sys.modules and finder not in sys.meta_path:
        sys.meta_path.insert(0, finder)


LOADED_ASIDE: set[str] = set()  # the stand-ins whose real module a name was read from


def _aside(name: str):
    """A module's missing names from its real module, loaded aside (never in sys.modules)
    on the first such read; dunder names, which the import system probes, stay absent."""
    real = []

    def attribute(attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        if not real:
            from importlib.util import module_from_spec
            spec = _real_spec(name)
            real.append(module_from_spec(spec))
            spec.loader.exec_module(real[0])
            LOADED_ASIDE.add(name)
        return getattr(real[0], attr)
    return attribute


def _real_spec(name: str):
    """The module's own spec, found past this module's finders (on its parent's path)."""
    import sys
    from importlib.machinery import PathFinder
    parent, _, _ = name.rpartition(".")
    return PathFinder.find_spec(name, sys.modules[parent].__path__ if parent else None)


def save_compiled_code() -> None:
    from kbsolve import codecache
    codecache.save()


def load_kb(paths: list[str] | None = None, *, use_cache: bool = True) -> KnowledgeBase:
    """The shipped KB plus rule packs, checked; raises KbError with every problem."""
    from kbsolve.catalog import load_kb as load
    return load(paths, use_cache=use_cache)


def check_side_files(kb: KnowledgeBase) -> None:
    """`kb check` reads every framework's side YAML files (audit.yaml, file_kinds.yaml,
    versions.yaml, accepted_keys.yaml) as the audit and --set will, so that a broken
    entry is reported now, at its file:line:col; raises KbError with one error per
    broken file."""
    from kbsolve.audit.accepted_keys import accepted_keys
    from kbsolve.audit.kinds import kind_data
    from kbsolve.audit.versions import version_files
    from kbsolve.diagnostics import SourceCache
    from kbsolve.program.repo_files import audit_data
    found, sources = [], SourceCache()
    for framework in sorted(kb.frameworks):
        for read in (audit_data, kind_data, version_files, accepted_keys):
            try:
                read(kb, framework)
            except KbError as error:
                found += error.diagnostics
                sources.merge(error.sources)
    if found:
        raise KbError(found, sources)


def diagnostic_codes() -> list[dict]:
    """Every diagnostic code (diagnostic_codes.py): name, severity, group, meaning,
    example, raised_in; `kbsolve kb codes` prints them as docs/dsl.md's table."""
    from dataclasses import asdict

    from kbsolve.diagnostic_codes import CODES
    return [asdict(code) for code in CODES]


def kb_summary(kb: KnowledgeBase) -> dict[str, int]:
    catalog = kb.catalog
    return {
        "frameworks": len(kb.frameworks), "options": len(kb.options), "rules": len(kb.rules),
        "warnings": len(kb.warnings), "checks": len(kb.checks), "tests": len(kb.tests),
        "GPUs": len(catalog.gpus) if catalog else 0,
        "models": len(catalog.models) if catalog else 0,
    }


def listing(kb: KnowledgeBase, what: str, framework: str | None = None) -> list[dict]:
    if framework is not None and framework not in kb.frameworks:
        from kbsolve.diagnostics import did_you_mean
        raise KbError(Diagnostic(f"unknown framework '{framework}' (--framework)"
                                 f"{did_you_mean(framework, kb.frameworks)}"))
    if what in ("gpus", "models"):
        table = kb.catalog.gpus if what == "gpus" else kb.catalog.models
        return [_jsonable(entry.model_dump(exclude_none=True)) for entry in table.values()]
    builders = {"options": (kb.options, _option_row), "rules": (kb.rules, _rule_row),
                "checks": (kb.checks, _check_row), "optins": (kb.optins, _optin_row)}
    table, build = builders[what]
    rows = [build(item) for item in table.values()
            if framework is None or item.framework == framework]
    if what == "checks":  # each item's category maximum (the seeds' x/58 tables)
        for row in rows:
            category = kb.categories.get(f"{row['framework']}.{row['category']}")
            row["category_points"] = category.points if category else None
    return rows


def _option_row(o) -> dict:
    return {"framework": o.framework, "name": o.name, "type": str(o.type),
            "domain": _jsonable(list(o.domain)) if o.domain is not None else None,
            "default": _jsonable(o.default),
            "emit": [f"{e.target}:{e.key}" for e in o.emits], "origin": o.origin,
            "aliases": [a.old for a in o.aliases],
            "inert": ("passthrough: " if o.passthrough else "") + o.inert if o.inert else "",
            "doc": o.meta.doc,
            "source": o.meta.source, "location": str(o.meta.span)}


def _rule_row(r) -> dict:
    return {"framework": r.framework, "id": r.id, "kind": r.kind, "because": r.meta.because,
            "source": r.meta.source, "versions": r.meta.versions,
            "location": str(r.meta.span)}


def _optin_row(o) -> dict:
    return {"framework": o.framework, "name": o.name, "group": o.group, "doc": o.meta.doc,
            "because": o.meta.because, "source": o.meta.source, "location": str(o.meta.span)}


def _check_row(c) -> dict:
    return {"framework": c.framework, "id": c.id, "category": c.category,
            "title_en": c.title_en, "title_zh": c.title_zh, "points": c.points,
            "priority": c.priority, "group": c.group, "judges": list(c.judges),
            "source": c.meta.source, "location": str(c.meta.span)}


def _jsonable(value: Any) -> Any:
    from fractions import Fraction
    if isinstance(value, Fraction):
        return int(value) if value.denominator == 1 else float(value)
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


# CPython (3.11 on) keeps frames in chunks of 16 KiB, each mapped when a call finds no room
# in the last one and unmapped when the first frame of a chunk returns: a call depth that
# swings across a chunk's end maps, touches and unmaps a fresh one each time (~940 times in a
# cold `kbsolve --gpus 8xA100 --model wan14b`, 1,200-1,500 in some warm plans: two system
# calls and a page fault or more each, issue 25). with_room runs a function under a frame
# whose value stack is FRAME_ROOM slots too large: its chunk is 1 MiB, the function's frames
# nest in the unused half, and pages never used stay untouched.
FRAME_ROOM = 1 << 16


def _call(function: Callable[[], Any]) -> Any:
    return function()


def _roomy() -> Callable:
    code = _call.__code__
    try:
        code = code.replace(co_stacksize=code.co_stacksize + FRAME_ROOM)
    except (AttributeError, TypeError, ValueError):  # an interpreter without the field
        return _call
    return type(_call)(code, _call.__globals__, _call.__name__)


_ROOMY = _roomy()


def with_room(function: Callable[[], Any]) -> Any:
    """function(), its calls nested in one large frame chunk (FRAME_ROOM)."""
    return _ROOMY(function)


def solve(query, kb: KnowledgeBase | None = None, *, packs: list[str] | None = None,
          solver: str = "z3"):
    """The fastest plan that fits, explained; `query` is a Query or a dict of its fields."""
    return with_room(lambda: _solve(query, kb, packs, solver))


def _solve(query, kb: KnowledgeBase | None, packs: list[str] | None, solver: str):
    from kbsolve.program.query import Query
    from kbsolve.plan.run import plan
    knowledge = kb or load_kb(packs)
    query = query if isinstance(query, Query) else Query(**query)
    return plan(knowledge if kb is not None else _scoped(knowledge, query), query, solver)


def estimate(query, config: dict[str, str] | None = None, kb: KnowledgeBase | None = None, *,
             packs: list[str] | None = None):
    """Memory and speed of one configuration; unset options take their defaults."""
    from kbsolve.program.query import Query
    from kbsolve.plan.run import estimate as run_estimate
    knowledge = kb or load_kb(packs)
    query = query if isinstance(query, Query) else Query(**query)
    return run_estimate(knowledge if kb is not None else _scoped(knowledge, query), query,
                        config or {})


def _scoped(kb: KnowledgeBase, query) -> KnowledgeBase:
    """The loaded KB as the query's plan reads it: from the KB cache, only the entries of
    the query's framework and core are unpickled (dsl/kb.py KnowledgeBase.scoped)."""
    from kbsolve.program.query import framework_of
    framework = framework_of(kb, query)
    return kb.scoped(framework) if framework else kb


def emit(plan, directory: str, kb: KnowledgeBase | None = None, *,
         packs: list[str] | None = None, force: bool = False) -> list[str]:
    """Write the framework's files for a plan; returns the paths written."""
    return emit_files(plan, directory, kb, packs=packs, force=force).written


def emit_files(plan, directory: str, kb: KnowledgeBase | None = None, *,
               packs: list[str] | None = None, force: bool = False):
    """Write the framework's files for a plan into a folder that holds nothing else
    (unless `force`); returns the paths written and the stale ones of an earlier
    emit removed (plan/emit_folder.py)."""
    from kbsolve.plan.emit import write_files
    if plan.status not in EMITTABLE or not plan.config:
        raise KbError(Diagnostic(f"--emit {directory}: the plan is {plan.status}, nothing to "
                                 f"write"))
    return write_files(kb if kb is not None else load_kb(packs).scoped(plan.framework), plan,
                       directory, force)


def check_emit_folder(directory: str, force: bool = False) -> None:
    """Refuse, before any work, a folder holding files `--emit` did not write."""
    from kbsolve.plan.emit_folder import check_folder
    check_folder(directory, force)


def run_kb_tests(packs: list[str] | None = None, select: str | None = None):
    """Run the DSL tests of the shipped KB and packs."""
    from kbsolve.lint.kbtest import run_tests
    return run_tests(load_kb(packs), select)


def test_coverage(packs: list[str] | None = None) -> dict[str, list[str]]:
    from kbsolve.lint.kbtest import coverage
    return coverage(load_kb(packs))


def coverage_report(packs: list[str] | None = None):
    """Per kind (hard rules, warnings, checklist items): total and the untested ones."""
    from kbsolve.lint.coverage import coverage
    return coverage(load_kb(packs))


# ---- the rule author's toolkit (kb fmt, kb check --deep, kb graph) -----------

def format_rule_files(paths: list[str] | None = None, *, packs: list[str] | None = None,
                      write: bool = True) -> list[str]:
    """Canonical layout for rule files (default: the shipped KB and packs); returns
    the files that were (or, with write=False, would be) changed."""
    from pathlib import Path

    from kbsolve.dsl.load import kb_roots
    from kbsolve.lint.fmtfiles import format_files
    targets = [Path(p) for p in paths] if paths else kb_roots(packs)
    return format_files(targets, write)


def audit(path: str, gpus: str | None = None, kb: KnowledgeBase | None = None, *,
          packs: list[str] | None = None, fix: bool = False, plan: bool = False,
          allow: list[str] | None = None, model: str | None = None,
          gpu_spec: str | None = None, host_ram: float | None = None):
    """Audit a training project (folder or one config); plan=True adds the solver's
    best plan per config; fix=True writes each config's recommended changes (a
    numbered backup is kept) and returns the re-audit; `allow` names the optins (or groups)
    that recommendations may change; `model`, `gpu_spec`, `host_ram` are the
    planner's --model, --gpu-spec, --host-ram. Returns (AuditReport, {config: Written})."""
    from kbsolve.audit.flags import Flags
    from kbsolve.audit.run import audit_project
    knowledge = kb or load_kb(packs)
    allowed = tuple(allow or ())
    flags = Flags(gpus=gpus, gpu_spec=gpu_spec, model=model, host_ram=host_ram)
    report = audit_project(knowledge, path, with_plan=plan, allow=allowed, flags=flags)
    if not fix:
        return report, {}
    from kbsolve.audit.fix_config import fix_project
    written = fix_project(knowledge, report)
    return (audit_project(knowledge, path, with_plan=plan, allow=allowed, flags=flags)
            if written else report), written


def fix(config: str, symptom: str, gpus: str | None = None, kb: KnowledgeBase | None = None,
        *, packs: list[str] | None = None, write: bool = False,
        allow: list[str] | None = None, model: str | None = None,
        gpu_spec: str | None = None, host_ram: float | None = None):
    """Changes for an OOM, slow or unstable config, found by the reference
    evaluator; `allow` names the optins (or groups) a cure may change; `model`,
    `gpu_spec`, `host_ram` as the planner's flags; with write=True the first is
    written and the file re-audited."""
    from kbsolve.audit.fix_config import fix_config
    from kbsolve.audit.flags import Flags
    return fix_config(kb or load_kb(packs), config, symptom, gpus, write, tuple(allow or ()),
                      Flags(gpus=gpus, gpu_spec=gpu_spec, model=model, host_ram=host_ram))


def deep_check(packs: list[str] | None = None, kb: KnowledgeBase | None = None,
               frameworks: list[str] | None = None):
    """`kb check --deep`: contradictions, dead values and rules, redundant rules,
    unused lets and defs, unwritten options, broken sources (lint/deep.py).
    `kb`: the already loaded KB of these packs; `frameworks`: solve only these
    (`--framework`; all when None)."""
    from kbsolve.dsl.load import kb_roots
    from kbsolve.lint.deep import deep_check as run
    kb = kb or load_kb(packs, use_cache=False)
    for framework in frameworks or ():
        if framework not in kb.frameworks:
            from kbsolve.diagnostics import did_you_mean
            raise KbError(Diagnostic(f"unknown framework '{framework}' (--framework)"
                                     f"{did_you_mean(framework, kb.frameworks)}"))
    return run(kb, kb_roots(packs), frameworks)


def kb_graph(what: str, name: str, fmt: str = "text", framework: str | None = None,
             packs: list[str] | None = None) -> str:
    """The dependency neighbourhood of an option, rule or quantity (lint/graph.py),
    rendered as text, dot, mermaid or json."""
    from kbsolve.lint import graph as kbgraph
    knowledge = load_kb(packs)
    whole = kbgraph.build(knowledge)
    hoods = [kbgraph.neighbourhood(knowledge, whole, centre)
             for centre in kbgraph.find(knowledge, whole, what, name, framework)]
    return kbgraph.render(knowledge, hoods, fmt)
