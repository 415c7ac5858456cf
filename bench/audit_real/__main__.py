"""python -m bench.audit_real [--fix] [--parsers] [--json PATH] [set ...]

Audits every set of bench/data/real_projects with its labelled hardware, scores the
findings against the labels and prints the tables; writes bench/audit_real.json."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bench.audit_real.labels import CORPUS, set_dirs
from bench.audit_real.report import tables
from bench.audit_real.run import run_all

OUT = Path(__file__).resolve().parents[1] / "audit_real.json"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.audit_real", description=__doc__)
    parser.add_argument("sets", nargs="*", help="set names (default: all)")
    parser.add_argument("--fix", action="store_true", help="fix a copy of each set and re-audit it")
    parser.add_argument("--parsers", action="store_true",
                        help="with --fix: the frameworks' parsers re-check the fixed configs")
    parser.add_argument("--json", type=Path, default=OUT, help=f"where to write (default {OUT})")
    args = parser.parse_args(argv)
    known = {folder.name for folder in set_dirs(CORPUS)}
    if unknown := [s for s in args.sets if s not in known]:
        parser.error(f"no such set: {', '.join(unknown)} (see {CORPUS})")
    result = run_all(fix=args.fix, parsers=args.parsers, only=args.sets)
    print(tables(result))
    args.json.write_text(json.dumps(result, indent=1, default=str) + "\n", encoding="utf-8")
    print(f"written: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
