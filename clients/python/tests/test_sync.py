"""AguiState, the synchronous client, against the real sidecar, every event replayed by python3-jsonpatch."""
from __future__ import annotations

import os
import re
import signal
import stat
import subprocess
import threading
from concurrent import futures
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest
from conftest import SOURCE
from helpers import BIN, DIE_AFTER_ONE, HOLD, PY, REVERSE, Witness, child_env, same

import agui_state._common
from agui_state import (
    AguiState, AguiStateError, InvalidParamsError, PatchFailedError, SidecarExitedError, UnknownActivityError,
    UnknownThreadError, VersionConflictError, find_binary,
)


@pytest.fixture
def s() -> Iterator[AguiState]:
    with AguiState(BIN, env=child_env(), timeout=30) as sidecar:
        yield sidecar


def step(s: AguiState, w: Witness, result: Dict[str, Any], opening: bool = False) -> Dict[str, Any]:
    """Replays one call's events on the witness, then checks it against getState."""
    w.feed(result, opening)
    w.check(s.get_state(w.tid))
    return result


def open_namespace_thread(s: AguiState, tid: str) -> "tuple[Witness, Dict[str, Any]]":
    """Run 1 of a namespace-mode thread: the client's state, an empty map, then tool writes."""
    own = {"selectedLayer": "era5", "ui": {"panel": "open"}}
    w = Witness(tid, own)
    r = step(s, w, s.open_run(tid, run_id="run-1", state=own, tool_state={}), opening=True)
    assert r["runId"] == "run-1" and r["threadId"] == tid
    assert r["events"] == [{"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/toolState", "value": {}}]}]
    stored = {"raster-ops/dataset": "era5", "a~b": [1, 2], "plain": {"x": None}}
    r = step(s, w, s.diff_tool_state(tid, set=stored))
    assert [op["path"] for op in r["delta"]] == ["/toolState/a~0b", "/toolState/plain", "/toolState/raster-ops~1dataset"]
    assert all(op["op"] == "add" for op in r["delta"])
    return w, stored


def test_namespace_scenario_two_runs(s: AguiState) -> None:
    w, stored = open_namespace_thread(s, "py-ns")
    v = s.get_state(w.tid)["version"]
    r = step(s, w, s.diff_tool_state(w.tid, set={"raster-ops/dataset": "era5", "a~b": [1, 2.0]}))
    assert r["delta"] == [] and r["events"] == [] and r["version"] == v, "an equal rewrite sends nothing"
    r = step(s, w, s.diff_tool_state(w.tid, remove=["a~b", "never-there"]))
    assert r["delta"] == [{"op": "remove", "path": "/toolState/a~0b"}]
    new_map = {"raster-ops/dataset": "gfs", "raster-ops/bounds": [0, 0, 10, 10], "Z": 0}
    r = step(s, w, s.diff_tool_state(w.tid, tool_state=new_map))
    assert [(op["op"], op["path"]) for op in r["delta"]] == [
        ("add", "/toolState/Z"), ("remove", "/toolState/plain"),
        ("add", "/toolState/raster-ops~1bounds"), ("add", "/toolState/raster-ops~1dataset")]
    assert w.state["selectedLayer"] == "era5" and w.state["ui"] == {"panel": "open"}
    # Run 2: the client sends what it holds, the server its stored map: one add of the whole map.
    r = step(s, w, s.open_run(w.tid, run_id="run-2", state=w.state, tool_state=new_map), opening=True)
    assert len(r["events"]) == 1 and len(r["delta"]) == 1
    assert r["delta"][0]["op"] == "add" and r["delta"][0]["path"] == "/toolState"
    assert same(r["delta"][0]["value"], new_map)


