"""What launch scripts say: environment variables and process counts.

The flags read are the launchers' own (torchrun, accelerate) and CUDA's
device list; framework variables (a node count included) are kept as written
for the KB's options to read."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_ENV = re.compile(r"(?:^|[\s;&|(])(?:export\s+)?([A-Z][A-Z0-9_]*)=(\"[^\"]*\"|'[^']*'|[^\s;&|)]*)")
_PROCS = re.compile(r"--(?:nproc[_-]per[_-]node|num[_-]processes)[=\s]+(\d+)")
_NODES = re.compile(r"--(?:nnodes|num[_-]machines)[=\s]+(\d+)")


@dataclass
class LaunchInfo:
    scripts: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    processes: int | None = None  # per node
    nodes: int | None = None

    @property
    def gpus(self) -> int | None:
        if self.processes is None:
            return None
        return self.processes * (self.nodes or 1)


_DEFAULTED = re.compile(r"^\$\{[A-Z][A-Z0-9_]*:?-([^}]*)\}$")


def _default(value: str) -> str:
    """`${NNODES:-2}` (the environment, else 2) reads as its default, 2."""
    match = _DEFAULTED.match(value)
    return match.group(1) if match else value


def read_launch(scripts: dict[str, str]) -> LaunchInfo:
    """Scripts (path -> text) that launch one config."""
    info = LaunchInfo(scripts=sorted(scripts))
    for rel in info.scripts:
        text = re.sub(r"(?m)#.*$", "", scripts[rel])
        for name, value in _ENV.findall(text):
            info.env[name] = _default(value.strip("\"'"))
        procs, nodes = _PROCS.findall(text), _NODES.findall(text)
        if procs:
            info.processes = int(procs[-1])
        if nodes:
            info.nodes = int(nodes[-1])
    devices = info.env.get("CUDA_VISIBLE_DEVICES")
    if info.processes is None and devices and re.fullmatch(r"[\d,\s]+", devices):
        info.processes = len([d for d in devices.split(",") if d.strip()])
    return info
