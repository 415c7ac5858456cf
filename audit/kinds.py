"""What a project file is: by its name (shell, YAML, README, ...), and, for a
config a framework's keys claimed, by its keys: the KB's file kinds (training,
inference, export, ...) and other frameworks' look-alikes."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from kbsolve.program.repo_files import side_yaml

_DEPS = re.compile(r"(^|/)(requirements[^/]*\.(txt|in)|pyproject\.toml|setup\.(py|cfg)|"
                   r"environment\.ya?ml|Pipfile|poetry\.lock)$", re.I)
_SHELL = re.compile(r"(^|/)(Makefile|makefile|GNUmakefile|[^/]+\.(sh|bash|zsh|ksh|mk|slurm|"
                    r"sbatch))$")  # zsh and ksh run the same command lines as sh
_README = re.compile(r"(^|/)README[^/]*$", re.I)


def is_yaml(rel: str) -> bool:
    return rel.endswith((".yaml", ".yml"))


def is_json(rel: str) -> bool:
    return rel.endswith(".json")


def is_python(rel: str) -> bool:
    return rel.endswith(".py")


def is_shell(rel: str) -> bool:
    return bool(_SHELL.search(rel))


def is_readme(rel: str) -> bool:
    return bool(_README.search(rel))


def is_dependency_file(rel: str) -> bool:
    return bool(_DEPS.search(rel))


# ---- what a config is, by its keys (kb/<framework>/file_kinds.yaml) ----------

KINDS_FILE = "file_kinds.yaml"


@dataclass(frozen=True)
class FileKind:
    name: str  # "LlamaFactory export/merge config"
    audit: bool  # False: one "not audited" line, no finding
    all: tuple[str, ...]  # conditions: KEY (present) or KEY=VALUE
    any: tuple[str, ...]
    none: tuple[str, ...]
    because: str
    source: str
    keys: str = "training"  # the table of accepted keys that applies (accepted_keys.yaml); "none"
    # (a kind that is not audited is checked for keys only where it names a table)
    warnings: tuple[str, ...] = ()  # KB warnings judged on a kind that is not audited

    def matches(self, values: dict[str, Any]) -> bool:
        return all(_holds(c, values) for c in self.all) and \
            (not self.any or any(_holds(c, values) for c in self.any)) and \
            not any(_holds(c, values) for c in self.none)


@dataclass(frozen=True)
class Renamed:
    """A known script under another name: by the copy's text, else by the flags."""
    script: str
    content: tuple[str, ...]
    content_none: tuple[str, ...]
    flags: tuple[str, ...]
    flags_none: tuple[str, ...]
    flags_any: tuple[str, ...]
    name_any: tuple[str, ...]

    def by_text(self, text: str) -> bool:
        return all(w in text for w in self.content) and \
            not any(w in text for w in self.content_none)

    def by_flags(self, name: str, flags) -> bool:
        return all(f in flags for f in self.flags) and \
            not any(f in flags for f in self.flags_none) and \
            (any(f in flags for f in self.flags_any) or
             any(w in name.lower() for w in self.name_any))


@dataclass(frozen=True)
class LaunchSignature:
    """A command line that runs the framework: one of `any` (the module or script
    it runs) and every word of `all` on the line; `config_flag` names the flag that
    passes the framework's own config file."""
    name: str
    any: tuple[str, ...]
    all: tuple[str, ...]
    config_flag: str
    because: str
    source: str
    audit: bool = True  # False: one "not audited" line
    renamed: tuple[Renamed, ...] = ()  # copies of the scripts under other names
    min_version: dict | None = None  # {dependency, pattern, because, source}: the
    # script's own check of the installed package's version

    def matches_line(self, line: str) -> bool:
        return any(word in line for word in self.any) and all(w in line for w in self.all)


@dataclass
class KindData:
    kinds: list[FileKind] = field(default_factory=list)  # the framework's own, in order
    lookalikes: list[FileKind] = field(default_factory=list)  # other frameworks' files
    launches: list[LaunchSignature] = field(default_factory=list)  # flag-driven runs


def _holds(condition: str, values: dict[str, Any]) -> bool:
    key, _, wanted = condition.partition("=")
    for path, value in values.items():
        if path == key or path.startswith(key + "."):
            if not wanted or str(value).strip().lower() == wanted.strip().lower():
                return True
    return False


