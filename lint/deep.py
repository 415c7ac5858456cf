"""`kb check --deep`: everything the front end cannot see without solving."""

from __future__ import annotations

import time
from pathlib import Path

from kbsolve.diagnostics import Diagnostic, Note
from kbsolve.dsl.kb import KnowledgeBase
from kbsolve.dsl.load import pack_of
from kbsolve.program.batch import batch_options
from kbsolve.lint import sources, static
from kbsolve.lint.solverchecks import Finding, check_framework
from kbsolve.results.lint import DeepReport


def deep_check(kb: KnowledgeBase, roots: list[Path],
               frameworks: list[str] | None = None) -> DeepReport:
    """`frameworks`: solve only these (a pack author's own); the checks that read
    the KB without solving still cover all of it."""
    start = time.monotonic()
    report = DeepReport()
    dead_values: dict[str, list[Note]] = {}
    for framework in sorted(kb.frameworks if frameworks is None else set(frameworks)):
        try:
            solved = check_framework(kb, framework)
        except Exception as error:  # a formula the analysis cannot take: say so, go on
            report.diagnostics.append(Diagnostic(
                f"could not analyse {framework} with the solver: {type(error).__name__}: "
                f"{error}", kb.frameworks[framework].meta.span, severity="warning",
                code="not-analysed"))
            continue
        report.situations[framework] = solved.situations
        if solved.incomplete:
            report.notes.append(f"{framework}: {solved.incomplete} GPU x model combinations "
                                f"left out (a fact they lack)")
        if solved.unknown:
            report.notes.append(f"{framework}: the solver gave up on some questions")
        report.notes += [f"not analysed: {item}" for item in solved.skipped]
        batch = batch_options(kb, framework)
        for finding in solved.findings:
            if finding.kind == "forbidden-value":
                report.forbidden_values += 1
                continue
            if finding.kind == "dead-value" and finding.subject.partition("=")[0] in batch:
                continue  # batch options take the values --global-batch asks for
            diagnostic = _diagnostic(kb, framework, finding)
            report.diagnostics.append(diagnostic)
            if finding.kind == "dead-value":
                dead_values[finding.subject] = list(diagnostic.notes)
    report.diagnostics += static.check_recommendations(kb, dead_values)
    report.diagnostics += static.unused_lets(kb) + static.unused_defs(kb)
    report.diagnostics += static.unemitted_options(kb) + static.unsourced_options(kb)
    report.diagnostics += static.silent_options(kb)
    report.diagnostics += split_facts(kb, roots)
    broken, skipped = sources.broken_sources(kb, roots)
    report.diagnostics += broken
    if skipped:
        report.notes.append(skipped)
    report.diagnostics, report.silenced = silence(kb, roots, report.diagnostics)
    report.diagnostics.sort(key=lambda d: (d.span.file if d.span else "",
                                           d.span.line if d.span else 0))
    report.seconds = time.monotonic() - start
    return report


def split_facts(kb: KnowledgeBase, roots: list[Path]) -> list[Diagnostic]:
    """Facts declared apart from a field of their own pack: the first edition's two
    declarations of one thing, which `kb fmt` joins (`fact` in the field's body)."""
    found = []
    for path, fact in sorted(kb.facts.items()):
        group, _, name = path.partition(".")
        spec = kb.vocabulary.field(group, name)
        if spec is None or spec.meta.span == fact.meta.span:
            continue
        if pack_of(fact.meta.span.file, roots) == pack_of(spec.meta.span.file, roots):
            found.append(Diagnostic(
                f"fact {path} repeats field {path} of the same pack; write 'fact' in the "
                f"field's body", fact.meta.span, severity="warning", code="split-fact",
                notes=(Note("the field is declared here", spec.meta.span),),
                hint="kbsolve kb fmt does it"))
    return found


def silence(kb: KnowledgeBase, roots: list[Path],
            found: list[Diagnostic]) -> tuple[list[Diagnostic], int]:
    """The diagnostics less the warnings that the pack holding them silences by code
    (`silence "CODE"`); a pack silences its own files' warnings only, never an error."""
    silenced = {(pack_of(s.meta.span.file, roots), s.code) for s in kb.silences}
    if not silenced:
        return found, 0
    kept = [d for d in found if d.severity != "warning" or d.span is None or
            (pack_of(d.span.file, roots), d.code) not in silenced]
    return kept, len(found) - len(kept)


def _diagnostic(kb: KnowledgeBase, framework: str, finding: Finding) -> Diagnostic:
    notes = tuple(_note(kb, part) for part in finding.core)
    anywhere = "for any GPU and model in the catalogs"
    if finding.kind == "contradiction":
        first = notes[0].span if notes else None
        return Diagnostic(f"the hard rules of {framework} contradict each other {anywhere}",
                          first, code="contradiction", notes=notes,
                          hint="these rules cannot all hold at once; drop or relax one")
    if finding.kind == "dead-value":
        key, _, value = finding.subject.partition("=")
        option = kb.options[key]
        return Diagnostic(f"value {_shown(value)} of option '{option.name}' can never be "
                          f"chosen {anywhere}", option.meta.span, code="dead-value",
                          notes=notes)
    name = finding.subject.split(":", 1)[1]
    if finding.kind == "silent-warning":
        warn = kb.warnings[name]
        return Diagnostic(f"warning {warn.id} can never fire {anywhere}", warn.meta.span,
                          severity="warning", code="silent-warning", notes=notes)
    rule = kb.rules[name]
    if finding.kind == "dead-rule":
        return Diagnostic(f"rule {rule.id} never applies: its condition is false {anywhere}",
                          rule.meta.span, severity="warning", code="dead-rule", notes=notes)
    message = f"rule {rule.id} is implied by other rules" if notes else \
        f"rule {rule.id} holds by itself {anywhere}"
    return Diagnostic(message, rule.meta.span, severity="warning", code="redundant",
                      notes=notes)


def _note(kb: KnowledgeBase, part: str) -> Note:
    kind, _, key = part.partition(":")
    if kind == "rule":
        rule = kb.rules[key]
        return Note(f"rule {rule.id} ({rule.kind}): {rule.meta.because}", rule.meta.span)
    option = kb.options[key]
    return Note(f"the 'when' clause of option {option.name}", option.meta.span)


def _shown(value: str) -> str:
    if value.startswith("Fraction("):
        numbers = value[len("Fraction("):-1].split(",")
        top, bottom = int(numbers[0]), int(numbers[1])
        return str(top) if bottom == 1 else f"{top}/{bottom}"
    return value
