"""List a project's files safely: no symlink loops, nothing outside the tree,
no vendored folders, a cap on the number and size of files."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from kbsolve.diagnostics import Diagnostic, KbError

SKIP_DIRS = frozenset({".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv",
                       ".tox", ".nox", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".cache",
                       "site-packages", ".eggs", ".idea", ".vscode", "wandb", "saves"})
MAX_FILES = 50_000
MAX_FILE_BYTES = 2 * 1024 * 1024
MAX_DEPTH = 64


@dataclass(frozen=True)
class Entry:
    path: Path  # absolute
    rel: str  # relative to the project root, with '/'
    size: int


@dataclass
class Tree:
    root: Path
    files: list[Entry] = field(default_factory=list)
    dirs: set[str] = field(default_factory=set)  # relative folder paths
    notes: list[str] = field(default_factory=list)  # what was skipped, and why
    single: bool = False  # PATH named one config: its references may lie above it

    def by_rel(self) -> dict[str, Entry]:
        index = self.__dict__.get("_index")
        if index is None or len(index) != len(self.files):
            index = self.__dict__["_index"] = {e.rel: e for e in self.files}
        return index


def walk(path: str | os.PathLike) -> Tree:
    """The project's files; raises KbError (exit 2) when PATH is not a readable folder or file."""
    root = Path(path)
    if not os.path.lexists(root):
        raise KbError(Diagnostic(f"{root}: no such file or folder"))
    try:
        root = root.resolve(strict=True)
    except (OSError, RuntimeError) as error:
        raise KbError(Diagnostic(f"{path}: cannot resolve the path ({error})")) from None
    if root.is_file():
        tree = Tree(root.parent, single=True)
        tree.files.append(Entry(root, root.name, root.stat().st_size))
        return tree
    if not root.is_dir():
        raise KbError(Diagnostic(f"{root}: not a regular file or folder"))
    if not os.access(root, os.R_OK | os.X_OK):
        raise KbError(Diagnostic(f"{root}: permission denied"))
    tree = Tree(root)
    _scan(tree, root, "")
    return tree


def _scan(tree: Tree, folder: Path, rel: str, depth: int = 0) -> None:
    if depth > MAX_DEPTH:
        tree.notes.append(f"{rel}: skipped, nested more than {MAX_DEPTH} folders deep")
        return
    try:
        with os.scandir(folder) as listing:
            entries = sorted(listing, key=lambda e: e.name)
    except OSError as error:
        tree.notes.append(f"{rel or '.'}: skipped, cannot list ({error.strerror or error})")
        return
    for entry in entries:
        if len(tree.files) >= MAX_FILES:
            tree.notes.append(f"stopped after {MAX_FILES} files")
            return
        child = f"{rel}/{entry.name}" if rel else entry.name
        try:
            if entry.is_symlink():
                _link(tree, Path(entry.path), child)
            elif entry.is_dir(follow_symlinks=False):
                if entry.name in SKIP_DIRS or _is_venv(Path(entry.path)):
                    continue
                tree.dirs.add(child)
                _scan(tree, Path(entry.path), child, depth + 1)
            elif entry.is_file(follow_symlinks=False):
                tree.files.append(Entry(Path(entry.path), child, entry.stat().st_size))
        except OSError as error:
            tree.notes.append(f"{child}: skipped ({error.strerror or error})")


def _link(tree: Tree, path: Path, rel: str) -> None:
    """Symlinked files inside the tree are read; links leaving it, loops and folders are not."""
    try:
        target = path.resolve(strict=True)
    except (OSError, RuntimeError):
        tree.notes.append(f"{rel}: skipped, a broken or looping symlink")
        return
    if tree.root not in target.parents:
        tree.notes.append(f"{rel}: skipped, a symlink leaving the project")
    elif target.is_dir():
        tree.notes.append(f"{rel}: skipped, a symlinked folder")
    elif target.is_file():
        tree.files.append(Entry(target, rel, target.stat().st_size))


def _is_venv(folder: Path) -> bool:
    return (folder / "pyvenv.cfg").is_file() or (folder / "conda-meta").is_dir()
