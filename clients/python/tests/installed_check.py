"""Run by test/clients/python-wheel.test.ts with the python of a fresh venv into which only the wheel was
installed, from an empty directory, with no AGUI_STATE_BIN and no `node` on PATH (a platform wheel), or
with AGUI_STATE_BIN set to the npm package's agui-state and node on PATH (the pure py3-none-any wheel):

    VENV/bin/python installed_check.py sync|async VERSION

It checks that the package and the sidecar both come from the venv, then plays a run with an activity,
many calls at once and a kill -9 with the recovery through the chosen client. Prints `installed <client>: ok` at the end."""
import asyncio
import os
import shutil
import signal
import sys
import sysconfig
from pathlib import Path

import agui_state
from agui_state import AguiState, AsyncAguiState, SidecarExitedError, UnknownActivityError, UnknownThreadError

client, version = sys.argv[1], sys.argv[2]
site = Path(sysconfig.get_paths()["platlib"]).resolve()
bundled = site / "agui_state" / "bin" / "agui-state"
pure = "AGUI_STATE_BIN" in os.environ
sidecar = os.environ["AGUI_STATE_BIN"] if pure else str(bundled)

if pure:
    assert not (site / "agui_state" / "bin").exists(), "the pure wheel installed a bin/ folder"
else:
    assert shutil.which("node") is None, f"node is on PATH: {shutil.which('node')}"
assert Path(agui_state.__file__).resolve().parent == site / "agui_state", agui_state.__file__
assert agui_state.__version__ == version, agui_state.__version__
# Checked before any client runs, since the lookup would set a missing executable bit itself.
assert pure or bundled.is_file() and os.access(bundled, os.X_OK), f"pip did not keep the executable bit of {bundled}"
assert agui_state.find_binary() == sidecar, agui_state.find_binary()

OPEN = {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/toolState", "value": {}}]}
WRITE = {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/toolState/raster-ops~1dataset", "value": "era5"}]}
EXPECTED = {"selectedLayer": "era5", "toolState": {"raster-ops/dataset": "era5"}}
PLAN = {"type": "ACTIVITY_SNAPSHOT", "messageId": "plan-1", "activityType": "plan", "content": {"steps": []}}
STEP = {"type": "ACTIVITY_DELTA", "messageId": "plan-1", "activityType": "plan",
        "patch": [{"op": "add", "path": "/steps/-", "value": "search"}]}


def check_sync() -> None:
    with AguiState() as s:
        assert s.argv == [sidecar], s.argv
        assert s.stats()["version"] == version
        assert s.open_run("t", state={"selectedLayer": "era5"}, tool_state={})["events"] == [OPEN]
        assert s.diff_tool_state("t", set={"raster-ops/dataset": "era5"})["events"] == [WRITE]
        assert s.get_state("t")["state"] == EXPECTED
        assert s.diff_activity("t", "plan-1", {"steps": []}, activity_type="plan")["events"] == [PLAN]
        ops = [{"op": "add", "path": "/steps/-", "value": "search"}]
        assert s.apply_activity_ops("t", "plan-1", ops)["events"] == [STEP]
        os.kill(s.pid, signal.SIGKILL)
        try:
            s.get_state("t")
            raise AssertionError("a call after kill -9 succeeded")
        except SidecarExitedError as e:
            assert "status -9 (signal SIGKILL)" in str(e), e
        s.restart()
        try:
            s.get_state("t")
            raise AssertionError("the fresh sidecar knew the thread")
        except UnknownThreadError:
            pass
        r = s.open_run("t", state={"selectedLayer": "era5"}, tool_state={"raster-ops/dataset": "era5"})
        assert r["delta"] == [{"op": "add", "path": "/toolState", "value": {"raster-ops/dataset": "era5"}}]
        try:
            s.get_activity("t", "plan-1")
            raise AssertionError("the fresh sidecar knew the activity")
        except UnknownActivityError as e:
            assert e.data == {"code": "UNKNOWN_ACTIVITY", "threadId": "t", "messageId": "plan-1"}, e


async def check_async() -> None:
    async with AsyncAguiState() as s:
        assert s.argv == [sidecar], s.argv
        assert (await s.stats())["version"] == version
        assert (await s.open_run("t", state={"selectedLayer": "era5"}, tool_state={}))["events"] == [OPEN]
        assert (await s.diff_tool_state("t", set={"raster-ops/dataset": "era5"}))["events"] == [WRITE]
        assert (await s.diff_activity("t", "plan-1", {"steps": []}, activity_type="plan"))["events"] == [PLAN]
        ops = [{"op": "add", "path": "/steps/-", "value": "search"}]
        assert (await s.apply_activity_ops("t", "plan-1", ops))["events"] == [STEP]
        states = await asyncio.gather(*(s.get_state("t") for _ in range(100)))
        assert all(st["state"] == EXPECTED for st in states)
        waiting = [asyncio.ensure_future(s.get_state("t")) for _ in range(20)]
        await asyncio.sleep(0)
        os.kill(s.pid, signal.SIGKILL)
        done = await asyncio.gather(*waiting, return_exceptions=True)
        # Each was answered before the kill, or failed with the status: never hung, never anything else.
        assert all(isinstance(r, dict) or (isinstance(r, SidecarExitedError) and r.returncode == -9) for r in done), done
        try:
            await s.get_state("t")
            raise AssertionError("a call after kill -9 succeeded")
        except SidecarExitedError as e:
            assert "status -9 (signal SIGKILL)" in str(e), e
        await s.restart()
        r = await s.open_run("t", state={"selectedLayer": "era5"}, tool_state={"raster-ops/dataset": "era5"})
        assert r["delta"] == [{"op": "add", "path": "/toolState", "value": {"raster-ops/dataset": "era5"}}]
        try:
            await s.apply_activity_ops("t", "plan-1", ops)
            raise AssertionError("the fresh sidecar knew the activity")
        except UnknownActivityError as e:
            assert e.code == -32005, e


if client == "sync":
    check_sync()
elif client == "async":
    asyncio.run(check_async())
else:
    sys.exit(f"usage: {sys.argv[0]} sync|async VERSION")
print(f"installed {client}: ok")
