"""Sources that point nowhere: a seed section, a fact sheet section or a KB
file that does not exist. Seeds and fact sheets live in the shared folder
(`../shared` next to the package, or $KBSOLVE_SHARED_DIR); without it the
check is skipped with a note (a wheel install has no shared folder)."""

from __future__ import annotations

import os
import re
from functools import lru_cache
from pathlib import Path

from kbsolve.diagnostics import Diagnostic
from kbsolve.dsl.kb import KnowledgeBase

SHARED_ENV = "KBSOLVE_SHARED_DIR"


def shared_dir() -> Path | None:
    configured = os.environ.get(SHARED_ENV)
    folder = Path(configured) if configured else Path(__file__).resolve().parents[2] / "shared"
    return folder if folder.is_dir() else None


def sourced_items(kb: KnowledgeBase):
    for table in (kb.frameworks, kb.options, kb.nokeys, kb.facts, kb.lets, kb.rules,
                  kb.warnings, kb.optins, kb.preferences, kb.memory, kb.speed, kb.work,
                  kb.categories, kb.checks, kb.detectors):
        for item in table.values():
            if item.meta.source:
                yield item.meta.source, item.meta.span
    vocabulary = getattr(kb, "vocabulary", None)  # fields, enums and their extensions
    if vocabulary is not None:
        metas = [f.meta for f in vocabulary.fields]
        for enum in vocabulary.enums.values():
            metas += [enum.meta] + [meta for _, meta in enum.extensions]
        for meta in metas:
            if meta.source:
                yield meta.source, meta.span


def broken_sources(kb: KnowledgeBase, roots: list[Path]) -> tuple[list[Diagnostic], str]:
    """Diagnostics, and a note when part of the check was skipped."""
    shared = shared_dir()
    out: list[Diagnostic] = []
    for source, span in sourced_items(kb):
        for part in (p.strip() for p in source.split(";")):
            problem = _problem(part, shared, roots)
            if problem:
                out.append(Diagnostic(f"source '{part}' {problem}", span, code="bad-source"))
    note = "" if shared else (f"seed and reference sources not checked: no shared folder "
                              f"(set {SHARED_ENV})")
    return out, note


def _problem(part: str, shared: Path | None, roots: list[Path]) -> str:
    kind, _, where = part.partition(":")
    if kind == "kb":
        path = where.split()[0] if where.split() else ""
        places = [r / path for r in roots] + [r.parent / path for r in roots]
        top = Path(path).parts[0] if path else ""
        if top and not any((r / top).exists() or (r.parent / top).exists() for r in roots):
            return ""  # its folder is not installed here (docs/ is not in the wheel)
        return "" if any(p.exists() for p in places) else "names a file that does not exist"
    if kind not in ("seed", "reference") or shared is None:
        return ""
    name, _, section = where.split()[0].partition("#") if where.split() else ("", "", "")
    if kind == "seed":
        files = sorted((shared / "seeds").glob(f"{name}_*")) + \
            sorted((shared / "seeds").glob(f"{name}.*"))
    else:
        files = [shared / "reference" / name] if (shared / "reference" / name).is_file() else []
    if not files:
        return f"names a {kind} file that does not exist"
    if section and not _has_section(str(files[0]), kind, section):
        return f"names section '{section}', which {files[0].name} does not have"
    return ""


@lru_cache(maxsize=32)
def _lines(path: str) -> tuple[str, ...]:
    return tuple(Path(path).read_text(encoding="utf-8", errors="replace").splitlines())


def _has_section(path: str, kind: str, section: str) -> bool:
    escaped = re.escape(section)
    if kind == "reference":
        pattern = re.compile(rf"^#+\s+{escaped}(\.|\s|$)")
    elif re.fullmatch(r"[A-Za-z0-9]{1,3}", section):
        pattern = re.compile(rf"^\s*{escaped}[.、:)\s]")
    else:
        pattern = re.compile(rf"{escaped}")
    return any(pattern.search(line) for line in _lines(path))
