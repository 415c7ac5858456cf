"""Plan JSON byte for byte over a ~100-query grid (every other query of
bench/as_printed.py's grid: LlamaFactory, Flow-Factory, torchtitan, diffusers
and plain PyTorch; pins, --allow, --network), run through the `kbsolve` CLI
in one process (`kbsolve ... --format json`, the exit code kept).

    python -m bench.plan_bytes record FILE   # dump every plan
    python -m bench.plan_bytes compare FILE  # dump again, report the queries that differ

A change that should not change plans (speed work) records before and compares
after; the dumps are not committed (they are the code's output, not a fact).
"""

from __future__ import annotations

import json
import sys
import time


def queries() -> list[dict]:
    from bench.as_printed import grid
    return grid()[::2]


def argv(fields: dict) -> list[str]:
    args = ["--gpus", fields["gpus"], "--model", fields["model"], "--format", "json"]
    for flag in ("framework", "task", "network"):
        if fields.get(flag):
            args += [f"--{flag}", fields[flag]]
    for pin in fields.get("set", []):
        args += ["--set", pin]
    for name in fields.get("allow", []):
        args += ["--allow", name]
    return args


def dump() -> dict[str, dict]:
    from click.testing import CliRunner

    from kbsolve.cli.main import cli
    runner, found = CliRunner(), {}
    for fields in queries():
        args = argv(fields)
        start = time.process_time()
        result = runner.invoke(cli, args, standalone_mode=False)
        code = result.return_value if result.exception is None else repr(result.exception)
        found[" ".join(args)] = {"exit": code, "stdout": result.stdout,
                                 "cpu_s": round(time.process_time() - start, 3)}
    return found


def main(argv_: list[str]) -> int:
    mode, path = argv_
    found = dump()
    if mode == "record":
        with open(path, "w") as out:
            json.dump(found, out, indent=1, sort_keys=True)
        print(f"{len(found)} plans recorded, {sum(v['cpu_s'] for v in found.values()):.1f} s CPU")
        return 0
    with open(path) as f:
        before = json.load(f)
    differ = [q for q in before if q not in found or
              (before[q]["exit"], before[q]["stdout"]) != (found[q]["exit"], found[q]["stdout"])]
    for q in differ:
        print("DIFFERS:", q)
    print(f"{len(before) - len(differ)} of {len(before)} plans byte-identical; CPU "
          f"{sum(v['cpu_s'] for v in before.values()):.1f} s before, "
          f"{sum(v['cpu_s'] for v in found.values()):.1f} s now")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
