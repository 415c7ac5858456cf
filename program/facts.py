"""Facts for one query: catalog entries and workload, in the KB's base units."""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

from kbsolve.diagnostics import Diagnostic, KbError
from kbsolve.dsl.kb import KnowledgeBase

_GPUS = re.compile(r"^(?:(\d+)x)?(?:(\d+)x)?([\w][\w.\-]*)$")
_MEMORY = re.compile(r"^(\d+(?:\.\d+)?)\s*(GB|G|GiB)$", re.IGNORECASE)


def parse_gpus(text: str) -> tuple[int, int, str]:
    """`COUNTxNAME` -> (1, COUNT, NAME); `NODESxCOUNTxNAME` -> (NODES, COUNT, NAME); a bare
    NAME is one GPU. NAME may be a memory size (2x16GB: a GPU the catalog does not list).
    A bare `COUNT` gives the name '' (--gpu-spec names the card; gpu_by_name refuses
    it); in `AxB` a number B is a name (1x4090), which --gpu-spec reads as NODESxCOUNT."""
    match = _GPUS.match(text.strip())
    if not match:
        raise KbError(Diagnostic(f"--gpus '{text}' is not COUNTxGPU or NODESxCOUNTxGPU "
                                 f"(for example 8xA100, 2x8xH100 or 2x16GB)"))
    first, second, name = match.groups()
    if first is None and re.match(r"^\d+x?$", name):
        if name.endswith("x"):
            raise KbError(Diagnostic(_NO_TYPE.format(text=text)))
        first, name = name, ""
    nodes, per_node = (int(first), int(second)) if second else (1, int(first or 1))
    if nodes < 1 or per_node < 1:
        raise KbError(Diagnostic(f"--gpus '{text}': the GPU count must be at least 1"))
    if nodes * per_node > 65536:
        raise KbError(Diagnostic(f"--gpus '{text}': more GPUs than kbsolve plans for"))
    return nodes, per_node, name


_NO_TYPE = ("--gpus '{text}' names no GPU type (for example 8xA100, or 2x16GB for a card "
            "the catalog lacks)")


def gpu_memory(kb: KnowledgeBase, name: str) -> tuple[float, str] | None:
    """The memory in GiB of a card named by its size (16GB, 48GiB), and how it was read;
    None for a name. A datasheet GB is read as the catalog's generic GPU says nvidia-smi
    shows it (ECC on); GiB is taken as reported."""
    match = _MEMORY.match(name.strip())
    generic = getattr(kb.catalog, "generic_gpu", None)
    if not match or generic is None:
        return None
    amount, unit = float(match.group(1)), match.group(2)
    if amount <= 0:
        raise KbError(Diagnostic(f"--gpus: a GPU with {name} of memory"))
    if unit.lower() == "gib":
        return amount, f"{amount:g} GiB as nvidia-smi reports it"
    reported = round(amount * generic.reported, 2)
    return reported, (f"{reported:g} GiB: {amount:g} GB as nvidia-smi shows such a card with ECC "
                      f"on ({generic.reported:.2%}; type {amount:g}GiB for the exact figure)")


def gpu_by_name(kb: KnowledgeBase, name: str) -> tuple[Any, list[str]]:
    """The GPU that --gpus names: a catalog entry by name or alias (with its alias
    note), or a card the catalog lacks by its memory (2x16GB), every other figure
    the catalog's generic GPU assumes, listed in a note."""
    if not name:
        raise KbError(Diagnostic("--gpus gives a count but names no GPU type (for example "
                                 "8xA100, 2x16GB for a card the catalog lacks, or a count "
                                 "with --gpu-spec FILE.yaml)"))
    memory = gpu_memory(kb, name)
    if memory is None:
        try:
            gpu = kb.catalog.gpu(name)
        except KbError as error:
            first = error.diagnostics[0]
            raise KbError(Diagnostic(first.message, first.span, hint=(
                "a card the catalog lacks: --gpus COUNTxMEMORY (for example 1x16GB) or "
                "--gpu-spec FILE.yaml; " + first.hint))) from None
        note = kb.catalog.resolved_alias_note(name, "gpu")
        return gpu, [f"GPU '{name}' taken as {gpu.name}: {note}"] if note else []
    generic = kb.catalog.generic_gpu
    given = {"name": name, "memory_gib": memory[0],
             "source": f"--gpus: a card the catalog lacks, by its memory ({name})"}
    gpu = generic.entry(given, kb.vocabulary)
    return gpu, [f"GPU '{name}' is no catalog card: memory {memory[1]}; "
                 + assumed_note(generic, given, "--gpu-spec FILE.yaml states them")]


def assumed_note(generic, given: dict[str, Any], fix: str) -> str:
    """'assumed <field> <value>, ...' for the fields an unlisted GPU did not state."""
    shown = ", ".join(f"{k} {str(v).lower() if isinstance(v, bool) else v}"
                      for k, v in generic.assumed(given))
    return (f"assumed {shown} (kb/catalog/gpus.yaml generic: {generic.because}; "
            f"{generic.source}); {fix}")


def collect_facts(kb: KnowledgeBase, gpu, model, query: dict[str, Any],
                  network=None) -> dict[str, Any]:
    sources = {"gpu": gpu, "model": model, "network": network}
    facts: dict[str, Any] = {}
    for path, fact in kb.facts.items():
        prefix, field = path.split(".", 1)
        if prefix == "query":
            raw = query.get(field)
        else:
            entry = sources.get(prefix)
            raw = getattr(entry, field, None) if entry is not None else None
        if raw is None:
            continue
        if fact.type.kind == "num":
            raw = Fraction(raw) * fact.scale if not isinstance(raw, bool) else raw
        facts[path] = raw
    return facts
