"""Audit every corpus set with its labelled hardware, score the findings, time a
90-config project. With fix=True each set's copy is fixed and re-audited; with
parsers=True the frameworks' parsers re-check every fixed config they accepted."""

from __future__ import annotations

import inspect
import shutil
import statistics
import tempfile
import time
import traceback
from pathlib import Path

from bench.audit_real.extract import changes_of, findings_of, predicted
from bench.audit_real.harm import change_harm, recipe_keys
from bench.audit_real.labels import CORPUS, JUDGED, load, set_dirs
from bench.audit_real.score import COUNTED, Finding, score, totals


def _audit(api, kb, root: Path, labels: dict, fix: bool):
    """(report dict or None, refusal line, traceback text)."""
    gpus = labels.get("hardware")
    kwargs = {"fix": fix}
    if labels.get("model") and "model" in inspect.signature(api.audit).parameters:
        kwargs["model"] = labels["model"]
    try:
        report, _ = api.audit(str(root), None if gpus in (None, "unknown") else gpus, kb, **kwargs)
        return report.model_dump(), "", ""
    except api.KbError as error:
        return None, str(error).splitlines()[0] if str(error) else "KbError", ""
    except Exception:  # a traceback a user would see: counted, never hidden
        return None, "", traceback.format_exc()


def audit_set(api, kb, folder: Path, work: Path, fix: bool, recipe: dict) -> dict:
    """Audit (and with fix=True fix) a copy of one set under `work`; unscored."""
    source, labels = load(folder)
    root = work / folder.name
    shutil.copytree(folder / "files", root)
    report, refused, trace = _audit(api, kb, root, labels, False)
    findings, audited = findings_of(report) if report else ([], set())
    launch = labels.get("launch_dir", ".")
    for finding in findings:
        if finding.kind == "change":
            change = next(c for c in changes_of(report)[finding.file] if c["key"] == finding.keys[0])
            finding.harmful = change_harm(change, labels["framework"], root, launch, recipe)
    fixed_trace = ""
    if fix and report:
        after, _, fixed_trace = _audit(api, kb, root, labels, True)
        _fix_harms(findings, labels, report, after)
    return {"folder": folder, "root": root, "labels": labels, "findings": findings,
            "audited": audited, "set": folder.name, "source": source["kind"],
            "framework": labels["framework"], "configs": len(labels.get("configs") or []),
            "refused": refused, "tracebacks": [t for t in (trace, fixed_trace) if t]}


def scored(state: dict) -> dict:
    findings, labels = state["findings"], state["labels"]
    result = score(findings, labels, state["audited"])
    return {key: state[key] for key in ("set", "source", "framework", "configs",
                                        "tracebacks")} | {"judged": _judged(labels),
        "holdout": bool(labels.get("holdout")),
        "refused": state["refused"].replace(str(state["root"]), state["set"]),
        "findings": [vars(f) for f in findings],
        "problems": [{"file": label["file"], "kind": label["kind"],
                      "keys": label.get("keys", []), "found": hit}
                     for label, hit in result["problems"]],
        "totals": totals(findings, result["problems"])}


def _fix_harms(findings: list[Finding], labels: dict, before: dict, after: dict | None) -> None:
    if after is None:
        return
    oom = {label["file"] for label in labels.get("problems") or [] if label["kind"] == "oom"}
    was, now = predicted(before), predicted(after)
    for finding in findings:
        if finding.kind == "change" and finding.file in oom and not finding.harmful and \
                was.get(finding.file) is not None and now.get(finding.file) is not None and \
                now[finding.file] > was[finding.file]:
            finding.harmful = (f"raises the predicted memory of an OOM config: "
                               f"{was[finding.file]} -> {now[finding.file]} GiB")


def _parser_harms(states: list[dict]) -> dict:
    """A change is harmful when the parser refuses a fixed file it accepted (one
    parser process per framework for the whole corpus). Returns how many fixed files
    the parser accepted before, and how many of them it still accepts."""
    kept = {"fixed_and_accepted_before": 0, "accepted_after": 0}
    from bench.parsers.run import verdicts_many
    every = verdicts_many([(s["folder"], s["labels"], s["root"]) for s in states])
    for state in states:
        accepted = {c["file"] for c in state["labels"].get("configs") or []
                    if (c.get("parser") or {}).get("verdict") == "accepted"}
        for file in accepted:
            verdict = every.get((state["set"], file))
            changes = [f for f in state["findings"] if f.file == file and f.kind == "change"]
            if changes and verdict:
                kept["fixed_and_accepted_before"] += 1
                kept["accepted_after"] += verdict["verdict"] == "accepted"
            if not verdict or verdict["verdict"] != "refused" or any(f.harmful for f in changes):
                continue  # accepted, or already explained by a harmful change
            for finding in changes:
                finding.harmful = f"the parser refuses the fixed file: {verdict['message']}"
    return kept


