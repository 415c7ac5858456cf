"""What goes wrong beyond the checklist: hard-rule violations (errors) and the
settings the framework ignores or rejects (silent failures)."""

from __future__ import annotations

from difflib import get_close_matches

from kbsolve.audit.assess import Context, Undecided
from kbsolve.audit.accepted_keys import accepted_keys
from kbsolve.audit.versions import excludes
from kbsolve.diagnostics import did_you_mean
from kbsolve.audit.mapping import FlatFile, Reading, plain, written_value
from kbsolve.results.audit import Finding
from kbsolve.dsl.ir import Op, OptionRef, facts_used, options_used
from kbsolve.dsl.kb import KnowledgeBase


CLOSE_SPELLING = 0.85  # difflib ratio: one letter off in a key of a dozen (lora_rnak)


def _suffix(key: str, name: str) -> bool:
    return key == name or key.endswith("." + name)


def rule_errors(ctx: Context, reading: Reading, files: dict[str, FlatFile],
                version=None) -> list[Finding]:
    """The hard rules the config breaks; `version`: the project's (versions.py),
    which leaves out rules whose `versions` exclude it."""
    found = []
    for rule in ctx.kb.of(ctx.kb.rules, ctx.framework):
        if excludes(rule.meta.versions, version):
            continue
        try:
            if ctx.keeps(rule):
                continue
        except Undecided:
            continue
        involved = sorted(options_used(rule.expr))
        written = [k for k in involved if k in reading.where]
        settings = ", ".join(f"{k.split('.', 1)[1]}={_shown(ctx.assignment[k])}"
                             for k in involved)
        found.append(Finding(
            kind="rule", id=rule.id,
            message=f"{rule.kind} rule {rule.id} is broken ({settings or 'by the hardware'})",
            message_zh=f"违反{'禁止' if rule.kind == 'forbid' else '必需'}规则 {rule.id}"
                       f"（{settings or '硬件所致'}）",
            because=rule.meta.because, source=rule.meta.source,
            location=reading.span(files, written[0]) if written else _main_rel(files)))
    return found


def _main_rel(files: dict[str, FlatFile]) -> str:
    """The config itself (the main file comes first)."""
    return next(iter(files.values())).rel if files else ""


def _shown(value) -> str:
    value = plain(value)
    return str(value).lower() if isinstance(value, bool) else str(value)


def key_findings(kb: KnowledgeBase, framework: str, main_name: str, main: FlatFile,
                 reading: Reading, accepted: str = "training", env: dict | None = None
                 ) -> tuple[list[Finding], list[str]]:
    """Keys that are not options: invented (nokey), old names (alias), in the
    wrong section; and the rest, which the KB does not describe."""
    options = kb.options_of(framework)
    main_keys = {e.key: o for o in options for e in o.emits if e.target == main_name}
    used = {key for target, key in reading.used if target == main_name}
    sectioned = any("." in k for k in main_keys)
    nokeys = [n for n in kb.of(kb.nokeys, framework)]
    findings, unknown = [], []
    for key in main.values:
        if key in used or key in main_keys:
            continue
        where = str(main.spans.get(key) or main.rel)
        nokey = next((n for n in nokeys if key == n.key or (not sectioned and
                                                            _suffix(key, n.key))), None)
        if nokey is not None and nokey.accepted:  # the parser takes it; nothing reads it
            findings.append(Finding(kind="no_op", id=key, location=where,
                                    message=f"'{key}' is accepted but does nothing here "
                                            f"({nokey.accepted})",
                                    message_zh=f"'{key}' 可被解析，但在此不起作用",
                                    because=nokey.meta.because, source=nokey.meta.source))
            continue
        if nokey is not None:
            findings.append(Finding(kind="nokey", id=key, location=where,
                                    message=f"'{key}' is not a {framework} setting",
                                    message_zh=f"'{key}' 不是 {framework} 的参数",
                                    because=nokey.meta.because, source=nokey.meta.source,
                                    fix={key: None}))
            continue
        alias = next(((o, a) for o in options for a in o.aliases if _suffix(key, a.old)), None)
        if alias is not None:
            option, entry = alias
            real = next((e.key for e in option.emits if e.target == main_name), option.name)
            findings.append(Finding(kind="alias", id=key, location=where,
                                    message=f"'{key}' is not read; the setting is '{real}'",
                                    message_zh=f"'{key}' 不会被读取；正确的参数是 '{real}'",
                                    because=entry.note, source=option.meta.source,
                                    fix={key: None, real: main.values[key]}))
            continue
        leaf = key.rsplit(".", 1)[-1]
        homes = [k for k in main_keys if k != key and k.rsplit(".", 1)[-1] == leaf]
        home = homes[0] if len(homes) == 1 else None
        if home is not None and sectioned and "." not in key:  # a setting left at the top
            findings.append(Finding(kind="wrong_section", id=key, location=where,
                                    message_zh=f"'{key}' 放错了位置；{framework} 读取的是 "
                                               f"'{home}'",
                                    message=f"'{key}' is in the wrong section; "
                                            f"{framework} reads '{home}'",
                                    source=main_keys[home].meta.source,
                                    fix={key: None, home: main.values[key]}))
            continue
        unknown.append(key)
    return _refused(kb, framework, main, main_keys, findings, unknown, accepted, env or {})


