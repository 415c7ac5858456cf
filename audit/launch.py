"""What launch scripts say about one config: the script lines that name it by
its path (from the directory they run in), their launcher, environment
variables, process and node counts, and the accelerate config they pass.

The flags read are the launchers' own (torchrun, accelerate) and CUDA's
device list; framework variables (a node count included) are kept as written
for the KB's options to read. Assignments on a command's own line (`NNODES=4
torchrun ...`) belong to that command; exported and standalone ones to the
whole script."""

from __future__ import annotations

import posixpath
import re
import shlex
from dataclasses import dataclass, field

_ENV = re.compile(r"(?:^|[\s;&|(])(?:export\s+)?([A-Z][A-Z0-9_]*)=(\"[^\"]*\"|'[^']*'|[^\s;&|)]*)")
_ASSIGN = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(\"[^\"]*\"|'[^']*'|[^\s;&|)]*)"
                     r"\s*$")
_PREFIX = re.compile(r"^\s*((?:[A-Z][A-Z0-9_]*=(?:\"[^\"]*\"|'[^']*'|\S*)\s+)+)")
_EXPORT = re.compile(r"^\s*export\s+([A-Z][A-Z0-9_]*)\s*$")
_PROCS = re.compile(r"--(?:nproc[_-]per[_-]node|num[_-]processes|num[_-]gpus)[=\s]+(\d+)")
_NODES = re.compile(r"--(?:nnodes|num[_-]machines)[=\s]+(\d+)")
_CONFIG_FILE = re.compile(r"--config[_-]file[=\s]+(\"[^\"]*\"|'[^']*'|\S+)")
_CD = re.compile(r"(?:^|[;&|]\s*)cd\s+(\"[^\"]*\"|'[^']*'|[^\s;&|]+)")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)")
_PATHLIKE = re.compile(r"\.(ya?ml|json|toml)$")
LAUNCHERS = ("accelerate launch", "torchrun", "deepspeed", "llamafactory-cli", "ff-train",
             "python")  # generic launchers, most specific first


@dataclass
class LaunchInfo:
    scripts: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    processes: int | None = None  # per node
    nodes: int | None = None
    flagged: bool = False  # the count is a launcher flag (it overrides an accelerate file's)
    launcher: str = ""  # "accelerate launch", "torchrun", ... of the line naming the config
    directory: str | None = None  # where that line runs, relative to the project root
    config_file: str | None = None  # accelerate's --config_file, as resolved from directory
    after_config: list[tuple[str, str, list[str]]] = field(default_factory=list)
    # (script, launcher, the arguments after the config's path) of each line naming it
    misplaced: list[tuple[str, str, str]] = field(default_factory=list)
    # (script, path as written, folder the line runs in): a line that runs after a `cd`
    # and names the config by a path that is the config only from elsewhere

    @property
    def gpus(self) -> int | None:
        if self.processes is None:
            return None
        return self.processes * (self.nodes or 1)

    @property
    def directories(self) -> list[str]:
        return [self.directory] if self.directory is not None else []


_DEFAULTED = re.compile(r"^\$\{[A-Z][A-Z0-9_]*:?-([^}]*)\}$")


def _default(value: str) -> str:
    """`${NNODES:-2}` (the environment, else 2) reads as its default, 2."""
    match = _DEFAULTED.match(value)
    return match.group(1) if match else value


def read_launch(scripts: dict[str, str]) -> LaunchInfo:
    """Scripts (path -> text) read whole: every assignment and count."""
    info = LaunchInfo(scripts=sorted(scripts))
    for rel in info.scripts:
        text = re.sub(r"(?m)#.*$", "", scripts[rel])
        for name, value in _ENV.findall(text):
            info.env[name] = _default(value.strip("\"'"))
        _counts(info, text)
    _devices(info)
    return info


