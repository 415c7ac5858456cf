"""Audit report (AuditReport as a dict) -> findings, one per thing a user reads."""

from __future__ import annotations

from bench.audit_real.score import Finding


def findings_of(report: dict) -> tuple[list[Finding], set[str]]:
    out, audited = [], set()
    for unit in report.get("units", []):
        path, framework = unit["path"], unit["framework"]
        audited.add(path)

        def add(kind: str, keys: list, text: str, where: str = "") -> None:
            out.append(Finding(where or path, kind, [str(k) for k in keys], text, framework))

        for group in ("errors", "silent"):
            for f in unit.get(group, []):
                add("error" if group == "errors" else "silent", [*f.get("fix", {}), f["id"]],
                    f"{f['id']} {f['message']}", located(f.get("location", "")))
        fit = unit.get("fit") or {}
        if fit.get("status") in ("oom", "fits"):
            add(fit["status"], ["memory"], f"{fit.get('device_gib')} of {fit.get('budget_gib')} GiB")
        for change in unit.get("changes", []):
            add("change", [change["key"]], f"{change['key']}: {change.get('old')!r} -> "
                f"{change.get('new')!r} ({change.get('reason', '')})")
        for check in unit.get("recommendations", {}).get("P2", []):
            add("tip", [*check.get("changes", {}), check["id"]], f"{check['id']} {check['title_en']}")
        if unit.get("unknown_keys"):  # one line in the report
            add("unknown_key", unit["unknown_keys"], " ".join(unit["unknown_keys"]))
    return out, audited


def located(location: str) -> str:
    """The file a finding points at (`a/b.yaml:7:1`, `run.sh, other.sh`): a finding
    about a launch script or a TOML a launch names is scored on that file, and its
    path is not text a label's keys could match."""
    return location.split(", ", 1)[0].split(":", 1)[0].strip()


def changes_of(report: dict) -> dict[str, list[dict]]:
    return {unit["path"]: unit.get("changes", []) for unit in report.get("units", [])}


def predicted(report: dict) -> dict[str, float | None]:
    return {unit["path"]: (unit.get("fit") or {}).get("predicted_gib")
            or (unit.get("fit") or {}).get("device_gib") for unit in report.get("units", [])}
