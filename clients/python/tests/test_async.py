"""AsyncAguiState, the asyncio client, against the real sidecar, every event replayed by python3-jsonpatch.
Each test runs on a fresh event loop (pytest-asyncio, asyncio_mode = auto)."""
from __future__ import annotations

import asyncio
import os
import random
import signal
from typing import Any, AsyncIterator, Dict, List

import pytest
from helpers import BIN, DIE_AFTER_ONE, HOLD, PY, REVERSE, Witness, child_env, same

from agui_state import (
    AguiStateError, AsyncAguiState, InvalidParamsError, PatchFailedError, SidecarExitedError, UnknownActivityError,
    UnknownThreadError, VersionConflictError,
)


@pytest.fixture
async def s() -> AsyncIterator[AsyncAguiState]:
    async with AsyncAguiState(BIN, env=child_env(), timeout=30) as sidecar:
        yield sidecar


async def step(s: AsyncAguiState, w: Witness, result: Dict[str, Any], opening: bool = False) -> Dict[str, Any]:
    """Replays one call's events on the witness, then checks it against getState."""
    w.feed(result, opening)
    w.check(await s.get_state(w.tid))
    return result


async def open_namespace_thread(s: AsyncAguiState, tid: str) -> "tuple[Witness, Dict[str, Any]]":
    own = {"selectedLayer": "era5", "ui": {"panel": "open"}}
    w = Witness(tid, own)
    r = await step(s, w, await s.open_run(tid, run_id="run-1", state=own, tool_state={}), opening=True)
    assert r["events"] == [{"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/toolState", "value": {}}]}]
    stored = {"raster-ops/dataset": "era5", "a~b": [1, 2], "plain": {"x": None}}
    r = await step(s, w, await s.diff_tool_state(tid, set=stored))
    assert [op["path"] for op in r["delta"]] == ["/toolState/a~0b", "/toolState/plain", "/toolState/raster-ops~1dataset"]
    return w, stored


async def test_namespace_scenario_two_runs(s: AsyncAguiState) -> None:
    w, stored = await open_namespace_thread(s, "as-ns")
    r = await step(s, w, await s.diff_tool_state(w.tid, set={"raster-ops/dataset": "era5", "a~b": [1, 2.0]}))
    assert r["delta"] == [] and r["events"] == []
    r = await step(s, w, await s.diff_tool_state(w.tid, remove=["a~b", "never-there"]))
    assert r["delta"] == [{"op": "remove", "path": "/toolState/a~0b"}]
    new_map = {"raster-ops/dataset": "gfs", "raster-ops/bounds": [0, 0, 10, 10], "Z": 0}
    r = await step(s, w, await s.diff_tool_state(w.tid, tool_state=new_map))
    assert [op["op"] for op in r["delta"]] == ["add", "remove", "add", "add"]
    r = await step(s, w, await s.apply_ops(w.tid, [{"op": "add", "path": "/todos/-", "value": "milk"}]))
    assert r["delta"][0] == {"op": "add", "path": "/todos", "value": []}
    r = await step(s, w, await s.diff_state(w.tid, ["tea", "milk"], path="/todos"))
    assert r["delta"] == [{"op": "add", "path": "/todos/0", "value": "tea"}]
    r = await step(s, w, await s.open_run(w.tid, run_id="run-2", state=w.state, tool_state=new_map), opening=True)
    assert len(r["delta"]) == 1 and r["delta"][0]["path"] == "/toolState" and same(r["delta"][0]["value"], new_map)
    assert (await s.normalize([{"op": "add", "path": "/a/-", "value": 1}]))["state"] == {"a": [1]}
    assert (await s.close_thread(w.tid)) == {"closed": True}


async def test_typed_errors(s: AsyncAguiState) -> None:
    await s.open_run("as-err", state={"todos": []})
    with pytest.raises(PatchFailedError) as e:
        await s.apply_ops("as-err", [{"op": "remove", "path": "/nope"}], atomic=True)
    assert (e.value.data or {})["code"] == "PATH_NOT_FOUND"
    with pytest.raises(VersionConflictError):
        await s.diff_state("as-err", 1, path="/x", if_version=99)
    with pytest.raises(UnknownThreadError):
        await s.get_state("as-never")
    with pytest.raises(InvalidParamsError):
        await s.call("openRun", {"threadId": "as-err", "toolstate": {}})
    with pytest.raises(AguiStateError) as e:
        await s.call("noSuchMethod")
    assert e.value.code == -32601
    with pytest.raises(ValueError):
        await s.diff_state("as-err", float("inf"), path="/x")
    assert (await s.get_state("as-err"))["state"] == {"todos": []}, "nothing above changed the state"


