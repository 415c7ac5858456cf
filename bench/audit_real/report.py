"""The scorer's tables as text."""

from __future__ import annotations


def _pct(value) -> str:
    return "-" if value is None else f"{value * 100:.1f} %"


def _table(title: str, rows: dict) -> list[str]:
    lines = [title, f"  {'':<14}{'findings':>9}{'correct':>8}{'wrong':>7}{'noise':>7}"
                    f"{'harmful':>8}{'problems':>9}{'found':>7}{'precision':>10}{'recall':>9}"]
    for name, t in rows.items():
        lines.append(f"  {name:<14}{t['findings']:>9}{t['correct']:>8}{t['wrong']:>7}"
                     f"{t['noise']:>7}{t['harmful']:>8}{t.get('problems', 0):>9}"
                     f"{t.get('found', 0):>7}{_pct(t.get('precision')):>10}"
                     f"{_pct(t.get('recall')):>9}")
    return lines


def tables(result: dict) -> str:
    lines = _table("per framework", {**result["by_framework"], "all": result["totals"]})
    kinds = {k: {**v, "precision": v["correct"] / v["findings"] if v["findings"] else None}
             for k, v in result["by_kind"].items()}
    lines += [""] + _table("per finding kind", kinds)
    t = result["totals"]
    lines += ["", f"sets {len(result['sets'])}, precision {_pct(t['precision'])}, recall "
                  f"{_pct(t['recall'])}, harmful {t['harmful']}, median findings per config "
                  f"{result['median_findings_per_config']}, tracebacks {result['tracebacks']}"]
    if result.get("timing"):
        lines.append(f"a {result['timing']['configs']}-config project: "
                     f"{result['timing']['cpu_s']} s CPU")
    for name, line in result["refused_sets"].items():
        lines.append(f"refused {name}: {line}")
    return "\n".join(lines)