def kind_of(kb, framework: str, values: dict[str, Any]) -> FileKind | None:
    """The kind of a config that `framework`'s keys claimed: first another
    framework's look-alike (any framework's list), then the framework's own kinds
    in order; None when no kind is declared or none matches (audited as training)."""
    for name in kb.frameworks:
        for kind in kind_data(kb, name).lookalikes:
            if kind.matches(values):
                return kind
    return next((k for k in kind_data(kb, framework).kinds if k.matches(values)), None)


def kind_data(kb, framework: str) -> KindData:
    cache = kb.__dict__.setdefault("_kind_data", {})
    if framework not in cache:
        cache[framework] = _load(kb, framework)
    return cache[framework]


_KIND = ("name", "all", "any", "none", "audit", "keys", "warnings", "because", "source")
SECTIONS = {"kinds": _KIND, "lookalikes": _KIND,  # file_kinds.yaml: the fields of entries
            "launches": ("name", "any", "all", "config_flag", "audit", "min_version", "renamed",
                         "because", "source")}


def _load(kb, framework: str) -> KindData:
    found = side_yaml(kb, framework, KINDS_FILE, SECTIONS)
    if found is None:
        return KindData()
    _, data, fail = found
    out = KindData()
    for section, into in (("kinds", out.kinds), ("lookalikes", out.lookalikes)):
        for i, entry in enumerate(data.get(section) or []):
            at = (section, i)
            if not isinstance(entry, dict):
                raise fail("an entry must be a mapping", at)
            missing = [f for f in ("name", "because", "source") if not entry.get(f)]
            if missing:
                raise fail(f"entry lacks {', '.join(missing)}", at)
            lists = {}
            for part in ("all", "any", "none"):
                raw = entry.get(part) or []
                if not isinstance(raw, list) or not all(isinstance(c, str) for c in raw):
                    raise fail(f"{part}: a list of KEY or KEY=VALUE", at + (part,))
                lists[part] = tuple(raw)
            if not any(lists.values()):
                raise fail("a kind needs a signature (all, any or none)", at)
            audit = entry.get("audit", section == "kinds")
            if section == "lookalikes" and audit:
                raise fail("a look-alike of another framework is never audited", at)
            into.append(FileKind(str(entry["name"]), bool(audit), lists["all"], lists["any"],
                                 lists["none"], str(entry["because"]), str(entry["source"]),
                                 str(entry.get("keys", "training" if audit else "none")),
                                 tuple(str(w) for w in entry.get("warnings") or ())))
    for i, entry in enumerate(data.get("launches") or []):
        at = ("launches", i)
        if not isinstance(entry, dict) or not all(entry.get(f) for f in
                                                  ("name", "any", "because", "source")):
            raise fail("a launch needs name, any, because and source", at)
        words = {part: entry.get(part) or [] for part in ("any", "all")}
        if not all(isinstance(w, list) and all(isinstance(x, str) and x for x in w)
                   for w in words.values()):
            raise fail("any, all: lists of words", at)
        renamed = []
        for j, copy in enumerate(entry.get("renamed") or []):
            if not isinstance(copy, dict) or not all(copy.get(f) for f in
                                                     ("script", "because", "source")) or \
                    copy["script"] not in words["any"]:
                raise fail("renamed: an entry needs script (one of any), because and source",
                           ("launches", i, "renamed", j))
            renamed.append(Renamed(str(copy["script"]), *(
                tuple(str(w) for w in copy.get(part) or ())
                for part in ("content", "content_none", "flags", "flags_none", "flags_any",
                             "name_any"))))
        out.launches.append(LaunchSignature(str(entry["name"]), tuple(words["any"]),
                                            tuple(words["all"]),
                                            str(entry.get("config_flag") or ""),
                                            str(entry["because"]), str(entry["source"]),
                                            bool(entry.get("audit", True)), tuple(renamed),
                                            _min_version(entry.get("min_version"), fail,
                                                         ("launches", i, "min_version"))))
    return out


def _min_version(entry, fail, at) -> dict | None:
    if entry is None:
        return None
    if not isinstance(entry, dict) or not all(entry.get(f) for f in
                                              ("dependency", "pattern", "because", "source")):
        raise fail("min_version needs dependency, pattern, because and source", at)
    try:
        pattern = re.compile(str(entry["pattern"]))
    except re.error as error:
        raise fail(f"min_version pattern: {error}", at) from None
    if "version" not in pattern.groupindex:
        raise fail("min_version pattern: needs a (?P<version>...) group", at)
    return {**entry, "pattern": pattern}
