"""The checked KB as the layers above read it: the rules, checked by the language
(dsl/), with the catalogs validated against the vocabulary those rules declare;
cached on disk by a digest of every source.

The catalog sits above the language: this module reads the language's results
(the rule files, their ASTs, the vocabulary, the checked rules) and the language
imports nothing of the catalog (tests/test_layers.py).
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import replace
from pathlib import Path

from kbsolve.diagnostics import DiagnosticSink, KbError
from kbsolve.dsl.cache import KbCache
from kbsolve.dsl.grammar import grammar_text
from kbsolve.dsl.kb import KnowledgeBase
from kbsolve.dsl.load import _display, kb_roots, parse_rules, rule_files
from kbsolve.version import __version__


def load_kb(paths: list[str | Path] | None = None, *, use_cache: bool = True) -> KnowledgeBase:
    """Load and check the shipped KB plus packs; raise KbError on any error."""
    roots = kb_roots(paths)
    files, sink = rule_files(roots)
    digest = _digest(files + _catalog_files(roots))
    cache = KbCache() if use_cache else None
    if cache is not None and not sink.errors:
        cached = cache.get(digest)
        if isinstance(cached, KnowledgeBase):
            return cached
    knowledge = _build(files, roots, sink)
    if cache is not None:
        cache.put(digest, knowledge)
    return knowledge


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
    h = hashlib.sha256()
    h.update(__version__.encode())
    h.update(_code_digest().encode())
    h.update(grammar_text().encode("utf-8"))
    for name, text in files:
        h.update(b"\0file\0" + name.encode("utf-8") + b"\0" + text.encode("utf-8"))
    return h.hexdigest()


@functools.lru_cache(maxsize=1)
def _code_digest() -> str:
    """The front end's own code, so that an edited checker never reads a stale cache;
    read once per process (the code running is the code first read)."""
    h = hashlib.sha256()
    package = Path(__file__).resolve().parent.parent
    for folder in ("dsl", "catalog"):
        for path in sorted((package / folder).glob("*.py")):
            h.update(path.name.encode() + b"\0" + path.read_bytes())
    registry = package / "diagnostic_codes.py"  # which codes a `silence` may name
    h.update(registry.name.encode() + b"\0" + registry.read_bytes())
    roles = package / "roles.py"  # which roles a `role` may name
    h.update(roles.name.encode() + b"\0" + roles.read_bytes())
    return h.hexdigest()