def meant_options(kb: KnowledgeBase, framework: str, main_name: str,
                  refused: list[str]) -> set[str]:
    """The options that keys the parser refuses stand for (`Lora_target` and
    `num train epochs`: the same key but for case, spaces or dashes; `lora_rnak`: one
    close spelling): the user meant a value for them that the run never reads, so a
    verdict at the option's default in its place would rest on a guess."""
    main_keys = {e.key: o.key for o in kb.options_of(framework) for e in o.emits
                 if e.target == main_name}
    plain_keys = {k.replace("-", "_").lower(): k for k in main_keys}
    found = set()
    for key in refused:
        spelt = key.strip().replace(" ", "_").replace("-", "_").lower()
        near = spelt if spelt in plain_keys else next(
            iter(get_close_matches(spelt, list(plain_keys), n=1, cutoff=CLOSE_SPELLING)), None)
        if near is not None:
            found.add(main_keys[plain_keys[near]])
    return found


def refused_keys(kb: KnowledgeBase, framework: str, main: FlatFile, kind: str,
                 env: dict | None = None) -> tuple[list[Finding], list[str]]:
    """Every key of `main` checked against the parser's table `kind` alone (a file
    the KB's options do not describe): the refused ones as errors, the rest kept."""
    return _refused(kb, framework, main, {}, [], list(main.values), kind, env or {})


def _refused(kb: KnowledgeBase, framework: str, main: FlatFile, main_keys: dict,
             findings: list[Finding], unknown: list[str], kind: str,
             env: dict) -> tuple[list[Finding], list[str]]:
    """Where the KB holds the framework's accepted keys: a key its parser refuses is
    an error with a "did you mean"; the accepted rest stay as keys not modelled."""
    table = accepted_keys(kb, framework, kind)
    if table is None or table.extras_allowed(env):  # ALLOW_EXTRA_ARGS=1: every key passes
        return findings, unknown
    kept = []
    for key in unknown:
        if table.accepts(key):
            kept.append(key)
            continue
        if table.near:  # a fork may add fields: only a near miss is a finding
            meant = table.near_miss(key)
            if meant is None:
                kept.append(key)
                continue
            findings.append(Finding(
                kind="dropped", id=key, location=str(main.spans.get(key) or main.rel),
                message=f"'{key}' is no field of its section; did you mean '{meant}'? "
                        f"({table.because})",
                message_zh=f"'{key}' 不是该节的字段；是否想写 '{meant}'？",
                because=table.because, source=f"{table.source}; {table.near['source']}"))
            continue
        known = table.keys | {k.split(".", 1)[0] for k in main_keys}
        hint = did_you_mean(key.replace(" ", "_").lower(), known)
        findings.append(Finding(
            kind="refused", id=key, location=str(main.spans.get(key) or main.rel),
            message=f"'{key}' is refused by {framework}'s argument parser{hint}".rstrip(),
            message_zh=f"'{key}' 会被 {framework} 的参数解析器拒绝{hint}".rstrip(),
            because=table.because, source=table.source))  # no --fix: the did-you-mean
            # is a guess, and dropping the key loses what the user meant (decisions.md)
    return findings, kept


