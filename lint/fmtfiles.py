"""`kb fmt`: find rule files, format them all or none."""

from __future__ import annotations

from pathlib import Path

from kbsolve.diagnostics import Diagnostic, KbError, SourceCache, Span
from kbsolve.dsl.fmt import format_text
from kbsolve.dsl.migrate import merge_facts


def rule_files(paths: list[Path]) -> list[Path]:
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files += sorted(path.rglob("*.kb"))
        elif path.is_file():
            files.append(path)
        else:
            raise KbError(Diagnostic(f"no such file or directory '{path}'", Span(str(path)),
                                     code="no-pack"))
    return list(dict.fromkeys(files))


def format_files(paths: list[Path], write: bool) -> list[str]:
    """The files whose layout is not canonical, or that hold a form the language
    replaced (dsl/migrate.py: a fact beside its field); written back when `write`.
    When any file does not parse, nothing is written and KbError lists them all."""
    sources = SourceCache()
    errors: list[Diagnostic] = []
    changed: list[tuple[Path, str]] = []
    texts: dict[Path, str] = {}
    for path in rule_files(paths):
        try:
            texts[path] = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            errors.append(Diagnostic(f"cannot read rule file: {exc}", Span(str(path)),
                                     code="unreadable"))
    laid_out: dict[str, str] = {}
    for path, text in texts.items():
        sources.add(str(path), text)
        try:
            laid_out[str(path)] = format_text(text, str(path))
        except KbError as exc:
            errors.extend(exc.diagnostics)
    if not errors:  # joined on the canonical layout (one declaration a line), then laid out
        migrated = merge_facts(laid_out)
        for path, text in texts.items():
            canonical = format_text(migrated[str(path)], str(path))
            if canonical != text:
                changed.append((path, canonical))
    if errors:
        raise KbError(errors, sources)
    if write:
        for path, canonical in changed:
            path.write_text(canonical, encoding="utf-8")
    return [_shown(path) for path, _ in changed]


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)
