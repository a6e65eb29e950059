"""Issue 22 §5: a parameter documented as a sequence refuses a str, bytes or Mapping (which Python iterates
by letters, byte values or keys) and anything not iterable, with a TypeError that names the Python method
and the parameter, before anything is sent. The parameters are found in the sidecar's own rpc.discover
document (an array schema, or a pointer-or-array one), so a sequence param added to the protocol is
covered here at once. Both clients, against the real binary."""
from __future__ import annotations

import re
from typing import Any, Dict, Iterator, List, Set, Tuple

import pytest
from helpers import BIN, Witness, child_env

from agui_state import AguiState, AsyncAguiState, UnknownActivityError, UnknownThreadError

OP = {"op": "add", "path": "/x", "value": 1}
# What Python iterates wrongly, and what it cannot iterate at all: each with the type name the error gives.
WRONG: List[Tuple[Any, str]] = [("plain", "str"), (b"ab", "bytes"), (bytearray(b"ab"), "bytearray"),
                                (OP, "dict"), (7, "int"), (None, "NoneType")]


def snake(name: str) -> str:
    return re.sub(r"[A-Z]", lambda m: "_" + m.group().lower(), name.split(".")[-1])


def schema_types(doc: Dict[str, Any], schema: Dict[str, Any]) -> Set[str]:
    """The JSON types a param schema admits, through $ref and anyOf/oneOf."""
    if "$ref" in schema:
        return schema_types(doc, doc["components"]["schemas"][schema["$ref"].split("/")[-1]])
    if "anyOf" in schema or "oneOf" in schema:
        return set().union(*(schema_types(doc, s) for s in schema.get("anyOf", schema.get("oneOf", []))))
    return {schema["type"]} if isinstance(schema.get("type"), str) else set()


def required_args(method: Dict[str, Any]) -> Dict[str, Any]:
    """Valid keyword arguments for the method's required params (a thread "t" that need not exist)."""
    values = {"thread_id": "t", "message_id": "m", "activity_type": "plan", "content": {}, "value": 1,
              "ops": [], "path": [], "pointer": "", "method": "POST", "headers": []}
    return {snake(p["name"]): values[snake(p["name"])] for p in method["params"] if p.get("required")}


def refused_calls(doc: Dict[str, Any]) -> Iterator[Tuple[str, Dict[str, Any], str]]:
    """Every wrapper call with a wrong value for a sequence param: (wrapper, kwargs, the message pattern)."""
    found = set()
    for method in doc["methods"]:
        for param in method["params"]:
            types = schema_types(doc, param["schema"])
            if "array" not in types:
                continue
            wrapper, name = snake(method["name"]), snake(param["name"])
            found.add((wrapper, name))
            for value, type_name in WRONG:
                if (value is None and not param.get("required")) or (isinstance(value, str) and "string" in types):
                    continue  # None leaves an optional param out; a str is a pointer where one is allowed
                pointer = "a str pointer or " if "string" in types else ""
                pattern = rf"^{wrapper}\(\): {name} must be {pointer}a sequence of [a-z ]+, not {type_name}$"
                yield wrapper, {**required_args(method), name: value}, pattern
    # The protocol's sequence params today; a new one joins the loop above by itself.
    assert {("diff_tool_state", "remove"), ("apply_ops", "ops"), ("normalize", "ops"), ("diff_state", "path"),
            ("get_state", "path"), ("apply_activity_ops", "ops"), ("escape_pointer", "path")} <= found, found


def test_sync_sequence_params_refuse_str_bytes_mappings_and_non_iterables() -> None:
    with AguiState(BIN, env=child_env(), timeout=30) as s:
        doc = s.discover()
        before = s.stats()["requests"]
        n = 0
        for wrapper, kwargs, pattern in refused_calls(doc):
            with pytest.raises(TypeError) as e:
                getattr(s, wrapper)(**kwargs)
            assert re.match(pattern, str(e.value)), (wrapper, kwargs, str(e.value))
            n += 1
        assert n >= 30, n
        assert s.stats()["requests"] == before + 1, "a refused call sends nothing (only this stats call came)"


