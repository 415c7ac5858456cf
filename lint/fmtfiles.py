"""`kb fmt`: find rule files, format them all or none."""

from __future__ import annotations

from pathlib import Path

from kbsolve.diagnostics import Diagnostic, KbError, SourceCache, Span
from kbsolve.dsl.fmt import format_text


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
    """The files whose layout is not canonical; written back when `write`.
    When any file does not parse, nothing is written and KbError lists them all."""
    sources = SourceCache()
    errors: list[Diagnostic] = []
    changed: list[tuple[Path, str]] = []
    for path in rule_files(paths):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            errors.append(Diagnostic(f"cannot read rule file: {exc}", Span(str(path)),
                                     code="unreadable"))
            continue
        sources.add(str(path), text)
        try:
            canonical = format_text(text, str(path))
        except KbError as exc:
            errors.extend(exc.diagnostics)
            continue
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
