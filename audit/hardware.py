"""The GPUs an audit assumes: --gpus, else the config's process count, else
nvidia-smi; otherwise unknown, and the report says what that leaves open."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field

from kbsolve.diagnostics import KbError
from kbsolve.program.facts import gpu_by_name as gpu_named, parse_gpus


@dataclass
class Hardware:
    gpu: object | None = None  # catalog GpuSpec
    nodes: int = 1
    per_node: int | None = None
    source: str = "unknown"  # --gpus | --gpu-spec | config | launch script | nvidia-smi | unknown
    notes: list[str] = field(default_factory=list)  # what --gpu-spec assumed

    @property
    def count(self) -> int | None:
        return None if self.per_node is None else self.nodes * self.per_node

    @property
    def spec(self) -> str | None:
        if self.gpu is None or self.per_node is None:
            return None
        prefix = f"{self.nodes}x" if self.nodes > 1 else ""
        return f"{prefix}{self.per_node}x{self.gpu.name}"


def from_flag(kb, text: str) -> Hardware:
    nodes, per_node, name = parse_gpus(text)
    return Hardware(gpu_named(kb, name)[0], nodes, per_node, "--gpus")


def from_flags(kb, gpus: str | None, gpu_spec: str | None = None) -> Hardware | None:
    """--gpus, or --gpu-spec (a GPU the catalog lacks) with --gpus giving the count;
    --gpu-spec alone leaves the count to the config or the launch script."""
    if gpu_spec is None:
        return from_flag(kb, gpus) if gpus else None
    from kbsolve.program.query import gpus_of
    notes: list[str] = []
    nodes, per_node, gpu = gpus_of(kb, gpus, gpu_spec, notes)
    return Hardware(gpu, nodes if gpus else 1, per_node if gpus else None,
                    "--gpus and --gpu-spec" if gpus else "--gpu-spec", notes)


def from_count(kb, gpus: int | None, nodes: int | None, source: str,
               gpu=None) -> Hardware | None:
    """`gpus` processes (of `gpu`, else nvidia-smi's card, else unknown)."""
    if not gpus:
        return None
    nodes = nodes if nodes and gpus % nodes == 0 else 1
    if gpu is None:
        smi = nvidia_smi(kb)
        gpu = smi.gpu if smi else None
    return Hardware(gpu, nodes, gpus // nodes, source)


_SMI: list = []


def nvidia_smi(kb) -> Hardware | None:
    """The local GPUs, when nvidia-smi is on PATH and names a catalog GPU."""
    if _SMI:
        return _SMI[0]
    found = None
    if shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=10).stdout
        except (OSError, subprocess.SubprocessError):
            out = ""
        names = [line.strip() for line in out.splitlines() if line.strip()]
        gpu = gpu_by_name(kb, names[0]) if names else None
        if gpu is not None:
            found = Hardware(gpu, 1, len(names), "nvidia-smi")
    _SMI.append(found)
    return found


def gpu_by_name(kb, name: str):
    """A catalog GPU for the name nvidia-smi prints (vendor, model, memory, memory type)."""
    words = name.replace("-", " ").split()
    tries = [name] + [" ".join(words[i:j]) for i in range(len(words))
                      for j in range(len(words), i, -1)]
    for text in tries:
        try:
            return kb.catalog.gpu(text)
        except KbError:
            continue
    return None
