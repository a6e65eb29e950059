"""Every method the sidecar serves (its rpc.discover document, protocol/openrpc.json) has a wrapper on both
clients: named in snake_case (rpc.discover: discover), taking the method's params in snake_case, in the
protocol's order, required exactly when the protocol requires them, and putting exactly those params on
the wire, under their protocol names, with None inside values sent as null. Every application error of
the document has its exception class. A method added to the protocol without a wrapper fails here."""
from __future__ import annotations

import inspect
import re
from typing import Any, Dict, List, Tuple

from helpers import BIN, ECHO, PY, child_env, same

import agui_state
from agui_state import AguiState, AguiStateError, AsyncAguiState
from agui_state._errors import error_from_reply

ACTIVITY_METHODS = {"activitySnapshot", "applyActivityOps", "diffActivity", "getActivity"}


def snake(name: str) -> str:
    return re.sub(r"[A-Z]", lambda m: "_" + m.group().lower(), name.split(".")[-1])


def params_of(method: Dict[str, Any]) -> List[Tuple[str, bool]]:
    return [(p["name"], bool(p.get("required", False))) for p in method["params"]]


def sample(name: str) -> Any:
    """A value for each wrapper param that the wrapper sends on as it is, with a null inside."""
    fixed = {"ops": [{"op": "add", "path": "/n", "value": None}], "remove": ["a", "b"], "path": ["a/b", 0],
             "atomic": True, "snapshot": True, "replace": False, "if_version": 7,
             "own": ["/a", "/b~1c"], "paths": ["/agent", "/x~y"], "headers": [["Last-Event-ID", "x"], ["cookie", None]]}
    return fixed.get(name, {"param": name, "null": None})


def check_signatures(doc: Dict[str, Any], cls: type) -> None:
    names = {m["name"] for m in doc["methods"]}
    assert ACTIVITY_METHODS <= names, sorted(names)
    for method in doc["methods"]:
        fn = getattr(cls, snake(method["name"]), None)
        assert callable(fn), f"{cls.__name__} has no wrapper {snake(method['name'])}() for {method['name']}"
        params = list(inspect.signature(fn).parameters.values())[1:]  # self
        assert [p.name for p in params] == [snake(n) for n, _ in params_of(method)], method["name"]
        assert [p.default is inspect.Parameter.empty for p in params] == [r for _, r in params_of(method)], \
            f"{method['name']}: a param is required in the wrapper exactly when the protocol requires it"
        assert fn.__doc__, f"{snake(method['name'])} has no docstring"


def wire_cases(doc: Dict[str, Any]) -> List[Tuple[str, str, Dict[str, Any], Dict[str, Any]]]:
    """For each method: its name, its wrapper's name, the keyword arguments given to the wrapper, and the
    params that must arrive; first with every param given, then with only the required ones."""
    cases: List[Tuple[str, str, Dict[str, Any], Dict[str, Any]]] = []
    for method in doc["methods"]:
        wrapper = snake(method["name"])
        every = {snake(n): sample(snake(n)) for n, _ in params_of(method)}
        required = {snake(n): sample(snake(n)) for n, r in params_of(method) if r}
        for given in (every, required):
            expected = {n: sample(snake(n)) for n, _ in params_of(method) if snake(n) in given}
            cases.append((method["name"], wrapper, given, expected))
    return cases


def test_every_method_has_a_sync_wrapper_that_sends_its_params() -> None:
    with AguiState(BIN, env=child_env(), timeout=30) as s:
        doc = s.discover()
    check_signatures(doc, AguiState)
    with AguiState(PY, ["-c", ECHO], timeout=30) as echo:
        for name, wrapper, given, expected in wire_cases(doc):
            got = getattr(echo, wrapper)(**given)
            assert got["method"] == name and same(got["params"], expected), (name, given, got)
        # Values that are JSON null are sent as null; None for an optional param leaves it out.
        assert echo.diff_activity("t", "m", None)["params"] == {"threadId": "t", "messageId": "m", "content": None}  # type: ignore[arg-type]
        assert echo.activity_snapshot("t", "m", "plan", {"x": None}, replace=True, if_version=None)["params"] == {
            "threadId": "t", "messageId": "m", "activityType": "plan", "content": {"x": None}}
        assert echo.apply_activity_ops("t", "m", iter([{"op": "remove", "path": "/x"}]), activity_type=None, atomic=False)["params"] == {
            "threadId": "t", "messageId": "m", "ops": [{"op": "remove", "path": "/x"}]}


async def test_every_method_has_an_async_wrapper_that_sends_its_params() -> None:
    async with AsyncAguiState(BIN, env=child_env(), timeout=30) as s:
        doc = await s.discover()
    check_signatures(doc, AsyncAguiState)
    async with AsyncAguiState(PY, ["-c", ECHO], timeout=30) as echo:
        for name, wrapper, given, expected in wire_cases(doc):
            got = await getattr(echo, wrapper)(**given)
            assert got["method"] == name and same(got["params"], expected), (name, given, got)
        assert (await echo.diff_activity("t", "m", None))["params"]["content"] is None  # type: ignore[arg-type]


def test_every_application_error_has_its_exception() -> None:
    with AguiState(BIN, env=child_env(), timeout=30) as s:
        errors = s.discover()["components"]["errors"]
    assert errors["UnknownActivity"]["code"] == -32005
    for name, err in errors.items():
        raised = error_from_reply({"code": err["code"], "message": err["message"], "data": {"code": "X"}})
        cls = getattr(agui_state, name + "Error", None)
        if -32099 <= err["code"] <= -32000 or cls is not None:  # the application errors, and -32602
            assert cls is not None and name + "Error" in agui_state.__all__, f"no exception exported for {name}"
            assert type(raised) is cls and issubclass(cls, AguiStateError), name
        else:  # the other standard errors are AguiStateError itself
            assert type(raised) is AguiStateError, name
        assert raised.code == err["code"] and raised.data == {"code": "X"}
