"""Safe YAML loading that remembers where every key and list item came from.

`load_yaml` returns plain Python data plus a map from key paths such as
("gpus", 3, "memory_gib") to the `Span` of that key (of the item, for list
entries). Only `yaml.SafeLoader` is used, and the node graph is rebuilt by
hand so that alias bombs stop at a node budget instead of eating memory.
Every failure is a `KbError`; nothing else escapes.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kbsolve.diagnostics import Diagnostic, KbError, Note, SourceCache, Span

MAX_BYTES = 5 * 1024 * 1024
MAX_NODES = 200_000
MAX_DEPTH = 100

Positions = dict[tuple, Span]

if TYPE_CHECKING:  # yaml itself loads when a file is parsed: a plan from the KB cache reads none
    from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

_MAP_TAG = "tag:yaml.org,2002:map"
_SEQ_TAG = "tag:yaml.org,2002:seq"
_MERGE_TAG = "tag:yaml.org,2002:merge"


def _fail(message: str, span: Span, sources: SourceCache | None = None) -> KbError:
    return KbError(Diagnostic(message, span), sources)


def _offset_span(file: str, data: bytes | str, offset: int) -> Span:
    """The 1-based line/col of a byte (or character) offset."""
    newline = b"\n" if isinstance(data, bytes) else "\n"
    line = data.count(newline, 0, offset) + 1
    col = offset - (data.rfind(newline, 0, offset) + 1) + 1
    return Span(file, line, col)


def decode_text(data: bytes, file: str, max_bytes: int = MAX_BYTES) -> str:
    """Bytes to text, refusing oversize, binary and non-UTF-8 input."""
    if len(data) > max_bytes:
        raise _fail(f"file is too large (over {max_bytes} bytes)", Span(file))
    nul = data.find(b"\x00")
    if nul >= 0:
        raise _fail("file looks binary (it contains NUL bytes); expected UTF-8 text",
                    _offset_span(file, data, nul))
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise _fail(f"file is not valid UTF-8 (byte 0x{data[e.start]:02x})",
                    _offset_span(file, data, e.start)) from None


def read_text(path: str | os.PathLike, *, file: str | None = None,
              max_bytes: int = MAX_BYTES) -> str:
    """Read a UTF-8 text file; any problem becomes a `KbError`."""
    p = Path(path)
    file = file or str(p)
    try:
        if p.is_dir():
            raise _fail("is a directory, not a file", Span(file))
        with open(p, "rb") as f:
            data = f.read(max_bytes + 1)  # stat sizes lie for special files
    except FileNotFoundError:
        raise _fail("file not found", Span(file)) from None
    except OSError as e:
        raise _fail(f"cannot read file: {e.strerror or e}", Span(file)) from None
    except ValueError as e:  # e.g. a NUL byte in the path
        raise _fail(f"cannot read file: {e}", Span(file)) from None
    return decode_text(data, file, max_bytes)


def load_yaml(source: str | bytes | os.PathLike, *, file: str | None = None,
              max_bytes: int = MAX_BYTES, max_nodes: int = MAX_NODES,
              sources: SourceCache | None = None) -> tuple[Any, Positions]:
    """Parse one YAML document into (data, positions).

    `source` is a path (`os.PathLike`), raw bytes, or YAML text (`str`).
    `file` names the source in spans; it defaults to the path or "<string>".
    When `sources` is given the text is added to it for error excerpts.
    """
    if isinstance(source, os.PathLike):
        file = file or str(source)
        text = read_text(source, file=file, max_bytes=max_bytes)
    else:
        file = file or "<string>"
        data = source if isinstance(source, bytes) else source.encode("utf-8", "surrogatepass")
        text = decode_text(data, file, max_bytes)
    cache = sources if sources is not None else SourceCache()
    cache.add(file, text)
    import yaml
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        span = Span(file, mark.line + 1, mark.column + 1) if mark else Span(file)
        problem = e.problem or e.context or "invalid YAML"
        raise _fail(f"YAML syntax error: {problem}", span, cache) from None
    except yaml.reader.ReaderError as e:
        raise _fail(f"YAML syntax error: unacceptable character #x{e.character:04x}",
                    _offset_span(file, text, e.position), cache) from None
    except yaml.YAMLError as e:
        raise _fail(f"YAML syntax error: {e}", Span(file), cache) from None
    except RecursionError:
        raise _fail("YAML nested too deeply", Span(file), cache) from None
    if root is None:
        return None, {}
    builder = _Builder(file, max_nodes, cache)
    builder.positions[()] = builder.span(root)
    return builder.build(root, (), 0), builder.positions


class _Builder:
    """Turns composed nodes into Python values, counting every node visited."""

    def __init__(self, file: str, max_nodes: int, cache: SourceCache):
        self.file = file
        self.max_nodes = max_nodes
        self.cache = cache
        self.count = 0
        self.active: set[int] = set()  # nodes on the current path (recursion check)
        self.positions: Positions = {}
        import yaml
        self.ctor = yaml.constructor.SafeConstructor()
        self.yaml_error = yaml.YAMLError

    def span(self, node: Node) -> Span:
        s, e = node.start_mark, node.end_mark
        return Span(self.file, s.line + 1, s.column + 1, e.line + 1, e.column + 1)

    def error(self, message: str, node: Node, notes=()) -> KbError:
        return KbError(Diagnostic(message, self.span(node), notes=tuple(notes)), self.cache)

    def build(self, node: Node, path: tuple, depth: int) -> Any:
        self.count += 1
        if self.count > self.max_nodes:
            raise self.error(f"YAML too large or uses too many aliases "
                             f"(more than {self.max_nodes} nodes)", node)
        if depth > MAX_DEPTH:
            raise self.error(f"YAML nested too deeply (more than {MAX_DEPTH} levels)", node)
        # node.id names the composer's node classes (scalar, sequence, mapping)
        if node.id == "scalar":
            return self.scalar(node)
        if id(node) in self.active:
            raise self.error("YAML alias refers to itself (recursive data)", node)
        self.active.add(id(node))
        try:
            if node.id == "sequence" and node.tag == _SEQ_TAG:
                return self.sequence(node, path, depth)
            if node.id == "mapping" and node.tag == _MAP_TAG:
                return self.mapping(node, path, depth)
            raise self.error(f"unsupported YAML tag '{node.tag}'", node)
        finally:
            self.active.discard(id(node))

    def scalar(self, node: ScalarNode) -> Any:
        try:
            return self.ctor.construct_object(node, deep=True)
        except self.yaml_error as e:
            problem = getattr(e, "problem", None) or str(e)
            raise self.error(f"YAML error: {problem}", node) from None

    def sequence(self, node: SequenceNode, path: tuple, depth: int) -> list:
        out = []
        for i, child in enumerate(node.value):
            self.positions[path + (i,)] = self.span(child)
            out.append(self.build(child, path + (i,), depth + 1))
        return out

    def mapping(self, node: MappingNode, path: tuple, depth: int) -> dict:
        out: dict = {}
        merges = [v for k, v in node.value if k.tag == _MERGE_TAG]
        for merge in merges:  # `<<: *base`: explicit keys win, earlier merges win
            sources = merge.value if merge.id == "sequence" else [merge]
            for src in reversed(sources):
                if src.id != "mapping":
                    raise self.error("YAML merge key '<<' needs a mapping or a list of mappings", src)
                out.update(self.build(src, path, depth + 1))
        seen: dict = {}
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                continue
            if key_node.id != "scalar":
                raise self.error("mapping keys must be plain scalars", key_node)
            self.count += 1
            key = self.scalar(key_node)
            if key in seen:
                raise self.error(f"duplicate key '{key}'", key_node,
                                 [Note("first defined here", seen[key])])
            seen[key] = self.positions[path + (key,)] = self.span(key_node)
            out[key] = self.build(value_node, path + (key,), depth + 1)
        return out
