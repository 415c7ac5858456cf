"""python -m bench.audit_real [--fix] [--parsers] [--json PATH] [set ...]

Audits every set of bench/data/real_projects with its labelled hardware, scores the
findings against the labels and prints the tables; writes bench/audit_real.json."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bench.audit_real.report import tables
from bench.audit_real.run import run_all

OUT = Path(__file__).resolve().parents[1] / "audit_real.json"


def main(argv: list[str]) -> int:
    fix, parsers = "--fix" in argv, "--parsers" in argv
    out = OUT
    if "--json" in argv:
        out = Path(argv[argv.index("--json") + 1])
        argv = [a for a in argv if a != str(out)]
    only = [a for a in argv if not a.startswith("--")]
    result = run_all(fix=fix, parsers=parsers, only=only)
    print(tables(result))
    out.write_text(json.dumps(result, indent=1, default=str) + "\n", encoding="utf-8")
    print(f"written: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
