"""`python -m bench`: run every benchmark, print one table, write bench/results.json."""

from __future__ import annotations

import json
import time
from pathlib import Path

from bench import accuracy, kb_load, solve
from bench.machine import describe


def main() -> None:
    results = {"machine": describe(), "date": time.strftime("%Y-%m-%d"),
               "kb_load": kb_load.measure(), "cli": solve.cold_cli(), "warm": solve.warm(),
               "z3_vs_enumerator": solve.versus_enumerator(),
               "memory_accuracy": {k: v for k, v in accuracy.summarise(accuracy.evaluate()).items()
                                   if k != "worst_rows"}}
    rows = [(k, v) for section in list(results.values())[2:] for k, v in section.items()]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key.ljust(width)}  {value}")
    out = Path(__file__).with_name("results.json")
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"written to {out}")


if __name__ == "__main__":
    main()