def test_model_ops_and_typed_errors(s: AguiState) -> None:
    w, _ = open_namespace_thread(s, "py-ops")
    ops: List[Dict[str, Any]] = [{"op": "add", "path": "/todos/-", "value": "milk"}, {"op": "replace", "path": "/status", "value": "busy"},
           {"op": "remove", "path": "/gone"}, {"op": "add", "path": ["labels"], "value": {}},
           {"op": "add", "path": ["labels", "x/y~z"], "value": 1}, {"op": "test", "path": "/status", "value": "busy"}]
    r = step(s, w, s.apply_ops(w.tid, ops))
    assert r["delta"] == [{"op": "add", "path": "/todos", "value": []}, {"op": "add", "path": "/todos/-", "value": "milk"},
                          {"op": "add", "path": "/status", "value": "busy"}, {"op": "add", "path": "/labels", "value": {}},
                          {"op": "add", "path": "/labels/x~1y~0z", "value": 1}]
    assert [(k["index"], k["code"]) for k in r["skipped"]] == [(2, "PATH_NOT_FOUND")]

    before = s.get_state(w.tid)
    with pytest.raises(PatchFailedError) as e:
        s.apply_ops(w.tid, [{"op": "add", "path": "/todos/-", "value": "eggs"}, {"op": "remove", "path": "/nope"}], atomic=True)
    data = e.value.data or {}
    assert e.value.code == -32002 and data["code"] == "PATH_NOT_FOUND" and data["index"] == 1
    assert s.get_state(w.tid) == before, "an atomic failure changes nothing"
    v = before["version"]
    with pytest.raises(VersionConflictError) as e:
        s.diff_tool_state(w.tid, set={"k": 1}, if_version=v - 1)
    assert e.value.data == {"code": "VERSION_CONFLICT", "expected": v - 1, "actual": v}
    step(s, w, s.apply_ops(w.tid, [{"op": "add", "path": "/todos/0", "value": "tea"}], if_version=v))

    with pytest.raises(UnknownThreadError) as e:
        s.get_state("py-never")
    assert e.value.code == -32001 and (e.value.data or {})["reason"] == "never opened"
    s.open_run("py-short", state={})
    assert s.close_thread("py-short") == {"closed": True}
    with pytest.raises(UnknownThreadError) as e:
        s.apply_ops("py-short", [])
    assert (e.value.data or {})["reason"] == "closed"
    with pytest.raises(InvalidParamsError) as e:
        s.get_state(w.tid, "/nope")
    assert (e.value.data or {})["field"] == "/path" and (e.value.data or {})["reason"] == "PATH_NOT_FOUND"
    with pytest.raises(InvalidParamsError) as e:
        s.call("openRun", {"threadId": w.tid, "toolstate": {}})
    assert (e.value.data or {})["reason"] == "UNKNOWN_PARAM" and (e.value.data or {})["field"] == "/toolstate"
    with pytest.raises(AguiStateError) as e:
        s.call("noSuchMethod")
    assert e.value.code == -32601 and type(e.value) is AguiStateError
    with pytest.raises(ValueError):
        s.diff_state(w.tid, float("nan"), path="/x")  # refused before anything is sent
    w.check(s.get_state(w.tid))

    state = {"items": [1]}
    r = s.normalize([{"op": "add", "path": "/todos/-", "value": 1}, {"op": "replace", "path": "/items/5", "value": 0}], state)
    assert [k["code"] for k in r["skipped"]] == ["INDEX_OUT_OF_BOUNDS"] and state == {"items": [1]}


def test_diff_state_and_edges(s: AguiState) -> None:
    w = Witness("py-edges", {"ui": {}})
    step(s, w, s.open_run(w.tid, state=w.state, namespace="tools"), opening=True)
    big = list(range(1000))
    step(s, w, s.diff_state(w.tid, big, path="/big"))
    r = step(s, w, s.diff_state(w.tid, [-1] + big, path="/big"))
    assert r["delta"] == [{"op": "add", "path": "/big/0", "value": -1}], "a prepend to 1000 elements is one op"
    r = step(s, w, s.diff_tool_state(w.tid, set={"\uffff": 1, "\U0001F600/x": 2, "": 3, "lone": "\ud800"}))
    assert [op["path"] for op in r["delta"]] == ["/tools/", "/tools/lone", "/tools/\U0001F600~1x", "/tools/\uffff"]
    r = step(s, w, s.diff_state(w.tid, "x" * (4 << 20), path="/blob"))
    assert len(r["delta"][0]["value"]) == 4 << 20, "a 4 MiB value goes both ways through the pipes"
    r = step(s, w, s.open_run(w.tid, snapshot=True), opening=True)
    assert [e["type"] for e in r["events"]] == ["STATE_SNAPSHOT", "STATE_DELTA"]
    assert r["delta"] == [{"op": "add", "path": "/tools", "value": w.state["tools"]}]


