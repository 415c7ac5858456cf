"""`python -m bench`: run every benchmark, print one table, write bench/results.json."""

from __future__ import annotations

import json
import time
from pathlib import Path

from bench import kb_load
from bench.machine import describe


def main() -> None:
    results = {"machine": describe(), "date": time.strftime("%Y-%m-%d"),
               "kb_load": kb_load.measure()}
    width = max(len(k) for k in results["kb_load"])
    for key, value in results["kb_load"].items():
        print(f"{key.ljust(width)}  {value}")
    out = Path(__file__).with_name("results.json")
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"written to {out}")


if __name__ == "__main__":
    main()
