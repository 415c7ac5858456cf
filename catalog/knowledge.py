"""The checked KB as the layers above read it: the rules, checked by the language
(dsl/), with the catalogs validated against the vocabulary those rules declare;
cached on disk by a digest of every source.

The catalog sits above the language: this module reads the language's results
(the rule files, their ASTs, the vocabulary, the checked rules) and the language
imports nothing of the catalog (tests/test_layers.py).
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path

from kbsolve.diagnostics import DiagnosticSink, KbError
from kbsolve.dsl.cache import KbCache
from kbsolve.dsl.grammar import grammar_text
from kbsolve.dsl.kb import KnowledgeBase
from kbsolve.dsl.load import (_display, file_seen, kb_roots, parse_rules, rule_files,
                              sources_seen)
from kbsolve.version import __version__


def load_kb(paths: list[str | Path] | None = None, *, use_cache: bool = True) -> KnowledgeBase:
    """Load and check the shipped KB plus packs; raise KbError on any error."""
    roots = kb_roots(paths)
    cache = KbCache() if use_cache else None
    if cache is not None:  # the sources as stat() sees them, before they are read
        read_at_ns = time.time_ns()
        key = (__version__, os.getcwd(), tuple(map(str, roots)))
        seen = _sources_seen(roots)
        stamped = cache.stamped(key, seen)
        cached = cache.get(stamped) if stamped else None
        if isinstance(cached, KnowledgeBase):
            return cached
    files, sink = rule_files(roots)
    digest = _digest(files + _catalog_files(roots))
    if cache is not None and not sink.errors:
        cached = cache.get(digest)
        if isinstance(cached, KnowledgeBase):
            cache.stamp(key, seen, digest, read_at_ns)
            return cached
    knowledge = _build(files, roots, sink)
    if cache is not None:
        cache.put(digest, knowledge)
        cache.stamp(key, seen, digest, read_at_ns)
    return knowledge


def _sources_seen(roots: list[Path]) -> tuple | None:
    """Every source of the KB cache key as stat() sees it (dsl/load.py sources_seen): the
    roots' files, then the front end's code (as _code_digest read it, once it has)."""
    files, code = sources_seen(roots), _code_seen()
    return None if files is None or code is None else files + code


def check_paths(paths: list[str | Path] | None = None) -> tuple[KnowledgeBase | None, KbError | None]:
    """`kb check`: the KB, or the error that stopped it (never both)."""
    try:
        return load_kb(paths, use_cache=False), None
    except KbError as exc:
        return None, exc


def _build(files: list[tuple[str, str]], roots: list[Path], sink: DiagnosticSink):
    # Imported here: a cache hit needs neither lark nor networkx.
    from kbsolve.catalog.load import load_catalog
    from kbsolve.dsl.check import check
    from kbsolve.dsl.vocab import build as build_vocabulary

    modules, sources, partial = parse_rules(files, sink)
    # The vocabulary first: the catalogs are validated against the models built
    # from it, and the checker's facts must name its fields. When it is broken
    # the catalogs are not validated: their errors would follow from its own.
    before = len(sink.errors)
    vocabulary = build_vocabulary(modules, sink)
    catalog = None
    if len(sink.errors) == before and vocabulary.fields:
        try:
            catalog = load_catalog(_catalog_dirs(roots), vocabulary)
        except KbError as exc:
            sink.items.extend(exc.diagnostics)
            for diag in exc.diagnostics:
                if diag.span and diag.span.file and Path(diag.span.file).is_file():
                    sources.add(diag.span.file, Path(diag.span.file).read_text("utf-8", "replace"))
    knowledge = check(modules, sink, partial=partial, vocabulary=vocabulary)
    sink.raise_if_errors(sources)
    import hashlib  # here and below: a cached load hashes nothing (OpenSSL, ~3 ms)
    shas = tuple((name, hashlib.sha256(text.encode("utf-8")).hexdigest()) for name, text in files)
    return replace(knowledge, files=shas, catalog=catalog)


def _catalog_files(roots: list[Path]) -> list[tuple[str, str]]:
    found = []
    for directory in _catalog_dirs(roots):
        for path in sorted(directory.glob("*.yaml")):
            try:
                found.append((_display(path), path.read_bytes().decode("utf-8", "replace")))
            except OSError:
                found.append((_display(path), "<unreadable>"))
    return found


def _catalog_dirs(roots: list[Path]) -> list[Path]:
    dirs = []
    for root in roots:
        for candidate in (root / "catalog", root):
            if candidate.is_dir() and any(candidate.glob("*.yaml")):
                dirs.append(candidate)
                break
    return dirs


def _digest(files: list[tuple[str, str]]) -> str:
    import hashlib
    h = hashlib.sha256()
    h.update(__version__.encode())
    h.update(_code_digest().encode())
    h.update(grammar_text().encode("utf-8"))
    for name, text in files:
        h.update(b"\0file\0" + name.encode("utf-8") + b"\0" + text.encode("utf-8"))
    return h.hexdigest()


def _code_digest() -> str:
    """The front end's own code, so that an edited checker never reads a stale cache;
    read once per process (the code running is the code first read)."""
    return _code()[0]


_CODE: list = []  # _code()'s one value, once computed


def _code_files() -> list[Path]:
    package = Path(__file__).resolve().parent.parent
    # listed by name, as sorted(glob("*.py")) named them (a glob compiles its pattern: a
    # regular expression of every cold plan)
    paths = [package / folder / name for folder in ("dsl", "catalog")
             for name in sorted(os.listdir(package / folder)) if name.endswith(".py")]
    # which codes a `silence` may name; which roles a `role` may name
    return paths + [package / "diagnostic_codes.py", package / "roles.py"]


def _code_seen() -> tuple | None:
    """The code files and the grammar as stat() sees them: as _code read them once it has,
    else now (without reading them)."""
    if _CODE:
        return _CODE[0][1]
    paths = [*_code_files(), Path(__file__).resolve().parent.parent / "grammar.lark"]
    seen = tuple(file_seen(str(path)) for path in paths)
    return None if None in seen else seen


def _code() -> tuple[str, tuple | None]:
    """_code_digest's digest, and the code files and the grammar as stat() saw them before
    they were read (None if one could not be)."""
    if not _CODE:
        import hashlib
        seen = _code_seen()
        h = hashlib.sha256()
        for path in _code_files():
            h.update(path.name.encode() + b"\0" + path.read_bytes())
        _CODE.append((h.hexdigest(), seen))
    return _CODE[0]
