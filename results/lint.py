"""What `kbsolve kb check --deep` answers: the deep check's report."""

from __future__ import annotations

from dataclasses import dataclass, field

from kbsolve.diagnostics import Diagnostic


@dataclass
class DeepReport:
    diagnostics: list[Diagnostic] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    situations: dict[str, int] = field(default_factory=dict)
    forbidden_values: int = 0
    seconds: float = 0.0
    silenced: int = 0  # warnings a pack's `silence` declaration hid

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity == "error"]
