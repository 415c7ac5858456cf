"""`--explain OPTION`: one option's full derivation."""

from __future__ import annotations

import json

from kbsolve.diagnostics import Diagnostic, KbError, did_you_mean


def derivation(plan, option: str) -> str:
    choices = {c.option: c for c in plan.explanation} | {c.key: c for c in plan.explanation}
    if option not in choices:
        raise KbError(Diagnostic(f"--explain: no option '{option}' in this plan"
                                 f"{did_you_mean(option, [c.option for c in plan.explanation])}"))
    c = choices[option]
    out = [f"{c.option} = {json.dumps(c.value)}   (key '{c.key}', {c.kind})", ""]
    for r in c.reasons:
        out.append(f"- {r.rule}: {r.detail or r.because}")
        if r.because and r.detail:
            out.append(f"    because {r.because}")
        if r.source:
            out.append(f"    source {r.source}  at {r.location}")
    if plan.memory:
        out += ["", "Memory terms in this plan (GiB per GPU):"]
        out += [f"  {m.term}: {m.gib:.3f} ({m.level}, {m.location})" for m in plan.memory.breakdown]
    if plan.speed:
        out += ["", "Speed terms:"] + [f"  {k}: {v:.6g}" for k, v in plan.speed.terms.items()]
    return "\n".join(out)
