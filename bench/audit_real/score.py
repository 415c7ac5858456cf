"""Score audit findings against hand labels (pure: no audit, no files).

A finding is (file, kind, keys, text). Its kind comes from where the report puts it:
error, silent, oom, fits, change (what --fix writes), tip (a P2 recommendation),
unknown_key, not_audited (no unit for a file: the audit left it alone). A finding is
correct when it matches a labelled problem, wrong when it matches a labelled false
finding, noise otherwise; a labelled problem is found when a finding matches it."""

from __future__ import annotations

from dataclasses import dataclass, field

# label kind -> the finding kinds that can find it
FINDS = {
    "error": {"error"}, "silent": {"silent", "error"}, "launch": {"error", "silent"},
    "path": {"error", "silent"}, "oom": {"oom"}, "fits": {"fits"},
    "recipe": {"error", "silent", "tip", "change"}, "tip": {"tip", "change"},
    "change": {"change", "tip"}, "unsupported_kind": {"not_audited"},
    "unknown_key": {"unknown_key"}, "audited": {"audited"},
}
# what a user reads as a finding; the one line of keys kbsolve does not model is not
# one, unless it is wrong (a key the framework refuses, shown as merely unmodelled)
COUNTED = ("error", "silent", "oom", "fits", "change", "tip")


@dataclass
class Finding:
    file: str
    kind: str
    keys: list[str] = field(default_factory=list)
    text: str = ""
    framework: str = ""
    verdict: str = ""          # correct | wrong | noise
    harmful: str = ""          # why a change hurts (empty: it does not)


def matches(finding: Finding, label: dict) -> bool:
    if label.get("file") not in (finding.file, "*"):
        return False
    kind = label.get("kind")
    if kind != "any" and finding.kind not in FINDS.get(kind, {kind}):
        return False
    keys = [str(k).lower() for k in label.get("keys") or []]
    if not keys:
        return True
    mine = {k.lower() for k in finding.keys}
    text = finding.text.lower()
    return any(k in mine or k in text for k in keys)


def score(findings: list[Finding], labels: dict, audited: set[str]) -> dict:
    """Sets each finding's verdict; returns {problems: [(label, found)], ...}.
    `audited`: the files the audit made a unit of. A file labelled unsupported_kind
    that the audit judged makes every finding on it wrong."""
    problems = list(labels.get("problems") or [])
    false = list(labels.get("false") or [])
    for label in problems:
        if label.get("kind") == "unsupported_kind":
            false.append({"file": label["file"], "kind": "any"})
            if label["file"] not in audited:
                findings.append(Finding(label["file"], "not_audited"))
            else:
                findings.append(Finding(label["file"], "audited"))
                false.append({"file": label["file"], "kind": "audited"})
    refused = [{**label, "kind": "any"} for label in problems
               if label.get("kind") == "error" and label.get("keys")]
    for finding in findings:
        if finding.kind == "unknown_key" and any(matches(finding, label) for label in refused):
            finding.verdict = "wrong"  # a refused key listed as merely unmodelled
        elif any(matches(finding, label) for label in problems):
            finding.verdict = "correct"
        elif any(matches(finding, label) for label in false):
            finding.verdict = "wrong"
            harm = next((label for label in false if label.get("harmful")
                         and finding.kind == "change" and matches(finding, label)), None)
            if harm and not finding.harmful:
                finding.harmful = harm.get("why", "labelled harmful")
        else:
            finding.verdict = "noise"
    found = [(label, any(f.verdict == "correct" and matches(f, label) for f in findings))
             for label in problems]
    return {"problems": found}


def totals(findings: list[Finding], problems: list[tuple[dict, bool]]) -> dict:
    counted = [f for f in findings if f.kind in COUNTED or f.verdict == "wrong"]
    counted = [f for f in counted if f.kind != "not_audited"]
    correct = sum(f.verdict == "correct" for f in counted)
    found = sum(hit for _, hit in problems)
    return {"findings": len(counted), "correct": correct,
            "wrong": sum(f.verdict == "wrong" for f in counted),
            "noise": sum(f.verdict == "noise" for f in counted),
            "harmful": sum(bool(f.harmful) for f in findings),
            "problems": len(problems), "found": found, "missed": len(problems) - found,
            "precision": round(correct / len(counted), 3) if counted else None,
            "recall": round(found / len(problems), 3) if problems else None}
