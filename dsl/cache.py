"""A cache of checked knowledge bases, keyed by a digest of their sources.

Each entry is one file: a magic line, the sha256 of the payload, the payload
(a pickle). Writers go through a temporary file and `os.replace`, so readers
never see half a file; a damaged entry fails its checksum and is rebuilt.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
from pathlib import Path

from platformdirs import user_cache_dir

CACHE_ENV = "KBSOLVE_CACHE_DIR"
_MAGIC = b"kbsolve-kb-cache-v1\n"


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or user_cache_dir("kbsolve"))


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
        payload = _unwrap(data)
        if payload is None:
            _remove(path)
            return None
        try:
            return pickle.loads(payload)
        except Exception:  # a payload from another version: rebuild it
            _remove(path)
            return None

    def put(self, digest: str, value) -> None:
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            payload = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
            blob = _MAGIC + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload
            fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".kb-", suffix=".tmp")
            with os.fdopen(fd, "wb") as handle:
                handle.write(blob)
            os.replace(tmp, self._path(digest))
        except (OSError, pickle.PicklingError, RecursionError):
            pass  # the cache is an optimisation; a read-only home must still work


def _unwrap(data: bytes) -> bytes | None:
    if not data.startswith(_MAGIC):
        return None
    rest = data[len(_MAGIC):]
    head, sep, payload = rest.partition(b"\n")
    if not sep or hashlib.sha256(payload).hexdigest().encode() != head:
        return None
    return payload


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass
