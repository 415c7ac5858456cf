"""Python's cyclic garbage collector, paused around work that makes many objects and
no garbage cycles (issue 25): unpickling the KB, a search, an explanation. Each
collection such work sets off walks every young object again and frees nothing;
reference counting still frees what dies. The collector is left as it was found."""

from __future__ import annotations

import contextlib
import gc


@contextlib.contextmanager
def paused():
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
