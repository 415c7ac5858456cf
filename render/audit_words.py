"""The report's fixed wording in English and in the seeds' Chinese."""

from __future__ import annotations

WORDS = {
    "en": {
        "project": "kbsolve audit", "title": "{fw} training audit",
        "basic": "Basic info", "overview": "Audit overview", "category": "Category",
        "score": "Score", "enabled": "Enabled", "recommended": "Recommended",
        "total": "Total", "priorities": "Priority recommendations (by impact)",
        "P0": "P0 - do now (large gain, no risk)",
        "P1": "P1 - strongly recommended (clear gain, low risk)",
        "P2": "P2 - worth trying (moderate gain, needs testing)",
        "changes": "Recommended configuration changes", "errors": "Errors (hard rules broken: the run fails, or the framework overrides the setting)",
        "silent": "Silent failures and warnings (ignored, without effect, or risky)", "fit": "Fit check",
        "undecided": "Undecided", "notes": "Notes", "unknown_keys": "Keys the KB does not describe",
        "none": "none", "frameworks": "Frameworks detected", "hardware": "Hardware",
        "files": "files read", "checks": "Checklist", "status": "Status", "item": "Item",
        "proven": "The changes together satisfy every hard rule of the KB{fit}.",
        "proven_fit": " and still fit", "evidence": "found",
        "fits": "fits: {device} GiB of {budget} GiB per GPU",
        "host_fits": "host RAM fits: {host} GiB of {host_budget} GiB per node (--host-ram)",
        "host_oom": "host RAM will run out: {host} GiB of {host_budget} GiB per node "
                    "(--host-ram)",
        "oom": "will OOM by {over} GiB ({device} GiB of {budget} GiB per GPU); the largest term is {term}",
        "band": "the model's error band",
        "fits_band": "fits at the model's error band's upper end: up to {device} GiB (predicted {predicted} GiB, band +{share}) of {budget} GiB per GPU",
        "oom_band": "will OOM by {over} GiB at the model's error band's upper end (up to {device} GiB, predicted {predicted} GiB, of {budget} GiB per GPU); the largest term is {term}",
        "oom_band_only": "may OOM: the prediction, {predicted} GiB, fits {budget} GiB per GPU, but not with the model's error band (+{share}: up to {device} GiB, {over} GiB over); the largest term is {term}",
        "fit_undecided": "undecided: {reason}", "because": "because", "source": "source",
        "enabled_s": "enabled", "not_enabled_s": "not enabled", "recommended_s": "recommended",
        "not_applicable_s": "not applicable", "undecided_s": "undecided",
        "framework": "Framework", "model": "Model", "task": "Task", "launch": "Launch scripts",
        "plan": "The solver's best plan for this hardware, model and task",
        "plan_same": "the config already is the solver's best plan",
        "speedup": "predicted speed-up: {x}x",
        "environment": "Environment", "script": "Script", "signs": "Signs",
        "per_config": "per config (from each config and its launch scripts)",
        "units": "{n} config(s) and script(s) audited",
        "effect": "on this config", "why": "note",
        "needs_allow": "Not offered: they change the recipe, the numerics or a library (pass --allow NAME to consider them)",
        "allowed": "Allowed (--allow)",
        "tips": "Tips with no estimate on this config (not written by --fix)",
    },
    "zh": {
        "project": "kbsolve 审计", "title": "{fw} 训练优化审计报告",
        "basic": "基本信息", "overview": "审计结果总览", "category": "类别",
        "score": "得分", "enabled": "已启用", "recommended": "建议启用",
        "total": "总计", "priorities": "优先优化建议（按影响排序）",
        "P0": "P0 - 立即执行（显著收益，零风险）",
        "P1": "P1 - 强烈推荐（明显收益，低风险）",
        "P2": "P2 - 建议尝试（中等收益，需测试）",
        "changes": "推荐配置修改", "errors": "错误（违反硬性规则：启动失败，或框架改写该设置）",
        "silent": "静默失效与警告（被忽略、不生效或有风险的设置）", "fit": "显存检查",
        "undecided": "无法判定", "notes": "说明", "unknown_keys": "知识库未收录的键",
        "none": "无", "frameworks": "识别到的框架", "hardware": "硬件",
        "files": "个文件", "checks": "检查清单", "status": "状态", "item": "检查项",
        "proven": "以上修改合起来满足知识库的全部硬性规则{fit}。",
        "proven_fit": "，且显存放得下", "evidence": "位置",
        "fits": "放得下：每卡 {device} GiB / {budget} GiB",
        "host_fits": "内存放得下：每节点 {host} GiB / {host_budget} GiB（--host-ram）",
        "host_oom": "内存不足：每节点 {host} GiB / {host_budget} GiB（--host-ram）",
        "oom": "将 OOM，超出 {over} GiB（每卡 {device} GiB / {budget} GiB）；最大项为 {term}",
        "band": "模型误差带",
        "fits_band": "按模型误差带上限放得下：每卡最多 {device} GiB（预测 {predicted} GiB，误差带 +{share}）/ {budget} GiB",
        "oom_band": "按模型误差带上限将 OOM，超出 {over} GiB（每卡最多 {device} GiB，预测 {predicted} GiB / {budget} GiB）；最大项为 {term}",
        "oom_band_only": "可能 OOM：预测值 {predicted} GiB 放得下每卡 {budget} GiB，但加上模型误差带（+{share}：最多 {device} GiB）超出 {over} GiB；最大项为 {term}",
        "fit_undecided": "无法判定：{reason}", "because": "原因", "source": "出处",
        "enabled_s": "已启用", "not_enabled_s": "未启用", "recommended_s": "建议启用",
        "not_applicable_s": "不适用", "undecided_s": "待定",
        "framework": "框架", "model": "模型", "task": "训练任务", "launch": "启动脚本",
        "plan": "求解器在同一硬件、模型与任务下的最优方案",
        "plan_same": "当前配置已是求解器的最优方案",
        "speedup": "预计加速：{x} 倍",
        "environment": "环境变量", "script": "脚本", "signs": "识别依据",
        "per_config": "按配置（取自各配置及其启动脚本）",
        "units": "审计了 {n} 个配置或脚本",
        "effect": "对此配置", "why": "说明",
        "needs_allow": "未采纳：会改变训练配方、数值精度或引入新库（加 --allow 名称 才会考虑）",
        "allowed": "已允许（--allow）",
        "tips": "无此配置估算支撑的提示（--fix 不会写入）",
    },
}


def words(lang: str) -> dict[str, str]:
    return WORDS.get(lang, WORDS["en"])


def title(item, lang: str) -> str:
    return (item.title_zh or item.title_en) if lang == "zh" else item.title_en


def advice(item, lang: str) -> str:
    return (item.advice_zh or item.advice_en) if lang == "zh" else item.advice_en