def value_findings(ctx: Context, reading: Reading, files: dict[str, FlatFile],
                   main_name: str) -> list[Finding]:
    """Old spellings of values, values that do nothing here, and KB warnings."""
    kb = ctx.kb
    found = []
    for key, yaml_key, raw, new, note in reading.aliased:
        option = kb.options[key]
        shown = written_value(option, main_name, new)
        found.append(Finding(kind="value_alias", id=yaml_key, location=reading.span(files, key),
                             message=f"{yaml_key}: {raw} is read as '{_shown(new)}' ({note})",
                             message_zh=f"{yaml_key}: {raw} 按 '{_shown(new)}' 读取（{note}）",
                             because=note, source=option.meta.source,
                             fix={yaml_key: shown[1] if shown else None}))
    for key, value in ctx.user.items():
        option = kb.options[key]
        if option.when is None:
            continue
        unset = sorted(k for k in options_used(option.when) if k not in ctx.user)
        if value == option.default and not unset:
            continue  # a default left beside a setting the user chose: nothing meant
        try:
            active = ctx.holds(option.when)
        except Undecided:
            continue
        if not active and not _switched_off(ctx, option.when):
            # written, even at its default, while what it needs is left unset
            yaml_key = reading.where[key][1]  # (a switch written off is a choice, no finding)
            needs = ", ".join(k.split(".", 1)[1] for k in unset)
            found.append(Finding(kind="no_op", id=yaml_key, location=reading.span(files, key),
                                 message_zh=f"{yaml_key}: {_shown(value)} 在此配置中不生效"
                                            f"（只在另一设置下起作用"
                                            + (f"；未设置 {needs}" if needs else "") + "）",
                                 message=f"{yaml_key}: {_shown(value)} has no effect in this "
                                         f"config (it applies only under another setting"
                                         + (f"; {needs} is not set" if needs else "") + ")",
                                 because=option.meta.doc, source=option.meta.source,
                                 fix={} if value == option.default else {yaml_key: None}))
            # a default spelt out: deleting it changes nothing, and it says what was meant
    for warning in kb.of(kb.warnings, ctx.framework):
        involved = options_used(warning.expr)
        if not (involved & reading.where.keys()) and (involved or not facts_used(warning.expr)):
            continue  # about defaults the config never touched
        try:
            if not ctx.holds(warning.expr):
                continue
        except Undecided:
            continue
        written = [k for k in sorted(options_used(warning.expr)) if k in reading.where]
        settings = ", ".join(f"{reading.where[k][1]}={_shown(ctx.assignment[k])}"
                             for k in written)  # the user's settings that fire it
        found.append(Finding(kind="warning", id=warning.id,
                             location=reading.span(files, written[0]) if written
                             else _main_rel(files),
                             message=warning.meta.because + (f" ({settings})" if settings else ""),
                             because=warning.meta.because,
                             source=warning.meta.source))
    return found


def _switched_off(ctx: Context, when) -> bool:
    """The option belongs to a feature whose own enable switch (a bool option that is a
    conjunct of its `when`) the config writes off: a template's sub-option kept for when
    the feature is turned on, not a silent failure, and no fix removes it (issue 22 §7).
    A sub-option written without its switch (galore_rank, no use_galore) may be meant
    to turn the feature on: that stays a no-op finding."""
    stack, conjuncts = [when], []
    while stack:
        node = stack.pop()
        if isinstance(node, Op) and node.op == "and":
            stack.extend(node.args)
        else:
            conjuncts.append(node)
    return any(isinstance(c, OptionRef) and c.type.kind == "bool" and
               ctx.user.get(c.option) is False for c in conjuncts)


