"""`kbsolve kb test [--coverage]`: one line per KB test, then what has no test."""

from __future__ import annotations


def results(results: list) -> str:
    lines = []
    for result in results:
        lines.append(f"{'PASS' if result.passed else 'FAIL'}  {result.name}")
        for failure in result.failures:
            lines.append(f"      {failure}  ({result.test.meta.span})")
    failed = sum(not r.passed for r in results)
    lines.append(f"{len(results) - failed} passed, {failed} failed")
    return "\n".join(lines)


def coverage(rows: list) -> str:
    lines = []
    for row in rows:
        tested = row.total - len(row.untested)
        lines.append(f"coverage of {row.kind}: {tested}/{row.total} ({row.percent:.0f}%)")
        lines.append(f"untested {row.short}: {len(row.untested)}")
        for key, location in row.untested:
            lines.append(f"  {key}  ({location})")
    return "\n".join(lines)
