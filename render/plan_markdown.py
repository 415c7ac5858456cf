"""Plans and estimates as Markdown."""

from __future__ import annotations

import json

from kbsolve.render.data import as_data
from kbsolve.render.plan_parts import reason, short, speed
from kbsolve.render.plan_table import banded


def markdown(result) -> str:
    return _markdown(as_data(result))


def _markdown(d: dict) -> str:
    lines = [f"# kbsolve plan: {d['framework']}, {d['model']} on {d['query']['gpus']}",
             "", f"Status: **{d.get('status', 'estimate').replace('_', ' ')}**", ""]
    if d.get("memory") is None and not d.get("core"):
        return "\n".join(lines + ["No plan was found within the time-out."]) + "\n"
    if d.get("core"):
        lines += ["## Why it cannot run", ""] + [f"- {reason(r)}" for r in d["core"]]
        lines += ["", "## Fixes", ""] + [f"- {f['description']}" for f in d["fixes"]]
        return "\n".join(lines) + "\n"
    lines += ["## Config", "", "| key | value | why |", "|---|---|---|"]
    kinds = {c["key"]: c for c in d.get("explanation", [])}
    for key, value in d["config"].items():
        c = kinds.get(key)
        lines.append(f"| `{key}` | `{json.dumps(value)}` | "
                     f"{(c['kind'] + ': ' + short(c)) if c else ''} |")
    m = d["memory"]
    lines += ["", "## Memory per GPU", "", "| term | GiB | level | source |", "|---|---|---|---|"]
    lines += [f"| {i['term']} | {i['gib']:.2f} | {i['level']} | {i['source']} |"
              for i in m["breakdown"]]
    band = m.get("band")
    if not banded(m):
        total = f"Device total {m['per_gpu_gib']['device']:.2f} GiB of {m['budget_gib']:.2f} " \
                f"GiB budget." + (f" Error band: {band['because']} ({band['source']})."
                                  if band else "")
    else:
        total = (f"Device total {band['predicted_gib']['device']:.2f} GiB predicted, up to "
                 f"{band['upper_gib']['device']:.2f} GiB with the model's error band "
                 f"(+{band['share']:.1%}), of {m['budget_gib']:.2f} GiB budget: "
                 f"{'fits' if m['fits'] else 'does not fit'} at the upper end. Error band: "
                 f"{band['because']} ({band['source']}).")
    lines += ["", total, "", "## Speed", ""] + speed(d["speed"])[1:]
    return "\n".join(lines) + "\n"