def effect_findings(kb: KnowledgeBase, reading: Reading, files: dict[str, FlatFile]
                    ) -> tuple[list[Finding], list[Finding]]:
    """(errors, silent failures): values the framework refuses, and values it reads
    as something else without a word (kb/<framework>/accepted_keys.yaml `values`)."""
    errors, silent = [], []
    for key, yaml_key, raw, effect in reading.effects:
        where = reading.span(files, key)
        shown = _shown(raw)
        if effect.effect == "refused":
            errors.append(Finding(kind="refused_value", id=yaml_key, location=where,
                                  message=f"{yaml_key}: {shown} is refused: {effect.because}",
                                  message_zh=f"{yaml_key}: {shown} 会被拒绝：{effect.because}",
                                  because=effect.because, source=effect.source))
        else:
            as_read = ", ".join(f"{k}: {_shown(v)}" for k, v in effect.read_as.items())
            meant = next((a.new for a in kb.options[key].value_aliases
                          if str(a.old).lower() == str(raw).lower()), None)
            silent.append(Finding(kind="no_op", id=yaml_key, location=where,
                                  fix={yaml_key: _shown(meant)} if meant is not None else {},
                                  message=f"{yaml_key}: {shown} does nothing"
                                          + (f"; the run is read as {as_read}" if as_read else "")
                                          + f" ({effect.because})",
                                  message_zh=f"{yaml_key}: {shown} 不起作用（{effect.because}）",
                                  because=effect.because, source=effect.source))
    return errors, silent


def launcher_findings(kb: KnowledgeBase, unit, main: FlatFile) -> list[Finding]:
    """A launcher run without the key that gives it its point (audit.yaml
    launcher_needs): the `deepspeed` launcher with no DeepSpeed config."""
    from kbsolve.audit.audit_data import audit_data
    return [Finding(kind="launch", id=need.key, location=", ".join(unit.launch.scripts),
                    message=f"the run is started by {need.launcher} but sets no {need.key}: "
                            f"{need.because}",
                    message_zh=f"由 {need.launcher} 启动但未设置 {need.key}：{need.because}",
                    because=need.because, source=need.source)
            for need in audit_data(kb, unit.framework).launcher_needs
            if unit.launch.launcher == need.launcher and need.key not in main.values]


def override_findings(kb: KnowledgeBase, unit) -> list[Finding]:
    """Arguments after the config on a launch line that the launcher does not read
    as overrides (audit.yaml override_forms): `llamafactory-cli train cfg.yaml
    --cutoff_len 512`, where LlamaFactory reads only cutoff_len=512."""
    from kbsolve.audit.audit_data import audit_data
    forms = {f.launcher: f for f in audit_data(kb, unit.framework).override_forms}
    found = []
    for script, launcher, args in unit.launch.after_config:
        form = forms.get(launcher)
        dashed = [a for a in args if a.startswith("-")]
        if form is None or not dashed:
            continue
        right, i = [], 0
        while i < len(args):
            key, eq, value = args[i].lstrip("-").partition("=")
            if args[i].startswith("-") and not eq and i + 1 < len(args) and \
                    not args[i + 1].startswith("-"):
                value, eq, i = args[i + 1], "=", i + 1
            right.append(f"{key.replace('-', '_')}={value}" if eq else f"{key}=true")
            i += 1
        shown = " ".join(right[:3]) + (" ..." if len(right) > 3 else "")
        found.append(Finding(
            kind="override_form", id=dashed[0], location=script,
            message=f"{script}: {launcher} reads the arguments after {unit.rel} as "
                    f"{form.form}, so {', '.join(dashed[:4])}"
                    f"{' ...' if len(dashed) > 4 else ''} and their values are refused as "
                    f"unknown keys; write them as {shown}",
            message_zh=f"{script}：{launcher} 以 {form.form} 形式读取 {unit.rel} 之后的参数，"
                       f"{', '.join(dashed[:4])} 会被当作未知键拒绝；应写成 {shown}",
            because=form.because, source=form.source))
    return found


