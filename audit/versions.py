"""Which version of a framework a project runs: a vendored copy's version file
(kb/<framework>/versions.yaml), else a requirement pinning one of the detect
block's `dependency` names (requirements*.txt, pyproject.toml, setup.py, ...)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from kbsolve.audit import kinds
from kbsolve.program.repo_files import side_yaml

VERSIONS_FILE = "versions.yaml"
_SPEC = r"\s*(?:\[[^\]]*\])?\s*(===|==|~=|>=|<=|!=|<|>)\s*([0-9][\w.+!-]*)"


@dataclass(frozen=True)
class ProjectVersion:
    version: str  # "0.9.3", or a specifier such as ">=0.9.2" when not pinned
    where: str  # "requirements.txt:4"
    pinned: bool  # an exact version (==, ===, or a vendored copy's file)


def project_version(kb, framework: str, texts) -> ProjectVersion | None:
    """`texts`: detect.ProjectText of the project."""
    for entry in texts.tree.files:
        for path, pattern in version_files(kb, framework):
            if entry.rel == path or entry.rel.endswith("/" + path):
                match = pattern.search(texts.text(entry.rel) or "")
                if match:
                    line = (texts.text(entry.rel) or "")[:match.start("version")].count("\n") + 1
                    return ProjectVersion(match.group("version"), f"{entry.rel}:{line}", True)
    detector = kb.detectors.get(framework)
    return dependency_version(texts, detector.dependencies if detector else ())


def dependency_version(texts, names) -> ProjectVersion | None:
    """The version the project's requirements give one of the package `names`:
    a pin (==) first, else the first specifier."""
    loose = None
    for entry in texts.tree.files:
        if not names or not kinds.is_dependency_file(entry.rel):
            continue
        text = texts.text(entry.rel) or ""
        for name in names:
            for match in re.finditer(r"(?im)^[\s\"']*" + re.escape(name) + _SPEC, text):
                line = text[:match.start()].count("\n") + 1
                op, version = match.group(1), match.group(2)
                found = ProjectVersion(version if op in ("==", "===") else op + version,
                                       f"{entry.rel}:{line}", op in ("==", "==="))
                if found.pinned:
                    return found
                loose = loose or found
    return loose


def version_files(kb, framework: str) -> list[tuple[str, re.Pattern]]:
    """The files that pin the framework's version and how to read it (versions.yaml)."""
    cache = kb.__dict__.setdefault("_version_files", {})
    if framework not in cache:
        cache[framework] = _load(kb, framework)
    return cache[framework]


def _load(kb, framework: str) -> list[tuple[str, re.Pattern]]:
    found = side_yaml(kb, framework, VERSIONS_FILE,
                      {"files": ("path", "pattern", "because", "source")})
    if found is None:
        return []
    _, data, fail = found
    found = []
    for i, entry in enumerate(data.get("files") or []):
        at = ("files", i)
        if not isinstance(entry, dict) or not all(entry.get(f) for f in
                                                  ("path", "pattern", "because", "source")):
            raise fail("an entry needs path, pattern, because and source", at)
        try:
            pattern = re.compile(str(entry["pattern"]))
        except re.error as error:
            raise fail(f"pattern: {error}", at + ("pattern",)) from None
        if "version" not in pattern.groupindex:
            raise fail("pattern: needs a (?P<version>...) group", at + ("pattern",))
        found.append((str(entry["path"]).strip("/"), pattern))
    return found


def excludes(spec: str, version: ProjectVersion | None) -> bool:
    """Whether a rule's `versions` specifier leaves out the project's pinned version."""
    if not spec or version is None or not version.pinned:
        return False
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion, Version
    try:
        return Version(version.version) not in SpecifierSet(spec, prereleases=True)
    except (InvalidSpecifier, InvalidVersion):
        return False
