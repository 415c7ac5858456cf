"""What the user tells the audit beyond the project: --gpus and --gpu-spec, --model,
--host-ram; read as the planner reads them (program/query.py), once per audit."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kbsolve.audit.hardware import Hardware, from_flags
from kbsolve.diagnostics import Diagnostic, KbError
from kbsolve.dsl.kb import KnowledgeBase


@dataclass
class Flags:
    """What the user says beyond the project: --gpus/--gpu-spec, --model, --host-ram."""
    gpus: str | None = None
    gpu_spec: str | None = None
    model: str | None = None  # as given: a catalog name, a config.json, a YAML spec
    host_ram: float | None = None  # GiB per node
    fixed: Hardware | None = None
    forced: Any = None  # the --model entry
    notes: list[str] = field(default_factory=list)
    resolved: bool = False

    def resolve(self, kb: KnowledgeBase, gpus: str | None = None) -> "Flags":
        """Read the flags once (exit 2 on a bad one, as the planner's); `gpus` is
        --gpus when given apart."""
        if self.resolved:
            return self
        self.resolved, self.gpus = True, self.gpus or gpus
        if self.host_ram is not None and not self.host_ram > 0:
            raise KbError(Diagnostic(f"--host-ram {self.host_ram}: give GiB above 0"))
        self.fixed = from_flags(kb, self.gpus, self.gpu_spec)
        if self.fixed is not None:
            self.notes += self.fixed.notes
        if self.model:
            from kbsolve.program.query import model_of
            self.forced = model_of(kb, self.model, self.notes)
        return self
