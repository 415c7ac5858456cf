"""The registry of diagnostic codes: every `Diagnostic.code` kbsolve raises, with its
severity, its meaning in one line, an example message and the files that raise it.

docs/dsl.md's table of codes is generated from this list (`kbsolve kb codes`), and
tests/test_diagnostic_codes.py checks, by reading the package's syntax, that every code
raised anywhere is listed here with the severity it is raised at and the files that
raise it, and that every code listed here is raised. A warning's code is what a rule
pack names to silence it (`silence "CODE" { because "..." }`); errors cannot be
silenced.
"""

from __future__ import annotations

from dataclasses import dataclass

ERROR, WARNING = "error", "warning"


@dataclass(frozen=True)
class Code:
    name: str
    severity: str  # error | warning
    group: str  # the heading it sits under in docs/dsl.md
    meaning: str  # one line
    example: str  # markdown: example messages as the checker prints them
    raised_in: tuple[str, ...]  # the package's files that raise it


_FILES, _SYNTAX, _CLAUSES, _REASONS, _NAMES = "files", "syntax", "clauses", "reasons", "names"
_FACTS, _VOCAB, _TYPES, _DOMAINS = "facts", "the vocabulary", "types and units", "domains"
_SIDE, _SILENCE, _ROLES = "side files", "silencing", "roles"
_DEEP, _EVAL = "kb check --deep", "evaluation (solving and auditing)"

