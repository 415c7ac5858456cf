"""A cache of checked knowledge bases, keyed by a digest of their sources.

Each entry is one file: a magic line, the payload's CRC-32, the payload (a pickle;
codecache.framed). Writers go through a temporary file and `os.replace`, so readers
never see half a file; a damaged entry fails its checksum and is rebuilt.
A process keeps the few KBs it unpickled, keyed by the entry's digest and the payload's
checksum: the same entry gives the same (read-only) object without a second unpickling.

A stamp (one small file per set of KB roots) maps what stat() says of every source to
the digest their texts gave, so that a run whose sources stat the same takes the digest
without reading and hashing them (issue 25: ~7 ms of a cold plan). Every write to a file
sets its ctime to the clock's time, which no program sets back; a stamp is written only
when every source's ctime and mtime are RACY_NS older than the moment they were read, so
a later write always differs from what the stamp holds (git's "racy" rule).
"""

from __future__ import annotations

import gc
import marshal
import pickle
from collections import OrderedDict
from pathlib import Path

from kbsolve.collector import paused
from kbsolve.codecache import (CACHE_ENV, cache_dir, checksum,  # noqa: F401 - the caches' one directory
                               framed, key_name, write_atomically)

_MAGIC = b"kbsolve-kb-cache-v4\n"  # v3: spans whole; v2: one pickle; v1: SHA-256
_STAMP_MAGIC = b"kbsolve-kb-stamp-v1\n"
RACY_NS = 2_000_000_000  # a source this recent when read is never stamped
_LOADED: OrderedDict[tuple[str, bytes], object] = OrderedDict()
_LOADED_MAX = 4
_DAMAGED = object()  # what get's unpickling gives for an entry that is no KB


class KbCache:
    def __init__(self, directory: Path | None = None):
        self.directory = directory or cache_dir()

    def _path(self, digest: str) -> Path:
        return self.directory / f"kb-{digest[:32]}.pickle"

    def get(self, digest: str):
        path = self._path(digest)
        data = mapped(path)
        if data is None:
            return None
        unwrapped = _unwrap(data)
        loaded = None if unwrapped is None else (digest, unwrapped[0])
        if loaded in _LOADED:
            _LOADED.move_to_end(loaded)
            return _LOADED[loaded]
        value = _DAMAGED
        if unwrapped is not None:
            try:
                value = _unpickle(*_unpacked(unwrapped[1]))
            except Exception:  # noqa: BLE001 - a payload from another version: rebuild it
                pass
        if value is _DAMAGED:
            del unwrapped
            _unmap(data)  # first: a mapped file cannot be removed everywhere (Windows)
            _remove(path)
            return None
        _keep(loaded, value)
        return value

    def _stamp_path(self, key: tuple) -> Path:
        return self.directory / f"kb-sources-{key_name(key, 32)}.marshal"

    def stamped(self, key: tuple, seen: tuple | None) -> str | None:
        """The digest stamped for `key` (the roots, the working folder, ...) when its
        sources are still as `seen` (dsl/load.py sources_seen), else None."""
        if seen is None:
            return None
        try:
            data = self._stamp_path(key).read_bytes()
            if data.startswith(_STAMP_MAGIC):
                stamped_key, stamped_seen, digest = marshal.loads(data[len(_STAMP_MAGIC):])
                if stamped_key == key and stamped_seen == seen and type(digest) is str:
                    return digest
        except Exception:  # noqa: BLE001 - missing or damaged: the texts decide
            pass
        return None

    def stamp(self, key: tuple, seen: tuple | None, digest: str, read_at_ns: int) -> None:
        """Remember `digest` for sources as `seen` at read_at_ns (time.time_ns() before
        they were looked at), unless one of them changed within RACY_NS of it."""
        if seen is None or any(max(entry[-2:]) >= read_at_ns - RACY_NS for entry in seen):
            return
        try:
            write_atomically(self._stamp_path(key),
                             _STAMP_MAGIC + marshal.dumps((key, seen, digest)), ".kb-")
        except (OSError, ValueError):
            pass

    def put(self, digest: str, value) -> None:
        try:
            payload = _packed(value)
            write_atomically(self._path(digest), framed(_MAGIC, payload), ".kb-")
            _keep((digest, checksum(payload)), value)
        except (OSError, pickle.PicklingError, RecursionError):
            pass  # the cache is an optimisation; a read-only home must still work


def _packed(value) -> bytes:
    """An entry's payload: a line of the lengths of the pickle and of its out-of-band
    buffers (the KB's still-pickled tables, dsl/kb.py Pickled and Scoped), then those
    bytes. Unpickled, the tables are views of the file read, not copies of its
    megabytes (fresh pages: ~6 us each to touch on this VM; issue 25)."""
    buffers = []
    stream = pickle.dumps(value, protocol=5, buffer_callback=buffers.append)
    parts = [stream, *(buffer.raw() for buffer in buffers)]
    return b" ".join(b"%d" % len(part) for part in parts) + b"\n" + b"".join(parts)


def _unpacked(payload: memoryview) -> tuple[memoryview, list[memoryview]]:
    """(pickle, buffers) of a payload _packed wrote (a view of the file's tail, _unwrap):
    views of it."""
    start = len(payload.obj) - payload.nbytes
    end = payload.obj.find(b"\n", start) - start
    parts, at = [], end + 1
    for length in bytes(payload[:max(end, 0)]).split():
        parts.append(payload[at:at + int(length)])
        at += int(length)
    if end < 0 or at != payload.nbytes or not parts:
        raise ValueError("not a payload of this version")
    return parts[0], parts[1:]


def _unpickle(payload, buffers=()):
    """The KB, unpickled without garbage collection passes: it is hundreds of thousands of
    new objects and no garbage, and each pass would walk them all again (issue 25: most
    of a cached load's time). The KB is read-only from here on: moved out of the
    collector's generations (gc.freeze), later passes skip it too."""
    with paused():
        value = pickle.loads(payload, buffers=buffers)
    gc.freeze()
    return value


def _keep(loaded: tuple[str, bytes], value) -> None:
    _LOADED[loaded] = value
    while len(_LOADED) > _LOADED_MAX:
        _LOADED.popitem(last=False)


def _unwrap(data) -> tuple[bytes, memoryview] | None:
    """(checksum, payload) of an intact entry (its bytes or their mmap); the payload is
    a view of `data`, not a copy of its megabytes."""
    if data[:len(_MAGIC)] != _MAGIC:
        return None
    end = data.find(b"\n", len(_MAGIC))
    if end < 0:
        return None
    head, payload = data[len(_MAGIC):end], memoryview(data)[end + 1:]
    if checksum(payload) != head:
        return None
    return head, payload


def mapped(path: Path):
    """An entry's bytes, mapped read-only (an mmap; b"" when empty), or None when it
    cannot be read. Read into memory, every page of the copy is a fresh one to fault in
    (~6 us each on this VM; issue 25); mapped, the kernel maps the page cache's pages
    16 at a fault, and the KB's still-pickled tables stay views of them (_unpacked).
    Writers replace an entry (write_atomically), never write into it, so a mapping
    keeps the bytes it was opened with."""
    import mmap
    try:
        with open(path, "rb") as file:
            return mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
    except ValueError:  # an empty file cannot be mapped
        return b""
    except OSError:
        return None


def _unmap(data) -> None:
    """Closes a mapping no view holds (mapped's mmap; bytes have nothing to close)."""
    try:
        data.close()
    except (AttributeError, BufferError):
        pass


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass
