"""Find the rule files and parse them.

The shipped KB is `kbsolve/kb`; rule packs (`--kb DIR`, `KBSOLVE_PATH`) are
laid on top. A pack holds `**/*.kb` files and optionally `catalog/*.yaml`: the
catalogs are the catalog layer's (catalog/knowledge.py: `load_kb` checks the
rules, validates the catalogs against their vocabulary, and caches the KB).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from kbsolve.diagnostics import (Diagnostic, DiagnosticSink, KbError, Note, SourceCache, Span)

MAX_SOURCE_BYTES = 4 * 1024 * 1024

PATH_ENV = "KBSOLVE_PATH"


@functools.lru_cache(maxsize=1)
def shipped_root() -> Path:
    """Where the shipped KB is installed (it does not move while the process runs): the
    package's folder, as importlib.resources.files("kbsolve") finds it for a package on the
    file system, without importing importlib.resources (and tempfile, shutil, bz2, lzma with
    it: about 8 ms of a cold plan, issue 25)."""
    return package_root() / "kb"


@functools.lru_cache(maxsize=1)
def package_root() -> Path:
    """The folder of the installed kbsolve package (this file is its dsl/load.py)."""
    return Path(__file__).parent.parent


def kb_roots(extra: list[str | Path] | None = None) -> list[Path]:
    """The shipped KB, then KBSOLVE_PATH entries, then explicit --kb dirs."""
    roots = [shipped_root()]
    for part in os.environ.get(PATH_ENV, "").split(os.pathsep):
        if part.strip():
            roots.append(Path(part.strip()))
    roots += [Path(p) for p in extra or ()]
    return roots


def parse_rules(files: list[tuple[str, str]], sink: DiagnosticSink):
    """The rule files' ASTs, their texts (for diagnostics) and whether some failed to
    parse (their errors go to `sink`)."""
    sources = SourceCache()
    modules = []
    partial = False
    for name, text in files:
        sources.add(name, text)
        try:
            modules.append(parsed_module(text, name))
        except KbError as exc:
            sink.items.extend(exc.diagnostics)
            partial = True
    return modules, sources, partial


@functools.lru_cache(maxsize=4096)
def parsed_module(text: str, name: str):
    """A module's AST (immutable), parsed once per process per text: a process
    that loads the KB again (other packs, no cache) parses only what changed.
    Room for many more texts than the shipped KB's ~85 files, so that a run of
    one-off texts (a fuzzer, a pack author's edits) does not evict them."""
    from kbsolve.dsl.parse import parse_module
    return parse_module(text, name)


def rule_files(roots: list[Path]) -> tuple[list[tuple[str, str]], DiagnosticSink]:
    """The `*.kb` files of the roots, (display name, text), each real file once."""
    sink = DiagnosticSink()
    files: list[tuple[str, str]] = []
    seen: set[tuple[int, int]] = set()  # (device, inode): a file reached twice is read once
    for root in roots:
        if not root.exists():
            sink.error(f"rule pack '{root}' does not exist", Span(str(root)), code="no-pack")
            continue
        if not root.is_dir():
            sink.error(f"rule pack '{root}' is not a directory", Span(str(root)), code="no-pack")
            continue
        try:
            paths = sorted(root.rglob("*.kb"))
        except (OSError, RuntimeError) as error:  # a symlink loop, an unreadable folder
            sink.error(f"rule pack '{root}': cannot list its files ({error})", Span(str(root)),
                       code="no-pack")
            continue
        for path in paths:
            try:
                stat = path.stat()  # one call, where resolving the path took one per folder
            except (OSError, RuntimeError) as error:
                sink.error(f"cannot read rule file '{path}' ({error})", Span(str(path)),
                           code="unreadable")
                continue
            if (stat.st_dev, stat.st_ino) in seen:
                continue
            seen.add((stat.st_dev, stat.st_ino))
            name = _display(path)
            text = _read(path, sink, name, stat.st_size)
            if text is not None:
                files.append((name, text))
    return files, sink


def sources_seen(roots: list[Path]) -> tuple | None:
    """What the file system says of the roots' sources without reading them: (path, device,
    inode, size, mtime_ns, ctime_ns) of every `*.kb` and `*.yaml` file in the folders under
    each root (symbolic links to folders not followed, as rule_files' rglob does not), in
    walk order; None when a root or a file cannot be read (the KB cache key then comes from
    the files' texts alone, dsl/cache.py KbCache.stamped)."""
    seen: list[tuple] = []
    for root in roots:
        if not root.is_dir():
            return None
        failed: list[OSError] = []
        for folder, dirs, names in os.walk(root, onerror=failed.append):
            dirs.sort()
            for name in sorted(names):
                if name.endswith((".kb", ".yaml")):
                    seen.append(file_seen(os.path.join(folder, name)))
        if failed or None in seen:
            return None
    return tuple(seen)


def file_seen(path: str) -> tuple | None:
    """(path, device, inode, size, mtime_ns, ctime_ns) of a file, None if it cannot be read."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (path, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _display(path: Path) -> str:
    """A rule file's name in spans: the shipped KB's as `kb/...` wherever it is installed
    (never a site-packages path), a pack's relative to the working folder if inside it."""
    text = str(path)
    for root, shown in ((str(shipped_root()), "kb"), (os.getcwd(), "")):
        if text == root:
            return shown or "."
        # inside: the root's text and a separator begin the path's (pathlib's own test,
        # `root in path.parents`, built a Path per folder: ~2 ms of a cold load's ~90 files)
        if text.startswith(root if root.endswith(os.sep) else root + os.sep):
            inner = text[len(root):].lstrip(os.sep)
            return f"{shown}{os.sep}{inner}" if shown else inner
    return text


def pack_of(file: str, roots: list[Path]) -> Path | None:
    """The pack (one of `roots`) that holds a rule file named as spans name it, or None:
    the root whose shown name is the longest prefix of the file's."""
    shown, best = Path(file), None
    for root in roots:
        prefix = Path(_display(root))
        inside = shown == prefix or prefix in shown.parents or \
            (prefix == Path(".") and not shown.is_absolute())
        if inside and (best is None or len(prefix.parts) > len(best[0].parts)):
            best = (prefix, root)
    return best[1] if best else None


def _read(path: Path, sink: DiagnosticSink, name: str, size: int) -> str | None:
    try:
        if size > MAX_SOURCE_BYTES:
            sink.error(f"rule file is too large (over {MAX_SOURCE_BYTES} bytes)", Span(name, 1, 1),
                       code="too-large")
            return None
        data = path.read_bytes()
    except OSError as exc:
        sink.error(f"cannot read rule file: {exc.strerror or exc}", Span(name), code="unreadable")
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        col = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        sink.error(f"rule file is not UTF-8 (byte 0x{data[exc.start]:02x})",
                   Span(name, line, col), code="encoding")
        return None


__all__ = ["kb_roots", "parse_rules", "rule_files", "shipped_root", "PATH_ENV", "Diagnostic",
           "Note"]