async def test_async_sequence_params_refuse_str_bytes_mappings_and_non_iterables() -> None:
    async with AsyncAguiState(BIN, env=child_env(), timeout=30) as s:
        doc = await s.discover()
        before = (await s.stats())["requests"]
        n = 0
        for wrapper, kwargs, pattern in refused_calls(doc):
            # The TypeError comes when the coroutine runs, as every other error of AsyncAguiState does.
            with pytest.raises(TypeError) as e:
                await getattr(s, wrapper)(**kwargs)
            assert re.match(pattern, str(e.value)), (wrapper, kwargs, str(e.value))
            n += 1
        assert n >= 30, n
        assert (await s.stats())["requests"] == before + 1, "a refused call sends nothing"


def test_the_issue_cases_change_nothing_and_the_sequences_they_meant_work() -> None:
    """remove="plain" used to remove the keys p and a and keep plain; apply_ops(tid, op) used to skip
    three "ops" made of the dict's keys. Now both raise and the state stays; a tuple, a generator or a
    list of the same does what was meant, replayed by python3-jsonpatch."""
    with AguiState(BIN, env=child_env(), timeout=30) as s:
        w = Witness("py-args", {})
        tool_map = {"p": 1, "a": 2, "plain": 3}
        w.feed(s.open_run(w.tid, state={}, tool_state=tool_map), True)
        w.check(before := s.get_state(w.tid))
        with pytest.raises(TypeError, match=r"^diff_tool_state\(\): remove must be a sequence of str, not str$"):
            s.diff_tool_state(w.tid, remove="plain")
        with pytest.raises(TypeError, match=r"^apply_ops\(\): ops must be a sequence of op dicts, not dict$"):
            s.apply_ops(w.tid, OP)
        with pytest.raises(TypeError, match=r"^escape_pointer\(\): path must be a sequence of .*, not str$"):
            s.escape_pointer("a/b")
        assert s.get_state(w.tid) == before, "nothing moved"

        r = s.diff_tool_state(w.tid, remove=("plain",))
        assert r["delta"] == [{"op": "remove", "path": "/toolState/plain"}]
        w.feed(r)
        r = s.apply_ops(w.tid, (op for op in [OP]))
        assert r["delta"] == [OP] and r["skipped"] == []
        w.feed(r)
        w.check(s.get_state(w.tid))
        assert w.state == {"toolState": {"p": 1, "a": 2}, "x": 1}
        assert s.get_state(w.tid, ("toolState", "p"))["state"] == 1 == s.get_state(w.tid, "/toolState/p")["state"]
        assert s.escape_pointer(iter(["a/b", 0])) == {"pointer": "/a~1b/0"}


def outside_quotes(text: str) -> str:
    return re.sub(r'"(?:[^"\\]|\\.)*"', '""', text)


def test_error_messages_name_the_python_methods() -> None:
    """The sidecar's messages name protocol methods ("call openRun with the state again"); the exceptions
    the clients raise name the Python ones, and leave the caller's quoted data (here a thread id and an
    activity id that are method names) as it is."""
    with AguiState(BIN, env=child_env(), timeout=30) as s:
        wire_names = {m["name"] for m in s.discover()["methods"]} - {"normalize", "stats", "rpc.discover"}
        with pytest.raises(UnknownThreadError) as thread:
            s.get_state("openRun")
        s.open_run("t", state={})
        with pytest.raises(UnknownActivityError) as activity:
            s.get_activity("t", "diffActivity")
    assert thread.value.message.startswith('unknown thread "openRun" ') and "call open_run" in thread.value.message
    assert '"diffActivity"' in activity.value.message and "diff_activity" in activity.value.message
    for e in (thread.value, activity.value):
        assert str(e).startswith(e.message)
        named = set(re.findall(r"[A-Za-z_]+", outside_quotes(e.message)))
        assert not named & wire_names, (e.message, named & wire_names)


async def test_async_error_messages_name_the_python_methods() -> None:
    async with AsyncAguiState(BIN, env=child_env(), timeout=30) as s:
        with pytest.raises(UnknownThreadError) as e:
            await s.apply_ops("closeThread", [])
    assert e.value.message.startswith('unknown thread "closeThread" ') and "call open_run " in e.value.message
