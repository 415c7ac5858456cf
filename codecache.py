"""Compiled code of generated source, kept across processes beside the KB cache.

A cold `kbsolve` plan builds ~110 dataclasses (ours and pydantic's), and Python 3.11's
`dataclasses` writes each one's methods (__init__, __repr__, __eq__, __hash__, a frozen
class's __setattr__ and __delattr__) as source text and compiles it with `exec`: ~540
compilations, 30-45 ms of a ~430 ms plan (issue 25). The text of a class's methods is the
same in every process, so its compiled code is too: `CodeCache` keeps the code objects
(each marshalled on its own, unmarshalled when first asked for; keyed by the source text, the
file name, the mode and the compiler flags) in one file per interpreter bytecode version,
checked by a CRC-32 as the KB cache's entries are (framed()).

`enable(module, ...)` shadows the builtin `exec` and `compile` in each module's namespace
(its globals, as a module-level name would) with functions that compile a string through the
cache and then do what the builtin does: the same code object the builtin would compile
from the same text (the caller's `from __future__` flags included, as the builtin
inherits them), run in the same namespaces. Only the command's process installs it (cli/
__init__.py `start`; a program that imports kbsolve keeps its modules as they are), and
`save()` writes what the process compiled anew, once, as the command ends (cli/main.py
`exit_now`). Code kbsolve generates itself asks `compiled()`.

A leaf: the standard library only, so that the command installs it before its imports.
"""

from __future__ import annotations

import __future__
import builtins
import marshal
import os
import sys
from importlib.util import MAGIC_NUMBER
from pathlib import Path
from types import CodeType

CACHE_ENV = "KBSOLVE_CACHE_DIR"
_MAGIC = b"kbsolve-code-cache-v2\n"  # v1: a SHA-256 check line
LIMIT = 20_000  # entries kept; past it a save keeps only what its process used
# Sources this long (the linked search code, program/link.py: ~20 kB a text, a few per query,
# and each query its own) are kept one file each beside the shared file, read only when asked
# for: in the shared file every cold command read, hashed and unmarshalled every query's code
# any command had compiled (4.3 MB after a dozen queries: ~10 ms of each cold start, growing)
BIG = 2_000
# the compiler flags a caller's `from __future__ import ...` sets, which exec and compile
# inherit from the calling code (PyCF_MASK)
_FUTURE = 0
for _name in __future__.all_feature_names:
    _FUTURE |= getattr(__future__, _name).compiler_flag
_FUTURE &= ~__future__.CO_NESTED  # a code flag of every nested function, not inherited


def cache_dir() -> Path:
    """The directory of kbsolve's caches: $KBSOLVE_CACHE_DIR, else the user's cache
    directory (platformdirs)."""
    chosen = os.environ.get(CACHE_ENV)
    if chosen:
        return Path(chosen)
    from platformdirs import user_cache_dir  # only then (about 5 ms of a cold start)
    return Path(user_cache_dir("kbsolve"))


_RESOLVING = Path("<resolving>")  # CodeCache.path while cache_dir() runs