async def test_null_is_sent_and_held(s: AsyncAguiState) -> None:
    async with AsyncAguiState(PY, ["-c", REVERSE, "1"], timeout=30) as echo:
        assert await echo.diff_state("t", None, path="/x") == {"threadId": "t", "value": None, "path": "/x"}
    w = Witness("as-null", {"status": "busy"})
    await step(s, w, await s.open_run(w.tid, state=w.state, tool_state={}), opening=True)
    r = await step(s, w, await s.diff_state(w.tid, None, path="/status"))
    assert r["delta"] == [{"op": "replace", "path": "/status", "value": None}]
    await step(s, w, await s.diff_tool_state(w.tid, set={"k": None}))
    assert (await s.get_state(w.tid, "/status"))["state"] is None
    assert (await s.get_state(w.tid))["state"] == {"status": None, "toolState": {"k": None}}


async def step_activity(s: AsyncAguiState, w: Witness, message_id: str, result: Dict[str, Any]) -> Dict[str, Any]:
    """Replays one activity call's events on the witness, then checks every activity it holds against
    getActivity, and the thread's state against getState (activities never touch it)."""
    w.feed_activity(result, message_id)
    for mid in w.activities:
        got = await s.get_activity(w.tid, mid)
        assert got["version"] == result["version"], "activities share the thread's version"
        w.check_activity(mid, got)
    w.check(await s.get_state(w.tid))
    return result