CODES: tuple[Code, ...] = (
    # ---- files
    Code("no-pack", ERROR, _FILES, "a rule pack directory that does not exist or is no directory",
         "`rule pack '/tmp/nonexist' does not exist`", ("dsl/load.py", "lint/fmtfiles.py")),
    Code("unreadable", ERROR, _FILES, "a rule file that cannot be read",
         "`cannot read rule file: Permission denied`",
         ("dsl/load.py", "lint/fmtfiles.py")),
    Code("too-large", ERROR, _FILES, "a rule file above the size limit (4 MiB)",
         "`rule file is too large (over 4194304 bytes)`",
         ("dsl/load.py", "dsl/parse.py")),
    Code("encoding", ERROR, _FILES, "a rule file that is not UTF-8",
         "`rule file is not UTF-8 (byte 0xe9)`", ("dsl/load.py",)),
    Code("too-deep", ERROR, _FILES, "expressions nested deeper than the front end can follow",
         "`this file nests expressions more than about 2500 levels deep; split long chains "
         "into lets`", ("dsl/check.py", "dsl/parse.py")),
    # ---- syntax
    Code("syntax", ERROR, _SYNTAX, "text the grammar does not accept",
         "`unexpected end of file; expected 'advice', 'alias', ...`; `unexpected character "
         "\"'\"` (help: strings use double quotes); `unexpected 'rule'; expected 'module'`",
         ("dsl/parse.py",)),
    Code("keyword-as-name", ERROR, _SYNTAX, "a keyword written where a name belongs",
         "`'in' is a keyword and cannot be used as a name here` (help: write `` `in` `` in "
         "backticks)", ("dsl/parse.py",)),
    # ---- clauses
    Code("clause", ERROR, _CLAUSES, "a clause the declaration does not take",
         "`'weight' is not allowed in an option; allowed here: alias, alias value, because, "
         "doc, ...`", ("dsl/check.py", "dsl/clauses.py")),
    Code("duplicate-clause", ERROR, _CLAUSES, "a clause given twice that may be given once",
         "`'origin' is given twice in option 'o18'`", ("dsl/clauses.py",)),
    Code("missing-clause", ERROR, _CLAUSES, "a clause the declaration needs is absent",
         "`category 'C1' needs 'points'`; `check 'K1' needs 'enabled' (when it counts as on)`",
         ("dsl/check.py",)),
    Code("no-group", ERROR, _CLAUSES, "an opt-in without the group that recommendations name",
         "`optin 'liger' has no 'group'` (help: add: group numerics)", ("dsl/check.py",)),
    Code("code-pattern", ERROR, _CLAUSES,
         "a `needs_code \"code: ...\"` pattern that is not one of its three forms",
         "`unknown code pattern 'whne'; did you mean 'when'?`; `'code: when' needs the names "
         "whose use is a fault`", ("dsl/check.py",)),
    # ---- reasons
    Code("no-because", ERROR, _REASONS, "a declaration that needs a reason has none",
         "`rule 'R1' has no 'because'; it needs a reason`; `nokey 'foo' needs a 'because' "
         "saying what to use instead`", ("dsl/check.py", "dsl/clauses.py")),
    Code("no-source", ERROR, _REASONS, "a declaration that needs a source has none",
         "`rule 'R1' has no 'source'`", ("dsl/clauses.py",)),
    Code("source-kind", ERROR, _REASONS, "a source that does not start with a known kind",
         "`unknown source kind 'blog'`; `source 'see the paper' does not start with a kind "
         "such as 'seed:' or 'paper:'`", ("dsl/clauses.py",)),
    Code("versions", ERROR, _REASONS, "a `versions` clause that is no version specifier",
         "`versions 'version 1' is not a version specifier such as '>=0.9.5'`",
         ("dsl/clauses.py",)),
    # ---- names
    Code("shadow", ERROR, _NAMES, "a framework name that hides a core let or def",
         "`let 'params' hides core let 'params'`", ("dsl/symbols.py",)),
    Code("duplicate", ERROR, _NAMES, "a name, value or import given twice",
         "`let 'params' is already defined`; `enum 'gpu_vendor' already has the value 'amd'`; "
         "`let 'lora_rank' clashes with option 'lora_rank'`; `def 'f' has two parameters named "
         "'x'`; `module 'core.facts' is imported twice`; `'bf16' in output 'main' is written "
         "by two options`; `alias 'bf16' of option 'o13' is itself an option`; `enum value "
         "'a' is listed twice`; `trait 'torchrun_multinode' is already defined`",
         ("dsl/check.py", "dsl/symbols.py", "dsl/traits.py", "dsl/vocab.py")),
    Code("needs-framework", ERROR, _NAMES,
         "a framework declaration, or an include, in a core module",
         "`a rule must be declared in a framework module`; `an include must sit in a "
         "framework module`", ("dsl/symbols.py", "dsl/traits.py")),
    Code("needs-core", ERROR, _NAMES,
         "a vocabulary declaration, or a trait, in a framework module",
         "`a field must be declared in a core module (no 'for')`; `a trait must be declared "
         "in a core module (no 'for')`", ("dsl/traits.py", "dsl/vocab.py")),
    Code("unknown-trait", ERROR, _NAMES, "an include of a trait no module declares",
         "`unknown trait 'torchrun_multinod'; did you mean 'torchrun_multinode'?`",
         ("dsl/traits.py",)),
    Code("include-cycle", ERROR, _NAMES, "traits that include each other in a circle",
         "`traits include each other in a circle: a -> b -> a`", ("dsl/traits.py",)),
    Code("in-trait", ERROR, _NAMES, "a declaration a trait cannot hold",
         "`a field cannot be declared in a trait`", ("dsl/traits.py",)),
    Code("unknown-framework", ERROR, _NAMES, "a framework no module declares",
         "`unknown framework 'lamafactory'; did you mean 'llamafactory'?`",
         ("dsl/symbols.py",)),
    Code("dotted-framework", ERROR, _NAMES,
         "a framework's name, declared or in a module's header, with a '.' in it",
         "`framework name 'flow.factory' has a '.': a framework's name is the first part of "
         "every key it scopes (framework.name)`", ("dsl/symbols.py",)),
    Code("unknown-module", ERROR, _NAMES, "an import of a module that does not exist",
         "`unknown module 'core.nothing'; did you mean 'core.sizing'?`", ("dsl/symbols.py",)),
    Code("unknown-name", ERROR, _NAMES, "a name no visible declaration defines",
         "`unknown name 'lora_rank'; did you mean 'lora_params_per_rank'?` (in a core module); "
         "`unknown name 'foo.bar'; dotted names are facts (gpu.*, model.*, network.*, "
         "query.*)`", ("dsl/resolve.py",)),
    Code("not-imported", ERROR, _NAMES, "a core name whose module is not imported here",
         "`'world2' is defined in module t3.core, which this module does not import`",
         ("dsl/resolve.py",)),
    Code("unknown-function", ERROR, _NAMES, "a call of a function or def that does not exist",
         "`unknown function 'shardd'; did you mean 'sharded'?`", ("dsl/resolve.py",)),
    Code("def-as-value", ERROR, _NAMES, "a def named without arguments",
         "`'sharded' is a def; call it with arguments: sharded(...)`", ("dsl/resolve.py",)),
    Code("arity", ERROR, _NAMES, "a call with the wrong number of arguments",
         "`'sharded' takes 2 argument(s), 1 given`; `min() takes two or more numbers`",
         ("dsl/resolve.py",)),
    Code("recursion", ERROR, _NAMES, "a def that calls itself",
         "`def 'rec' calls itself`", ("dsl/resolve.py",)),
    Code("cycle", ERROR, _NAMES, "lets that depend on each other in a circle",
         "`derived quantities form a cycle: a -> b -> a`", ("dsl/check.py",)),
    Code("unknown-option", ERROR, _NAMES, "an option the framework does not declare",
         "`unknown option 'nope' of llamafactory`", ("dsl/check.py",)),
    Code("unknown-category", ERROR, _NAMES, "a check in a category that does not exist",
         "`unknown category 'C9'`", ("dsl/check.py",)),
    Code("unknown-rule", ERROR, _NAMES, "a test that expects a rule or warning not declared",
         "`unknown rule 'NOPE'` / `unknown warning 'P18'` (help: 'P18' is a rule; write "
         "'expect infeasible P18')", ("dsl/check.py",)),
    Code("unknown-key", ERROR, _NAMES, "a test that gives a query key that does not exist",
         "`unknown query key 'gpu'; did you mean 'gpus'?`", ("dsl/check.py",)),
    Code("unknown-output", ERROR, _NAMES, "an output or launch placeholder not declared",
         "`unknown output 'nofile' of framework llamafactory`; `unknown placeholder "
         "'{NNODE}' in a launch command; did you mean 'NNODES'?`", ("dsl/check.py",)),
    # ---- facts
    Code("unknown-fact", ERROR, _FACTS, "a fact or fact group that is not declared",
         "`unknown fact group 'foo'`; `unknown fact 'gpu.memory'; did you mean "
         "'gpu.memory_gib'?`; `'model.knd' is not a field declared before this one; did you "
         "mean 'model.kind'?` (a field's `when`)",
         ("dsl/check.py", "dsl/resolve.py", "dsl/vocab.py")),
    Code("unknown-attribute", ERROR, _FACTS, "a fact whose catalog attribute does not exist",
         "`the gpu catalog has no attribute 'fa2x'; did you mean 'fa2'?`; `the model "
         "attribute 'text_encoders' is a list, which rules cannot read`", ("dsl/check.py",)),
    Code("fact-type", ERROR, _FACTS, "a fact declared with another type or unit than the catalog",
         "`fact gpu.compute_capability is declared int but the catalog attribute is num`; "
         "`fact network.kind lacks catalog values: \"ethernet\"`; `fact gpu.fp32_tflops is "
         "declared in GFLOPS but the catalog attribute is in TFLOPS`", ("dsl/check.py",)),
    # ---- the vocabulary
    Code("unknown-enum", ERROR, _VOCAB, "an enum or unit name that does not exist",
         "`unknown enum 'gpu_vendr'; did you mean 'gpu_vendor'?`; `unknown enum or unit "
         "'MBB'; did you mean 'MB'?`", ("dsl/vocab.py",)),
    Code("no-default", ERROR, _VOCAB, "a query field or option without a default",
         "`query field 'query.x' needs a default`; `option 'o5' has no default`",
         ("dsl/check.py", "dsl/vocab.py")),
    # ---- types and units
    Code("type", ERROR, _TYPES, "an expression of the wrong type",
         "`rule p must be a condition, but this is int`; `options take bool, enum, int, num "
         "or str, not a unit ('GiB')`; `'%' needs whole plain numbers on both sides`; "
         "`cannot compare enum [...] with enum [...]`; `'from' gives int but option 'o12' "
         "is str`", ("dsl/check.py", "dsl/resolve.py", "dsl/vocab.py")),
    Code("unit", ERROR, _TYPES, "units that do not match or do not exist",
         "`'+' mixes units: bytes and a plain number`; `unknown unit 'Gib'; did you mean "
         "'GiB'?`; `memory term m1 must be in bytes, not a plain number`; `memory bounds "
         "need a unit such as GiB`", ("dsl/check.py", "dsl/resolve.py")),
    Code("enum-value", ERROR, _TYPES, "a value outside an option's or enum's values",
         "`'z4' is not a value of option deepspeed` (help lists the values); `7 is not in "
         "the domain of option 'lora_rank'`; `'lmm' is not a model kind; did you mean "
         "'llm'?`", ("dsl/check.py", "dsl/resolve.py", "dsl/vocab.py")),
    Code("div-zero", ERROR, _TYPES, "a division or remainder by a zero constant",
         "`division by zero`; `remainder by zero`", ("dsl/resolve.py", "program/evaluate.py")),
    Code("match", ERROR, _TYPES, "a match that does not cover every value",
         "`match does not cover 'auto', 'disabled', 'sdpa'; add an 'else =>' arm`",
         ("dsl/resolve.py",)),
    Code("memory-sum", ERROR, _TYPES, "a memory.* sum read where it is not defined",
         "`memory.* sums can only be used in memory terms at level 'reserved' or 'device'`; "
         "`memory.reserved cannot be used at level 'reserved'`", ("dsl/resolve.py",)),
    Code("passthrough-read", ERROR, _TYPES, "a formula that reads a passthrough option",
         "`option 'report_to' is passthrough, but a formula reads it`", ("dsl/check.py",)),
    # ---- domains
    Code("default-domain", ERROR, _DOMAINS, "a default outside its option's or field's domain",
         "`default 3 is outside the domain of option 'o6'`; `default 5 is outside 1..4 of "
         "option 'o7'`; `default 0 is outside the bounds of field 'gpu.x'`",
         ("dsl/check.py", "dsl/vocab.py")),
    Code("domain", ERROR, _DOMAINS, "a number or word outside what the clause takes",
         "`empty range 8..2`; `tier must be a whole number from 1`; `priority must be P0, P1 "
         "or P2, not 'P7'`; `unknown memory level 'pinned'`; `unknown_keys takes \"ignore\" "
         "or \"error\", not \"warn\"`", ("dsl/check.py", "dsl/vocab.py")),
    Code("file-kind", ERROR, _DOMAINS, "an output file of an unknown kind",
         "`unknown file kind 'toml'`", ("dsl/check.py",)),
    Code("detect-name", ERROR, _DOMAINS, "a detect block not named after its framework",
         "`detect 'other' must be named after its framework 'llamafactory'`",
         ("dsl/check.py",)),
    Code("empty-test", ERROR, _DOMAINS, "a test with no expectation",
         "`test 't1' expects nothing`", ("dsl/check.py",)),
    # ---- silencing
    Code("unknown-code", ERROR, _SILENCE, "a `silence` naming a code that does not exist",
         "`unknown diagnostic code 'unusd'; did you mean 'unused'?`", ("dsl/check.py",)),
    Code("not-silenceable", ERROR, _SILENCE, "a `silence` naming an error's code",
         "`'cycle' is an error; only warnings can be silenced`", ("dsl/check.py",)),
    # ---- roles (roles.py)
    Code("unknown-role", ERROR, _ROLES, "a `role` that roles.py does not list",
         "`unknown role 'batch_geometri'; did you mean 'batch_geometry'?`", ("dsl/check.py",)),
    Code("role-kind", ERROR, _ROLES, "a `role` naming an entity of the wrong kind, or a "
         "shared role declared in a framework",
         "`role 'error_band' names a memory, not a let`", ("dsl/check.py",)),
    Code("role-target", ERROR, _ROLES, "a `role` naming an entity its scope does not declare",
         "`role 'global_batch' names let 'global_bach', which llamafactory does not declare; "
         "did you mean 'global_batch'?`", ("dsl/check.py",)),
    Code("missing-role", ERROR, _ROLES, "a framework that declares a role but not a role it "
         "needs with it", "`torchtitan declares role 'batch_geometry' but not role "
         "'global_batch', which it needs`", ("dsl/check.py",)),
    # ---- side files
    Code("side-file", ERROR, _SIDE,
         "an entry of a framework's side YAML file (audit.yaml, ...) that its reader cannot take",
         "`'zero_stag' is not an option of llamafactory; did you mean 'zero_stage'? "
         "(audit.yaml of llamafactory)`; `unknown section 'repository_file'; did you mean "
         "'repository_files'? (audit.yaml of llamafactory)`", ("program/repo_files.py",)),
    # ---- kb check --deep
    Code("contradiction", ERROR, _DEEP, "hard rules that no configuration satisfies together",
         "`the hard rules of llamafactory contradict each other for any GPU and model in the "
         "catalogs`", ("lint/deep.py",)),
    Code("dead-value", ERROR, _DEEP, "an option value no configuration can take",
         "`value 'z4' of option 'deepspeed' can never be chosen for any GPU and model in "
         "the catalogs`", ("lint/deep.py",)),
    Code("dead-recommendation", ERROR, _DEEP, "a check that recommends a value never allowed",
         "`check K3 recommends deepspeed = 'z4', which no configuration allows`",
         ("lint/static.py",)),
    Code("silent-option", ERROR, _DEEP, "an option that moves nothing and is not declared inert",
         "`option 'seed' of llamafactory is silent: no value of it moves memory, speed, an "
         "emitted file, a rule or a warning`", ("lint/static.py",)),
    Code("bad-source", ERROR, _DEEP, "a source whose file, line or section does not exist",
         "`source 'llamafactory:src/nope.py#L3' names a file that does not exist`; `source "
         "'seed:002#ZZ' names section 'ZZ', which 002.md does not have`",
         ("lint/sources.py",)),
    Code("silent-warning", WARNING, _DEEP, "a warning that can never fire",
         "`warning W_X can never fire for any GPU and model in the catalogs`",
         ("lint/deep.py",)),
    Code("dead-rule", WARNING, _DEEP, "a rule whose condition is never true",
         "`rule R1 never applies: its condition is false for any GPU and model in the "
         "catalogs`", ("lint/deep.py",)),
    Code("redundant", WARNING, _DEEP, "a rule implied by others or true by itself",
         "`rule R2 is implied by other rules`", ("lint/deep.py",)),
    Code("not-analysed", WARNING, _DEEP, "a framework the solver could not analyse",
         "`could not analyse pytorch with the solver: KbError: ...`", ("lint/deep.py",)),
    Code("unused", WARNING, _DEEP, "a let or def that nothing reads",
         "`let 'x' is defined but never used`; `def 'f' is defined but never called`",
         ("lint/static.py",)),
    Code("split-fact", WARNING, _DEEP,
         "a fact declared apart from its field in the same pack (the first edition's form)",
         "`fact gpu.vendor repeats field gpu.vendor of the same pack; write 'fact' in the "
         "field's body` (help: kbsolve kb fmt does it)", ("lint/deep.py",)),
    Code("no-emit", WARNING, _DEEP, "an option never written to any output",
         "`option 'foo' of llamafactory is never written to any output`",
         ("lint/static.py",)),
    Code("inert-moves", WARNING, _DEEP, "an option declared inert that moves something",
         "`option 'foo' of llamafactory is declared inert, but it moves memory term m1`",
         ("lint/static.py",)),
    Code("option-no-source", WARNING, _DEEP, "an option without a source",
         "`option 'foo' of llamafactory has no source`", ("lint/static.py",)),
    # ---- evaluation
    Code("missing-fact", ERROR, _EVAL, "a formula that needs a fact the model or GPU lacks",
         "`the model or GPU has no value for model.layers, which this formula needs`",
         ("program/evaluate.py",)),
    Code("nonlinear", ERROR, _EVAL, "a formula the solver cannot linearise",
         "`cannot linearise this formula: cannot split this term over a finite set of "
         "values`", ("solver/compile.py",)),
)

BY_NAME: dict[str, Code] = {code.name: code for code in CODES}
GROUPS: tuple[str, ...] = tuple(dict.fromkeys(code.group for code in CODES))


def silenceable() -> list[str]:
    """The codes a rule pack may silence: the warnings."""
    return [code.name for code in CODES if code.severity == WARNING]
