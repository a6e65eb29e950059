"""B5 reference: what a Python server author has without agui-state.
make_patch(old, new) plus apply_patch on the same dicts, in process.
Reads {"old": ..., "new": ..., "rounds": N} on stdin; prints the median
microseconds per (make_patch + apply) and the op count."""
import json, sys, time
import jsonpatch

spec = json.load(sys.stdin)
old, new, rounds = spec["old"], spec["new"], spec["rounds"]
times = []
ops = 0
for _ in range(rounds):
    t = time.perf_counter()
    patch = jsonpatch.make_patch(old, new)
    jsonpatch.apply_patch(old, patch)
    times.append(time.perf_counter() - t)
    ops = len(patch.patch)
times.sort()
print(json.dumps({"us": times[len(times) // 2] * 1e6, "min": times[0] * 1e6, "max": times[-1] * 1e6, "ops": ops}))