def timing(api, kb, target: int = 90) -> dict:
    """CPU seconds of auditing one project of `target` corpus configs (sets copied
    side by side, again under new names until the count is reached)."""
    folders = [f for f in set_dirs(CORPUS) if load(f)[0]["kind"] != "lookalike"]
    with tempfile.TemporaryDirectory() as tmp:
        root, count, round_ = Path(tmp) / "project", 0, 0
        while count < target:
            for folder in folders:
                if count >= target:
                    break
                shutil.copytree(folder / "files", root / f"{folder.name}-{round_}")
                count += len(_judged(load(folder)[1]))
            round_ += 1
        start = time.process_time()
        _audit(api, kb, root, {"hardware": "unknown"}, False)
        return {"configs": count, "cpu_s": round(time.process_time() - start, 2)}


def run_all(fix: bool = False, parsers: bool = False, only: list[str] | None = None) -> dict:
    from kbsolve import api
    kb = api.load_kb()
    recipe = recipe_keys()
    with tempfile.TemporaryDirectory() as tmp:
        states = [audit_set(api, kb, folder, Path(tmp), fix, recipe)
                  for folder in set_dirs(CORPUS) if not only or folder.name in only]
        kept = _parser_harms(states) if fix and parsers else None
        sets = [scored(state) for state in states]
    return {"sets": sets, **summary(sets), "parts": parts(sets),
            "refused_sets": {s["set"]: s["refused"] for s in sets if s["refused"]},
            "timing": timing(api, kb) if not only else None, "fix": fix, "parsers": parsers,
            "parser_kept": kept}


def summary(sets: list[dict]) -> dict:
    """The scores of some scored sets: totals, per framework, per finding kind, per
    labelled problem kind, the median findings per config and the tracebacks."""
    findings = [Finding(**f) for s in sets for f in s["findings"]]
    problems = [({"kind": p["kind"]}, p["found"]) for s in sets for p in s["problems"]]
    per_config = [sum(1 for f in s["findings"] if f["file"] == file and
                      (f["kind"] in COUNTED or f["verdict"] == "wrong"))
                  for s in sets for file in s["judged"]]
    return {"totals": totals(findings, problems),
            "by_framework": _grouped(sets, lambda s: s["framework"]),
            "by_kind": _by_kind(findings, sets),
            "median_findings_per_config": round(statistics.median(per_config), 2)
            if per_config else None,
            "tracebacks": sum(len(s["tracebacks"]) for s in sets),
            "problems_by_kind": _problems_by_kind(sets)}


def parts(sets: list[dict]) -> dict:
    """The corpus split in two: the sets the audit was tuned on, and the held-out sets
    (labels.yaml `holdout: true`: collected and labelled before the audit ever ran on
    them), each with its own summary and set names."""
    out = {}
    for name, chosen in (("tuned", [s for s in sets if not s.get("holdout")]),
                         ("holdout", [s for s in sets if s.get("holdout")])):
        out[name] = {"set_names": [s["set"] for s in chosen], **summary(chosen)}
    return out


def _problems_by_kind(sets: list[dict]) -> dict:
    out: dict[str, dict] = {}
    for s in sets:
        for p in s["problems"]:
            row = out.setdefault(p["kind"], {"problems": 0, "found": 0})
            row["problems"] += 1
            row["found"] += p["found"]
    return dict(sorted(out.items()))


def _judged(labels: dict) -> list[str]:
    """The labelled files that are configs to judge (not DeepSpeed files, requirements...)."""
    return [c["file"] for c in labels.get("configs") or [] if c["kind"] in JUDGED]


def _grouped(sets: list[dict], key) -> dict:
    out = {}
    for name in sorted({key(s) for s in sets}):
        chosen = [s for s in sets if key(s) == name]
        out[name] = totals([Finding(**f) for s in chosen for f in s["findings"]],
                           [({"kind": p["kind"]}, p["found"]) for s in chosen
                            for p in s["problems"]])
    return out


def _by_kind(findings: list[Finding], sets: list[dict]) -> dict:
    out = {}
    for kind in sorted({f.kind for f in findings} - {"not_audited"}):
        chosen = [f for f in findings if f.kind == kind]
        out[kind] = {"findings": len(chosen), "correct": sum(f.verdict == "correct" for f in chosen),
                     "wrong": sum(f.verdict == "wrong" for f in chosen),
                     "noise": sum(f.verdict == "noise" for f in chosen),
                     "harmful": sum(bool(f.harmful) for f in chosen)}
    return out
