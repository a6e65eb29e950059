// Command go_witness applies JSON Patch cases with evanphx/json-patch, as a
// Go agent server would. It reads NDJSON cases {"id", "doc", "patch"} on
// stdin and writes one NDJSON line per case: {"id", "ok": true, "doc":
// <patched>} or {"id", "ok": false, "error": "..."}.
//
// It is built in GOPATH mode against Debian's golang-github-evanphx-json-patch-dev
// (GO111MODULE=off GOPATH=/usr/share/gocode): no module proxy is needed.
package main

import (
	"bufio"
	"encoding/json"
	"os"

	jsonpatch "github.com/evanphx/json-patch"
)

type testCase struct {
	ID    int             `json:"id"`
	Doc   json.RawMessage `json:"doc"`
	Patch json.RawMessage `json:"patch"`
}

type result struct {
	ID    int             `json:"id"`
	OK    bool            `json:"ok"`
	Doc   json.RawMessage `json:"doc,omitempty"`
	Error string          `json:"error,omitempty"`
}

func apply(c testCase) result {
	patch, err := jsonpatch.DecodePatch(c.Patch)
	if err != nil {
		return result{ID: c.ID, Error: "decode: " + err.Error()}
	}
	doc, err := patch.Apply(c.Doc)
	if err != nil {
		return result{ID: c.ID, Error: err.Error()}
	}
	return result{ID: c.ID, OK: true, Doc: doc}
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 256<<20)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	enc := json.NewEncoder(out)
	for in.Scan() {
		if len(in.Bytes()) == 0 {
			continue
		}
		var c testCase
		if err := json.Unmarshal(in.Bytes(), &c); err != nil {
			_ = enc.Encode(result{ID: -1, Error: "bad case: " + err.Error()})
			continue
		}
		_ = enc.Encode(apply(c))
	}
	if err := in.Err(); err != nil {
		_ = enc.Encode(result{ID: -1, Error: "read: " + err.Error()})
	}
}
