"""The scorer's tables as text."""

from __future__ import annotations


def _pct(value) -> str:
    return "-" if value is None else f"{value * 100:.1f} %"


def _table(title: str, rows: dict, problems: bool = True) -> list[str]:
    head = f"  {'':<15}{'findings':>9}{'correct':>8}{'wrong':>7}{'noise':>7}{'harmful':>8}"
    head += f"{'problems':>9}{'found':>7}{'precision':>10}{'recall':>9}" if problems else \
        f"{'precision':>10}"
    lines = [title, head]
    for name, t in rows.items():
        line = (f"  {name:<15}{t['findings']:>9}{t['correct']:>8}{t['wrong']:>7}"
                f"{t['noise']:>7}{t['harmful']:>8}")
        line += (f"{t.get('problems', 0):>9}{t.get('found', 0):>7}{_pct(t.get('precision')):>10}"
                 f"{_pct(t.get('recall')):>9}") if problems else f"{_pct(t.get('precision')):>10}"
        lines.append(line)
    return lines


def _part(result: dict, title: str = "") -> list[str]:
    """The tables of one summary (the whole corpus, or one part of it)."""
    lines = _table(f"{title}per framework", {**result["by_framework"], "all": result["totals"]})
    kinds = {(k if k != "unknown_key" else "unknown_keys*"):
             {**v, "precision": v["correct"] / v["findings"] if v["findings"] else None}
             for k, v in result["by_kind"].items()}
    lines += [""] + _table(f"{title}per finding kind", kinds, problems=False)
    lines.append("  * the one line of keys kbsolve does not model: counted only where wrong")
    lines += ["", f"{title}labelled problems per kind",
              f"  {'':<17}{'problems':>9}{'found':>7}{'recall':>9}"]
    for kind, p in result["problems_by_kind"].items():
        lines.append(f"  {kind:<17}{p['problems']:>9}{p['found']:>7}"
                     f"{_pct(p['found'] / p['problems'] if p['problems'] else None):>9}")
    return lines


def _line(name: str, count: int, result: dict) -> str:
    t = result["totals"]
    return (f"{name} {count}, precision {_pct(t['precision'])}, recall {_pct(t['recall'])}, "
            f"harmful {t['harmful']}, median findings per config "
            f"{result['median_findings_per_config']}, tracebacks {result['tracebacks']}")


def tables(result: dict) -> str:
    lines = _part(result)
    lines += ["", _line("sets", len(result["sets"]), result)]
    parts = result.get("parts") or {}
    if (held := parts.get("holdout")) and held["set_names"]:
        lines += ["", "=" * 20 + " held-out sets (labelled before the audit ran on them) "
                  + "=" * 20] + _part(held, "held-out: ")
        for name, part in parts.items():
            lines.append(_line(f"{name} sets", len(part["set_names"]), part))
    if result.get("timing"):
        lines.append(f"a {result['timing']['configs']}-config project: "
                     f"{result['timing']['cpu_s']} s CPU")
    if kept := result.get("parser_kept"):
        lines.append(f"fixed configs the parser accepted before, still accepted after: "
                     f"{kept['accepted_after']} of {kept['fixed_and_accepted_before']}")
    for name, line in result["refused_sets"].items():
        lines.append(f"refused {name}: {line}")
    return "\n".join(lines)