def misplaced_paths(unit) -> list[Finding]:
    """A launch line that runs after the script's `cd` and names the config by a path
    that exists only from where the script started: the launcher gets no such file."""
    return [Finding(kind="launch_path", id=token, location=script,
                    message=f"{script}: after 'cd {folder}' the line names {token}, which "
                            f"is {folder}/{token.removeprefix('./')} from there and does not "
                            f"exist; from {folder} the config is "
                            f"{_relative(unit.rel, folder)}",
                    message_zh=f"{script}：执行 cd {folder} 之后，{token} 指向的文件不存在；"
                               f"应为 {_relative(unit.rel, folder)}",
                    because="a relative path on a command line is resolved from the "
                            "shell's working directory, which the script's cd has changed",
                    source="POSIX sh: cd changes the working directory of the commands "
                           "that follow; open(2) resolves a relative path from it")
            for script, token, folder in unit.launch.misplaced]


def min_version_findings(unit, root) -> list[Finding]:
    """The launched script's own minimum version of its package (check_min_version)
    above the version the project pins: ImportError before training."""
    if unit.min_version is None or root is None:
        return []
    wanted, where, entry = unit.min_version
    from kbsolve.audit.versions import dependency_version
    from kbsolve.audit.detect import ProjectText
    from kbsolve.audit.walk import walk
    pinned = dependency_version(ProjectText(walk(root)), (entry["dependency"],))
    if pinned is None or not pinned.pinned:
        return []
    from packaging.version import InvalidVersion, Version
    try:
        if Version(pinned.version) >= Version(wanted):
            return []
    except InvalidVersion:
        return []
    name = entry["dependency"]
    return [Finding(kind="version", id="check_min_version", location=unit.rel,
                    message=f"{where}: the script asks for {name} >= {wanted} "
                            f"(check_min_version) but {pinned.where} pins "
                            f"{name}=={pinned.version}: it raises ImportError at start",
                    message_zh=f"{where}：脚本要求 {name} >= {wanted}，但 {pinned.where} "
                               f"固定为 {pinned.version}：启动即 ImportError",
                    because=entry["because"], source=entry["source"])]


def media_findings(kb: KnowledgeBase, unit, main: FlatFile, root) -> list[Finding]:
    """Datasets whose dataset_info.json entry has media columns (audit.yaml
    media_datasets): dropped by a text-only stage, refused by a template without a
    multimodal plugin. Judged only where the project holds that dataset_info.json."""
    import json
    import posixpath
    from pathlib import Path
    from kbsolve.audit.audit_data import audit_data
    media = audit_data(kb, unit.framework).media
    if media is None or root is None or not main.values.get("dataset"):
        return []
    folder = str(main.values.get("dataset_dir") or media.dataset_dir)
    if folder.startswith(("/", "~")) or folder == "ONLINE":
        return []
    bases, here = [unit.launch.directory] if unit.launch.directory is not None else [], \
        posixpath.dirname(main.rel)
    while True:
        bases.append(here)
        if not here:
            break
        here = posixpath.dirname(here)
    info = None
    for base in bases:
        path = Path(root) / base / folder / "dataset_info.json"
        if path.is_file():
            try:
                info = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                return []
            break
    if not isinstance(info, dict):
        return []
    with_media = []
    for name in str(main.values["dataset"]).split(","):
        entry = info.get(name.strip())
        columns = entry.get("columns") if isinstance(entry, dict) else None
        kinds_found = [c for c in media.columns if isinstance(columns, dict) and columns.get(c)]
        if kinds_found:
            with_media.append(f"{name.strip()} ({', '.join(kinds_found)})")
    if not with_media:
        return []
    stage = str(main.values.get("stage") or kb.options[f"{unit.framework}.stage"].default)
    where = str(main.spans.get("dataset") or main.rel)
    shown = ", ".join(with_media)
    if stage in media.text_only_stages:
        return [Finding(kind="media_dropped", id="dataset", location=where,
                        message=f"stage {stage} on {shown}: {media.dropped_because}",
                        message_zh=f"stage {stage} 使用含媒体的数据集 {shown}：只保留第一条消息的文本，"
                                   f"图像与后续消息被静默丢弃",
                        because=media.dropped_because, source=media.dropped_source)]
    template = main.values.get("template")
    if template is None or str(template) in media.templates:
        return []
    return [Finding(kind="media_template", id="template",
                    location=str(main.spans.get("template") or main.rel),
                    message=f"template {template} has no multimodal plugin, and dataset {shown} "
                            f"has media: {media.refused_because}",
                    message_zh=f"模板 {template} 没有多模态插件，而数据集 {shown} 含媒体：预处理报错",
                    because=media.refused_because, source=media.refused_source)]


