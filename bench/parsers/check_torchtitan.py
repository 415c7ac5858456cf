"""Run inside the torchtitan side venv: each case {file, path, cwd, args} through
`ConfigManager().parse_args` (torchtitan 0.3.0); prints one JSON list of verdicts."""

import json
import os
import sys


def check(case: dict) -> dict:
    from torchtitan.config import ConfigManager
    out = {"file": case["file"], "parser": "torchtitan.config.ConfigManager.parse_args (0.3.0)"}
    here = os.getcwd()
    try:
        os.chdir(case["cwd"])
        ConfigManager().parse_args(case["args"])
        out["verdict"] = "accepted"
    except BaseException as error:  # tyro and argparse refuse with SystemExit
        text = str(error).strip().splitlines()
        out.update(verdict="refused", message=f"{type(error).__name__}: {text[0] if text else ''}"[:300])
    finally:
        os.chdir(here)
    return out


if __name__ == "__main__":
    print(json.dumps([check(case) for case in json.load(open(sys.argv[1], encoding="utf-8"))]))
