"""Pieces the plan's table and Markdown share: a choice's first reason, a broken
rule, the speed line."""

from __future__ import annotations


def short(choice: dict) -> str:
    reasons = choice["reasons"]
    if not reasons:
        return ""
    first = reasons[0]
    return first["detail"] or first["because"] or first["rule"]


def reason(r: dict) -> str:
    text = r["detail"] or r["because"]
    where = f" [{r['source']}; {r['location']}]" if r.get("source") else ""
    rule = r["rule"].split(".", 1)[-1]
    return f"{rule}: {text}{where}"


def _rate(value: float) -> str:
    """Whole numbers from 100 up, else three significant digits (0.492 samples/s)."""
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def speed(s: dict) -> list[str]:
    parts = [f"step {s['step_time_s']:.3f} s" + (f" ({s['step']})" if s.get("step") else "")]
    parts += [f"{_rate(v)} {k}/s" for k, v in s["throughput"].items()]
    if s.get("mfu") is not None:
        parts.append(f"MFU {s['mfu']:.0%}")
    return ["\nSpeed: " + ", ".join(parts)]
