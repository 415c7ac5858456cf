"""kbsolve: a knowledge base and solver for training-run configurations.

    import kbsolve
    plan = kbsolve.solve({"gpus": "8xA100", "model": "qwen3-8b"})
    estimate = kbsolve.estimate({"gpus": "8xA100", "model": "qwen3-8b"}, {"deepspeed": "z2"})
    kb = kbsolve.load_kb(["my_pack/"])
"""

import os as _os
import sys as _sys

from kbsolve.version import __version__

# kbsolve's numpy work is small tables, which a BLAS thread pool only slows: OpenBLAS
# starts one thread per core when numpy is imported, and at a cold start they cost more
# CPU than the plan (issue 25: 143 ms). One thread, set before numpy loads; a thread
# count the user set (OPENBLAS_NUM_THREADS, GOTO_NUM_THREADS, OMP_NUM_THREADS) wins.
_BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")
if "numpy" not in _sys.modules and not any(_os.environ.get(n) for n in _BLAS_THREADS):
    _os.environ["OPENBLAS_NUM_THREADS"] = "1"

_API = ("solve", "estimate", "load_kb", "emit", "run_kb_tests")


def __getattr__(name: str):
    if name in _API:  # lazy, so that `import kbsolve` stays cheap
        from kbsolve import api
        return getattr(api, name)
    raise AttributeError(f"module 'kbsolve' has no attribute {name!r}")


__all__ = list(_API)
