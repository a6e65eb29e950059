"""B16, B17, B5c: what a Python server pays per call through our clients, next to a bare client on the
same kind of pipe to the same binary. Each figure alternates rounds of its two sides in this one process
(A, B, A, B, ...) and prints every round's microseconds per call as JSON; bench/clients.ts takes the
medians.

    python3 bench/python_clients.py <sync|async|async64|inproc> <rounds> <calls> <sidecar argv...>

The call is diffToolState of one key in a 100-key namespace, one at a time (async64: 64 callers at
once). The bare clients do nothing but json.dumps, write, flush, readline and json.loads: the floor for
any client on a pipe. inproc is B5c's reference, what a server does without a sidecar:
jsonpatch.make_patch plus apply_patch on the same namespace, in process."""
from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "clients" / "python"))
from agui_state import AguiState, AsyncAguiState  # noqa: E402

KEYS = 100
KEY = "tool-50/result"
WARM = 500


def namespace() -> Dict[str, Any]:
    """The shape of B5's namespace (tool results of 20 rows), 100 keys of it."""
    return {f"tool-{i}/result": {"rows": [{"j": j, "v": f"value {i}.{j}"} for j in range(20)], "ok": True}
            for i in range(KEYS)}


def value(i: int) -> Dict[str, Any]:
    return {"rows": [{"j": 0, "v": f"changed {i}"}], "ok": i % 2 == 0}


class Counter:
    def __init__(self) -> None:
        self.i = 0

    def next(self) -> Dict[str, Any]:
        self.i += 1
        return value(self.i)


class Rounds:
    """Per round: wall-clock and this process's CPU microseconds per call, for each side."""

    def __init__(self) -> None:
        self.out: Dict[str, List[float]] = {"ours": [], "bare": [], "oursCpu": [], "bareCpu": []}

    def add(self, side: str, wall: float, cpu: float, calls: int) -> None:
        self.out[side].append(wall * 1e6 / calls)
        self.out[side + "Cpu"].append(cpu * 1e6 / calls)


def per_call(rounds: Rounds, side: str, fn: Callable[[], None], calls: int) -> None:
    t, c = time.perf_counter(), time.process_time()
    for _ in range(calls):
        fn()
    rounds.add(side, time.perf_counter() - t, time.process_time() - c, calls)


class BareSync:
    """The floor: json.dumps, write, flush, readline, json.loads; nothing else."""

    def __init__(self, argv: List[str]) -> None:
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.ids = 0

    def call(self, method: str, params: Dict[str, Any]) -> Any:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.ids += 1
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": self.ids, "method": method,
                                          "params": params}).encode() + b"\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())["result"]

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait()


def sync(argv: List[str], rounds: int, calls: int) -> Dict[str, List[float]]:
    ns, c = namespace(), Counter()
    ours, bare = AguiState(argv[0], argv[1:]), BareSync(argv)
    ours.open_run("ns", tool_state=ns)
    bare.call("openRun", {"threadId": "ns", "toolState": ns})
    a = lambda: ours.diff_tool_state("ns", set={KEY: c.next()})  # noqa: E731
    b = lambda: bare.call("diffToolState", {"threadId": "ns", "set": {KEY: c.next()}})  # noqa: E731
    for _ in range(WARM):  # both sidecars' JIT, and both clients, warm before the first round
        a(), b()
    r = Rounds()
    for _ in range(rounds):
        per_call(r, "ours", a, calls)
        per_call(r, "bare", b, calls)
    ours.close()
    bare.close()
    return r.out


def inproc(argv: List[str], rounds: int, calls: int) -> Dict[str, List[float]]:
    import jsonpatch
    ns, c = namespace(), Counter()
    ours = AguiState(argv[0], argv[1:])
    ours.open_run("ns", tool_state=ns)
    held = json.loads(json.dumps(ns))

    def reference() -> None:
        # What the server would do without us: diff its old map against the new one, apply the patch.
        new = dict(held)
        new[KEY] = c.next()
        patch = jsonpatch.make_patch(held, new)
        jsonpatch.apply_patch(held, patch, in_place=True)

    a = lambda: ours.diff_tool_state("ns", set={KEY: c.next()})  # noqa: E731
    for _ in range(WARM):
        a(), reference()
    r = Rounds()
    for _ in range(rounds):
        per_call(r, "ours", a, calls)
        per_call(r, "bare", reference, max(1, calls // 4))
    ours.close()
    return r.out


class BareAsync:
    """The asyncio floor: write, drain, readline, json.loads; one caller at a time."""

    async def start(self, argv: List[str]) -> "BareAsync":
        self.proc = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.PIPE,
                                                         stdout=asyncio.subprocess.PIPE, limit=1 << 24)
        self.ids = 0
        return self

    async def call(self, method: str, params: Dict[str, Any]) -> Any:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.ids += 1
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": self.ids, "method": method,
                                          "params": params}).encode() + b"\n")
        await self.proc.stdin.drain()
        return json.loads(await self.proc.stdout.readline())["result"]

    async def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        await self.proc.wait()


async def per_call_async(rounds: Rounds, side: str, fn: Callable[[], Any], calls: int, callers: int) -> None:
    async def caller(n: int) -> None:
        for _ in range(n):
            await fn()
    t, c = time.perf_counter(), time.process_time()
    await asyncio.gather(*(caller(calls // callers) for _ in range(callers)))
    rounds.add(side, time.perf_counter() - t, time.process_time() - c, calls // callers * callers)


async def asynchronous(argv: List[str], rounds: int, calls: int, callers: int) -> Dict[str, List[float]]:
    ns, c = namespace(), Counter()
    ours, bare = await AsyncAguiState(argv[0], argv[1:]).start(), await BareAsync().start(argv)
    await ours.open_run("ns", tool_state=ns)
    await bare.call("openRun", {"threadId": "ns", "toolState": ns})
    a = lambda: ours.diff_tool_state("ns", set={KEY: c.next()})  # noqa: E731
    b = lambda: bare.call("diffToolState", {"threadId": "ns", "set": {KEY: c.next()}})  # noqa: E731
    for _ in range(WARM):
        await a(), await b()
    r = Rounds()
    for _ in range(rounds):
        await per_call_async(r, "ours", a, calls, callers)
        # The bare client cannot pipeline (one readline per caller), so its reference stays one caller.
        await per_call_async(r, "bare", b, calls, 1)
    await ours.close()
    await bare.close()
    return r.out


def main() -> None:
    figure, rounds, calls, argv = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
    if figure == "sync":
        out = sync(argv, rounds, calls)
    elif figure == "inproc":
        out = inproc(argv, rounds, calls)
    elif figure in ("async", "async64"):
        out = asyncio.run(asynchronous(argv, rounds, calls, 64 if figure == "async64" else 1))
    else:
        raise SystemExit(f"unknown figure {figure!r}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
