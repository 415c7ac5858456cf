"""Which YAML files are training configs, and of which framework.

A YAML is a config of framework F when it holds F's `yaml_key` signs or keys
that F's options write into F's main file (its first, when that is a YAML); keys of F's other files (DeepSpeed,
accelerate) mark a referenced file instead."""

from __future__ import annotations

import re
from dataclasses import dataclass

from kbsolve.dsl.kb import KnowledgeBase

SIGN_WEIGHT = 3  # one declared yaml_key counts as much as three option keys
MIN_SCORE = 3


@dataclass(frozen=True)
class KeySets:
    main: dict[str, frozenset[str]]  # framework -> keys its options write to the main file
    other: dict[str, frozenset[str]]  # framework -> keys written to its other files
    words: re.Pattern  # any key's last part, for a cheap text pre-filter


def key_sets(kb: KnowledgeBase) -> KeySets:
    main: dict[str, set] = {}
    other: dict[str, set] = {}
    for name, fw in kb.frameworks.items():
        # the framework's first file is its main one; a framework driven by a script's
        # flags (diffusers, torchtitan) has no main YAML: its accelerate file is another file
        main_file = fw.files[0].name if fw.files and fw.files[0].kind == "yaml" else None
        main[name], other[name] = set(), set()
        for option in kb.options_of(name):
            for emit in option.emits:
                (main[name] if emit.target == main_file else other[name]).add(emit.key)
        for static in kb.emits:
            if static.framework == name and static.target != main_file:
                other[name].add(static.key)
    leaves = {k.rsplit(".", 1)[-1] for keys in list(main.values()) + list(other.values())
              for k in keys}
    leaves |= {k.rsplit(".", 1)[-1] for d in kb.detectors.values() for k, _ in d.yaml_keys}
    words = re.compile("|".join(re.escape(w) for w in sorted(leaves, key=len, reverse=True))
                       or r"(?!)")
    return KeySets({k: frozenset(v) for k, v in main.items()},
                   {k: frozenset(v) for k, v in other.items()}, words)


def sign_hits(kb: KnowledgeBase, framework: str, values: dict) -> list[str]:
    detector = kb.detectors.get(framework)
    hits = []
    for key, wanted in detector.yaml_keys if detector else ():
        for path, value in values.items():
            if (path == key or path.endswith("." + key)) and \
                    (wanted is None or str(value).lower() == str(wanted).lower()):
                hits.append(f"{key}: {value}" if wanted is not None else key)
                break
    return hits


def classify(kb: KnowledgeBase, sets: KeySets, values: dict,
             project_votes: dict[str, int]) -> tuple[str | None, list[str]]:
    """(framework or None, the signs found) for one flattened YAML."""
    best: tuple = (0, 0, None, [])
    for name in kb.frameworks:
        hits = sign_hits(kb, name, values)
        main = sum(1 for k in values if k in sets.main[name])
        other = sum(1 for k in values if k in sets.other[name])
        if other > main and not hits:
            continue
        score = SIGN_WEIGHT * len(hits) + main
        rank = (score, project_votes.get(name, 0), name, hits)
        if score >= MIN_SCORE and rank[:2] > best[:2]:
            best = rank
    return best[2], best[3]