def launch_of(scripts: dict[str, str], config_rel: str, known: set[str]) -> LaunchInfo:
    """The launch of one config: the lines of `scripts` (path -> text) that name
    `config_rel` by a path that, from the directory the line runs in, is the
    config (a file of the same name elsewhere does not count). `known`: the
    project's files, relative to its root."""
    info = LaunchInfo()
    for rel in sorted(scripts):
        lines = _logical_lines(scripts[rel])
        variables = _variables(lines)
        name = posixpath.basename(config_rel)
        for number, line in enumerate(lines):
            if name not in line and "$" not in line:
                continue
            base = _directory(lines[:number], rel, variables, known)
            where = _names(line, config_rel, base, rel, variables)
            if where is None:
                continue
            if base and where != base:  # after the script's cd, that path is not there
                token = next((t for t in _tokens(line, variables)
                              if _names(t, config_rel, where, rel, {}) is not None), "")
                info.misplaced.append((rel, token, base))
            if rel not in info.scripts:
                info.scripts.append(rel)
            for other in lines:  # the script's exported variables
                match = _ASSIGN.match(other)
                exported = _EXPORT.match(other)
                if match and match.group(1).isupper() and other.lstrip().startswith("export"):
                    info.env[match.group(1)] = _default(match.group(2).strip("\"'"))
                elif exported and exported.group(1) in variables:
                    info.env[exported.group(1)] = variables[exported.group(1)]
            prefix = _PREFIX.match(line)
            for name, value in _ENV.findall(prefix.group(1) if prefix else ""):
                info.env[name] = _default(value.strip("\"'"))
            _counts(info, _expand(line, variables))
            launcher = next(
                (n for n in LAUNCHERS if re.search(rf"(^|[\s;&|]){re.escape(n)}(\s|$)", line)), "")
            info.launcher = info.launcher or launcher
            info.after_config.append((rel, launcher,
                                      _after(line, config_rel, where, rel, variables)))
            if info.directory is None:
                info.directory = where
            found = _CONFIG_FILE.search(line)
            if found and info.config_file is None:
                path = _expand(found.group(1).strip("\"'"), variables)
                info.config_file = posixpath.normpath(posixpath.join(where, path)) \
                    if not path.startswith("/") else path
    _devices(info)
    return info


def _logical_lines(text: str) -> list[str]:
    """Commands as bash reads them: a comment runs to the end of its physical line,
    its trailing backslash included, so a commented line inside a continued
    command ends that command (the lines after it are another)."""
    lines: list[str] = []
    joined: str | None = None
    for raw in text.splitlines():
        line = re.sub(r"(^|\s)#.*$", "", raw.rstrip("\r"))
        line = line if joined is None else f"{joined} {line}"
        if line.endswith("\\"):
            joined = line[:-1]
            continue
        lines.append(line)
        joined = None
    if joined is not None:
        lines.append(joined)
    return lines


def _variables(lines: list[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    for line in lines:
        match = _ASSIGN.match(line)
        if match:
            found[match.group(1)] = _default(match.group(2).strip("\"'"))
    return found


def _expand(text: str, variables: dict[str, str]) -> str:
    def value(match: re.Match) -> str:
        name = match.group(1) or match.group(3)
        return variables.get(name, match.group(2) if match.group(2) is not None
                             else match.group(0))
    return _VAR.sub(value, text)


def _directory(before: list[str], script: str, variables: dict[str, str],
               known: set[str]) -> str | None:
    """The folder a line runs in after the script's `cd`s (relative to the project
    root, assuming the script starts there); None when a cd leaves the project or
    cannot be read."""
    folder = ""
    for line in before:
        for match in _CD.finditer(line):
            target = _expand(match.group(1).strip("\"'"), variables)
            if "$" in target or target.startswith(("/", "~")) or target == "-":
                return None
            moved = posixpath.normpath(posixpath.join(folder, target))
            if moved.startswith(".."):
                return None
            folder = "" if moved == "." else moved
    return folder


def _tokens(line: str, variables: dict[str, str]) -> list[str]:
    try:
        return shlex.split(_expand(line, variables), comments=False, posix=True)
    except ValueError:
        return _expand(line, variables).split()


def _after(line: str, config_rel: str, folder: str, script: str,
           variables: dict[str, str]) -> list[str]:
    """The arguments after the config's path on the line (up to a command separator)."""
    tokens = _tokens(line, variables)
    for i, token in enumerate(tokens):
        if _names(token, config_rel, folder, script, {}) is not None:
            rest = tokens[i + 1:]
            end = next((j for j, t in enumerate(rest) if t in (";", "&&", "||", "|", "&")),
                       len(rest))
            return rest[:end]
    return []


def _names(line: str, config_rel: str, base: str | None, script: str,
           variables: dict[str, str]) -> str | None:
    """The directory from which a path on the line is the config, or None."""
    tokens = _tokens(line, variables)
    for token in tokens:
        token = token.split("=", 1)[1] if token.startswith("-") and "=" in token else token
        if not _PATHLIKE.search(token) or "$" in token:
            continue
        if token.startswith("/"):
            if token.endswith("/" + config_rel):
                return ""
            continue
        script_dir = posixpath.dirname(script)
        for folder in ([base] if base else []) + ["", script_dir]:
            if folder is None:
                continue
            if posixpath.normpath(posixpath.join(folder, token)) == config_rel:
                return folder
    return None


def _counts(info: LaunchInfo, text: str) -> None:
    procs, nodes = _PROCS.findall(text), _NODES.findall(text)
    if procs:
        info.processes, info.flagged = int(procs[-1]), True
    if nodes:
        info.nodes = int(nodes[-1])


def _devices(info: LaunchInfo) -> None:
    devices = info.env.get("CUDA_VISIBLE_DEVICES")
    if info.processes is None and devices and re.fullmatch(r"[\d,\s]+", devices):
        info.processes = len([d for d in devices.split(",") if d.strip()])