def test_null_is_sent_and_held(s: AguiState) -> None:
    # On the wire: a stand-in that echoes params shows that "value" is present and null, not left out.
    with AguiState(PY, ["-c", REVERSE, "1"], timeout=30) as echo:
        assert echo.diff_state("t", None, path="/x") == {"threadId": "t", "value": None, "path": "/x"}
    # In the sidecar: null is a value the state holds, through every method that writes one.
    w = Witness("py-null", {"status": "busy"})
    step(s, w, s.open_run(w.tid, state=w.state, tool_state={}), opening=True)
    r = step(s, w, s.diff_state(w.tid, None, path="/status"))
    assert r["delta"] == [{"op": "replace", "path": "/status", "value": None}]
    step(s, w, s.diff_tool_state(w.tid, set={"k": None}))
    step(s, w, s.apply_ops(w.tid, [{"op": "add", "path": "/n", "value": None}]))
    assert s.get_state(w.tid, "/status")["state"] is None
    assert s.get_state(w.tid)["state"] == {"status": None, "n": None, "toolState": {"k": None}}


def step_activity(s: AguiState, w: Witness, message_id: str, result: Dict[str, Any]) -> Dict[str, Any]:
    """Replays one activity call's events on the witness, then checks every activity it holds against
    getActivity, and the thread's state against getState (activities never touch it)."""
    w.feed_activity(result, message_id)
    for mid in w.activities:
        got = s.get_activity(w.tid, mid)
        assert got["version"] == result["version"], "activities share the thread's version"
        w.check_activity(mid, got)
    w.check(s.get_state(w.tid))
    return result