async def test_activities_replay_onto_get_activity(s: AsyncAguiState) -> None:
    w = Witness("as-act", {"plan": "p"})
    v = (await step(s, w, await s.open_run(w.tid, state=w.state), opening=True))["version"]
    plan = {"steps": [{"title": "search", "done": False}], "note": None}
    r = await step_activity(s, w, "plan-1", await s.diff_activity(w.tid, "plan-1", plan, activity_type="plan"))
    assert r == {"version": v + 1, "delta": [], "events": [
        {"type": "ACTIVITY_SNAPSHOT", "messageId": "plan-1", "activityType": "plan", "content": plan}]}
    r = await step_activity(s, w, "plan-1", await s.diff_activity(w.tid, "plan-1", {"steps": [], "note": None}))
    assert r["delta"] == [{"op": "remove", "path": "/steps/0"}] and r["events"][0]["activityType"] == "plan"

    ops: List[Dict[str, Any]] = [
        {"op": "replace", "path": "/status", "value": "running"}, {"op": "add", "path": "/notes/-", "value": "started"},
        {"op": "replace", "path": "", "value": []}, {"op": "add", "path": "/steps/-", "value": None}]
    r = await step_activity(s, w, "plan-1", await s.apply_activity_ops(w.tid, "plan-1", ops, activity_type="plan-running"))
    assert r["delta"] == [{"op": "add", "path": "/status", "value": "running"}, {"op": "add", "path": "/notes", "value": []},
                          {"op": "add", "path": "/notes/-", "value": "started"}, {"op": "add", "path": "/steps/-", "value": None}]
    assert [(k["index"], k["code"]) for k in r["skipped"]] == [(2, "ROOT_NOT_OBJECT")]
    assert r["events"][0]["activityType"] == "plan-running"
    r = await step_activity(s, w, "plan-1", await s.apply_activity_ops(w.tid, "plan-1", [], activity_type="plan-done"))
    assert r["events"] == [{"type": "ACTIVITY_DELTA", "messageId": "plan-1", "activityType": "plan-done", "patch": []}]

    held = await s.get_activity(w.tid, "plan-1")
    r = await step_activity(s, w, "plan-1", await s.activity_snapshot(w.tid, "plan-1", "other", {}, replace=False))
    assert r == {"version": held["version"], "events": [{"type": "ACTIVITY_SNAPSHOT", "messageId": "plan-1",
                 "activityType": held["activityType"], "content": held["content"], "replace": False}]}
    r = await step_activity(s, w, "search-1", await s.activity_snapshot(w.tid, "search-1", "search", {"q": None}, replace=False))
    # Created here: no replace member, so it replaces any copy a client kept (protocol §10).
    assert "replace" not in r["events"][0] and r["version"] == held["version"] + 1
    r = await step_activity(s, w, "search-1", await s.activity_snapshot(w.tid, "search-1", "search", {"q": "era5"}))
    assert "replace" not in r["events"][0]
    assert (await s.stats())["activities"] == 2

    v = r["version"]
    with pytest.raises(UnknownActivityError) as e:
        await s.get_activity(w.tid, "never")
    assert e.value.code == -32005 and e.value.data == {"code": "UNKNOWN_ACTIVITY", "threadId": w.tid, "messageId": "never"}
    with pytest.raises(UnknownActivityError):
        await s.apply_activity_ops(w.tid, "never", [])
    with pytest.raises(InvalidParamsError, match="activityType"):
        await s.diff_activity(w.tid, "never", {})
    with pytest.raises(PatchFailedError):
        await s.apply_activity_ops(w.tid, "plan-1", [{"op": "remove", "path": "/gone"}], activity_type="x", atomic=True)
    with pytest.raises(VersionConflictError):
        await s.activity_snapshot(w.tid, "plan-1", "plan", {}, if_version=v + 1)
    await step_activity(s, w, "plan-1", await s.diff_activity(w.tid, "plan-1", w.activities["plan-1"]["content"], if_version=v))
    assert (await s.get_state(w.tid))["version"] == v, "nothing above changed anything"

    # Many activity calls in flight at once, on as many threads.
    async def one(i: int) -> Any:
        tid = f"as-act-{i}"
        await s.open_run(tid, state={})
        await s.diff_activity(tid, "m", {"i": i}, activity_type="t")
        await s.apply_activity_ops(tid, "m", [{"op": "add", "path": "/log/-", "value": i}])
        return await s.get_activity(tid, "m")

    got = await asyncio.gather(*(one(i) for i in range(50)))
    assert all(g["content"] == {"i": i, "log": [i]} for i, g in enumerate(got))
    assert (await s.stats())["activities"] == 52
    assert await s.close_thread(w.tid) == {"closed": True}
    assert (await s.stats())["activities"] == 50, "close_thread drops the thread's activities"
    await s.open_run(w.tid, state={})
    with pytest.raises(UnknownActivityError):
        await s.get_activity(w.tid, "plan-1")


async def test_kill_9_loses_activities_then_diff_activity_resyncs(s: AsyncAguiState) -> None:
    w = Witness("as-act-crash", {"plan": "p"})
    await step(s, w, await s.open_run(w.tid, state=w.state), opening=True)
    await step_activity(s, w, "plan-1", await s.diff_activity(w.tid, "plan-1", {"steps": ["search"]}, activity_type="plan"))
    await step_activity(s, w, "plan-1", await s.apply_activity_ops(w.tid, "plan-1", [{"op": "add", "path": "/steps/-", "value": "rank"}]))
    os.kill(s.pid, signal.SIGKILL)
    with pytest.raises(SidecarExitedError):
        await s.get_activity(w.tid, "plan-1")
    await s.restart()
    await step(s, w, await s.open_run(w.tid, state=w.state), opening=True)
    with pytest.raises(UnknownActivityError) as e:
        await s.apply_activity_ops(w.tid, "plan-1", [{"op": "add", "path": "/status", "value": "done"}])
    assert e.value.data == {"code": "UNKNOWN_ACTIVITY", "threadId": w.tid, "messageId": "plan-1"}
    content = {"steps": ["search", "rank"], "status": "done"}
    r = await step_activity(s, w, "plan-1", await s.diff_activity(w.tid, "plan-1", content, activity_type="plan"))
    assert r["delta"] == [] and [ev["type"] for ev in r["events"]] == ["ACTIVITY_SNAPSHOT"]
    r = await step_activity(s, w, "plan-1", await s.apply_activity_ops(w.tid, "plan-1", [{"op": "move", "from": "/steps/1", "path": "/steps/0"}]))
    assert w.activities["plan-1"]["content"]["steps"] == ["rank", "search"] and (await s.stats())["activities"] == 1


