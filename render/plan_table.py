"""Plans and estimates as a table for people."""

from __future__ import annotations

import json

from kbsolve.render.data import as_data
from kbsolve.render.plan_parts import reason, short, speed

BAR = 30


def table(result) -> str:
    return _table(as_data(result))


def _table(d: dict) -> str:
    status = d.get("status", "estimate").replace("_", " ")  # timed_out: "timed out"
    out = [f"kbsolve: {status} — {d['framework']}, {d['model']} on "
           f"{d['query']['gpus']} ({d['gpu']})"]
    out += [f"  note: {n}" for n in d.get("notes", [])]
    if d.get("status") == "infeasible":
        out.append("\nNo configuration fits. These clash:")
        out += [f"  - {reason(r)}" for r in d["core"]]
        out.append("Smallest fixes:" if d["fixes"] else "No fix found among the pins and "
                                                        "the hardware tried.")
        out += [f"  - {f['description']}" for f in d["fixes"]]
        return "\n".join(out)
    if d.get("memory") is None:
        out.append("\nNo plan was found within the time-out (--timeout); try a longer one.")
        return "\n".join(out)
    if d.get("broken"):
        out.append("\nThis configuration breaks rules:")
        out += [f"  - {reason(r)}" for r in d["broken"]]
    out.append("\nConfig:")
    kinds = {c["key"]: c for c in d.get("explanation", [])}
    shown = {k: v for k, v in d["config"].items() if worth_showing(kinds.get(k), v)}
    labels = {k: label(k, kinds.get(k)) for k in shown}
    width = max(len(v) for v in labels.values()) if shown else 0
    for key, value in shown.items():
        choice = kinds.get(key)
        why = f"  [{choice['kind']}] {short(choice)}" if choice else ""
        out.append(f"  {labels[key].ljust(width)}  {json.dumps(value, ensure_ascii=False)}{why}")
    hidden = len(d["config"]) - len(shown)
    if hidden:
        out.append(f"  ... and {hidden} more at their defaults or not applying here "
                   f"(--format yaml lists all)")
    kept_out = consent_names(d.get("explanation", []))
    if kept_out:
        out.append(f"  kept out without your consent (--allow NAME): {', '.join(kept_out)}")
    if d.get("global_batch"):
        batch = d["global_batch"]
        out.append(f"\nGlobal batch: {batch['value']} {batch['unit']} = "
                   f"{' x '.join(batch['factors'])}; {batch['origin']}")
    out += memory(d["memory"])
    out += speed(d["speed"])
    if d.get("warnings"):
        out.append("\nWarnings:")
        out += [f"  - {w['id']}: {w['because']} ({w['source']})"
                + (f"\n    accepted: {w['accepted']}" if w.get("accepted") else "")
                for w in d["warnings"]]
    if d.get("alternatives"):
        out.append("\nAlternatives:")
        for alt in d["alternatives"]:
            changes = ", ".join(f"{k}={json.dumps(v)}" for k, v in alt["changes"].items())
            out.append(f"  - {changes}: {alt['speed_delta_pct']:+.1f}% time, "
                       f"{alt['memory_delta_gib']:+.2f} GiB")
    if d.get("launch"):
        out.append(f"\nLaunch: {d['launch']}")
    return "\n".join(out)


def label(key: str, choice: dict | None) -> str:
    """The framework's key, and the option's name where it differs (the name is
    what --set and the explanations use)."""
    if choice is None or key.rsplit(".", 1)[-1] == choice["option"]:
        return key
    return f"{key} ({choice['option']})"


def worth_showing(choice: dict | None, value) -> bool:
    """Decided options always; facts when they carry a value (a model id, a
    length); settings nobody decided are summarised in one line."""
    if choice is None:  # an estimate: no explanations, every option shown
        return True
    if choice["kind"] == "n/a":
        return False
    if choice.get("is_default") and choice["kind"] in ("default", "forced", "tie"):
        # kept at its default: the summary lines say why, except for the recipe
        return any(r.get("optin_group") == "recipe" for r in choice["reasons"])
    if choice["kind"] == "fact":
        return not isinstance(value, bool) and value not in ("", 0, None)
    return True


def consent_names(explanation: list[dict]) -> list[str]:
    """The optins that kept options of the table at their defaults."""
    names = []
    for choice in explanation:
        if not (choice.get("is_default") and choice["kind"] in ("default", "forced")):
            continue
        for r in choice["reasons"]:
            rule = r["rule"].split(".", 1)[-1]
            if r.get("optin_group") and r["optin_group"] != "recipe" and \
                    rule[6:] not in names:
                names.append(rule[6:])
    return names


def memory(m: dict) -> list[str]:
    level = m["per_gpu_gib"]
    band = m.get("band")
    budget = (f"of {m['budget_gib']:.2f} GiB budget ({m['gpu_gib']:.2f} GiB GPU, "
              f"{m['headroom']:.0%} headroom)")
    if not banded(m):
        out = [f"\nMemory per GPU: {level['device']:.2f} GiB {budget}"
               f" — allocated {level['allocated']:.2f}, reserved {level['reserved']:.2f}"]
    else:
        low, high = band["predicted_gib"], band["upper_gib"]
        out = [f"\nMemory per GPU: device {low['device']:.2f} GiB (model error band "
               f"{band_share(band)}: up to {high['device']:.2f} GiB) {budget}"
               f" — allocated {low['allocated']:.2f} (up to {high['allocated']:.2f}), "
               f"reserved {low['reserved']:.2f} (up to {high['reserved']:.2f})"]
    scale = max(m["budget_gib"], level["device"], 1e-9)
    zero = 0
    for item in m["breakdown"]:
        if item["location"] != "gpu":
            continue
        if item["gib"] == 0:
            zero += 1  # kept in JSON; a row of 0.00 says nothing here
            continue
        bar = "█" * max(int(round(item["gib"] / scale * BAR)), 0)
        out.append(f"  {item['term'][:22].ljust(22)} {item['gib']:8.2f} GiB {bar}")
    if zero:
        out.append(f"  ({zero} more terms are 0 in this plan)")
    if m["host_gib"]:
        node = m.get("host_node_gib") or m["host_gib"]
        budget = m.get("host_budget_gib")
        limit = f" of {budget:.2f} GiB ({m.get('host_budget_source') or '--host-ram'})" \
            if budget is not None else \
            " (not checked: pass --host-ram GIB)"
        out.append(f"  host RAM: {m['host_gib']:.2f} GiB per GPU process, "
                   f"{node:.2f} GiB per node{limit}")
    if band is not None:
        share = f" {band_share(band)}" if banded(m) else ""
        out.append(f"  error band{share}: {band['because']} [{band['source']}]")
    out.append(fit_words(m))
    if not m.get("host_fits", True):
        out.append("  HOST RAM DOES NOT FIT")
    return out


def band_share(band: dict) -> str:
    return f"+{band['share']:.1%}"


def banded(m: dict) -> bool:
    """The figures carry an error band above 0 (a KB may state none, and say why)."""
    band = m.get("band")
    return band is not None and (band["share"] > 0 or band["gib"] > 0)


def fit_words(m: dict) -> str:
    """Whether it fits, and at which figure: the band's upper end where there is one."""
    band = m.get("band")
    if not banded(m):
        return "  fits" if m["fits"] else "  DOES NOT FIT"
    if m["fits"]:
        return "  fits at the error band's upper end"
    if band["fits_without_band"]:
        return ("  DOES NOT FIT at the error band's upper end (the prediction without the band "
                "fits)")
    return "  DOES NOT FIT, even without the error band"