def test_activities_replay_onto_get_activity(s: AguiState) -> None:
    w = Witness("py-act", {"plan": "p"})
    v = step(s, w, s.open_run(w.tid, run_id="run-1", state=w.state), opening=True)["version"]
    assert s.stats()["activities"] == 0
    # diff_activity creates a missing activity with a snapshot: the client has no baseline to patch.
    plan = {"steps": [{"title": "search", "done": False}], "note": None}
    r = step_activity(s, w, "plan-1", s.diff_activity(w.tid, "plan-1", plan, activity_type="plan"))
    assert r == {"version": v + 1, "delta": [], "events": [
        {"type": "ACTIVITY_SNAPSHOT", "messageId": "plan-1", "activityType": "plan", "content": plan}]}
    r = step_activity(s, w, "plan-1", s.diff_activity(w.tid, "plan-1", {**plan, "steps": [{"title": "search", "done": True}]}))
    assert r["delta"] == [{"op": "replace", "path": "/steps/0/done", "value": True}] and r["version"] == v + 2
    assert r["events"][0]["activityType"] == "plan", "left out, the type stays"
    r = step_activity(s, w, "plan-1", s.diff_activity(w.tid, "plan-1", w.activities["plan-1"]["content"]))
    assert r == {"version": v + 2, "delta": [], "events": []}, "equal content and type: nothing"

    # Ops that do not fit as given, and a retype: a replace of a missing member becomes an add, an append
    # to a missing array creates it, a root replace with an array is skipped, a test is checked and dropped.
    ops: List[Dict[str, Any]] = [
        {"op": "replace", "path": "/status", "value": "running"}, {"op": "add", "path": "/notes/-", "value": "started"},
        {"op": "replace", "path": "", "value": []}, {"op": "test", "path": "/note", "value": None},
        {"op": "add", "path": ["labels"], "value": {"a/b": None}}]
    r = step_activity(s, w, "plan-1", s.apply_activity_ops(w.tid, "plan-1", ops, activity_type="plan-running"))
    assert r["delta"] == [{"op": "add", "path": "/status", "value": "running"}, {"op": "add", "path": "/notes", "value": []},
                          {"op": "add", "path": "/notes/-", "value": "started"},
                          {"op": "add", "path": "/labels", "value": {"a/b": None}}]
    assert [(k["index"], k["code"], k["op"]) for k in r["skipped"]] == [(2, "ROOT_NOT_OBJECT", ops[2])]
    assert r["events"][0]["activityType"] == "plan-running" and r["version"] == v + 3
    # A retype alone is one ACTIVITY_DELTA with an empty patch; the same type again is nothing.
    r = step_activity(s, w, "plan-1", s.apply_activity_ops(w.tid, "plan-1", [], activity_type="plan-done"))
    assert r == {"version": v + 4, "delta": [], "skipped": [], "events": [
        {"type": "ACTIVITY_DELTA", "messageId": "plan-1", "activityType": "plan-done", "patch": []}]}
    r = step_activity(s, w, "plan-1", s.apply_activity_ops(w.tid, "plan-1", [], activity_type="plan-done"))
    assert r == {"version": v + 4, "delta": [], "skipped": [], "events": []}
    # null is a value in content, through every method that writes one.
    r = step_activity(s, w, "plan-1", s.apply_activity_ops(w.tid, "plan-1", [{"op": "replace", "path": "/status", "value": None}]))
    assert r["delta"] == [{"op": "replace", "path": "/status", "value": None}]
    assert s.get_activity(w.tid, "plan-1")["content"]["status"] is None

    # replace=False on an existing activity: left as it is; the event carries the mirror's type and
    # content (not the ones given), with replace false; the version does not move.
    held = s.get_activity(w.tid, "plan-1")
    r = step_activity(s, w, "plan-1", s.activity_snapshot(w.tid, "plan-1", "other", {"x": 1}, replace=False))
    assert r == {"version": held["version"], "events": [{"type": "ACTIVITY_SNAPSHOT", "messageId": "plan-1",
                 "activityType": held["activityType"], "content": held["content"], "replace": False}]}
    # ... on a new one: created.
    search = {"query": "raster ops", "results": []}
    r = step_activity(s, w, "search-1", s.activity_snapshot(w.tid, "search-1", "search", search, replace=False))
    # Created here: no replace member, so it replaces any copy a client kept (protocol §10).
    assert r == {"version": v + 6, "events": [{"type": "ACTIVITY_SNAPSHOT", "messageId": "search-1",
                 "activityType": "search", "content": search}]}
    # replace (the default) replaces type and content; the same snapshot again is sent again, no new version.
    found = {"query": "raster ops", "results": [{"id": "era5", "score": None}]}
    r = step_activity(s, w, "search-1", s.activity_snapshot(w.tid, "search-1", "search-done", found))
    assert r["version"] == v + 7 and r["events"][0] == {
        "type": "ACTIVITY_SNAPSHOT", "messageId": "search-1", "activityType": "search-done", "content": found}
    r = step_activity(s, w, "search-1", s.activity_snapshot(w.tid, "search-1", "search-done", found, replace=True))
    assert r["version"] == v + 7 and "replace" not in r["events"][0]
    assert s.stats()["activities"] == 2

    # The typed errors: nothing below changes anything.
    v = s.get_activity(w.tid, "plan-1")["version"]
    with pytest.raises(UnknownActivityError) as unknown:
        s.get_activity(w.tid, "never")
    assert unknown.value.code == -32005
    assert unknown.value.data == {"code": "UNKNOWN_ACTIVITY", "threadId": w.tid, "messageId": "never"}
    with pytest.raises(UnknownActivityError) as unknown:
        s.apply_activity_ops(w.tid, "never", [{"op": "add", "path": "/a", "value": 1}], activity_type="t")
    assert (unknown.value.data or {})["messageId"] == "never"
    with pytest.raises(InvalidParamsError) as invalid:
        s.diff_activity(w.tid, "never", {"a": 1})  # creating needs the type
    assert (invalid.value.data or {})["field"] == "/activityType" and (invalid.value.data or {})["reason"] == "MISSING"
    for bad in ([1, 2], None):
        with pytest.raises(InvalidParamsError) as invalid:
            s.activity_snapshot(w.tid, "never", "t", bad)  # type: ignore[arg-type]
        assert (invalid.value.data or {})["field"] == "/content"
        assert (invalid.value.data or {})["reason"] == "ROOT_NOT_OBJECT"
    with pytest.raises(PatchFailedError) as failed:
        s.apply_activity_ops(w.tid, "plan-1", [{"op": "add", "path": "/x", "value": 1}, {"op": "remove", "path": "/gone"}],
                             activity_type="never-set", atomic=True)
    assert (failed.value.data or {})["code"] == "PATH_NOT_FOUND" and (failed.value.data or {})["index"] == 1
    with pytest.raises(VersionConflictError):
        s.diff_activity(w.tid, "plan-1", {}, if_version=v - 1)
    with pytest.raises(UnknownThreadError):
        s.get_activity("py-never", "plan-1")
    with pytest.raises(UnknownThreadError):
        s.diff_activity("py-never", "plan-1", {}, activity_type="plan")
    step_activity(s, w, "plan-1", s.apply_activity_ops(w.tid, "plan-1", [], if_version=v))  # nothing moved, in the end
    assert s.stats()["activities"] == 2

    # Activities survive open_run (a new run), and go with close_thread.
    w.state = {"plan": "q"}  # the client changed its own state between runs, and sends it
    step(s, w, s.open_run(w.tid, run_id="run-2", state=w.state), opening=True)
    step_activity(s, w, "search-1", s.apply_activity_ops(w.tid, "search-1", [{"op": "add", "path": "/results/-", "value": {"id": "gfs"}}]))
    before = s.stats()
    assert s.close_thread(w.tid) == {"closed": True}
    after = s.stats()
    assert (after["activities"], after["threads"]) == (before["activities"] - 2, before["threads"] - 1) == (0, 0)
    with pytest.raises(UnknownThreadError) as gone:
        s.get_activity(w.tid, "plan-1")
    assert (gone.value.data or {})["reason"] == "closed"
    s.open_run(w.tid, state={"plan": "p"})
    with pytest.raises(UnknownActivityError):
        s.get_activity(w.tid, "plan-1")
    assert s.stats()["activities"] == 0


