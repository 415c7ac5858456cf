"""Find rule files and catalogs, parse and check them, cache the result.

The shipped KB is `kbsolve/kb`; rule packs (`--kb DIR`, `KBSOLVE_PATH`) are
laid on top. A pack holds `**/*.kb` files and optionally `catalog/*.yaml`.
"""

from __future__ import annotations

import functools

import hashlib
import os
from importlib import resources
from pathlib import Path

from kbsolve import __version__
from kbsolve.diagnostics import (Diagnostic, DiagnosticSink, KbError, Note, SourceCache, Span)
from kbsolve.dsl.cache import KbCache
from kbsolve.dsl.grammar import grammar_text
from kbsolve.dsl.kb import KnowledgeBase

MAX_SOURCE_BYTES = 4 * 1024 * 1024

PATH_ENV = "KBSOLVE_PATH"


def shipped_root() -> Path:
    return Path(str(resources.files("kbsolve").joinpath("kb")))


def kb_roots(extra: list[str | Path] | None = None) -> list[Path]:
    """The shipped KB, then KBSOLVE_PATH entries, then explicit --kb dirs."""
    roots = [shipped_root()]
    for part in os.environ.get(PATH_ENV, "").split(os.pathsep):
        if part.strip():
            roots.append(Path(part.strip()))
    roots += [Path(p) for p in extra or ()]
    return roots


def load_kb(paths: list[str | Path] | None = None, *, use_cache: bool = True) -> KnowledgeBase:
    """Load and check the shipped KB plus packs; raise KbError on any error."""
    roots = kb_roots(paths)
    files, sink = _rule_files(roots)
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


@functools.lru_cache(maxsize=512)
def _parsed(text: str, name: str):
    """A module's AST (immutable), parsed once per process per text: a process
    that loads the KB again (other packs, no cache) parses only what changed."""
    from kbsolve.dsl.parse import parse_module
    return parse_module(text, name)


def _build(files: list[tuple[str, str]], roots: list[Path], sink: DiagnosticSink):
    # Imported here: a cache hit needs neither lark nor networkx.
    from kbsolve.catalog import load_catalog
    from kbsolve.dsl.check import check
    from kbsolve.dsl.vocab import build as build_vocabulary

    sources = SourceCache()
    modules = []
    partial = False
    for name, text in files:
        sources.add(name, text)
        try:
            modules.append(_parsed(text, name))
        except KbError as exc:
            sink.items.extend(exc.diagnostics)
            partial = True
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
    return _with(knowledge, files, catalog)


def _with(knowledge: KnowledgeBase, files, catalog) -> KnowledgeBase:
    from dataclasses import replace
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


def _rule_files(roots: list[Path]) -> tuple[list[tuple[str, str]], DiagnosticSink]:
    sink = DiagnosticSink()
    files: list[tuple[str, str]] = []
    seen: dict[Path, str] = {}
    for root in roots:
        if not root.exists():
            sink.error(f"rule pack '{root}' does not exist", Span(str(root)), code="no-pack")
            continue
        if not root.is_dir():
            sink.error(f"rule pack '{root}' is not a directory", Span(str(root)), code="no-pack")
            continue
        try:
            paths = sorted(root.rglob("*.kb"))
        except (OSError, RuntimeError) as error:  # a symlink loop, an unreadable folder
            sink.error(f"rule pack '{root}': cannot list its files ({error})", Span(str(root)),
                       code="no-pack")
            continue
        for path in paths:
            try:
                real = path.resolve(strict=True)
            except (OSError, RuntimeError) as error:
                sink.error(f"cannot read rule file '{path}' ({error})", Span(str(path)),
                           code="unreadable")
                continue
            if real in seen:
                continue
            seen[real] = str(path)
            text = _read(path, sink)
            if text is not None:
                files.append((_display(path), text))
    return files, sink


def _display(path: Path) -> str:
    """A rule file's name in spans: the shipped KB's as `kb/...` wherever it is installed
    (never a site-packages path), a pack's relative to the working folder if inside it."""
    for root, shown in ((shipped_root(), Path("kb")), (Path.cwd(), Path())):
        try:
            return str(shown / path.relative_to(root))
        except ValueError:
            continue
    return str(path)


def pack_of(file: str, roots: list[Path]) -> Path | None:
    """The pack (one of `roots`) that holds a rule file named as spans name it, or None:
    the root whose shown name is the longest prefix of the file's."""
    shown, best = Path(file), None
    for root in roots:
        prefix = Path(_display(root))
        inside = shown == prefix or prefix in shown.parents or \
            (prefix == Path(".") and not shown.is_absolute())
        if inside and (best is None or len(prefix.parts) > len(best[0].parts)):
            best = (prefix, root)
    return best[1] if best else None


def _read(path: Path, sink: DiagnosticSink) -> str | None:
    name = _display(path)
    try:
        if path.stat().st_size > MAX_SOURCE_BYTES:
            sink.error(f"rule file is too large (over {MAX_SOURCE_BYTES} bytes)", Span(name, 1, 1),
                       code="too-large")
            return None
        data = path.read_bytes()
    except OSError as exc:
        sink.error(f"cannot read rule file: {exc.strerror or exc}", Span(name), code="unreadable")
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        col = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        sink.error(f"rule file is not UTF-8 (byte 0x{data[exc.start]:02x})",
                   Span(name, line, col), code="encoding")
        return None


def _digest(files: list[tuple[str, str]]) -> str:
    h = hashlib.sha256()
    h.update(__version__.encode())
    h.update(_code_digest().encode())
    h.update(grammar_text().encode("utf-8"))
    for name, text in files:
        h.update(b"\0file\0" + name.encode("utf-8") + b"\0" + text.encode("utf-8"))
    return h.hexdigest()


def _code_digest() -> str:
    """The front end's own code, so that an edited checker never reads a stale cache."""
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


def check_paths(paths: list[str | Path] | None = None) -> tuple[KnowledgeBase | None, KbError | None]:
    """`kb check`: the KB, or the error that stopped it (never both)."""
    try:
        return load_kb(paths, use_cache=False), None
    except KbError as exc:
        return None, exc


__all__ = ["load_kb", "check_paths", "kb_roots", "shipped_root", "PATH_ENV", "Diagnostic",
           "Note"]
