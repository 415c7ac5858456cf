"""Which frameworks a project uses: the KB's `detect` signs, project-wide.

Config files are classified one by one in classify.py; here are the signs
that belong to the project as a whole (imports, CLI names, dependencies,
folders, the git remote)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from kbsolve.audit import kinds
from kbsolve.audit.texts import Unreadable, text_of
from kbsolve.audit.walk import Tree
from kbsolve.dsl.kb import KnowledgeBase

_IMPORT = re.compile(r"^\s*(?:from\s+([\w.]+)\s+import|import\s+([\w.]+(?:\s*,\s*[\w.]+)*))",
                     re.M)


@dataclass(frozen=True)
class Sign:
    framework: str
    kind: str  # import | cli | dependency | path | remote | yaml_key
    what: str
    where: str


class ProjectText:
    """Texts of the small files detection reads, each read once."""

    def __init__(self, tree: Tree):
        self.tree = tree
        self.texts: dict[str, str | None] = {}
        self.notes: list[str] = []
        self._index = tree.by_rel()
        self._modules: dict[str, set[str]] = {}

    def modules(self, rel: str) -> set[str]:
        """The modules a Python file imports (read once)."""
        if rel not in self._modules:
            self._modules[rel] = imported_modules(self.text(rel) or "")
        return self._modules[rel]

    def text(self, rel: str) -> str | None:
        if rel not in self.texts:
            entry = self._index.get(rel)
            try:
                self.texts[rel] = text_of(entry) if entry else None
            except Unreadable as error:
                self.notes.append(str(error))
                self.texts[rel] = None
        return self.texts[rel]


def imported_modules(text: str) -> set[str]:
    found: set[str] = set()
    for match in _IMPORT.finditer(text):
        if match.group(1):
            found.add(match.group(1))
        else:
            found.update(part.strip().split(" ")[0] for part in match.group(2).split(","))
    return found


def project_signs(kb: KnowledgeBase, texts: ProjectText) -> list[Sign]:
    tree = texts.tree
    signs: list[Sign] = []
    rels = [e.rel for e in tree.files]
    remote = git_remote(tree)
    for detector in kb.detectors.values():
        fw = detector.framework
        for entry_rel in rels:
            if detector.imports and kinds.is_python(entry_rel):
                modules = texts.modules(entry_rel)
                for pkg in detector.imports:
                    if any(m == pkg or m.startswith(pkg + ".") for m in modules):
                        signs.append(Sign(fw, "import", pkg, entry_rel))
            if detector.clis and (kinds.is_shell(entry_rel) or kinds.is_readme(entry_rel)):
                text = texts.text(entry_rel) or ""
                for cli in detector.clis:
                    if _word(cli).search(text):
                        signs.append(Sign(fw, "cli", cli, entry_rel))
            if detector.dependencies and kinds.is_dependency_file(entry_rel):
                text = texts.text(entry_rel) or ""
                for dep in detector.dependencies:
                    if _word(dep, re.I).search(text):
                        signs.append(Sign(fw, "dependency", dep, entry_rel))
        for wanted in detector.paths:
            wanted = wanted.strip("/")
            hit = next((r for r in sorted(tree.dirs) + rels
                        if r == wanted or r.endswith("/" + wanted)), None)
            if hit:
                signs.append(Sign(fw, "path", wanted, hit))
        for name in detector.remotes:
            if remote and name.lower() in remote.lower():
                signs.append(Sign(fw, "remote", name, ".git/config"))
    return signs


def _word(name: str, flags: int = 0) -> re.Pattern:
    return re.compile(r"(?<![\w.-])" + re.escape(name) + r"(?![\w-])", flags)


def git_remote(tree: Tree) -> str:
    config = tree.root / ".git" / "config"
    try:
        if config.is_file() and config.stat().st_size < 1_000_000:
            text = config.read_text(encoding="utf-8", errors="replace")
            return " ".join(re.findall(r"^\s*url\s*=\s*(\S+)", text, re.M))
    except OSError:
        return ""
    return ""