def test_kill_9_loses_activities_then_diff_activity_resyncs(s: AguiState) -> None:
    w = Witness("py-act-crash", {"plan": "p"})
    step(s, w, s.open_run(w.tid, state=w.state), opening=True)
    step_activity(s, w, "plan-1", s.diff_activity(w.tid, "plan-1", {"steps": ["search"]}, activity_type="plan"))
    step_activity(s, w, "plan-1", s.apply_activity_ops(w.tid, "plan-1", [{"op": "add", "path": "/steps/-", "value": "rank"}]))
    os.kill(s.pid, signal.SIGKILL)
    with pytest.raises(SidecarExitedError):
        s.apply_activity_ops(w.tid, "plan-1", [{"op": "add", "path": "/status", "value": "done"}])
    s.restart()
    with pytest.raises(UnknownThreadError):
        s.get_activity(w.tid, "plan-1")
    step(s, w, s.open_run(w.tid, state=w.state), opening=True)  # the thread again, without its activities
    assert s.stats()["activities"] == 0
    with pytest.raises(UnknownActivityError) as e:
        s.apply_activity_ops(w.tid, "plan-1", [{"op": "add", "path": "/status", "value": "done"}])
    assert e.value.data == {"code": "UNKNOWN_ACTIVITY", "threadId": w.tid, "messageId": "plan-1"}
    # The server's own record of the activity, with the change: diff_activity recreates it with a
    # snapshot, which the client (still holding the old content) takes whole.
    content = {"steps": ["search", "rank"], "status": "done"}
    r = step_activity(s, w, "plan-1", s.diff_activity(w.tid, "plan-1", content, activity_type="plan"))
    assert r["delta"] == [] and r["events"] == [
        {"type": "ACTIVITY_SNAPSHOT", "messageId": "plan-1", "activityType": "plan", "content": content}]
    r = step_activity(s, w, "plan-1", s.apply_activity_ops(w.tid, "plan-1", [{"op": "remove", "path": "/steps/0"}]))
    assert r["delta"] == [{"op": "remove", "path": "/steps/0"}]
    assert s.stats()["activities"] == 1 and w.events >= 4


