"""Read one of Flow-Factory's own example YAMLs as a kbsolve query and config."""

from __future__ import annotations

from pathlib import Path

import yaml

CONFIG_FILES = {"deepspeed_zero1": ("zero1", "none"), "deepspeed_zero2": ("zero2", "none"),
                "deepspeed_zero2_offparam": ("zero2_offparam", "none"),
                "deepspeed_zero3": ("zero3", "none"), "fsdp2": ("none", "fsdp2"),
                "fsdp2_wan": ("none", "fsdp2"), "fsdp_full_shard": ("none", "full_shard"),
                "fsdp_grad_op_shard": ("none", "grad_op_shard"), "multi_gpu": ("none", "none"),
                "multi_node": ("none", "none")}


def _text(value) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def example_query(kb, path: str, gpu: str = "H200") -> tuple[dict, dict, list[str]]:
    """(query, config, skipped) for an example: its keys mapped to options through
    the emits, value aliases applied; values outside kbsolve's domains are skipped."""
    data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    by_key = {e.key: o.name for o in kb.options.values() if o.framework == "flow-factory"
              for e in o.emits if e.target == "main"}
    train = data.get("train") or {}
    model = data.get("model") or {}
    name = model.get("model_name_or_path", "")
    entry = next((m for m in kb.catalog.models.values() if name in (m.hf_id, m.name, *m.aliases)),
                 None)
    if entry is None:
        raise LookupError(f"no catalog model for {name}")
    query = {"gpus": f"{data.get('num_processes', 8)}x{gpu}", "model": entry.name,
             "task": train.get("trainer_type", "grpo")}
    resolution = train.get("resolution", 512)
    height, width = (resolution, resolution) if isinstance(resolution, int) else resolution
    query["resolution"] = f"{train.get('height', height)}x{train.get('width', width)}"
    if train.get("num_frames"):
        query["frames"] = train["num_frames"]
    config: dict[str, str] = {}
    skipped: list[str] = []
    stem = Path(str(data.get("config_file", "multi_gpu"))).stem
    config["deepspeed"], config["fsdp"] = CONFIG_FILES[stem]
    rewards = data.get("rewards") or []
    sections = {k: v for k, v in data.items() if isinstance(v, dict)}
    sections["rewards"] = rewards[0] if isinstance(rewards, list) and rewards else rewards or {}
    flat = {k: v for k, v in data.items() if not isinstance(v, (dict, list))}
    flat.update({f"{s}.{k}": v for s, body in sections.items() for k, v in body.items()})
    for key, value in flat.items():
        option = by_key.get(key)
        if option is None or value is None or option in ("model_name_or_path", "height", "width",
                                                          "num_frames", "eval_num_frames"):
            continue
        if option == "target_components" and isinstance(value, list):
            value = "both" if len(value) == 2 else value[0]
        if isinstance(value, (list, dict)):
            continue
        spec = kb.options[f"flow-factory.{option}"]
        value = next((a.new for a in spec.value_aliases if _text(a.old) == _text(value)), value)
        if spec.domain is not None and _text(value) not in {_text(v) for v in spec.domain}:
            skipped.append(f"{key}={value}")
            continue
        config[option] = _text(value)
    return query, config, skipped