class CodeCache:
    """Code objects by (source, filename, mode, flags), read from `path` on first use; a
    code object stays marshalled until it is asked for (a file holds the classes of every
    command that ran, a plan builds about half of them)."""

    def __init__(self, path: Path | None = None):
        self._path = path
        self.codes: dict | None = None
        self.used: set = set()
        # the code objects handed out, by key: a text asked again (typing's forward
        # references: 'bool' ~140 times a cold plan) is not unmarshalled again
        self.made: dict = {}
        self.added = 0
        self.big: dict[Path, bytes] = {}  # BIG entries compiled anew: file -> marshalled code

    @property
    def path(self) -> Path:
        if self._path is None:
            # cache_dir() may import platformdirs, whose imports (tempfile, shutil) make
            # namedtuples through this cache: code() compiles those without it meanwhile
            self._path = _RESOLVING
            try:
                self._path = cache_dir() / f"code-{MAGIC_NUMBER.hex()}.marshal"
            except BaseException:
                self._path = None
                raise
        return self._path

    def _load(self) -> dict:
        codes: dict = {}
        loaded = _read_checked(self.path)
        # a file of another layout under the same magic line (an earlier kbsolve's
        # code objects stored whole) is compiled again and replaced, never trusted
        if isinstance(loaded, dict) and all(type(data) is bytes for data in loaded.values()):
            codes = loaded
        big = [key for key in codes if len(key[0]) >= BIG]
        if big:  # an earlier layout kept them here: the next save writes the file without
            for key in big:
                del codes[key]
            self.added += 1
        self.codes = codes
        return codes

    def _big_file(self, key: tuple) -> Path:
        return Path(f"{self.path}.d") / f"{key_name(key, 40)}.marshal"

    def _big_code(self, key: tuple):
        """A BIG entry from its own file (checked as the shared one is), else compiled and
        kept for save()."""
        path = self._big_file(key)
        code = _read_checked(path)
        if type(code) is not CodeType or code.co_filename != key[1]:
            code = builtins.compile(*key, True)
            self.big[path] = marshal.dumps(code)
        return code

    def code(self, source: str, filename: str, mode: str, flags: int):
        """What compile(source, filename, mode, flags, dont_inherit=True) returns."""
        key = (source, filename, mode, flags)
        code = self.made.get(key)
        if code is not None:
            return code
        if self._path is _RESOLVING:  # asked while the cache's own folder is found (path)
            return builtins.compile(source, filename, mode, flags, True)
        if len(source) >= BIG:
            return self._big_code(key)
        codes = self.codes if self.codes is not None else self._load()
        data = codes.get(key)
        code = None
        if data is not None:
            try:
                code = marshal.loads(data)
            except (EOFError, ValueError, TypeError):
                pass
        if type(code) is not CodeType:  # absent, or an entry that is not a code object
            code = builtins.compile(source, filename, mode, flags, True)
            codes[key] = marshal.dumps(code)
            self.added += 1
        self.used.add(key)
        if len(self.made) >= LIMIT:  # a long-lived command (kbsolve mcp): bounded
            self.made.clear()
        self.made[key] = code
        return code

    def save(self) -> None:
        """Writes the cache if this process compiled anything new (atomically; a cache
        directory that cannot be written is left alone: the cache is an optimisation)."""
        if not self.big and (not self.added or self.codes is None):
            return
        for path, payload in list(self.big.items()):
            try:
                write_atomically(path, framed(_MAGIC, payload), ".code-")
                del self.big[path]
            except (OSError, ValueError):
                break
        if not self.added or self.codes is None:
            return
        codes = self.codes
        if len(codes) > LIMIT:
            codes = {key: code for key, code in codes.items() if key in self.used}
        try:
            write_atomically(self.path, framed(_MAGIC, marshal.dumps(codes)), ".code-")
            self.added = 0
        except (OSError, ValueError):
            pass


# A cache file (this module's, dsl/cache.py's entries) is a magic line, a check line and the
# payload. The check is a CRC-32 (zlib): it finds a damaged file as the SHA-256 it replaced
# did, in less time, and a cached command then never imports hashlib, whose OpenSSL alone
# was ~3 ms of CPU of a cold plan (issue 25); a cache file is trusted as far as its folder is.
def checksum(payload) -> bytes:
    """The check line of a cache file's payload."""
    import zlib
    return b"%08x" % zlib.crc32(payload)


def framed(magic: bytes, payload: bytes) -> bytes:
    """A cache file's bytes: `magic`, the payload's check line, the payload."""
    return magic + checksum(payload) + b"\n" + payload


def key_name(key: tuple, length: int) -> str:
    """A cache file's name for `key`: the first `length` hex digits of the SHA-256 of its
    repr, from CPython's own SHA-256 where there is one (hashlib's is OpenSSL's, whose
    loading costs more than hashing a key of a few kB)."""
    try:
        from _sha256 import sha256  # CPython 3.10, 3.11
    except ImportError:
        try:
            from _sha2 import sha256  # CPython 3.12 on
        except ImportError:
            from hashlib import sha256
    return sha256(repr(key).encode("utf-8", "surrogatepass")).hexdigest()[:length]


def write_atomically(path: Path, blob: bytes, prefix: str) -> None:
    """`blob` as the file `path`, replaced whole (a reader never sees half a file); the
    caches' one writer (this module's, dsl/cache.py's entries and stamps). Raises OSError."""
    import tempfile  # only when writing: a plan from the caches never imports it
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=prefix, suffix=".tmp")
    with os.fdopen(fd, "wb") as handle:
        handle.write(blob)
    os.replace(tmp, path)


CACHE = CodeCache()


def _inherited(depth: int) -> int:
    """The `from __future__` flags of the code `depth` frames above the caller."""
    return sys._getframe(depth + 1).f_code.co_flags & _FUTURE