def test_the_readme_activities_example_prints_what_the_readme_says(tmp_path: Path) -> None:
    readme = (SOURCE / "README.md").read_text()

    def block(marker: str) -> str:
        m = re.search(rf"<!-- {marker} -->\n```\w+\n(.*?)```", readme, re.S)
        assert m, f"README.md has no block marked <!-- {marker} -->"
        return m.group(1)

    (tmp_path / "activities.py").write_text(block("example: activities"))
    env = {**child_env(), "AGUI_STATE_BIN": BIN, "PYTHONPATH": str(SOURCE)}
    r = subprocess.run([PY, "activities.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout == block("output: activities")


def test_the_top_readme_s_one_line_for_your_own_state_writes_runs(s: AguiState) -> None:
    """The repository README's "pick your path" table gives the sidecar clients' path as one line of this
    client: it runs as written, on a thread opened as the README's sidecar.py opens it, and sends the key
    escaped, as that example prints."""
    readme = (SOURCE.parents[1] / "README.md").read_text()
    row = re.search(r"^\| your own state writes \|.*`([^`]+)` \|$", readme, re.M)
    assert row, "README.md's path table has no row for your own state writes"
    s.open_run("thread-1", state={"selectedLayer": "era5"}, tool_state={})
    r = eval(row.group(1), {}, {"s": s})  # noqa: S307 - the README's own line, run as shown
    assert r["events"] == [{"type": "STATE_DELTA", "delta": [
        {"op": "add", "path": "/toolState/raster-ops~1dataset", "value": "era5"}]}]


def test_many_threads_share_one_client(s: AguiState) -> None:
    n = 16
    start = threading.Barrier(n)

    def one(i: int) -> "tuple[int, Any]":
        start.wait()
        tid = f"py-par-{i}"
        s.open_run(tid, state={"who": i}, tool_state={"k": i})
        s.diff_tool_state(tid, set={f"key/{i}": [i] * i})
        return i, s.get_state(tid)["state"]

    with ThreadPoolExecutor(n) as pool:
        results = list(pool.map(one, range(n)))
    assert all(st == {"who": i, "toolState": {"k": i, f"key/{i}": [i] * i}} for i, st in results)


def test_replies_out_of_order_reach_their_callers() -> None:
    n = 16
    with AguiState(PY, ["-c", REVERSE, str(n)], timeout=30) as f, ThreadPoolExecutor(n) as pool:
        got = list(pool.map(lambda i: f.call("echo", {"n": i}), range(n)))
    assert got == [{"n": i} for i in range(n)]


def test_timeout_drops_the_late_reply() -> None:
    with AguiState(PY, ["-c", HOLD], timeout=30) as f:
        with pytest.raises(futures.TimeoutError):
            f.call("echo", {"n": 1}, timeout=0.2)
        assert f.call("release") == {}, "the late reply to the timed-out call went nowhere"
        assert f.call("sync", {"n": 2}) == {"n": 2}


def test_kill_9_then_restart_and_resync(s: AguiState) -> None:
    w, stored = open_namespace_thread(s, "py-crash")
    os.kill(s.pid, signal.SIGKILL)
    with pytest.raises(SidecarExitedError) as e:
        s.diff_tool_state(w.tid, set={"k": 1})
    assert "status -9" in str(e.value) and "SIGKILL" in str(e.value) and e.value.returncode == -9
    with pytest.raises(SidecarExitedError):
        s.get_state(w.tid)
    old = s.pid
    s.restart()
    assert s.pid != old
    with pytest.raises(UnknownThreadError):
        s.get_state(w.tid)
    r = step(s, w, s.open_run(w.tid, run_id="run-2", state=w.state, tool_state=stored), opening=True)
    assert r["delta"] == [{"op": "add", "path": "/toolState", "value": stored}], "the resync sends the stored map"
    step(s, w, s.diff_tool_state(w.tid, set={"raster-ops/bounds": [1, 1, 5, 5], "after/crash": True}))
    step(s, w, s.diff_tool_state(w.tid, remove=["plain"], set={"raster-ops/dataset": "gfs"}))
    assert w.events >= 5


def test_a_waiting_call_fails_when_the_sidecar_dies() -> None:
    with AguiState(DIE_AFTER_ONE[0], DIE_AFTER_ONE[1], timeout=30) as f:
        with pytest.raises(SidecarExitedError) as e:
            f.call("stats")
        assert e.value.returncode == -9 and "status -9 (signal SIGKILL)" in str(e.value)


def test_exit_status_logs_and_close() -> None:
    env = child_env()
    with AguiState(BIN, ["--max-ops", "many"], env=env, capture_logs=True) as bad:
        with pytest.raises(SidecarExitedError) as e:
            bad.stats()
        assert e.value.returncode == 2 and "status 2" in str(e.value)
    assert any("max-ops" in line for line in bad.logs())
    s = AguiState(BIN, env={**env, "AGUI_STATE_LOG_LEVEL": "debug"}, capture_logs=True)
    assert s.stats()["threads"] == 0
    s.close()
    assert any('"method":"stats"' in line for line in s.logs()), "capture_logs drains stderr into logs()"
    with pytest.raises(SidecarExitedError) as e:
        s.stats()
    assert "status 0 after close()" in str(e.value)


def test_logs_hold_every_line_written_before_the_exit_once_close_returns() -> None:
    # A stand-in that, at the end of its input, writes 20,000 lines to stderr and exits: up to a pipe's
    # worth of them is still unread when it has exited, and close() returns only once the drain has them.
    # (Without that wait the last line was missing in about a third of the runs: 20 runs, not one.)
    loud_at_exit = ("/bin/sh", ["-c", "cat > /dev/null; seq 1 20000 >&2; echo last >&2"])
    for run in range(20):
        s = AguiState(*loud_at_exit, capture_logs=True, log_lines=3)
        s.close()
        assert s.logs() == ["19999", "20000", "last"], f"run {run}"


def test_the_binary_is_looked_up_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The argument, then $AGUI_STATE_BIN, then the bundled binary, then `agui-state` on PATH."""
    on_path, bundled = tmp_path / "path" / "agui-state", tmp_path / "bundled" / "agui-state"
    for f in (on_path, bundled):
        f.parent.mkdir()
        f.symlink_to(BIN)
    monkeypatch.setenv("PATH", str(on_path.parent))
    monkeypatch.setattr(agui_state._common, "BUNDLED", bundled)
    monkeypatch.setenv("AGUI_STATE_BIN", "/from/env")
    assert find_binary("/from/arg") == "/from/arg"
    assert find_binary() == "/from/env"
    monkeypatch.delenv("AGUI_STATE_BIN")
    assert find_binary() == str(bundled)
    bundled.unlink()
    assert find_binary() == str(on_path)
    with AguiState(env=child_env()) as found_on_path:
        assert found_on_path.stats()["threads"] == 0
    on_path.unlink()
    with pytest.raises(FileNotFoundError, match=r"\$AGUI_STATE_BIN \(not set\).*on PATH \(none\)"):
        AguiState()
    # A bundled binary that lost its executable bit (an installer that drops modes) gets it back.
    bundled.write_bytes(b"#!/bin/sh\n")
    bundled.chmod(0o644)
    assert find_binary() == str(bundled) and bundled.stat().st_mode & stat.S_IXUSR


def test_captured_logs_never_stall_the_sidecar() -> None:
    # A thread drains stderr into a bounded buffer: a chatty sidecar (debug logs for 2,000 calls) keeps
    # answering, and only the last log_lines lines are kept.
    env = {**child_env(), "AGUI_STATE_LOG_LEVEL": "debug"}
    with AguiState(BIN, env=env, capture_logs=True, log_lines=10) as s:
        s.open_run("chatty", state={})
        for i in range(2000):
            s.diff_state("chatty", i, path="/i")
        assert s.get_state("chatty", "/i")["state"] == 1999 and len(s.logs()) == 10
