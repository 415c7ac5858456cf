"""The same query in fresh processes, each with its own PYTHONHASHSEED: the JSON
plans must be byte-identical. The KB's files are fingerprinted before and after,
so that a KB edited during the run is not mistaken for non-determinism."""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile

from bench.budget import within

QUERY = ["kbsolve", "--gpus", "8xA100", "--model", "qwen3-8b", "--top", "1", "--timeout", "120",
         "--format", "json"]


def kb_fingerprint() -> str:
    from kbsolve.dsl.load import shipped_root
    h = hashlib.sha256()
    for path in sorted(p for p in shipped_root().rglob("*") if p.is_file()):
        h.update(path.as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def measure(runs: int = 20, budget_s: float = 45.0) -> dict:
    digests, codes = set(), set()
    before = kb_fingerprint()
    with tempfile.TemporaryDirectory() as cache:
        def once(seed):
            env = {**os.environ, "PYTHONHASHSEED": str(seed), "KBSOLVE_CACHE_DIR": cache}
            done = subprocess.run(QUERY, env=env, capture_output=True)
            digests.add(hashlib.sha256(done.stdout).hexdigest())
            codes.add(done.returncode)
        times = within(list(range(runs)), budget_s, once)
    return {"runs": len(times), "runs_planned": runs, "distinct_outputs": len(digests),
            "exit_codes": sorted(codes), "kb_changed_during_run": kb_fingerprint() != before,
            "identical": len(digests) == 1 and codes == {0}}


if __name__ == "__main__":
    print(measure())
