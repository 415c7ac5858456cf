"""`kbsolve mcp` with a real client: the SDK's stdio client starts `python -m
kbsolve mcp` (one server for the module), lists the tools, calls each with good
and bad arguments, and checks the answers against the CLI's JSON for the same
query; the CLI's bad-input table is replayed as tool calls (a sample by default,
all of it under -m slow): no call may crash the server."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from mcp_client import McpClient, exit_code, text_of
from test_bad_inputs import CASES, UNREADABLE, _name, _readable_anyway, d  # noqa: F401

from kbsolve.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
PROJECTS = ROOT / "tests" / "fixtures" / "projects"
FLAGSHIP = {"gpus": "8xA100", "model": "wan14b"}
TOOLS = {"plan", "estimate", "check_config", "audit", "fix", "explain", "list"}
ERROR_LINE = re.compile(r"(^|: )error: ")


@pytest.fixture(scope="module")
def server_cwd(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("mcp-server-cwd")


@pytest.fixture(scope="module")
def client(tmp_path_factory, _shipped_kb_cache_entries, server_cwd):
    pytest.importorskip("mcp", reason="the MCP SDK is the `mcp` extra: pip install -e '.[test]'")
    cache = tmp_path_factory.mktemp("mcp-kb-cache")
    for entry in _shipped_kb_cache_entries:
        shutil.copyfile(entry, cache / entry.name)
    env = {k: v for k, v in os.environ.items() if k != "KBSOLVE_PATH"}
    env["KBSOLVE_CACHE_DIR"] = str(cache)
    session = McpClient(env, cwd=str(server_cwd))
    yield session
    session.close()


@pytest.fixture
def cli(capsys, monkeypatch, server_cwd):
    """`kbsolve ARGV` in this process, from the server's working directory (the KB's
    locations are shown relative to it): what it prints, parsed, and its exit code."""
    monkeypatch.chdir(server_cwd)

    def run(argv: list[str], parse=json.loads):
        capsys.readouterr()
        code = main(argv)
        return parse(capsys.readouterr().out), code
    return run


def test_every_tool_is_listed_with_schemas_from_the_models(client):
    from kbsolve.results.audit import AuditReport
    from kbsolve.results.plan import Estimate, Plan
    tools = {tool.name: tool for tool in client.tools()}
    assert set(tools) == TOOLS
    assert tools["plan"].output_schema == Plan.model_json_schema()
    assert tools["estimate"].output_schema == Estimate.model_json_schema()
    assert tools["audit"].output_schema == tools["check_config"].output_schema \
        == AuditReport.model_json_schema()
    plan_input = tools["plan"].input_schema
    assert plan_input["required"] == ["gpus", "model"]
    assert plan_input["additionalProperties"] is False
    assert {"write", "set", "allow", "kb", "objective"} <= set(plan_input["properties"])


def test_plan_answers_the_flagship_query_as_the_cli_does(client, cli):
    progress: list = []
    result = client.call("plan", FLAGSHIP, progress=progress)
    expected, code = cli(["--gpus", "8xA100", "--model", "wan14b", "--format",
                                       "json"])
    assert not result.is_error
    assert result.structured_content == expected
    assert json.loads(text_of(result)) == expected
    assert exit_code(result) == code == 0
    assert progress and progress[-1][0] == progress[-1][1]  # the last says: done
    assert [p for p, _, _ in progress] == sorted(p for p, _, _ in progress)


def test_estimate_equals_the_cli(client, cli):
    result = client.call("estimate", {**FLAGSHIP, "set": ["per_device_batch_size=2"]})
    expected, code = cli(["estimate", "--gpus", "8xA100", "--model", "wan14b",
                                       "--set", "per_device_batch_size=2", "--format", "json"])
    assert result.structured_content == expected
    assert expected["config"]["train.per_device_batch_size"] == 2
    assert exit_code(result) == code


def test_list_equals_the_cli(client, cli):
    result = client.call("list", {"what": "options", "framework": "flow-factory"})
    expected, code = cli(["list", "options", "--framework", "flow-factory",
                                       "--format", "json"])
    assert result.structured_content == {"rows": expected}
    assert len(expected) > 20 and exit_code(result) == code == 0


def test_audit_and_check_config_equal_the_cli(client, cli):
    project = str(PROJECTS / "ff_project")
    result = client.call("audit", {"path": project})
    expected, _ = cli(["audit", project, "--format", "json"])
    assert result.structured_content == expected
    config = PROJECTS / "lf_project" / "configs" / "broken.yaml"
    by_path = client.call("check_config", {"path": str(config)})
    expected, _ = cli(["audit", str(config), "--format", "json"])
    assert by_path.structured_content == expected
    unit = expected["units"][0]
    assert unit["errors"] and unit["silent"]
    by_text = client.call("check_config", {"text": config.read_text(), "filename":
                                           "broken.yaml"})
    text_unit = by_text.structured_content["units"][0]  # alone: no referenced files
    assert {e["id"] for e in text_unit["errors"]} <= {e["id"] for e in unit["errors"]}
    assert {e["id"] for e in text_unit["errors"]} >= {"use_liger"}
    assert by_text.structured_content["path"] == "."  # no temporary path leaks out


def test_fix_equals_the_cli_and_writes_nothing(client, cli, tmp_path):
    config = tmp_path / "oom.yaml"
    shutil.copyfile(PROJECTS / "lf_project" / "configs" / "oom.yaml", config)
    before = config.read_text()
    arguments = {"config": str(config), "symptom": "oom", "gpus": "1xA100"}
    result = client.call("fix", arguments)
    expected, code = cli(["fix", str(config), "--symptom", "oom", "--gpus",
                                       "1xA100", "--format", "json"])
    assert result.structured_content == expected and exit_code(result) == code
    assert expected["suggestions"]
    assert config.read_text() == before and sorted(os.listdir(tmp_path)) == ["oom.yaml"]
    written = client.call("fix", {**arguments, "write": True})
    assert written.structured_content["written"]
    assert (tmp_path / "oom.yaml.bak").read_text() == before


def test_explain_gives_the_reasons_and_costs_the_other_values(client, cli):
    result = client.call("explain", {**FLAGSHIP, "option": "deepspeed"})
    text, code = cli(["--gpus", "8xA100", "--model", "wan14b", "--explain", "deepspeed"],
                     parse=str)
    answer = result.structured_content
    assert answer["text"] == text.rstrip("\n") and code == 0
    assert answer["value"] == "zero2" and answer["reasons"]
    costed = {cost["value"]: cost for cost in answer["alternatives"]}
    assert set(costed) == {"none", "zero1", "zero2_offparam", "zero3"}
    # the plan's own reason: zero2_offparam fits but is 2.0 % slower
    assert costed["zero2_offparam"]["feasible"] and costed["zero2_offparam"]["slower_pct"] > 1
    assert not costed["zero3"]["feasible"] and costed["zero3"]["broken"]


def test_plan_writes_only_into_the_directory_it_is_given(client, tmp_path, server_cwd):
    target = tmp_path / "run"
    result = client.call("plan", {**FLAGSHIP, "top": 0, "write": str(target)})
    assert not result.is_error
    assert {"train.yaml", "run.sh"} <= set(os.listdir(target))
    assert os.listdir(server_cwd) == []  # no call of this module wrote anywhere else


def test_calls_sent_together_are_answered_one_by_one(client):
    small = {"gpus": "1xA100", "model": "sd3.5-medium", "top": 0}
    first, second, bad = client.call_together([("plan", small), ("plan", small),
                                               ("plan", {"gpus": "1xA100"})])
    assert first.structured_content == second.structured_content
    assert first.structured_content["status"] == "optimal"
    assert bad.is_error and exit_code(bad) == 2


BAD_CALLS = [  # (tool, arguments, needle of the one error line)
    ("plann", {}, "did you mean 'plan'"),
    ("plan", {"gpu": "8xA100", "model": "wan14b"}, "did you mean 'gpus'"),
    ("plan", {"model": "wan14b"}, "missing argument 'gpus'"),
    ("plan", {**FLAGSHIP, "top": "many"}, "argument 'top'"),
    ("plan", {**FLAGSHIP, "set": "lora_rank=8"}, "argument 'set'"),
    ("estimate", {"gpus": "8xH10", "model": "wan14b"}, "did you mean 'H100'"),
    ("check_config", {}, "text or its path"),
    ("check_config", {"text": "a: 1", "path": "x.yaml"}, "text or its path"),
    ("check_config", {"text": "a: 1", "filename": "../x.yaml"}, "argument 'filename'"),
    ("check_config", {"path": "/no/such/config.yaml"}, "no such config file"),
    ("audit", {"path": "/no/such/project"}, "no such file or folder"),
    ("fix", {"config": "/no/such.yaml", "symptom": "oom"}, "no such config file"),
    ("fix", {"config": "/no/such.yaml", "symptom": "slowness"}, "argument 'symptom'"),
    ("explain", {**FLAGSHIP, "option": "deepspeeed"}, "did you mean 'deepspeed'"),
    ("list", {"what": "gpu"}, "argument 'what'"),
    ("list", {"what": "gpus", "framework": "llamafactroy"}, "did you mean 'llamafactory'"),
]


@pytest.mark.parametrize("tool, arguments, needle", BAD_CALLS,
                         ids=[f"{t}-{n}" for n, (t, _, _) in enumerate(BAD_CALLS)])
def test_bad_arguments_are_tool_errors_with_the_cli_message(client, tool, arguments, needle):
    result = client.call(tool, arguments)
    text = text_of(result)
    assert result.is_error and exit_code(result) == 2, text
    headlines = [line for line in text.splitlines() if ERROR_LINE.search(line)]
    assert len(headlines) == 1 and needle in headlines[0], text


# ---- the CLI's bad-input table, replayed as tool calls -------------------------------

NOT_TOOLS = {"deep_check_contradiction": "kb check --deep is the rule author's",
             "kb_fmt_missing_path": "kb fmt is the rule author's"}
NEEDLES = {"missing --gpus": "missing argument 'gpus'",
           "missing --model": "missing argument 'model'"}
FLAG_VALUES = {"--gpus": "gpus", "-g": "gpus", "--model": "model", "--framework": "framework",
               "--task": "task", "--network": "network", "--seq-len": "seq_len",
               "--resolution": "resolution", "--frames": "frames", "--headroom": "headroom",
               "--timeout": "timeout", "--top": "top", "--global-batch": "global_batch",
               "--symptom": "symptom", "--explain": "option"}
LISTS = {"--set": "set", "--kb": "kb", "--allow": "allow"}
SAMPLE = {"gpu_lookalike_letter", "gpus_missing", "set_unknown_key", "seq_len_not_number",
          "flag_typo", "command_typo", "config_not_json", "config_nested_too_deeply",
          "model_layer_larger_than_gpu",
          "audit_symlink_loop", "fix_binary_config", "list_framework_typo",
          "explain_unknown_option"}


def as_tool_call(argv: list[str]) -> tuple[str, dict]:
    """A CLI argv as the tool call that asks the same."""
    words = list(argv)
    if words[:2] == ["kb", "check"]:  # loading the packs is what is checked
        tool, arguments, words = "list", {"what": "options"}, words[2:]
    elif words[0] == "list":
        tool, arguments, words = "list", {"what": words[1]}, words[2:]
    elif words[0] in ("audit", "fix"):
        tool = words[0]
        arguments = {"path" if tool == "audit" else "config": words[1]}
        words = words[2:]
    elif words[0] == "estimate":
        tool, arguments, words = "estimate", {}, words[1:]
    elif not words[0].startswith("-"):
        return words[0], {}  # a command name: the tool's name
    else:
        tool, arguments = ("explain" if "--explain" in words else "plan"), {}
    while words:
        flag, value = words.pop(0), words.pop(0) if len(words) else ""
        if flag in LISTS:
            arguments.setdefault(LISTS[flag], []).append(value)
        else:
            arguments[FLAG_VALUES.get(flag, flag.lstrip("-").replace("-", "_"))] = value
    return tool, arguments


def tool_needle(needle: str) -> str:
    if needle in NEEDLES:
        return NEEDLES[needle]
    return re.sub(r"--([a-z-]+)", lambda m: m.group(1).replace("-", "_"), needle).lower()


def replayed(cases):
    return [pytest.param(*(case.values if hasattr(case, "values") else case),
                         id=_name(case)) for case in cases if _name(case) not in NOT_TOOLS]


def replay(client, d, name, argv, code, needle):
    if name in UNREADABLE and _readable_anyway(d / UNREADABLE[name]):
        pytest.skip("running as root: chmod 0 does not make a file unreadable")
    tool, arguments = as_tool_call([arg.replace("{d}", str(d)) for arg in argv])
    result = client.call(tool, arguments)  # a crashed server raises here
    text = text_of(result)
    assert "Traceback" not in text and "internal error" not in text, text
    assert exit_code(result) == code, text
    if code == 1:
        assert not result.is_error and tool_needle(needle) in text.lower()
        return
    headlines = [line for line in text.splitlines() if ERROR_LINE.search(line)]
    assert result.is_error and len(headlines) == 1, text
    assert tool_needle(needle) in headlines[0].lower(), headlines[0]


def test_the_replay_covers_the_table():
    assert len(replayed(CASES)) >= 40
    assert SAMPLE <= {_name(case) for case in CASES}


@pytest.mark.parametrize("name, argv, code, needle",
                         [p for p in replayed(CASES) if p.id in SAMPLE])
def test_bad_input_sample_as_tool_calls(client, d, name, argv, code, needle):
    replay(client, d, name, argv, code, needle)


@pytest.mark.slow
@pytest.mark.parametrize("name, argv, code, needle", replayed(CASES))
def test_bad_input_table_as_tool_calls(client, d, name, argv, code, needle):
    replay(client, d, name, argv, code, needle)


def test_the_server_outlives_every_bad_call(client):
    """Run last in this module: after all of the above, the same process answers."""
    client.ping()
    result = client.call("list", {"what": "gpus"})
    assert not result.is_error and result.structured_content["rows"]


def test_without_the_sdk_the_server_says_how_to_get_it(capsys, monkeypatch):
    import importlib.util
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *rest: None if name == "mcp" else find_spec(name, *rest))
    assert main(["mcp"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "pip install 'kbsolve[mcp]'" in err


SERVER_MAY_IMPORT = ("kbsolve.api", "kbsolve.render", "kbsolve.diagnostics",
                     "kbsolve.mcp_server", "kbsolve.results")  # the last: the results' models


def test_the_server_is_a_front_end_over_the_api():
    """Like the CLI, the server reaches kbsolve through the api, the renderers and
    the result models (for their schemas); only server.py imports the SDK."""
    from test_layers import imports, ours, under
    bad, sdk = [], []
    for path in sorted((ROOT / "mcp_server").glob("*.py")):
        for module, line, _ in imports(path, "kbsolve.mcp_server"):
            if ours(module) and not under(module, *SERVER_MAY_IMPORT):
                bad.append(f"mcp_server/{path.name}:{line}: {module}")
            if under(module, "mcp", "mcp_types", "anyio"):
                sdk.append(path.name)
    assert not bad, "\n".join(bad)
    assert set(sdk) == {"server.py"}


# ---- docs/mcp.md ----------------------------------------------------------------------

DOC_START = "<!-- tools: `kbsolve mcp --tools` writes this part -->\n"
DOC_END = "<!-- end of tools -->"


def test_docs_describe_the_current_tools(capsys):
    doc = (ROOT / "docs" / "mcp.md").read_text(encoding="utf-8")
    assert DOC_START in doc and DOC_END in doc
    published = doc.split(DOC_START, 1)[1].split(DOC_END, 1)[0]
    capsys.readouterr()
    assert main(["mcp", "--tools"]) == 0
    assert published == capsys.readouterr().out, \
        "regenerate docs/mcp.md's tool part with `kbsolve mcp --tools` (see the doc)"
