"""The KB's estimates of the committed trace grid's cases, each (file, case) computed
once per test run (bench/trace_compare.py `evaluate`'s rows).

Several tests read the same rows (test_trace_grid.py, test_trace_peaks.py: the traced
cases of qwen3-0.6b, mistral-7b-v0.3, ... and the KTO retrace) and none changes them:
they are shared read-only, as the solved plans of tests/plans.py are shared by copy."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from bench import trace_compare

_ROWS: dict = {}


def evaluated(path=trace_compare.DATA, models: tuple[str, ...] = (), where=None) -> dict:
    """trace_compare.evaluate(path, models), each (file, case)'s row computed once per
    run. `where(case)` keeps only the cases a test reads (a test of checkpointed LoRA
    need not estimate its models' full-tuning rows). The missing cases are estimated by
    `evaluate` itself, on a copy of the file that holds only them (a row depends on its
    case alone); a case that a later retrace file replaces is not estimated, as in
    `evaluate`. The rows come in evaluate's own order (file by file, each file's cases
    in order; a retrace file's row, trace_compare.with_retraces, in the place of the row
    it replaces), with its environment (the first file's) and its failed list."""
    paths = trace_compare.with_retraces([path] if isinstance(path, Path) else list(path))
    assert models, "evaluate without models reads every case: call it directly"
    files = [(file, json.loads(file.read_text(encoding="utf-8"))) for file in paths]
    latest = {case["id"]: file for file, data in files for case in data["cases"]}
    rows: list = []
    place: dict = {}  # a replaced case's place, for its retrace's row
    failed, environment = [], None
    for file, data in files:
        cases = [c for c in data["cases"] if c["model"] in models and (where is None or where(c))]
        missing = [c for c in cases if latest[c["id"]] == file and (file, c["id"]) not in _ROWS]
        if missing:
            with tempfile.TemporaryDirectory() as folder:
                part_file = Path(folder) / file.name
                part_file.write_text(json.dumps(dict(data, cases=missing)), encoding="utf-8")
                part = trace_compare.evaluate(part_file, models=models)
            assert [r["id"] for r in part["rows"]] == [c["id"] for c in missing]
            _ROWS.update(((file, row["id"]), row) for row in part["rows"])
        environment = data["environment"] if environment is None else environment
        failed += data.get("failed", [])  # the file's, whichever model read it
        for case in cases:
            if latest[case["id"]] != file:
                place[case["id"]] = len(rows)
                rows.append(None)
            elif case["id"] in place:
                rows[place.pop(case["id"])] = _ROWS[file, case["id"]]
            else:
                rows.append(_ROWS[file, case["id"]])
    failed = list({f["id"]: f for f in failed if f["id"] not in latest}.values())
    return {"environment": environment, "rows": [r for r in rows if r is not None],
            "failed": failed}
