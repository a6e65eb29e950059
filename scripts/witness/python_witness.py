"""Applies JSON Patch cases with python-json-patch, as a Python agent server would.

Reads NDJSON cases {"id", "doc", "patch"} on stdin and writes one NDJSON line
per case: {"id", "ok": true, "doc": <patched>} or {"id", "ok": false,
"error": "<exception>"}. Run it with the interpreter whose jsonpatch is the
one under test (Debian's /usr/bin/python3 and python3-jsonpatch).
"""
import json
import sys

import jsonpatch


def main() -> None:
    out = sys.stdout
    for line in sys.stdin:
        if not line.strip():
            continue
        case = json.loads(line)
        try:
            doc = jsonpatch.apply_patch(case["doc"], case["patch"], in_place=False)
            out.write(json.dumps({"id": case["id"], "ok": True, "doc": doc}) + "\n")
        except Exception as e:  # noqa: BLE001 - every refusal is a finding, whatever its class
            out.write(json.dumps({"id": case["id"], "ok": False, "error": f"{type(e).__name__}: {e}"}) + "\n")
    out.write(json.dumps({"version": jsonpatch.__version__}) + "\n")


if __name__ == "__main__":
    main()
