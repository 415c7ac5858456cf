"""Runs a framework drives by command-line flags (torchtitan, diffusers' example
scripts): the script or README lines that launch them, by the KB's launch
signatures (kb/<framework>/file_kinds.yaml `launches`), and the flags each line
passes after the training module or script, plus a TOML config it names."""

from __future__ import annotations

import posixpath
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from kbsolve.audit.launch import LaunchInfo, _ASSIGN, _ENV, _PREFIX, _counts, _default, \
    _devices, _expand, _logical_lines, _variables, _CONFIG_FILE
from kbsolve.diagnostics import Span

_FENCE = re.compile(r"^\s*(```|~~~)")


@dataclass
class LaunchLine:
    framework: str
    kind: str  # the launch signature's name
    rel: str  # the script or README
    line: int
    flags: dict[str, Any] = field(default_factory=dict)  # dotted key as passed -> value text
    spans: dict[str, Span] = field(default_factory=dict)
    launch: LaunchInfo = field(default_factory=LaunchInfo)
    config_file: str | None = None  # the framework's own config (a TOML), as written
    script: str = ""  # the module or script the line runs, as written
    read_as: str = ""  # a copy under another name: why it is read as `script`
    script_rel: str = ""  # the script as a file of the project, when it holds it


def launch_lines(framework: str, signatures, rel: str, text: str,
                 readme: bool = False, read=None) -> list[LaunchLine]:
    """Every line of `text` (a shell script, or a README's fenced code) that one of
    the framework's launch signatures matches, or that runs a copy of a script the
    signature knows under another name (`renamed`: `read(path)` gives the copy's
    text when the project holds it)."""
    lines = _logical_lines(_fenced(text) if readme else text)
    variables = _variables(lines)
    exported = {m.group(1): _default(m.group(2).strip("\"'")) for m in map(_ASSIGN.match, lines)
                if m and m.group(1).isupper()}
    found = []
    for number, line in enumerate(lines, start=1):
        kind = next((s for s in signatures if s.matches_line(line)), None)
        copy = None
        if kind is None and (".py" not in line or not any(s.renamed for s in signatures)):
            continue
        expanded = _expand(line, variables)
        try:
            tokens = shlex.split(expanded, posix=True)
        except ValueError:
            tokens = expanded.split()
        if kind is None:
            other = _renamed(signatures, tokens, rel, read)
            if other is None:
                continue
            kind, copy, start = other
        else:
            start = _start(tokens, kind.any)
        if start is None or (start + 1 < len(tokens) and
                             re.search(r"\.(ya?ml|json)$", tokens[start + 1])):
            continue  # a config file named after the module: the config's own launch
        item = LaunchLine(framework, kind.name, rel, number, script=tokens[start])
        item.script_rel = _script_file(tokens[start], rel, read)
        if copy is not None:
            item.script, item.read_as = copy
        _flags(tokens[start + 1:], item, rel, number)
        item.launch.scripts = [rel]
        item.launch.env = {k: v for k, v in exported.items()
                           if re.search(rf"(?m)^\s*export\s+{k}\b", text)}
        prefix = _PREFIX.match(line)
        for name, value in _ENV.findall(prefix.group(1) if prefix else ""):
            item.launch.env[name] = _default(value.strip("\"'"))
        _counts(item.launch, " ".join(tokens[:start]))
        _devices(item.launch)
        item.launch.launcher = tokens[0] if tokens else ""
        accelerate = _CONFIG_FILE.search(" ".join(tokens[:start]))
        item.launch.config_file = posixpath.normpath(accelerate.group(1).strip("\"'")) \
            if accelerate else None
        if kind.config_flag and kind.config_flag in item.flags:
            item.config_file = str(item.flags.pop(kind.config_flag))
            item.spans.pop(kind.config_flag, None)
        found.append(item)
    return found


def _script_file(script: str, rel: str, read) -> str:
    """The project file a line's script is (from the launcher's folder, else the
    root), or ""."""
    if read is None or "$" in script or script.startswith("/"):
        return ""
    for path in (posixpath.join(posixpath.dirname(rel), script), script):
        if read(posixpath.normpath(path)) is not None:
            return posixpath.normpath(path)
    return ""


def _renamed(signatures, tokens: list[str], rel: str, read):
    """(signature, (known script, why), index of the script token) for a line that
    runs a .py the signatures do not name but know by its text or its flags."""
    start = next((i for i, t in enumerate(tokens) if t.endswith(".py")), None)
    if start is None:
        return None
    script = tokens[start]
    if any(word in script for s in signatures for word in s.any):
        return None  # a known name (of a kind the signature list decides)
    flags = {t[2:].split("=", 1)[0].replace("-", "_") for t in tokens[start + 1:]
             if t.startswith("--")}
    text = None
    if read is not None and "$" not in script:
        for path in (posixpath.join(posixpath.dirname(rel), script), script):
            text = read(posixpath.normpath(path))
            if text is not None:
                break
    for signature in signatures:
        for copy in signature.renamed:
            if text is not None and copy.by_text(text):
                return signature, (copy.script, f"{script} is read as {copy.script}: its "
                                                f"text is that script's"), start
            if text is None and copy.by_flags(posixpath.basename(script), flags):
                return signature, (copy.script, f"{script} (not in the project) is read as "
                                                f"{copy.script}: the flags it is given are "
                                                f"that script's options"), start
    return None


def _start(tokens: list[str], words: tuple[str, ...]) -> int | None:
    """The index of the token that ends the signature (`llamafactory-cli train`
    spans two tokens)."""
    for i in range(len(tokens)):
        for word in words:
            parts = word.split()
            window = tokens[i:i + len(parts)]
            if len(window) == len(parts) and all(p in t for p, t in zip(parts, window)):
                return i + len(parts) - 1
    return None


def _fenced(text: str) -> str:
    """A README's fenced code blocks; other lines blanked (line numbers kept)."""
    out, inside = [], False
    for line in text.splitlines():
        if _FENCE.match(line):
            inside = not inside
            out.append("")
        else:
            out.append(line if inside else "")
    return "\n".join(out)


def _flags(tokens: list[str], item: LaunchLine, rel: str, number: int) -> None:
    """`--a.b 4`, `--a.b=4`, `--flag` (true); a later flag overrides an earlier one."""
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if not token.startswith("--") or token == "--":
            i += 1
            continue
        key, eq, value = token[2:].partition("=")
        if not eq:
            if i + 1 < len(tokens) and not tokens[i + 1].startswith("--"):
                value, i = tokens[i + 1], i + 1
            else:
                value = True  # a bare flag: argparse's store_true, or a value left out
        key = key.replace("-", "_")
        item.flags[key] = value
        item.spans[key] = Span(rel, number, 1)
        i += 1