def _relative(rel: str, folder: str) -> str:
    import posixpath
    return posixpath.relpath(rel, folder)


def unreadable_files(unit) -> list[Finding]:
    """Files the config names that exist but do not parse: the run stops when the
    framework opens them."""
    return [Finding(kind="unreadable_file", id=key, location=unit.rel,
                    message=f"{key}: {why}", message_zh=f"{key}：{why}",
                    because="the framework parses this file when the run starts")
            for key, why in unit.unreadable.items()]


def missing_keys(kb: KnowledgeBase, framework: str, main: FlatFile) -> list[Finding]:
    """Keys the framework's parser raises without (audit.yaml required_keys)."""
    from kbsolve.audit.audit_data import missing_required
    return [Finding(kind="missing_key", id=r.key, location=main.rel,
                    message=f"'{r.key}' is not set: {r.because}",
                    message_zh=f"缺少 '{r.key}'：{r.because}",
                    because=r.because, source=r.source)
            for r in missing_required(kb, framework, main)]


def missing_files(kb: KnowledgeBase, framework: str, missing: dict[str, str], main: FlatFile,
                  launch_dir: str | None, known: list[str]) -> list[Finding]:
    """Paths the config names that are not where the run starts (nor the framework's
    own files): the run stops when it opens them."""
    from kbsolve.audit.audit_data import audit_data
    own = [e.path for e in audit_data(kb, framework).repository_files]
    found = []
    for key, value in missing.items():
        hint = did_you_mean(value, own + known)
        start = f"from {launch_dir or 'the project root'}" if launch_dir is not None else \
            "from the config's folder or the project root"
        found.append(Finding(kind="missing_file", id=key, location=str(main.spans.get(key) or
                                                                        main.rel),
                             message=f"{key}: {value} does not exist {start}{hint}",
                             message_zh=f"{key}: {value} 不存在{hint}",
                             because="the framework opens this file when the run starts"))
    return found


def launch_findings(unit, hardware) -> list[Finding]:
    """A launch that starts more processes on a node than the GPUs it lets them see."""
    devices = unit.launch.env.get("CUDA_VISIBLE_DEVICES", "")
    visible = [d for d in devices.split(",") if d.strip()]
    if not visible or not all(d.strip().isdigit() for d in visible) or hardware.per_node is None \
            or hardware.per_node <= len(visible) or hardware.source == "--gpus":
        return []
    return [Finding(kind="launch", id="CUDA_VISIBLE_DEVICES",
                    location=", ".join(unit.launch.scripts),
                    message=f"the launch starts {hardware.per_node} processes per node "
                            f"({hardware.source}) but CUDA_VISIBLE_DEVICES={devices} shows "
                            f"{len(visible)} GPU(s)",
                    message_zh=f"每节点启动 {hardware.per_node} 个进程，但 CUDA_VISIBLE_DEVICES="
                               f"{devices} 只有 {len(visible)} 张卡",
                    because="each process takes one visible GPU by its local rank: the ranks "
                            "beyond the visible GPUs fail to start (invalid device ordinal)",
                    source="accelerate:src/accelerate/state.py:814-838@v1.10.1 (set_device: "
                           "cuda:<local_process_index>)")]
