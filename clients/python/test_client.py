"""The Python client against the real sidecar, witnessed by Debian's python3-jsonpatch.

    /usr/bin/python3 clients/python/test_client.py dist/agui-state

The witness keeps its own copy of the client's state and applies every event the
sidecar returns (STATE_SNAPSHOT replaces, STATE_DELTA goes through
jsonpatch.apply_patch); after every call its copy must equal getState.
Exits non-zero on the first failed check.
"""
import copy
import json
import os
import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import jsonpatch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agui_state import (  # noqa: E402
    AguiState, AguiStateError, InvalidParamsError, PatchFailedError, SidecarExitedError,
    UnknownThreadError, VersionConflictError,
)

BIN = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else None
checks = 0


def check(cond, what):
    global checks
    if not cond:
        raise AssertionError(what)
    checks += 1


def same(a, b):
    """JSON equality, strictly typed: true is not 1, but 1 equals 1.0."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def raises(cls, fn, what):
    try:
        fn()
    except cls as e:
        check(True, what)
        return e
    raise AssertionError(f"{what}: no {cls.__name__}")


class Witness:
    """The client's copy of one thread's state, fed nothing but the events agui-state returned."""

    def __init__(self, s, thread_id, state):
        self.s, self.tid, self.state, self.events = s, thread_id, copy.deepcopy(state), 0

    def feed(self, result, what, opening=False):
        events, delta = result["events"], result["delta"]
        if not opening:  # elsewhere: events are [STATE_DELTA(delta)], or [] when nothing moved
            check(events == ([{"type": "STATE_DELTA", "delta": delta}] if delta else []), f"{what}: events match delta")
        for ev in events:
            if ev["type"] == "STATE_SNAPSHOT":
                self.state = copy.deepcopy(ev["snapshot"])
            else:
                check(ev["type"] == "STATE_DELTA" and all(op["op"] != "test" for op in ev["delta"]), f"{what}: event")
                self.state = jsonpatch.apply_patch(self.state, ev["delta"])  # raises if an op does not fit
            self.events += 1
        self.verify(what)
        return result

    def verify(self, what):
        got = self.s.get_state(self.tid)["state"]
        check(same(self.state, got), f"{what}: replay equals getState\n  replay:   {json.dumps(self.state)}\n"
                                     f"  getState: {json.dumps(got)}")


def namespace_scenario(s):
    tid = "py-ns"
    own = {"selectedLayer": "era5", "ui": {"panel": "open"}}
    stored = {}  # the agent server's own store of the tool map
    w = Witness(s, tid, own)

    # Run 1: the client's state and an empty map.
    r = w.feed(s.open_run(tid, run_id="run-1", state=own, tool_state={}), "run 1 open", opening=True)
    check(r["runId"] == "run-1" and r["threadId"] == tid, "runId and threadId are echoed")
    check(r["events"] == [{"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/toolState", "value": {}}]}],
          "run 1 opens with add /toolState {}")

    stored.update({"raster-ops/dataset": "era5", "a~b": [1, 2], "plain": {"x": None}})
    r = w.feed(s.diff_tool_state(tid, set=stored), "set with / and ~")
    check([op["path"] for op in r["delta"]] == ["/toolState/a~0b", "/toolState/plain", "/toolState/raster-ops~1dataset"],
          "keys escaped (~0, ~1) and sorted")
    check(all(op["op"] == "add" for op in r["delta"]), "every set is an add")
    v = r["version"]

    r = w.feed(s.diff_tool_state(tid, set={"raster-ops/dataset": "era5", "a~b": [1, 2.0]}), "equal rewrite")
    check(r["delta"] == [] and r["events"] == [] and r["version"] == v, "an equal rewrite sends nothing")

    del stored["a~b"]
    r = w.feed(s.diff_tool_state(tid, remove=["a~b", "never-there"]), "remove")
    check(r["delta"] == [{"op": "remove", "path": "/toolState/a~0b"}], "remove= gives one remove, absent keys nothing")

    new_map = {"raster-ops/dataset": "gfs", "raster-ops/bounds": [0, 0, 10, 10], "Z": 0}
    r = w.feed(s.diff_tool_state(tid, tool_state=new_map), "full map")
    check([(op["op"], op["path"]) for op in r["delta"]] == [
        ("add", "/toolState/Z"), ("remove", "/toolState/plain"),
        ("add", "/toolState/raster-ops~1bounds"), ("add", "/toolState/raster-ops~1dataset")],
        "the full-map form: adds and removes interleaved in UTF-16 order")
    stored = dict(new_map)
    check(w.state["selectedLayer"] == "era5" and w.state["ui"] == {"panel": "open"}, "run 1 left the client's keys alone")

    # Run 2: the client sends what it holds; the server sends its stored map.
    r = w.feed(s.open_run(tid, run_id="run-2", state=w.state, tool_state=stored), "run 2 open", opening=True)
    check(len(r["events"]) == 1 and r["delta"] == r["events"][0]["delta"], "run 2 opens with one STATE_DELTA")
    op = r["delta"][0] if len(r["delta"]) == 1 else {}
    check(op.get("op") == "add" and op.get("path") == "/toolState" and same(op.get("value"), stored),
          "run 2's one op is add /toolState naming every key")
    check({k: w.state[k] for k in own} == own, "the client's own keys are untouched")
    return w, stored


def model_ops(s, w):
    tid = w.tid
    ops = [{"op": "add", "path": "/todos/-", "value": "milk"},
           {"op": "replace", "path": "/status", "value": "busy"},
           {"op": "remove", "path": "/gone"},
           {"op": "add", "path": ["labels"], "value": {}},
           {"op": "add", "path": ["labels", "x/y~z"], "value": 1},
           {"op": "test", "path": "/status", "value": "busy"}]
    r = w.feed(s.apply_ops(tid, ops), "model ops")
    check(r["delta"][:3] == [{"op": "add", "path": "/todos", "value": []},
                             {"op": "add", "path": "/todos/-", "value": "milk"},
                             {"op": "add", "path": "/status", "value": "busy"}],
          "add /todos [] goes before the append; a replace of a missing key becomes add")
    check(r["delta"][3:] == [{"op": "add", "path": "/labels", "value": {}},
                             {"op": "add", "path": "/labels/x~1y~0z", "value": 1}], "array paths are escaped")
    check([(k["index"], k["code"]) for k in r["skipped"]] == [(2, "PATH_NOT_FOUND")], "the remove of a missing key is skipped")

    before = s.get_state(tid)
    e = raises(PatchFailedError, lambda: s.apply_ops(tid, [{"op": "add", "path": "/todos/-", "value": "eggs"},
                                                            {"op": "remove", "path": "/nope"}], atomic=True),
               "atomic failure raises PatchFailedError")
    check(e.code == -32002 and e.data["code"] == "PATH_NOT_FOUND" and e.data["index"] == 1, "PATCH_FAILED data")
    check(s.get_state(tid) == before, "an atomic failure changes nothing")
    w.verify("after the atomic failure")

    v = before["version"]
    e = raises(VersionConflictError, lambda: s.diff_tool_state(tid, set={"k": 1}, if_version=v - 1),
               "a stale if_version raises VersionConflictError")
    check(e.data == {"code": "VERSION_CONFLICT", "expected": v - 1, "actual": v}, "VERSION_CONFLICT data")
    w.feed(s.apply_ops(tid, [{"op": "add", "path": "/todos/0", "value": "tea"}], if_version=v), "a matching if_version")

    e = raises(UnknownThreadError, lambda: s.get_state("py-never"), "an unknown thread raises UnknownThreadError")
    check(e.code == -32001 and e.data["reason"] == "never opened", "data.reason is 'never opened'")
    s.open_run("py-short", state={})
    check(s.close_thread("py-short") == {"closed": True}, "close_thread")
    e = raises(UnknownThreadError, lambda: s.apply_ops("py-short", []), "a closed thread raises UnknownThreadError")
    check(e.data["reason"] == "closed", "data.reason is 'closed'")
    e = raises(InvalidParamsError, lambda: s.get_state(tid, "/nope"), "a missing path raises InvalidParamsError")
    check(e.data["field"] == "/path" and e.data["reason"] == "PATH_NOT_FOUND", "INVALID_PARAMS data")
    e = raises(InvalidParamsError, lambda: s.call("openRun", {"threadId": tid, "toolstate": {}}), "a misspelt param")
    check(e.data["reason"] == "UNKNOWN_PARAM" and e.data["field"] == "/toolstate", "UNKNOWN_PARAM names the field")
    e = raises(AguiStateError, lambda: s.call("noSuchMethod"), "an unknown method raises AguiStateError")
    check(e.code == -32601 and type(e) is AguiStateError, "-32601 is the base class")

    state = {"items": [1]}
    r = s.normalize([{"op": "add", "path": "/todos/-", "value": 1}, {"op": "replace", "path": "/items/5", "value": 0}], state)
    check(same(jsonpatch.apply_patch(state, r["delta"]), r["state"]) and state == {"items": [1]},
          "normalize is pure and its delta lands on its state")
    check([k["code"] for k in r["skipped"]] == ["INDEX_OUT_OF_BOUNDS"], "normalize reports the skip")


def diff_state(s, w):
    big = list(range(1000))
    w.feed(s.diff_state(w.tid, big, path="/big"), "diff_state creates /big")
    r = w.feed(s.diff_state(w.tid, [-1] + big, path="/big"), "prepend to 1000")
    check(r["delta"] == [{"op": "add", "path": "/big/0", "value": -1}], "a prepend to 1000 elements is exactly one op")
    r = w.feed(s.diff_state(w.tid, None, path="/status"), "diff_state to null")
    check(r["delta"] == [{"op": "replace", "path": "/status", "value": None}], "value=None is sent as JSON null")


def edges(s):
    w = Witness(s, "py-edges", {"ui": {}})
    w.feed(s.open_run(w.tid, state=w.state, namespace="tools"), "edges open", opening=True)
    r = w.feed(s.diff_tool_state(w.tid, set={"\uffff": 1, "\U0001F600/x": 2, "": 3, "lone": "\ud800"}), "unicode keys")
    check([op["path"] for op in r["delta"]] == ["/tools/", "/tools/lone", "/tools/\U0001F600~1x", "/tools/\uffff"],
          "keys sorted by UTF-16 code units (an astral key before U+FFFF), the empty key included")
    r = w.feed(s.diff_state(w.tid, "x" * (4 << 20), path="/blob"), "a 4 MiB value")
    check(len(r["delta"][0]["value"]) == 4 << 20, "a 4 MiB value goes both ways through the pipes")
    r = w.feed(s.open_run(w.tid, snapshot=True), "snapshot", opening=True)
    check([e["type"] for e in r["events"]] == ["STATE_SNAPSHOT", "STATE_DELTA"], "snapshot=True: the snapshot, then the add")
    check(r["delta"] == [{"op": "add", "path": "/tools", "value": w.state["tools"]}], "the remembered namespace is used")


def concurrency(s):
    n = 16
    start = threading.Barrier(n)

    def one(i):
        start.wait()
        tid = f"py-par-{i}"
        s.open_run(tid, state={"who": i}, tool_state={"k": i})
        s.diff_tool_state(tid, set={f"key/{i}": [i] * i})
        return i, s.get_state(tid)["state"]

    with ThreadPoolExecutor(n) as pool:
        results = list(pool.map(one, range(n)))
    check(all(st == {"who": i, "toolState": {"k": i, f"key/{i}": [i] * i}} for i, st in results),
          f"{n} threads at once each got their own results")

    # A stand-in sidecar that answers only once it holds every request, in reverse order.
    fake = ("import sys, json\n"
            f"reqs = [json.loads(sys.stdin.readline()) for _ in range({n})]\n"
            "for r in reversed(reqs):\n"
            "    print(json.dumps({'jsonrpc': '2.0', 'id': r['id'], 'result': r['params']}), flush=True)\n"
            "sys.stdin.read()\n")
    with AguiState(sys.executable, ["-c", fake], timeout=30) as f:
        with ThreadPoolExecutor(n) as pool:
            got = list(pool.map(lambda i: f.call("echo", {"n": i}), range(n)))
    check(got == [{"n": i} for i in range(n)], "replies in reverse order reach their own callers")


def crash_recovery(s, w, stored):
    tid = w.tid
    os.kill(s.pid, signal.SIGKILL)
    e = raises(SidecarExitedError, lambda: s.diff_tool_state(tid, set={"k": 1}), "a call after SIGKILL raises")
    check("status -9" in str(e) and "SIGKILL" in str(e) and e.returncode == -9, f"the error names the status: {e}")
    e = raises(SidecarExitedError, lambda: s.get_state(tid), "later calls raise too")
    check(isinstance(e, AguiStateError), "SidecarExitedError is an AguiStateError")

    old = s.pid
    s.restart()
    check(s.pid != old, "restart() starts a fresh process")
    raises(UnknownThreadError, lambda: s.get_state(tid), "the fresh process knows no threads")
    r = w.feed(s.open_run(tid, run_id="run-3", state=w.state, tool_state=stored), "resync", opening=True)
    check(r["delta"] == [{"op": "add", "path": "/toolState", "value": stored}], "the resync sends the stored map")
    stored["raster-ops/bounds"] = [1, 1, 5, 5]
    w.feed(s.diff_tool_state(tid, set={"raster-ops/bounds": [1, 1, 5, 5], "after/crash": True}), "after the crash 1")
    w.feed(s.diff_tool_state(tid, remove=["Z"], set={"raster-ops/dataset": "era5"}), "after the crash 2")

    # A pending call fails too: this stand-in reads one request, then kills itself.
    with AguiState("/bin/sh", ["-c", "read line; kill -9 $$"], timeout=30) as f:
        e = raises(SidecarExitedError, lambda: f.call("stats"), "a pending call fails when the sidecar dies")
        check(e.returncode == -9, "with its status")


def logs_and_close():
    env = {k: v for k, v in os.environ.items() if k != "NODE_OPTIONS"}
    with AguiState(BIN, ["--max-ops", "many"], env=env, capture_logs=True) as bad:
        e = raises(SidecarExitedError, bad.stats, "a sidecar that refuses its flags")
        check(e.returncode == 2 and "status 2" in str(e), f"names status 2: {e}")
    check(any("max-ops" in line for line in bad.logs()), f"its stderr is captured: {bad.logs()}")
    os.environ["AGUI_STATE_BIN"] = BIN
    with AguiState(env=env) as by_env:
        check(by_env.stats()["version"], "the binary is found through AGUI_STATE_BIN")
    del os.environ["AGUI_STATE_BIN"]
    env["AGUI_STATE_LOG_LEVEL"] = "debug"
    s = AguiState(BIN, env=env, capture_logs=True)
    check(s.stats()["threads"] == 0, "stats")
    s.close()
    check(any('"method":"stats"' in line for line in s.logs()), "capture_logs drains stderr into logs()")
    e = raises(SidecarExitedError, s.stats, "a call after close() raises")
    check("status 0" in str(e), f"after a clean close, status 0: {e}")


def main():
    t0 = time.monotonic()
    with AguiState(BIN, timeout=30) as s:
        w, stored = namespace_scenario(s)
        model_ops(s, w)
        diff_state(s, w)
        edges(s)
        concurrency(s)
        crash_recovery(s, w, stored)
        check(w.events > 10, "the witness replayed the session")
    logs_and_close()
    print(f"python client: {checks} checks passed ({time.monotonic() - t0:.1f} s)")


if __name__ == "__main__":
    main()
