"""A cache of checked knowledge bases, keyed by a digest of their sources.

Each entry is one file: a magic line, the sha256 of the payload, the payload
(a pickle). Writers go through a temporary file and `os.replace`, so readers
never see half a file; a damaged entry fails its checksum and is rebuilt.
A process keeps the few KBs it unpickled, keyed by the payload's checksum: the
same bytes give the same (read-only) object without a second unpickling.
"""

from __future__ import annotations

import gc
import hashlib
import os
import pickle
from collections import OrderedDict
from pathlib import Path

from kbsolve.collector import paused
from kbsolve.codecache import CACHE_ENV, cache_dir  # noqa: F401 - the caches' one directory

_MAGIC = b"kbsolve-kb-cache-v1\n"
_LOADED: OrderedDict[bytes, object] = OrderedDict()
_LOADED_MAX = 4


class KbCache:
    def __init__(self, directory: Path | None = None):
        self.directory = directory or cache_dir()

    def _path(self, digest: str) -> Path:
        return self.directory / f"kb-{digest[:32]}.pickle"

    def get(self, digest: str):
        path = self._path(digest)
        try:
            data = path.read_bytes()
        except OSError:
            return None
        unwrapped = _unwrap(data)
        if unwrapped is None:
            _remove(path)
            return None
        checksum, payload = unwrapped
        if checksum in _LOADED:
            _LOADED.move_to_end(checksum)
            return _LOADED[checksum]
        try:
            value = _unpickle(payload)
        except Exception:  # a payload from another version: rebuild it
            _remove(path)
            return None
        _keep(checksum, value)
        return value

    def put(self, digest: str, value) -> None:
        import tempfile  # only when writing: a plan from the cache never imports it
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            payload = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
            checksum = hashlib.sha256(payload).hexdigest().encode()
            blob = _MAGIC + checksum + b"\n" + payload
            fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".kb-", suffix=".tmp")
            with os.fdopen(fd, "wb") as handle:
                handle.write(blob)
            os.replace(tmp, self._path(digest))
            _keep(checksum, value)
        except (OSError, pickle.PicklingError, RecursionError):
            pass  # the cache is an optimisation; a read-only home must still work


def _unpickle(payload: bytes):
    """The KB, unpickled without garbage collection passes: it is hundreds of thousands of
    new objects and no garbage, and each pass would walk them all again (issue 25: most
    of a cached load's time). The KB is read-only from here on: moved out of the
    collector's generations (gc.freeze), later passes skip it too."""
    with paused():
        value = pickle.loads(payload)
    gc.freeze()
    return value


def _keep(checksum: bytes, value) -> None:
    _LOADED[checksum] = value
    while len(_LOADED) > _LOADED_MAX:
        _LOADED.popitem(last=False)


def _unwrap(data: bytes) -> tuple[bytes, memoryview] | None:
    """(checksum, payload) of an intact entry; the payload is a view of `data`, not a
    copy of its megabytes."""
    if not data.startswith(_MAGIC):
        return None
    end = data.find(b"\n", len(_MAGIC))
    if end < 0:
        return None
    head, payload = data[len(_MAGIC):end], memoryview(data)[end + 1:]
    if hashlib.sha256(payload).hexdigest().encode() != head:
        return None
    return head, payload


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass
