"""The command's cache of compiled generated code (codecache.py): the code it hands out
is the code the builtins compile, it survives a process, a damaged or unwritable file
costs only the time, and a second command compiles nothing anew."""

from __future__ import annotations

import builtins
import dataclasses
import marshal
import os
import subprocess
import sys

import pytest

from kbsolve import codecache
from kbsolve.codecache import CodeCache

SOURCE = "def f(x: int, y: 'list[str]' = None) -> int:\n    return x\n"


@pytest.fixture
def private_cache(tmp_path, monkeypatch) -> CodeCache:
    cache = CodeCache(tmp_path / "code.marshal")
    monkeypatch.setattr(codecache, "CACHE", cache)
    return cache


def test_the_code_is_the_builtins_and_survives_a_save(tmp_path):
    path = tmp_path / "code.marshal"
    first = CodeCache(path)
    code = first.code(SOURCE, "<string>", "exec", 0)
    assert code == compile(SOURCE, "<string>", "exec", dont_inherit=True)
    assert first.added == 1
    first.save()
    assert path.is_file() and first.added == 0
    second = CodeCache(path)
    again = second.code(SOURCE, "<string>", "exec", 0)
    assert again == code and again.co_filename == "<string>"
    assert second.added == 0  # read, not compiled
    second.save()  # nothing new: the file is left as it is
    assert path.read_bytes() == CodeCache(path).path.read_bytes()


def test_a_damaged_file_is_compiled_again_and_replaced(tmp_path):
    path = tmp_path / "code.marshal"
    cache = CodeCache(path)
    cache.code(SOURCE, "<string>", "exec", 0)
    cache.save()
    data = bytearray(path.read_bytes())
    data[-5] ^= 0xFF  # one flipped byte: the checksum refuses the payload
    path.write_bytes(bytes(data))
    damaged = CodeCache(path)
    assert damaged.code(SOURCE, "<string>", "exec", 0) == compile(SOURCE, "<string>", "exec",
                                                                  dont_inherit=True)
    assert damaged.added == 1
    damaged.save()
    assert CodeCache(path)._load()  # whole again
    path.write_bytes(codecache._MAGIC)  # truncated after the magic line
    assert CodeCache(path)._load() == {}


def test_a_cache_that_cannot_be_written_is_left_alone(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    cache = CodeCache(blocker / "sub" / "code.marshal")
    assert cache.code(SOURCE, "<string>", "exec", 0) is not None
    cache.save()  # no error: the cache is an optimisation
    assert cache.added == 1


HELPER = """
def run(exec_, compile_, source):
    namespace = {}
    exec_(source, {}, namespace)
    return namespace["f"].__annotations__, eval(compile_("list[int]", "<string>", "eval"))
"""


def test_exec_and_compile_inherit_the_callers_future_flags_as_the_builtins_do(private_cache):
    """A caller under `from __future__ import annotations` gets string annotations from
    the cache's exec as from the builtin's; a caller without gets the objects."""
    seen = {}
    for future in ("", "from __future__ import annotations\n"):
        space: dict = {}
        exec(compile(future + HELPER, "<helper>", "exec", dont_inherit=True), space)
        ours = space["run"](codecache.cached_exec, codecache.cached_compile, SOURCE)
        theirs = space["run"](builtins.exec, builtins.compile, SOURCE)
        assert ours == theirs
        seen[bool(future)] = ours[0]
    assert seen[False]["x"] is int and seen[True]["x"] == "int"
    assert private_cache.added == 4  # each text compiled once under each set of flags


def test_a_dataclass_built_through_the_cache_is_the_same_class(private_cache):
    def build():
        @dataclasses.dataclass(frozen=True)
        class Entry:
            name: str
            tags: tuple = ()
            extra: dict = dataclasses.field(default_factory=dict, compare=False)
        return Entry

    plain = build()
    codecache.enable(dataclasses)
    try:
        cached = build()
        again = build()
    finally:
        codecache.disable(dataclasses)
    assert "exec" not in vars(dataclasses)
    assert private_cache.added > 0
    for name in ("__init__", "__repr__", "__eq__", "__hash__", "__setattr__"):
        assert getattr(cached, name).__code__ == getattr(plain, name).__code__, name
        assert getattr(again, name).__code__ == getattr(plain, name).__code__, name
    assert cached.__init__.__annotations__ == plain.__init__.__annotations__
    one, other = cached("a", (1,), {"x": 1}), plain("a", (1,), {"x": 1})
    assert repr(one).split(".")[-1] == repr(other).split(".")[-1]
    assert one == cached("a", (1,)) and hash(one) == hash(cached("a", (1,)))
    with pytest.raises(dataclasses.FrozenInstanceError):
        one.name = "b"


def test_a_program_that_imports_kbsolve_compiles_as_before():
    import kbsolve.cli.main  # noqa: F401 - the command's module, not its process
    assert "exec" not in vars(dataclasses) and not codecache._enabled
    assert codecache.compiled(SOURCE, "<linked>") == compile(SOURCE, "<linked>", "exec",
                                                             dont_inherit=True)


def test_the_second_command_compiles_nothing_anew(tmp_path, seed_kb_cache):
    """The first command writes the code it compiled; the second reads all of it and
    leaves the file untouched (it would write it had it compiled anything). Both read the
    KB from its cache (seeded: the code cache starts empty)."""
    env = {**os.environ, "KBSOLVE_CACHE_DIR": str(seed_kb_cache(tmp_path / "cache"))}
    argv = [sys.executable, "-m", "kbsolve", "list", "gpus", "--format", "json"]
    outputs = []
    for _ in range(2):
        done = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, env=env,
                              timeout=120)
        assert done.returncode == 0, done.stderr
        outputs.append(done.stdout)
        [path] = (tmp_path / "cache").glob("code-*.marshal")
        if len(outputs) == 1:
            written = path.stat().st_mtime_ns, path.read_bytes()
    assert outputs[0] == outputs[1] and '"A100-80G-SXM"' in outputs[0]
    assert (path.stat().st_mtime_ns, path.read_bytes()) == written
    codes = CodeCache(path)._load()
    assert len(codes) > 100  # the dataclasses' methods, kbsolve's and pydantic's
    assert any("__dataclass_self__" in key[0] or "def __init__" in key[0] for key in codes)


def _write_cache(path, codes) -> None:
    import marshal

    from kbsolve.codecache import _MAGIC, framed
    path.write_bytes(framed(_MAGIC, marshal.dumps(codes)))


def test_a_file_of_another_layout_under_the_same_magic_is_compiled_again(tmp_path):
    """An earlier layout kept the code objects themselves, under the same magic line and a
    valid checksum: it is not trusted (it made every command end in a TypeError traceback
    before its flags were read), compiled again and replaced; a single entry that does not
    unmarshal to a code object is compiled again too."""
    import marshal
    path = tmp_path / "code.marshal"
    key = (SOURCE, "<string>", "exec", 0)
    expected = compile(SOURCE, "<string>", "exec", dont_inherit=True)
    _write_cache(path, {key: expected})
    cache = CodeCache(path)
    assert cache.code(*key) == expected and cache.added == 1
    cache.save()
    assert CodeCache(path)._load() == {key: marshal.dumps(expected)}
    _write_cache(path, {key: marshal.dumps("not code"), ("x", "<string>", "eval", 0): b"\0"})
    cache = CodeCache(path)
    assert cache.code(*key) == expected and cache.added == 1
    assert cache.code("x", "<string>", "eval", 0) == compile("x", "<string>", "eval",
                                                             dont_inherit=True)


def test_the_command_runs_over_a_code_cache_of_another_layout(tmp_path, seed_kb_cache):
    """The command's process compiles typing's forward references through the cache as it
    imports click, before any flag is read: a file of the earlier layout must cost only
    the time, not a traceback. (The KB's entry is seeded: the command reads it.)"""
    env = {**os.environ, "KBSOLVE_CACHE_DIR": str(seed_kb_cache(tmp_path))}
    from importlib.util import MAGIC_NUMBER
    source = "ParamType"  # one of the forward references click's import compiles
    _write_cache(tmp_path / f"code-{MAGIC_NUMBER.hex()}.marshal",
                 {(source, "<string>", "eval", 0): compile(source, "<string>", "eval")})
    done = subprocess.run([sys.executable, "-m", "kbsolve", "list", "gpus", "--format",
                           "json"], capture_output=True, text=True, cwd=tmp_path, env=env,
                          timeout=120)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert '"A100-80G-SXM"' in done.stdout
    codes = CodeCache(tmp_path / f"code-{MAGIC_NUMBER.hex()}.marshal")._load()
    assert codes and all(type(data) is bytes for data in codes.values())