async def test_many_calls_in_flight_at_once(s: AsyncAguiState) -> None:
    assert asyncio.iscoroutine(coro := s.stats()), "each method gives a coroutine"
    await coro

    async def thread(i: int) -> Any:
        tid = f"as-par-{i}"
        await s.open_run(tid, state={"who": i}, tool_state={"k": i})
        await s.diff_tool_state(tid, set={f"key/{i}": [i] * (i % 7), "big": "x" * (i * 1000)})
        return (await s.get_state(tid))["state"]

    states = await asyncio.gather(*(thread(i) for i in range(200)))
    assert all(st == {"who": i, "toolState": {"k": i, f"key/{i}": [i] * (i % 7), "big": "x" * (i * 1000)}}
               for i, st in enumerate(states))
    async with AsyncAguiState(PY, ["-c", REVERSE, "50"], timeout=30) as f:
        got = await asyncio.gather(*(f.call("echo", {"n": i}) for i in range(50)))
    assert got == [{"n": i} for i in range(50)], "replies in reverse order reach their own callers"


async def test_a_waiting_call_leaves_the_loop_free() -> None:
    # The stand-in holds the first reply until a second task sends "release": if awaiting the first
    # blocked the loop, the second could never run and this would time out.
    async with AsyncAguiState(PY, ["-c", HOLD], timeout=30) as f:
        first = asyncio.ensure_future(f.call("echo", {"n": 1}))
        assert await asyncio.wait_for(f.call("release"), 10) == {}
        assert await first == {"n": 1}


async def test_cancelling_one_call_spares_the_others() -> None:
    async with AsyncAguiState(PY, ["-c", HOLD], timeout=30) as f:
        calls = [asyncio.ensure_future(f.call("echo", {"n": i})) for i in range(3)]
        await f.call("sync")  # all three requests are now with the stand-in, their replies held
        calls[1].cancel()
        assert await f.call("release") == {}, "the late reply to the cancelled call went nowhere"
        assert [await calls[0], await calls[2]] == [{"n": 0}, {"n": 2}]
        with pytest.raises(asyncio.CancelledError):
            await calls[1]
        assert await f.call("sync", {"n": 3}) == {"n": 3}, "the stream is intact"
        assert f._live().pending == {}, "no call is left waiting"


async def test_cancelling_calls_at_random_points(s: AsyncAguiState) -> None:
    w, _ = await open_namespace_thread(s, "as-cancel")
    rng = random.Random(7)
    tasks = [asyncio.ensure_future(s.get_state(w.tid)) for _ in range(300)]
    for i, t in enumerate(tasks):
        if i % 3 == 0:
            for _ in range(rng.randrange(4)):
                await asyncio.sleep(0)  # before it is sent, while it is written, or while it awaits its reply
            t.cancel()
    done = await asyncio.gather(*tasks, return_exceptions=True)
    assert all(isinstance(r, asyncio.CancelledError) or same(r["state"], w.state) for r in done)
    assert sum(not isinstance(r, BaseException) for r in done) >= 200
    await step(s, w, await s.diff_tool_state(w.tid, set={"after": "cancels"}))
    assert s._live().pending == {}


async def test_timeout_drops_the_late_reply() -> None:
    async with AsyncAguiState(PY, ["-c", HOLD]) as f:
        with pytest.raises(asyncio.TimeoutError):
            await f.call("echo", {"n": 1}, timeout=0.2)
        assert await f.call("release") == {}
        assert await f.call("sync", {"n": 2}) == {"n": 2}


