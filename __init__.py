"""kbsolve: a knowledge base and solver for training-run configurations.

    import kbsolve
    plan = kbsolve.solve({"gpus": "8xA100", "model": "qwen3-8b"})
    estimate = kbsolve.estimate({"gpus": "8xA100", "model": "qwen3-8b"}, {"deepspeed": "z2"})
    kb = kbsolve.load_kb(["my_pack/"])
"""

from kbsolve.version import __version__

_API = ("solve", "estimate", "load_kb", "emit", "run_kb_tests")


def __getattr__(name: str):
    if name in _API:  # lazy, so that `import kbsolve` stays cheap
        from kbsolve import api
        return getattr(api, name)
    raise AttributeError(f"module 'kbsolve' has no attribute {name!r}")


__all__ = list(_API)