def test_long_sources_are_kept_one_file_each_and_read_only_when_asked(tmp_path):
    """A source of BIG characters or more (the linked search code, one set per query) has a
    file of its own beside the shared one: the shared file, which every command reads whole,
    stays the size of the generated methods however many queries ran; an earlier file holding
    long sources is written again without them."""
    import marshal
    path = tmp_path / "code.marshal"
    long = "x = 1\n" * (codecache.BIG // 6 + 1)
    expected = compile(long, "<linked>", "exec", dont_inherit=True)
    cache = CodeCache(path)
    assert cache.code(long, "<linked>", "exec", 0) == expected
    assert cache.code(SOURCE, "<string>", "exec", 0) is not None
    cache.save()
    [own] = (tmp_path / "code.marshal.d").glob("*.marshal")
    assert all(len(key[0]) < codecache.BIG for key in CodeCache(path)._load())
    again = CodeCache(path)
    assert again.code(long, "<linked>", "exec", 0) == expected and not again.big
    assert again.codes is None  # the shared file not even read for it
    own.write_bytes(own.read_bytes()[:-3])  # damaged: compiled again, and rewritten
    damaged = CodeCache(path)
    assert damaged.code(long, "<linked>", "exec", 0) == expected and damaged.big
    damaged.save()
    assert CodeCache(path).code(long, "<linked>", "exec", 0) == expected
    _write_cache(path, {(long, "<linked>", "exec", 0): marshal.dumps(expected)})
    earlier = CodeCache(path)
    assert earlier._load() == {} and earlier.added == 1
    earlier.save()
    assert path.stat().st_size < 200


def test_cache_file_names_are_the_sha256_of_their_key():
    """key_name hashes without hashlib (OpenSSL) and names the files hashlib named: the
    caches' files keep their names."""
    import hashlib
    key = ("def f():\n    return 1\n" * 200, "<string>", "exec", 0)
    assert codecache.key_name(key, 40) == hashlib.sha256(repr(key).encode()).hexdigest()[:40]


def test_a_damaged_payload_fails_its_check_line():
    framed = codecache.framed(b"magic\n", b"payload bytes")
    assert framed.startswith(b"magic\n" + codecache.checksum(b"payload bytes") + b"\n")
    assert codecache.checksum(b"payload bytez") != codecache.checksum(b"payload bytes")


def test_a_text_asked_again_gets_the_code_it_got_without_unmarshalling_it(tmp_path,
                                                                          monkeypatch):
    """typing compiles one forward reference ('bool', 'str') for every annotation naming it:
    the second ask of a key is handed the code object of the first, read from the file once."""
    path = tmp_path / "code.marshal"
    first = CodeCache(path)
    first.code(SOURCE, "<string>", "exec", 0)
    first.save()
    loads = []
    monkeypatch.setattr(codecache, "marshal", type("Counting", (), {
        "loads": staticmethod(lambda data: loads.append(data) or marshal.loads(data)),
        "dumps": staticmethod(marshal.dumps)}))
    again = CodeCache(path)
    one = again.code(SOURCE, "<string>", "exec", 0)
    assert again.code(SOURCE, "<string>", "exec", 0) is one
    assert one == compile(SOURCE, "<string>", "exec", dont_inherit=True)
    assert len(loads) == 2 and again.added == 0  # the file's table, then the code once
    assert again.code(SOURCE, "<other>", "exec", 0) is not one  # another key


def test_the_commands_search_compiles_its_indexers_through_the_cache(private_cache,
                                                                     monkeypatch):
    """In the command's process the search's indexers (solver/search.py) are compiled once
    per text across processes; a program importing kbsolve compiles them as before."""
    from kbsolve.solver import search
    befores = (((0, 12), (3, 2)), ())
    monkeypatch.setattr(search, "_INDEXERS", type(search._INDEXERS)(8))  # none kept before
    search._indexer(befores)  # not the command's process: the cache is not asked
    assert not private_cache.used
    monkeypatch.setattr(search, "_INDEXERS", type(search._INDEXERS)(8))
    codecache.enable()
    try:
        indexer = search._indexer(befores)
    finally:
        codecache.disable()
    assert "compile" not in vars(search) and not codecache._enabled
    assert indexer([5, 0, 0, 7]) == [5 * 12 + 7 * 2, 0]
    [key] = [key for key in private_cache.used if key[1] == "<indexer>"]
    assert key == ("def index(idx):\n    return [idx[0] * 12 + idx[3] * 2, 0]\n",
                   "<indexer>", "exec", 0)


@pytest.mark.ci
def test_the_command_runs_with_the_users_own_cache_folder(tmp_path, seed_kb_cache):
    """No KBSOLVE_CACHE_DIR: the cache folder is the user's (platformdirs), whose import
    makes namedtuples through the code cache while the cache's own folder is being found.
    It crashed every command of a user who had not set the variable (found in the
    eighteenth round; the tests and benches all set it)."""
    xdg = tmp_path / "xdg"
    seed_kb_cache(xdg / "kbsolve")  # the KB read from its cache, as a second command reads it
    env = {k: v for k, v in os.environ.items() if k != "KBSOLVE_CACHE_DIR"}
    env.update(XDG_CACHE_HOME=str(xdg), HOME=str(tmp_path))
    done = subprocess.run([sys.executable, "-P", "-m", "kbsolve", "list", "gpus", "--format",
                           "json"], capture_output=True, text=True, cwd=tmp_path, env=env,
                          timeout=120)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert '"A100-80G-SXM"' in done.stdout
    assert list((xdg / "kbsolve").glob("code-*.marshal"))  # the code cache written there