async def test_kill_9_fails_pending_and_later_calls_then_restart_and_resync(s: AsyncAguiState) -> None:
    w, stored = await open_namespace_thread(s, "as-crash")
    async with AsyncAguiState(*DIE_AFTER_ONE, timeout=30) as f:  # five calls waiting when it dies
        waiting = await asyncio.gather(*(f.call("stats") for _ in range(5)), return_exceptions=True)
        assert all(isinstance(e, SidecarExitedError) and e.returncode == -9 for e in waiting), waiting
        with pytest.raises(SidecarExitedError, match=r"status -9 \(signal SIGKILL\)"):
            await f.stats()
    os.kill(s.pid, signal.SIGKILL)
    with pytest.raises(SidecarExitedError) as e:
        await s.diff_tool_state(w.tid, set={"k": 1})
    assert "status -9" in str(e.value) and "SIGKILL" in str(e.value) and e.value.returncode == -9
    with pytest.raises(SidecarExitedError):
        await s.get_state(w.tid)
    old = s.pid
    await s.restart()
    assert s.pid != old
    with pytest.raises(UnknownThreadError):
        await s.get_state(w.tid)
    r = await step(s, w, await s.open_run(w.tid, state=w.state, tool_state=stored), opening=True)
    assert r["delta"] == [{"op": "add", "path": "/toolState", "value": stored}]
    await step(s, w, await s.diff_tool_state(w.tid, set={"after/crash": True}, remove=["plain"]))


async def test_async_with_answers_what_was_sent_then_closes() -> None:
    async with AsyncAguiState(BIN, env=child_env()) as s:
        v = (await s.open_run("as-close", state={}))["version"]
        late = [asyncio.ensure_future(s.diff_state("as-close", i, path="/i")) for i in range(50)]
        await asyncio.sleep(0)  # each has written its request; none has its reply yet
        proc = s._live().proc
    assert proc.returncode == 0, "the sidecar exited by itself once stdin closed"
    assert [(await t)["version"] for t in late] == list(range(v + 1, v + 51)), "everything sent before close was answered"
    with pytest.raises(SidecarExitedError, match="status 0 after close"):
        await s.stats()


async def test_exit_status_logs_and_lookup(monkeypatch: pytest.MonkeyPatch) -> None:
    async with AsyncAguiState(BIN, ["--max-ops", "many"], env=child_env(), capture_logs=True) as bad:
        with pytest.raises(SidecarExitedError) as e:
            await bad.stats()
        assert e.value.returncode == 2 and "status 2" in str(e.value)
    assert any("max-ops" in line for line in bad.logs())
    monkeypatch.setenv("AGUI_STATE_BIN", BIN)
    env = {**child_env(), "AGUI_STATE_LOG_LEVEL": "debug"}
    async with AsyncAguiState(env=env, capture_logs=True, log_lines=5) as by_env:
        assert by_env.argv[0] == BIN
        for i in range(500):
            await by_env.stats()
    assert len(by_env.logs()) == 5 and all(line.startswith("{") for line in by_env.logs())


async def test_a_call_before_start_says_how_to_start() -> None:
    s = AsyncAguiState(BIN)
    with pytest.raises(RuntimeError, match="async with AsyncAguiState"):
        await s.stats()
    await s.start()
    with pytest.raises(RuntimeError, match="already started"):
        await s.start()
    assert (await s.stats())["threads"] == 0
    await s.close()


async def test_a_large_request_body_is_encoded_off_the_event_loop(s: AsyncAguiState,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # openStream's request form carries the request body whole (protocol/README.md §14): past 1 MiB its
    # frame is encoded in a worker thread, so that the loop serving every other request is not held meanwhile
    # (as UTF-8, the frame's attachment, in slices between which the loop's thread can take the GIL).
    import threading
    from agui_state import _calls

    encoded_on: List[str] = []
    real = _calls.frame

    def spy(*args: Any) -> bytes:
        encoded_on.append(threading.current_thread().name)
        return real(*args)

    monkeypatch.setattr(_calls, "frame", spy)
    head = {"status": 200, "headers": [["Content-Type", "text/event-stream"]]}
    for size in (1000, 2 << 20):
        body = '{"state":{"pad":"' + "x" * size + '"}}'
        opened = await s.open_stream(request={"method": "POST", "path": "/agent", "headers": [], "body": body},
                                     response=head, resume=False)
        assert "baseline" not in opened, "the body was the baseline"
        await s.close_stream(opened["streamId"])
    loop_thread = threading.current_thread().name
    assert encoded_on[0] == loop_thread and encoded_on[2] != loop_thread, encoded_on
