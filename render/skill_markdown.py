"""`kbsolve skill`: SKILL.md for coding agents, from the skill's facts (the KB's
frameworks and detection signatures, the MCP tools)."""

from __future__ import annotations

SIGN_WORDS = {"import": "Python imports", "cli": "commands in shell scripts or READMEs",
              "yaml_key": "config keys", "dependency": "dependencies",
              "path": "paths in the project", "remote": "git remotes"}

QUESTIONS = [  # (the agent's question, MCP tool, CLI command)
    ("Which configuration should this run use? (a new config, a new GPU count)", "plan",
     "kbsolve --gpus 8xA100 --model qwen3-8b --format json"),
    ("Does this configuration fit, how fast is it?", "estimate",
     "kbsolve estimate --gpus 8xA100 --model qwen3-8b --set KEY=VALUE --format json"),
    ("Is this config file right? (before a launch, after an edit)", "check_config",
     "kbsolve audit CONFIG --format json"),
    ("Review a whole training project", "audit", "kbsolve audit PATH --format json"),
    ("The run hits OOM, is slow, or is unstable", "fix",
     "kbsolve fix CONFIG --symptom oom --format json"),
    ("Why this value? What would another cost?", "explain",
     "kbsolve --gpus ... --model ... --explain OPTION"),
    ("Which GPUs, models, options, rules does it know?", "list",
     "kbsolve list options --format json"),
]

MEANINGS = [
    "Exit code (the CLI's, and `_meta.kbsolve/exit_code` of an MCP result): 0 ok; "
    "1 infeasible (no configuration fits, or no change cures the symptom); 2 bad input "
    "(the one-line message says which argument, with a \"did you mean\"); 3 the solver "
    "ran out of time (the best plan so far is given).",
    "A plan's `status`: `optimal` is proven the fastest (or, with objective memory, the "
    "smallest) that fits; `feasible` fits but is not proven best; `infeasible` comes with "
    "`core` (the rules that clash) and `fixes` (the smallest changes that make it "
    "feasible: drop a pin, `allow` an optin, more host RAM, other hardware).",
    "`explanation`: every option's value with its `kind` (forced, speed, memory, "
    "preference, default, pinned, ...) and `reasons`, each with `because` and `source` "
    "(the framework's file and line, a paper, a measurement). Quote these; do not invent "
    "reasons.",
    "`memory`: GiB per GPU term by term; `band` is the model's measured error band, and "
    "`fits` is judged at its upper end. `speed`: step time, throughput, MFU.",
    "An audit's `errors` crash at start-up; `silent` are settings the framework ignores or "
    "misreads without a word; `fit.status` is fits, oom or undecided (the config lacks "
    "something; `undecided` lists what).",
    "A plan changes numerics (FP8, quantization, 8-bit optimizers), the recipe (method, "
    "rank, packing) or libraries only when allowed (`allow`, `kbsolve list optins`): do not "
    "apply such a change unless the user agreed to it.",
]


def markdown(facts: dict) -> str:
    frameworks = facts["frameworks"]
    names = ", ".join(f["name"] for f in frameworks)
    description = (
        f"Plan, check, audit and fix ML training configurations ({names}) with kbsolve, "
        "a checked knowledge base and an exact solver, instead of a checklist. Use when a "
        "project trains with one of these frameworks (see the signs below), or when asked "
        "to choose, review or debug a training config (GPU count, batch, parallelism, "
        "DeepSpeed/FSDP, LoRA, memory, OOM, speed).")
    out = ["---", f"name: {facts['name']}", f"description: {description}", "---",
           f"{facts['mark']} from the KB; regenerate it, do not edit -->", "",
           "# kbsolve: checked answers for training configurations", "",
           "kbsolve knows what each framework accepts, what it silently ignores, what "
           "crashes at start-up and what a configuration costs in memory and time; every "
           "answer carries its reasons and sources. When a question below comes up, ask "
           "kbsolve (its MCP server, or the CLI) and report its answer; do not reason from "
           "a checklist or from memory, and do not guess option names.", "",
           "## When to use it", "",
           "A project uses one of these frameworks when one of its signs is found (the "
           "KB's `detect` blocks, as `kbsolve audit` reads them):", ""]
    for framework in frameworks:
        out.append(f"- **{framework['name']}** ({', '.join(framework['models'])}): "
                   f"{framework['doc']}")
        if not framework["signs"]:
            out.append(f"  - the KB has no detection signs for it: when the user trains "
                       f"with it, name it (`framework: {framework['name']}`)")
        for kind, signs in framework["signs"].items():
            shown = ", ".join(f"`{s}`" for s in signs)
            out.append(f"  - {SIGN_WORDS[kind]}: {shown}")
    out += ["", "Also when the user asks which configuration to train with, whether one "
            "fits or is legal, or why a run is out of memory, slow or unstable.", "",
            "## How to ask", "",
            "Run `kbsolve mcp` as an MCP server (tools below), or the CLI with "
            "`--format json`. Paths are read on the machine kbsolve runs on; nothing is "
            "written unless `write` (MCP) or `--emit`/`--fix`/`--write` (CLI) is given.", "",
            "| question | MCP tool | CLI |", "|---|---|---|"]
    tools = {tool["name"]: tool["description"] for tool in facts["tools"]}
    for question, tool, command in QUESTIONS:
        if tool in tools:
            out.append(f"| {question} | `{tool}` | `{command}` |")
    out += ["", "## What the answers mean", ""]
    out += [f"- {meaning}" for meaning in MEANINGS]
    out += ["", "## The tools", ""]
    out += [f"- `{name}`: {description}" for name, description in tools.items()]
    return "\n".join(out) + "\n"
