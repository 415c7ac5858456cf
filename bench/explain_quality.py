"""How true the explanations' decisive comparisons are, over bench/plan_bytes.py's
~100-query grid (its dumps: `python -m bench.plan_bytes record FILE`).

A decisive comparison names the best plan with a rival value: "the best plan with
it" where its search proved it, "the best plan found with it" where the search
spent its node budget first (plan/explain.py _decisive).

    python -m bench.explain_quality check DUMP     # every proven claim, by a full search
    python -m bench.explain_quality compare A B    # the same plans' comparisons, A -> B

`check` solves each plan's problem again and, for every proven claim, searches the
best plan with that value with the whole node budget and no ceiling: the printed
slowdown must be its slowdown (as plan/explain._compared rounds it). `compare` counts,
per changed comparison, proven/found on each side and whether B names a rival closer
to the plan (a smaller slowdown) than A.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter

FITS = "fits only with other changes"
CLAIM = re.compile(r"(\w+)=(\S+) fits only with other changes; the best plan (found )?with it "
                   r"\(.+?\) (?:is (\d+\.\d)% slower|is as fast)")


def _plans(dump: dict) -> dict:
    out = {}
    for query, entry in dump.items():
        try:
            out[query] = json.loads(entry["stdout"])
        except ValueError:  # a refusal's or an error's text
            continue
    return out


def _comparison(choice: dict) -> str:
    return " ".join(r["detail"] for r in choice["reasons"] if FITS in r["detail"])


def _slower(detail: str) -> float | None:
    found = CLAIM.search(detail)
    if not found:
        return None
    return float(found.group(4)) if found.group(4) else 0.0


def compare(a: dict, b: dict) -> Counter:
    """Per comparison that differs: 'found->proven' and the like, and closer / farther /
    same slowdown; 'plans changed' when a config differs (it should not)."""
    counts: Counter = Counter()
    plans_a, plans_b = _plans(a), _plans(b)
    for query, plan_a in plans_a.items():
        plan_b = plans_b.get(query)
        if plan_b is None or plan_a == plan_b:
            continue
        counts["plans changed"] += plan_a.get("config") != plan_b.get("config")
        for choice_a, choice_b in zip(plan_a.get("explanation") or [],
                                      plan_b.get("explanation") or []):
            da, db = _comparison(choice_a), _comparison(choice_b)
            if da == db or not (da and db):
                continue
            side = ["found" if "plan found with" in d else "proven" for d in (da, db)]
            counts[f"{side[0]}->{side[1]}"] += 1
            x, y = _slower(da), _slower(db)
            if x is not None and y is not None:
                counts["closer" if y < x else "farther" if y > x else "same slowdown"] += 1
        alts_a = [alt["speed_delta_pct"] for alt in plan_a.get("alternatives") or []]
        alts_b = [alt["speed_delta_pct"] for alt in plan_b.get("alternatives") or []]
        if alts_a != alts_b and alts_a and alts_b:
            counts["runner-up " + ("better" if min(alts_b) < min(alts_a) else
                                   "worse" if min(alts_b) > min(alts_a) else "same")] += 1
    return counts


def check(dump: dict) -> Counter:
    """Every proven claim of the dump against a full search of its plan's problem."""
    from bench.plan_bytes import argv, queries
    from kbsolve import api
    from kbsolve.program.query import Query, resolve
    kb = api.load_kb()
    counts: Counter = Counter()
    plans = _plans(dump)
    for fields in queries():
        plan = plans.get(" ".join(argv(fields)))
        if plan is None or plan["status"] != "optimal":
            continue
        details = [r["detail"] for c in plan["explanation"] for r in c["reasons"]
                   if FITS in r["detail"]]
        counts["comparisons"] += len(details)
        claims = [m for m in map(CLAIM.search, details) if m and not m.group(3)]
        if not claims:
            continue
        query = {k: v for k, v in fields.items()
                 if k in ("gpus", "model", "framework", "task", "network", "set", "allow")}
        problem = resolve(kb, Query(**query)).problem
        if problem.objective != "speed":
            counts["not checked (memory objective)"] += len(claims)
            continue
        for claim, holds, slower in proven_claims(problem, details):
            counts["proven, true" if holds else "proven, WRONG"] += 1
            if not holds:
                print("WRONG:", " ".join(argv(fields)), "|", claim, "| best:", slower)
    return counts


def proven_claims(problem, details: list[str]) -> list[tuple[str, bool, float | None]]:
    """(claim, whether it holds, the best plan's slowdown) of each proven decisive claim
    among a plan's reason `details` (speed objective): the best plan with the claimed
    value, found with the whole node budget and no ceiling, is as much slower than the
    plan as printed (rounded as plan/explain._compared rounds it)."""
    from kbsolve.solver.search import Search
    claims = [m for m in map(CLAIM.search, details) if m and not m.group(3)]
    if not claims:
        return []
    search = Search(problem)
    best = search.run()
    found = []
    for claim in claims:
        option, shown, _, pct = claim.groups()
        key = next(o.key for o in problem.options if o.name == option)
        value = next(v for v in problem.choices[key] if str(v).lower() == shown.lower())
        truth = search.run(fixed={key: value})
        if best.status != "optimal" or truth.status != "optimal":
            found.append((claim.group(0), False, None))
            continue
        slower = round(float((truth.metrics.time_per_work / best.metrics.time_per_work - 1)
                             * 100), 2)
        found.append((claim.group(0), f"{slower:.1f}" == pct if pct else slower < 0.05,
                      slower))
    return found


def main(args: list[str]) -> int:
    if args[:1] == ["check"] and len(args) == 2:
        with open(args[1]) as f:
            counts = check(json.load(f))
        print(dict(counts))
        return 1 if counts["proven, WRONG"] else 0
    if args[:1] == ["compare"] and len(args) == 3:
        with open(args[1]) as f, open(args[2]) as g:
            print(dict(compare(json.load(f), json.load(g))))
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
