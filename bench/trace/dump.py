"""What the traced step holds at its forward/backward peak, tensor by tensor
(run INSIDE the side venv, beside step.py; a diagnostic, not part of the grid).

    KBSOLVE_TRACE_VENV/bin/python bench/trace/dump.py < cases.json

Reads the same case list as step.py and, per case, runs step.py's trace under
one more dispatch mode that records every storage the step allocates (op,
shape, dtype, the module that ran it, forward or backward, the step.py line
that led to it) and drops it when the storage is freed. At each new maximum of
the bytes allocated during the step it keeps the list of live storages; the
result is that list at the forward/backward peak, largest first, grouped by
(op, module, phase, step.py line), one JSON line per case. Parameters,
buffers and anything alive before the step are not listed: the listing is the
step's transient memory (activations, loss path, gradients), what
`fb_transient` counts.

A case with `"drop_returned_weights": true` runs the same step with every
checkpointed decoder layer returning None in place of the attention weights it
returns beside its hidden states (Falcon, BLOOM, GPT-J): the experiment that
shows what reentrant checkpointing's materialised zero gradient of that unused
output costs (docs/decisions.md, issue 23 falcon).
"""
from __future__ import annotations

import collections
import json
import sys
import traceback
import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode

import step


class LiveStorages(TorchDispatchMode):
    """Every storage an op returns, alive until its Python object dies."""

    def __init__(self):
        super().__init__()
        self.live: dict[int, tuple] = {}
        self.bytes = 0
        self.peak = 0
        self.at_peak: list[tuple] = []
        self.module: list[str] = []
        self.frozen = False
        self.forwards = 0  # top-level model forwards so far: which forward made a tensor
        self.tensors: dict[int, weakref.ref] = {}

    def _forget(self, key, nbytes):
        if self.live.pop(key, None) is not None:
            self.bytes -= nbytes

    def _where(self) -> str:
        for frame in reversed(traceback.extract_stack(limit=40)):
            if frame.filename.endswith("step.py"):
                return f"step.py:{frame.lineno}"
        return "?"

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if self.frozen:
            return out
        tensors = out if isinstance(out, (tuple, list)) else (out,)
        phase = "backward" if torch._C._current_graph_task_id() != -1 else "forward"
        grew = False
        views = [r.alias_info is not None for r in func._schema.returns]
        for i, t in enumerate(tensors):
            if not isinstance(t, torch.Tensor) or (views[i] if i < len(views) else views[-1:] == [True]):
                continue  # a view shares its base's storage, allocated before or counted already
            storage = t.untyped_storage()
            key = id(storage)
            if key in self.live:
                continue
            nbytes = storage.nbytes()
            if nbytes == 0:
                continue
            try:
                weakref.finalize(storage, self._forget, key, nbytes)
            except TypeError:
                continue
            module = self.module[-1] if self.module else "-"
            self.live[key] = (nbytes, str(func), tuple(t.shape), str(t.dtype).replace("torch.", ""),
                              module, phase, f"{self._where()} fwd{self.forwards}")
            self.tensors[key] = weakref.ref(t)
            self.bytes += nbytes
            grew = True
        if grew and self.bytes > self.peak:
            self.peak = self.bytes
            self.at_peak = list(self.live.values())
        return out


def name_modules(model, mode: LiveStorages) -> None:
    """The innermost running module's name on a stack (its pre and post hooks)."""
    for name, module in model.named_modules():
        short = ".".join(p for p in name.split(".") if p not in ("base_model", "model")) or "model"

        def pre(module, args, short=short, root=name in ("model", "transformer")):
            mode.forwards += root
            mode.module.append(short)

        def post(module, args, output):
            if mode.module:
                mode.module.pop()

        module.register_forward_pre_hook(pre)
        module.register_forward_hook(post)


def drop_returned_weights(model) -> None:
    """Each checkpointed layer (transformers' GradientCheckpointingLayer) returns
    (hidden_states, None) where its forward returns (hidden_states, weights)."""
    from transformers.modeling_layers import GradientCheckpointingLayer

    for module in model.modules():
        if isinstance(module, GradientCheckpointingLayer):
            def forward(*args, _forward=module.forward, **kwargs):
                out = _forward(*args, **kwargs)
                return (out[0], None) if isinstance(out, tuple) and len(out) == 2 else out
            module.forward = forward


def grouped(entries: list[tuple]) -> list[dict]:
    groups: dict[tuple, list] = collections.defaultdict(lambda: [0, 0, None])
    for nbytes, op, shape, dtype, module, phase, where in entries:
        layer = ".".join("L" if p.isdigit() else p for p in module.split("."))
        key = (op, layer, phase, where, dtype)
        g = groups[key]
        g[0] += nbytes
        g[1] += 1
        g[2] = shape
    rows = [{"bytes": b, "count": n, "op": k[0], "module": k[1], "phase": k[2], "where": k[3],
             "dtype": k[4], "shape": list(s)} for k, (b, n, s) in groups.items()]
    return sorted(rows, key=lambda r: -r["bytes"])


def main() -> int:
    cases = json.load(sys.stdin)
    for case in cases:
        mode = LiveStorages()
        build = step.build_model

        def build_named(c, build=build):
            model = build(c)
            name_modules(model, mode)
            if c.get("drop_returned_weights"):
                drop_returned_weights(model)
            return model

        step.build_model = build_named
        original_loss = step.task_loss

        def loss_under_mode(model, c, rows):
            with mode:
                return original_loss(model, c, rows)

        step.task_loss = loss_under_mode
        backward = torch.Tensor.backward

        def backward_under_mode(self, *args, **kwargs):
            with mode:
                return backward(self, *args, **kwargs)

        torch.Tensor.backward = backward_under_mode
        try:
            result = step.trace(case)
        finally:
            step.build_model, step.task_loss, torch.Tensor.backward = build, original_loss, backward
        result["dump_peak"] = mode.peak
        result["dump"] = grouped(mode.at_peak)
        print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