def cached_exec(source, globals=None, locals=None, /, **kwargs):
    """builtins.exec, a string compiled through the cache."""
    if globals is None:  # the caller's namespaces, as the builtin takes them
        frame = sys._getframe(1)
        globals = frame.f_globals
        if locals is None:
            locals = frame.f_locals
    if isinstance(source, str):
        source = CACHE.code(source, "<string>", "exec", _inherited(1))
    return builtins.exec(source, globals, locals, **kwargs)


def cached_eval(source, globals=None, locals=None, /):
    """builtins.eval, a string compiled through the cache (as the builtin compiles it: its
    leading spaces and tabs stripped)."""
    if globals is None:
        frame = sys._getframe(1)
        globals = frame.f_globals
        if locals is None:
            locals = frame.f_locals
    if isinstance(source, str):
        source = CACHE.code(source.lstrip(" \t"), "<string>", "eval", _inherited(1))
    return builtins.eval(source, globals, locals)


def cached_compile(source, filename, mode, flags=0, dont_inherit=False, optimize=-1,
                   **kwargs):
    """builtins.compile, a string compiled through the cache where the result is a code
    object of the interpreter's own optimisation level."""
    if isinstance(source, str) and optimize == -1 and not kwargs \
            and not flags & ~_FUTURE:
        if not dont_inherit:
            flags |= _inherited(1)
        return CACHE.code(source, os.fsdecode(filename), mode, flags)
    if not dont_inherit:
        flags |= _inherited(1)
    return builtins.compile(source, filename, mode, flags, True, optimize, **kwargs)


_enabled = False


def enable(*modules) -> None:
    """The command's process compiles through the cache: `compiled()` everywhere, and
    `modules`' own exec, eval and compile calls (their globals shadow the builtins)."""
    global _enabled
    _enabled = True
    for module in modules:
        module.exec = cached_exec
        module.eval = cached_eval
        module.compile = cached_compile


class _OnImport:
    """The import system's finder of modules that compile generated source as they load: the
    module is found and loaded as ever (on its parent's path), its namespace given the
    cache's exec, eval and compile before its first line runs."""

    def __init__(self, names: tuple[str, ...]):
        self.names = names

    def find_spec(self, name, path=None, target=None):
        if name not in self.names:
            return None
        from importlib.machinery import PathFinder
        spec = PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _Shadowing(spec.loader)
        return spec


class _Shadowing:
    """A module's loader whose module runs with the cache's exec, eval and compile (enable)."""

    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:
        module.exec, module.eval, module.compile = cached_exec, cached_eval, cached_compile
        self.loader.exec_module(module)

    def __getattr__(self, name: str):  # get_source, get_code, ... as the loader's
        return getattr(self.loader, name)


def enable_on_import(*names: str) -> None:
    """As enable(), for modules not imported yet that compile generated source as they load
    (typing_inspection.typing_objects: 30 functions written as text); one already imported
    is left as it is."""
    global _enabled
    _enabled = True
    waiting = tuple(name for name in names if name not in sys.modules)
    if waiting and not any(isinstance(f, _OnImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _OnImport(waiting))


def disable(*modules) -> None:
    global _enabled
    _enabled = False
    for module in modules:
        for name, ours in (("exec", cached_exec), ("eval", cached_eval),
                           ("compile", cached_compile)):
            if getattr(module, name, None) is ours:
                delattr(module, name)


def compiled(source: str, filename: str, mode: str = "exec"):
    """compile(source, filename, mode, dont_inherit=True): through the cache in the
    command's process (enable), plainly in any other."""
    if _enabled:
        return CACHE.code(source, filename, mode, 0)
    return builtins.compile(source, filename, mode, 0, True)


def save() -> None:
    """What the command's process compiled anew, written once as it ends."""
    if _enabled:
        CACHE.save()


def _read_checked(path: Path):
    """What a cache file written by save() holds (framed: magic line, check line,
    marshal), or None when it is missing, of another magic, corrupt or unreadable."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    end = data.find(b"\n", len(_MAGIC)) if data.startswith(_MAGIC) else -1
    if end < 0:
        return None
    payload = memoryview(data)[end + 1:]
    if checksum(payload) != data[len(_MAGIC):end]:
        return None
    try:
        return marshal.loads(payload)
    except (EOFError, ValueError, TypeError):
        return None
